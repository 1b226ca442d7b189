"""The one exception type users see.

Every check on user input raises :class:`CollsimError` with a message that names the problem and the
fix. The CLI prints it as one line and exits with status 2; Python callers can catch it (it is a
``ValueError``, so ``except ValueError`` also works).
"""


class CollsimError(ValueError):
    """Bad input: the message says what is wrong and how to fix it."""
