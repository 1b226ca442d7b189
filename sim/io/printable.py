"""Text from untrusted files made safe to print on a terminal: the one helper every report line goes through.

A name in a topology file, a process group's description or a profiling name in a flight-recorder dump is
the file author's text. Printed raw, an ESC sequence (``\\x1b[2J``) clears the reader's screen or recolours
it, a bidi override (U+202E) shows text reversed, and a line break starts a report line the file wrote
(``#forged line``). Every character Python does not call printable (``str.isprintable``: control and
format characters, line and paragraph separators, non-ASCII spaces) is shown as Python escapes it in a
``repr``; accents and other scripts stay as they are. Error messages already quote values with ``!r``,
which escapes the same characters.

>>> printable("\\u03a9mega\\u202eevil\\n\\x1b[31mred")
'Ωmega\\\\u202eevil\\\\n\\\\x1b[31mred'
>>> printable("gpu\\u00e9 0")
'gpué 0'
"""
from __future__ import annotations


def printable(text: object) -> str:
    """``text`` (made a string) with each non-printable character escaped as ``repr`` shows it (``\\n``,
    ``\\x1b``, ``\\u202e``): one line, no terminal control, nothing hidden."""
    s = str(text)
    if s.isprintable():   # the common case: nothing to do, no copy
        return s
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in s)


def printable_lines(lines) -> str:
    """``lines`` (each one report line) made :func:`printable` and joined with newlines: a line break inside
    a line is shown escaped, so only the report's own lines start a line."""
    return "\n".join(printable(line) for line in lines)


def short_repr(value: object, limit: int = 24) -> str:
    """A value read from an untrusted file, quoted for an error line and kept short: its ``repr`` (which
    escapes what :func:`printable` escapes), cut past ``limit`` characters with the length said (a
    400-digit integer or a 1 MB string is not printed whole).

    >>> short_repr("abc"), short_repr(10 ** 400)
    ("'abc'", '100000000000... (401 characters)')
    """
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit // 2]}... ({len(text)} characters)"
