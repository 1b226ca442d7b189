"""Read a student's submission: the code cells of a notebook (via nbformat) or a ``.py`` file, and which
assignment it answers.

IPython-only lines (``%matplotlib inline``, ``!pip ...``) are dropped, since the code runs in plain
Python; cells tagged ``skip-grade`` (cell metadata ``tags``) are left out, for cells that only draw.

>>> cells = code_cells_from_text("x = 1\\n%matplotlib inline\\ny = x + 1\\n", "a.py")
>>> cells[0].label, cells[0].code
('a.py', 'x = 1\\n\\ny = x + 1\\n')
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ..errors import CollsimError

MAX_SOURCE_BYTES = 4 << 20
SKIP_TAG = "skip-grade"


@dataclass(frozen=True)
class Cell:
    label: str   # "code cell 3" in a notebook (3rd code cell, as Jupyter's Run All numbers them), else the file name
    code: str


def _strip_magics(code: str) -> str:
    # Keep line numbers stable (error messages cite them): blank the line rather than remove it.
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in code.split("\n"))


def code_cells_from_text(text: str, label: str) -> list[Cell]:
    return [Cell(label, _strip_magics(text))]


def read_submission(path: str) -> tuple[list[Cell], dict]:
    """``(cells, notebook metadata)`` from a ``.ipynb`` or ``.py`` file."""
    if not os.path.isfile(path):
        raise CollsimError(f"no such file {path!r}: give the path of your .ipynb or .py file")
    size = os.path.getsize(path)
    if size > MAX_SOURCE_BYTES:
        raise CollsimError(f"{path} is {size} bytes: clear the notebook's outputs (Kernel > Restart & Clear Output) and save")
    if path.endswith(".py"):
        from ..io.safe_io import read_input
        return code_cells_from_text(read_input(path, "submission", MAX_SOURCE_BYTES), os.path.basename(path)), {}
    if not path.endswith(".ipynb"):
        raise CollsimError(f"{path}: grade a notebook (.ipynb) or a Python file (.py)")
    nb = read_notebook(path)
    cells = []
    code_cells = [c for c in nb["cells"] if c.get("cell_type") == "code"]
    for k, cell in enumerate(code_cells, start=1):   # counted among code cells: markdown cells have no number
        tags = (cell.get("metadata") or {}).get("tags") or []
        if SKIP_TAG in (tags if isinstance(tags, list) else []):
            continue
        cells.append(Cell(f"code cell {k}", _strip_magics(cell["source"])))
    return cells, dict(nb["metadata"])


def _source(cell: dict, where: str) -> str:
    src = cell.get("source", "")
    if isinstance(src, list) and all(isinstance(x, str) for x in src):
        return "".join(src)
    if isinstance(src, str):
        return src
    raise CollsimError(f"{where}: a cell's source is a {type(src).__name__}, not text: open the notebook in Jupyter and save it again")


def read_notebook(path: str) -> dict:
    """A v4 notebook as plain JSON (no nbformat: it is slow to import and not needed to read cells), with
    every cell's ``source`` joined into one string and ``metadata`` a dict."""
    from ..io.safe_io import load_json, read_input
    # through the safe reader: regular files only (a FIFO would hang), size-capped, nesting bounded
    text = read_input(path, "notebook", MAX_SOURCE_BYTES)
    try:
        nb = load_json(text, path)
    except CollsimError as e:
        raise CollsimError(f"{e}: not a readable notebook: open it in Jupyter and save it again") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        hint = " (an nbformat 3 notebook: open and save it in a current Jupyter)" if isinstance(nb, dict) and "worksheets" in nb else ""
        raise CollsimError(f"{path} is not a Jupyter notebook: it has no list of cells{hint}")
    cells = []
    for cell in nb["cells"]:
        if not isinstance(cell, dict):
            raise CollsimError(f"{path}: a cell is a {type(cell).__name__}, not a mapping: open it in Jupyter and save it again")
        meta = cell.get("metadata")
        cells.append(dict(cell, source=_source(cell, path), metadata=meta if isinstance(meta, dict) else {}))
    meta = nb.get("metadata")
    return dict(nb, cells=cells, metadata=meta if isinstance(meta, dict) else {})


def detect_assignment(path: str, cells: list[Cell], metadata: dict, known: dict) -> str:
    """Which assignment ``path`` answers: notebook metadata ``collsim.assignment``, else the file name
    (``a1_...``), else a line ``ASSIGNMENT = "a1"`` in the code."""
    collsim_meta = metadata.get("collsim")
    meta = collsim_meta.get("assignment") if isinstance(collsim_meta, dict) else None
    if isinstance(meta, str) and meta in known:
        return meta
    stem = os.path.basename(path).lower()
    m = re.match(r"(a\d+)[_\-.]", stem)
    if m and m.group(1) in known:
        return m.group(1)
    for key, mod in known.items():
        if mod.rsplit(".", 1)[-1][len(key) + 1:] in stem:
            return key
    for cell in cells:
        m = re.search(r"^ASSIGNMENT\s*=\s*['\"](a\d+)['\"]", cell.code, re.M)
        if m and m.group(1) in known:
            return m.group(1)
    raise CollsimError(f"cannot tell which assignment {path} answers: keep its file name (e.g. a1_ring_reduce_scatter.ipynb) "
                       f"or pass --assignment ({', '.join(known)})")


__all__ = ["Cell", "read_submission", "read_notebook", "detect_assignment", "code_cells_from_text", "SKIP_TAG"]
