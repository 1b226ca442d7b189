"""Where in the student's code an exception happened, in one line.

Student cells are compiled with the file name ``<student LABEL>`` (LABEL: "code cell 3" or a .py file's
name), so the innermost frame with such a name is the place to point at.

>>> try:
...     exec(compile("x = 1\\n1 / 0", "<student code cell 2>", "exec"))
... except ZeroDivisionError as e:
...     print(student_error(e))
ZeroDivisionError: division by zero (code cell 2, line 2)
"""
from __future__ import annotations

import traceback


def student_error(e: BaseException) -> str:
    """``ValueError: bad (cell 3, line 4)``: the exception and the innermost place in the student's code."""
    where = ""
    for frame in reversed(traceback.extract_tb(e.__traceback__)):
        if frame.filename.startswith("<student"):
            where = f" ({frame.filename[len('<student '):-1]}, line {frame.lineno})"
            break
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}{': ' + text if text else ''}{where}"


__all__ = ["student_error"]
