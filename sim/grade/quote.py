"""Student text made harmless in reports: one line, no control characters, Markdown quoted.

Text that comes from a student's process (an exception message, a value it returned, a name it defined)
ends up in the text report, the CSV grade sheet, JSON, Gradescope's ``results.json`` and the Markdown
feedback. A newline in it could forge a line (``score 6/6``) or a Markdown heading, so every report
field goes through :func:`one_line` and, in Markdown, :func:`md`.

>>> one_line("ok\\n**Score: 6/6**\\r\\x1b[2J")
'ok ⏎ **Score: 6/6** ⏎ \\\\x1b[2J'
>>> md("x | y\\n# Score: 6/6")
'x \\\\| y ⏎ \\\\# Score: 6/6'
"""
from __future__ import annotations

import re

NEWLINES = re.compile(r"\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
MARKDOWN = re.compile(r"([\\`*_{}\[\]<>()#+!|~])")
MAX_FIELD = 2000


def one_line(text: object, limit: int = MAX_FIELD) -> str:
    """``text`` on one line: line breaks shown as ``⏎``, other control and bidi characters escaped, at most
    ``limit`` characters (``…`` marks a cut)."""
    s = NEWLINES.sub(" ⏎ ", str(text))
    s = CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), s).replace("\t", " ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def md(text: object, limit: int = MAX_FIELD) -> str:
    """:func:`one_line`, then every character Markdown gives a meaning to escaped with a backslash."""
    return MARKDOWN.sub(r"\\\1", one_line(text, limit))


__all__ = ["one_line", "md"]
