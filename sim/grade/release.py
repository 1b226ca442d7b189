"""Release student notebooks from the instructor's: one source per assignment, nbgrader's markers.

In an instructor notebook (``notebooks/solutions/*.ipynb``) solution code sits between nbgrader's
markers::

    def ring_reduce_scatter(nranks):
        n = nranks
        ### BEGIN SOLUTION
        ...the reference code...
        ### END SOLUTION

:func:`release_notebook` replaces each marked region of a code cell by ``# YOUR CODE HERE`` and
``raise NotImplementedError()`` at the marker's indentation (a region may instead end with
``### STUB: <code>`` lines just before END SOLUTION, whose code replaces it, for a stub the notebook tells
the student to fill; markers are found as nbgrader finds them: ``BEGIN SOLUTION`` anywhere in a line,
after any number of ``#``, in Markdown cells too; a cell whose nbgrader metadata says ``solution: true``
and has no markers is replaced whole), drops marked regions from Markdown cells (instructor-only text), drops cells left
empty, clears outputs and execution counts, and keeps the notebook's metadata (``collsim.assignment``
tells the grader which assignment it is). Cells tagged ``solution-only`` are left out. :func:`leaks` checks the result: a release that still holds
a marker or a solution cell beyond its stub is refused (nothing is written).

>>> release_source("def f():\\n    ### BEGIN SOLUTION\\n    return 42\\n    ### END SOLUTION\\n")
'def f():\\n    # YOUR CODE HERE\\n    raise NotImplementedError()\\n'
"""
from __future__ import annotations

import json
import os
import re

from ..errors import CollsimError
from .batch import write_atomic
from .source import read_notebook

BEGIN, END, STUB = "### BEGIN SOLUTION", "### END SOLUTION", "### STUB:"
SOLUTION_ONLY_TAG = "solution-only"
# nbgrader finds its delimiters anywhere in a line (any number of '#', in Markdown cells too); so do we,
# case-insensitively, and :func:`leaks` refuses a release in which any is left
BEGIN_RE = re.compile(r"BEGIN\s+SOLUTION", re.IGNORECASE)
END_RE = re.compile(r"END\s+SOLUTION", re.IGNORECASE)
STUB_RE = re.compile(r"^\s*#+\s*STUB:")
CODE_STUB = ["# YOUR CODE HERE", "raise NotImplementedError()"]
MARKDOWN_STUB = "YOUR ANSWER HERE"


def release_source(source: str, markdown: bool = False, where: str = "cell") -> str:
    """``source`` with every marked solution region replaced (code) or removed (Markdown)."""
    out, inside, stub, indent, opened = [], False, [], "", 0
    lines = source.split("\n")
    for k, line in enumerate(lines, start=1):
        text = line.strip()
        if BEGIN_RE.search(line):
            if inside:
                raise CollsimError(f"{where}, line {k}: BEGIN SOLUTION inside another solution region: close the first with END SOLUTION")
            inside, stub, indent, opened = True, [], line[: len(line) - len(line.lstrip())], k
        elif END_RE.search(line):
            if not inside:
                raise CollsimError(f"{where}, line {k}: END SOLUTION without a BEGIN SOLUTION above it")
            inside = False
            if not markdown:
                out += [indent + s for s in stub] or [indent + c for c in CODE_STUB]
        elif inside:
            if STUB_RE.match(line):
                stub.append(text[text.index(":") + 1:].strip())
        else:
            out.append(line)
    if inside:
        raise CollsimError(f"{where}, line {opened}: BEGIN SOLUTION is never closed: add ### END SOLUTION")
    return "\n".join(out)


def _nbgrader_solution(cell: dict) -> bool:
    """nbgrader's cell metadata marks the whole cell as a solution (``{"nbgrader": {"solution": true}}``)."""
    meta = cell.get("metadata", {}).get("nbgrader")
    return isinstance(meta, dict) and meta.get("solution") is True


def release_notebook(nb: dict, where: str = "notebook") -> dict:
    """The student version of the instructor notebook ``nb`` (as read by :func:`read_notebook`)."""
    cells = []
    for k, cell in enumerate(nb["cells"], start=1):
        tags = cell.get("metadata", {}).get("tags") or []
        if SOLUTION_ONLY_TAG in (tags if isinstance(tags, list) else []):
            continue
        kind = cell.get("cell_type")
        src = release_source(cell["source"], markdown=kind != "code", where=f"{where}, cell {k}")
        if _nbgrader_solution(cell) and src == cell["source"]:
            # a solution cell without delimiters: nbgrader replaces all of it
            src = "\n".join(CODE_STUB) if kind == "code" else MARKDOWN_STUB
        if not src.strip() and cell["source"].strip():
            continue   # nothing left of an instructor-only cell
        new = {"cell_type": kind, "metadata": cell.get("metadata", {}), "source": src}
        if kind == "code":
            new.update(execution_count=None, outputs=[])
        if "id" in cell:
            new["id"] = cell["id"]
        cells.append(new)
    return {"cells": cells, "metadata": nb.get("metadata", {}), "nbformat": nb.get("nbformat", 4),
            "nbformat_minor": nb.get("nbformat_minor", 5)}


def leaks(nb: dict) -> list[str]:
    """What in a released notebook still looks like a solution: a marker line, or an nbgrader solution cell
    that holds more than the stub (empty: nothing)."""
    found = []
    for k, cell in enumerate(nb["cells"], start=1):
        src = cell.get("source", "")
        if BEGIN_RE.search(src) or END_RE.search(src):
            found.append(f"cell {k} still holds a SOLUTION marker")
        elif _nbgrader_solution(cell) and src.strip() not in ("\n".join(CODE_STUB), MARKDOWN_STUB) \
                and any(line.strip() not in CODE_STUB for line in src.split("\n") if line.strip()):
            found.append(f"cell {k} is an nbgrader solution cell with more than the stub")
        if cell.get("outputs") or cell.get("attachments"):
            found.append(f"cell {k} keeps outputs or attachments")
    return found


def notebook_json(nb: dict) -> str:
    """Notebook text as Jupyter writes it (sources as lists of lines, indent 1, sorted keys)."""
    def lines(src: str) -> list[str]:
        parts = src.split("\n")
        return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    cells = [dict(c, source=lines(c["source"])) for c in nb["cells"]]
    return json.dumps(dict(nb, cells=cells), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def _one_per_name(files: list[str], out_dir: str) -> list[str]:
    """``files`` without repeats of the same notebook; two different notebooks with one name (case aside: one
    file on macOS and Windows) are refused, since the second would overwrite the first in ``out_dir``."""
    seen: dict[str, str] = {}
    out = []
    for f in files:
        key = os.path.basename(f).lower()
        if key in seen:
            if os.path.realpath(seen[key]) == os.path.realpath(f):
                continue   # the same notebook given twice (a folder and a file in it): released once
            raise CollsimError(f"{seen[key]} and {f} have the same name: both would be released as "
                               f"{os.path.join(out_dir, os.path.basename(f))}, one over the other: rename one, or release "
                               "them into separate --out folders")
        seen[key] = f
        out.append(f)
    return out


def release(sources: list[str], out_dir: str) -> list[str]:
    """Write the student version of every instructor notebook in ``sources`` (files or folders) into
    ``out_dir``; returns the paths written."""
    files = []
    for s in sources:
        if os.path.isdir(s):
            files += [os.path.join(s, f) for f in sorted(os.listdir(s)) if f.endswith(".ipynb") and not f.startswith(".")]
        elif os.path.isfile(s) and s.endswith(".ipynb"):
            files.append(s)
        else:
            raise CollsimError(f"{s!r} is neither a notebook (.ipynb) nor a folder of them")
    if not files:
        raise CollsimError(f"no notebooks in {', '.join(sources)}: give the folder of instructor notebooks (notebooks/solutions)")
    files = _one_per_name(files, out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise CollsimError(f"--out {out_dir} is a file: give a folder")
    real_out = os.path.realpath(out_dir)
    if any(os.path.dirname(os.path.realpath(f)) == real_out for f in files):
        raise CollsimError(f"--out {out_dir} is where the instructor notebooks are: release into another folder")
    released = []
    for f in files:
        nb = read_notebook(f)
        if not any(BEGIN_RE.search(c["source"]) or _nbgrader_solution(c) for c in nb["cells"]):
            raise CollsimError(f"{f} has no '{BEGIN}' markers: mark the solution code before releasing it")
        student = release_notebook(nb, f)
        left = leaks(student)
        if left:   # refused, nothing written: a release must never carry a solution
            raise CollsimError(f"{f}: refusing to release it: {left[0]}" + (f" (and {len(left) - 1} more)" if len(left) > 1 else "")
                               + ": close every BEGIN SOLUTION with END SOLUTION on its own line, or tag the cell solution-only")
        released.append((os.path.join(out_dir, os.path.basename(f)), notebook_json(student)))
    os.makedirs(out_dir, exist_ok=True)
    for path, text in released:
        write_atomic(path, text, files, "--out")
    return [p for p, _ in released]


__all__ = ["release", "release_notebook", "release_source", "notebook_json", "leaks", "BEGIN", "END"]
