"""The one exception type users see.

Every check on user input raises :class:`CollsimError` with a message that names the problem and the
fix. The CLI prints it as one line and exits with status 2; Python callers can catch it (it is a
``ValueError``, so ``except ValueError`` also works). The message is made one line here, once for every
raiser: a line break inside a value it quotes (a key named ``"a\\nb"`` in a YAML file) is shown escaped.

>>> str(CollsimError("unknown key 'a\\nb'"))
"unknown key 'a\\\\nb'"
"""
import re

_BREAKS = re.compile(r"\r\n|[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class CollsimError(ValueError):
    """Bad input: the message says what is wrong and how to fix it."""

    def __init__(self, *args):
        if args and isinstance(args[0], str):
            text = args[0].strip()
            args = (_BREAKS.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text), *args[1:])
        super().__init__(*args)
