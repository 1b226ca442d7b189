"""Argument helpers shared by the subcommands (sizes, dtypes, output formats)."""
from __future__ import annotations

import csv
import io
import json
import os
import sys

from ..errors import CollsimError
from ..io.safe_io import check_output
from ..units import parse_size, size_sweep

DTYPE_BYTES = {"int8": 1, "uint8": 1, "half": 2, "float16": 2, "bfloat16": 2, "int32": 4, "uint32": 4,
               "float": 4, "float32": 4, "int64": 8, "uint64": 8, "double": 8, "float64": 8}
DEFAULT_TOPOLOGY = "ring:n=8"


def add_size_args(p, default_min: str = "32M", default_max: str = "32M") -> None:
    """nccl-tests' sweep flags: -b/-e with K/M/G suffixes, -f factor, -i step."""
    p.add_argument("-b", "--minbytes", default=default_min, help=f"smallest size, e.g. 8, 64K, 1M (default {default_min})")
    p.add_argument("-e", "--maxbytes", default=default_max, help=f"largest size (default {default_max})")
    p.add_argument("-f", "--stepfactor", type=float, default=None,
                   help="multiply the size by this each step (larger than 1, e.g. 2)")
    p.add_argument("-i", "--stepbytes", default="1M", help="add this to the size each step when no -f is given (default 1M)")
    p.add_argument("-d", "--datatype", default="float", help=f"element type ({', '.join(DTYPE_BYTES)}; default float)")


def sizes_from_args(args) -> list[int]:
    lo, hi = parse_size(args.minbytes), parse_size(args.maxbytes)
    dtype = args.datatype
    if dtype not in DTYPE_BYTES:
        raise CollsimError(f"unknown datatype {dtype!r}: choose one of {', '.join(DTYPE_BYTES)}")
    factor, step = args.stepfactor, parse_size(args.stepbytes)
    if factor == 0:   # given (no -f is None): nccl-tests would never leave the first size
        raise CollsimError(f"step factor {factor} must be larger than 1 (e.g. -f 2)")
    if factor is None and step <= 0:
        raise CollsimError(f"step -i {args.stepbytes} must be a positive number of bytes (e.g. -i 1M), or give a "
                           "factor with -f")
    sizes = size_sweep(lo, hi, factor or 0.0, step)
    elem = DTYPE_BYTES[dtype]
    for s, flag in ((lo, "-b"), (hi, "-e")):   # the sizes typed: refused, the user can fix them
        if s % elem and s in sizes:
            raise CollsimError(f"{flag} {s} B is not a multiple of the {dtype} element size ({elem} B): pick sizes like "
                               f"{s - s % elem or elem}")
    # the sizes a factor or step made in between: whole elements, as nccl-tests counts them (count = size /
    # element size), each once (-f 1.5 from 8 B gives 12, 18 -> 16, 27 -> 24, ...)
    out = sorted({s - s % elem for s in sizes if s >= elem})
    if not out:   # only 0 B: nccl-tests' rows of no data, which time nothing the model predicts
        raise CollsimError(f"-e {hi} B holds no {dtype} element ({elem} B): nothing to time; give -e {elem} or more")
    if lo < elem:
        print(f"collsim: starting at {out[0]} B: sizes under one {dtype} element ({elem} B) move no data, "
              "so they have no time to predict", file=sys.stderr)
    return out


def check_output_path(path: str | None, flag: str, suffixes: tuple[str, ...] = ()) -> None:
    """Refuse an output path that cannot be written, before any work is done: its folder must exist and,
    when ``suffixes`` are given, its name must end in one of them."""
    if path is not None and not str(path).strip():   # an unset shell variable: --trace "$OUT"
        raise CollsimError(f"{flag} is empty: give a file name")
    if not path:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CollsimError(f"{flag} {path}: the folder {folder} does not exist: create it or write elsewhere")
    if os.path.isdir(path):
        raise CollsimError(f"{flag} {path} is a folder: give a file name")
    check_output(path, flag)  # not a link, not a file this command has read
    if suffixes and not path.lower().endswith(suffixes):
        raise CollsimError(f"{flag} {path}: use a file name ending in {' or '.join(suffixes)}")


def check_model_choice(algorithm: str, protocol: str) -> None:
    """Refuse an unknown ``-a``/``-p`` before any input is read (``auto`` and ``all`` pass): commands that
    predict many collectives one by one would otherwise note the same error on every row."""
    from ..algorithms import get_algorithm
    from ..nccl.protocols import get_protocol
    if algorithm not in ("auto", "all"):
        get_algorithm(algorithm)
    if protocol not in ("auto", "all"):
        get_protocol(protocol)


def check_output_dir(path: str | None, flag: str) -> None:
    """Refuse a report folder that is an existing file or whose parent folder does not exist."""
    if not path:
        return
    if os.path.islink(path):
        raise CollsimError(f"{flag} {path} is a symbolic link: collsim never writes through a link; give a real folder")
    if os.path.exists(path) and not os.path.isdir(path):
        raise CollsimError(f"{flag} {path} is an existing file: give a folder for the report")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise CollsimError(f"{flag} {path}: the folder {parent} does not exist: create it first")


def json_text(obj, **kw) -> str:
    """``obj`` as JSON (RFC 8259: no Infinity or NaN, which json.dumps writes by default and jq and most readers
    refuse); a number that came out infinite or undefined is refused in one line instead."""
    try:
        return json.dumps(obj, allow_nan=False, **kw)
    except ValueError:
        raise CollsimError("a result came out infinite or undefined, which JSON cannot carry: an input rate or "
                           "bandwidth is near zero or a size near the limits; check them (--format table shows the rows)") from None


def csv_text(rows: list[dict], always: tuple[str, ...] = ()) -> str:
    """``rows`` as CSV: the columns are every key any row has, in the order first seen (an optional key such as
    ``faster_choice`` appears on some rows only; taking the first row's keys crashed on a later one), blank
    where a row lacks one (``always``: columns last, there even where no row has them, so they do not move with
    the data); a nested value (a mapping, a list) is written as JSON, not as Python's repr.

    >>> print(csv_text([{"a": 1}, {"a": 2, "b": {"x": [1, 2]}}]))
    a,b
    1,
    2,"{""x"": [1, 2]}"
    """
    columns: dict = {}
    for r in rows:
        columns.update(dict.fromkeys(k for k in r if k not in always))
    columns.update(dict.fromkeys(always))   # last, filled or not: a script finds them in one place
    buf = io.StringIO()
    if rows:
        w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: json.dumps(v) if isinstance(v, (dict, list, tuple)) else v for k, v in r.items()})
    return buf.getvalue().rstrip("\n")


def emit(fmt: str, table_text: str, payload: dict, rows: list[dict], always: tuple[str, ...] = ()) -> str:
    """Render one of table|json|csv (``always``: CSV columns kept where no row fills them)."""
    if fmt == "json":
        return json_text(payload, indent=1)
    if fmt == "csv":
        return csv_text(rows, always)
    return table_text
