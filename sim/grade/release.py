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
the student to fill), drops marked regions from Markdown cells (instructor-only text), drops cells left
empty, clears outputs and execution counts, and keeps the notebook's metadata (``collsim.assignment``
tells the grader which assignment it is). Cells tagged ``solution-only`` are left out.

>>> release_source("def f():\\n    ### BEGIN SOLUTION\\n    return 42\\n    ### END SOLUTION\\n")
'def f():\\n    # YOUR CODE HERE\\n    raise NotImplementedError()\\n'
"""
from __future__ import annotations

import json
import os

from ..errors import CollsimError
from .batch import write_atomic
from .source import read_notebook

BEGIN, END, STUB = "### BEGIN SOLUTION", "### END SOLUTION", "### STUB:"
SOLUTION_ONLY_TAG = "solution-only"


def release_source(source: str, markdown: bool = False, where: str = "cell") -> str:
    """``source`` with every marked solution region replaced (code) or removed (Markdown)."""
    out, inside, stub, indent, opened = [], False, [], "", 0
    lines = source.split("\n")
    for k, line in enumerate(lines, start=1):
        text = line.strip()
        if text.startswith(BEGIN):
            if inside:
                raise CollsimError(f"{where}, line {k}: BEGIN SOLUTION inside another solution region: close the first with END SOLUTION")
            inside, stub, indent, opened = True, [], line[: len(line) - len(line.lstrip())], k
        elif text.startswith(END):
            if not inside:
                raise CollsimError(f"{where}, line {k}: END SOLUTION without a BEGIN SOLUTION above it")
            inside = False
            if not markdown:
                out += [indent + s for s in stub] or [indent + "# YOUR CODE HERE", indent + "raise NotImplementedError()"]
        elif inside:
            if text.startswith(STUB):
                stub.append(text[len(STUB):].strip())
        else:
            out.append(line)
    if inside:
        raise CollsimError(f"{where}, line {opened}: BEGIN SOLUTION is never closed: add ### END SOLUTION")
    return "\n".join(out)


def release_notebook(nb: dict, where: str = "notebook") -> dict:
    """The student version of the instructor notebook ``nb`` (as read by :func:`read_notebook`)."""
    cells = []
    for k, cell in enumerate(nb["cells"], start=1):
        tags = cell.get("metadata", {}).get("tags") or []
        if SOLUTION_ONLY_TAG in tags:
            continue
        kind = cell.get("cell_type")
        src = release_source(cell["source"], markdown=kind != "code", where=f"{where}, cell {k}")
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


def notebook_json(nb: dict) -> str:
    """Notebook text as Jupyter writes it (sources as lists of lines, indent 1, sorted keys)."""
    def lines(src: str) -> list[str]:
        parts = src.split("\n")
        return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])
    cells = [dict(c, source=lines(c["source"])) for c in nb["cells"]]
    return json.dumps(dict(nb, cells=cells), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


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
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise CollsimError(f"--out {out_dir} is a file: give a folder")
    real_out = os.path.realpath(out_dir)
    if any(os.path.dirname(os.path.realpath(f)) == real_out for f in files):
        raise CollsimError(f"--out {out_dir} is where the instructor notebooks are: release into another folder")
    released = []
    for f in files:
        nb = read_notebook(f)
        if not any(BEGIN in c["source"] for c in nb["cells"]):
            raise CollsimError(f"{f} has no '{BEGIN}' markers: mark the solution code before releasing it")
        released.append((os.path.join(out_dir, os.path.basename(f)), notebook_json(release_notebook(nb, f))))
    os.makedirs(out_dir, exist_ok=True)
    for path, text in released:
        write_atomic(path, text, files, "--out")
    return [p for p, _ in released]


__all__ = ["release", "release_notebook", "release_source", "notebook_json", "BEGIN", "END"]
