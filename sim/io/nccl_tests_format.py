"""Read the text nccl-tests prints (``all_reduce_perf ...``) into rows of numbers.

:func:`parse_nccl_tests` returns one dict per data line with the out-of-place columns under plain names
and the in-place ones prefixed ``inplace_``:

``nbytes`` (B), ``count`` (elements), ``dtype``, ``redop``, ``root``, ``time_us``, ``algbw_GBps``,
``busbw_GBps``, ``wrong`` and ``inplace_time_us``, ``inplace_algbw_GBps``, ``inplace_busbw_GBps``,
``inplace_wrong``. A column the output does not have is ``None`` (old versions print no ``root``; some
collectives print no ``redop``). ``wrong`` is the ``#wrong`` count (an int), or the older ``error``
column (max absolute error, a float), or ``None`` where nccl-tests printed ``N/A`` (``-c 0``).

The column layout is read from the header line (``#  size  count  type  redop  root  time ...``), so
the current layout (2.x since 2021), the older one (``error`` instead of ``#wrong``, no ``root``), the
oldest one (``bytes N type op root ... res``), ``-C 1`` (``cputime``) and ``-I 1`` (per-iteration
statistics, kept under their own names such as ``i_p99``) all work. Lines may carry a prefix that MPI or
Slurm adds (``[1,0]<stdout>:``, ``node12:``): the numbers are taken from the end of the line. Without any
header, lines of 13 fields are read as the current layout and lines of 12 as the older one.

>>> text = '''
... #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
... #        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
...      1048576        262144     float     sum      -1    29.80   35.19   61.58      0    29.50   35.54   62.20      0
... '''
>>> row = parse_nccl_tests(text)[0]
>>> row["nbytes"], row["time_us"], row["busbw_GBps"], row["inplace_time_us"], row["wrong"]
(1048576, 29.8, 61.58, 29.5, 0)
"""
from __future__ import annotations

import math
import re

from ..errors import CollsimError

# Header names (as nccl-tests spells them over the versions) -> our key.
_LEAD = {"size": "nbytes", "bytes": "nbytes", "count": "count", "n": "count", "type": "dtype",
         "redop": "redop", "op": "redop", "root": "root"}
_TIMED = {"time": "time_us", "cputime": "time_us", "algbw": "algbw_GBps", "busbw": "busbw_GBps",
          "#wrong": "wrong", "wrong": "wrong", "error": "wrong", "res": "wrong"}
KEYS = ("nbytes", "count", "dtype", "redop", "root", "time_us", "algbw_GBps", "busbw_GBps", "wrong",
        "inplace_time_us", "inplace_algbw_GBps", "inplace_busbw_GBps", "inplace_wrong")

# Header-less fallbacks: field count -> column names.
_CURRENT = ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
            "time", "algbw", "busbw", "#wrong")
_OLDER = ("size", "count", "type", "redop", "time", "algbw", "busbw", "error", "time", "algbw", "busbw", "error")
_FALLBACK = {len(_CURRENT): _CURRENT, len(_OLDER): _OLDER}

# NCCL_DEBUG's own records, which a log interleaves with (and glues onto) what the program prints: "host:pid:tid
# [dev] NCCL INFO ...". A host name starts where no name character precedes it: without that guard a search
# over a long line of name characters retried the name from every position (a 100 KB line took 46 s)
_HOST = r"(?P<host>[\w.-]+)"
_RECORD_TAIL = r":(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] NCCL (?P<level>INFO|WARN|TRACE|ERROR|ABORT)\b"
NCCL_RECORD = re.compile(r"(?<![\w.-])" + _HOST + _RECORD_TAIL)
MPI_PREFIX = re.compile(r"\[\d+,\d+\]<std(?:out|err)>:")
_MAX_HOSTS = 4096


def records_of(lines: list[str]) -> re.Pattern:
    """The record pattern with this log's host names (read from lines that start with a record): a record
    glued to printed text (``... -1host:1:2 [0] NCCL INFO``) would otherwise take the printed digits into
    its host name."""
    known = set()
    for line in lines[:200_000]:
        m = NCCL_RECORD.match(line)
        if m:
            known.add(m.group("host"))
        if len(known) > _MAX_HOSTS:
            return NCCL_RECORD
    if not known:
        return NCCL_RECORD
    names = "|".join(re.escape(h) for h in sorted(known, key=len, reverse=True))
    return re.compile(f"(?P<host>{names})" + _RECORD_TAIL)


def split_records(lines: list[str]):
    """For each line of a debug log (MPI prefixes already removed): ``(printed, match)``, the text the
    program printed before the line's NCCL record and the record's match (None where the line has none)."""
    record_re = records_of(lines)
    for line in lines:
        m = record_re.search(line)
        yield (line[:m.start()], m) if m else (line, None)


def program_output(text: str) -> str:
    """What the program printed, out of a log that NCCL_DEBUG=INFO interleaved with NCCL's records: the
    records are dropped, Open MPI's ``[1,0]<stdout>:`` tags removed, and a row cut by a record (printed text
    glued to a record's start) re-joined with its rest on a later line. Text without records is returned as
    it is.

    >>> program_output("#  size count\\n   8388608   2097152   float   sum   -1h1:9:9 [1] NCCL INFO AllReduce: opCount 0\\n"
    ...                "h1:9:9 [0] NCCL INFO Channel 00/02 :    0   1\\n   410.2   20.45   20.45      0\\n")
    '#  size count\\n   8388608   2097152   float   sum   -1    410.2   20.45   20.45      0'
    """
    if "NCCL " not in text or not NCCL_RECORD.search(text):
        return text
    lines = [MPI_PREFIX.sub("", raw) for raw in text.splitlines()]
    out, joined = [], ""
    for printed, record in split_records(lines):
        if not printed.strip():
            continue
        joined += printed
        if record is None:
            out.append(joined)
            joined = ""
        else:
            joined += " "   # a piece glued to a record continues on a later line
    if joined:
        out.append(joined)
    return "\n".join(out)


_COLLECTIVE_RE = re.compile(r"\b(all_reduce|all_gather|reduce_scatter|broadcast|reduce|alltoall|sendrecv|hypercube|gather|scatter)_perf\b")


def _header_columns(line: str) -> list[str] | None:
    """Column names if ``line`` is nccl-tests' column header, else None."""
    words = line.lstrip("#").split()
    low = [w.lower() for w in words]
    if ("size" in low or "bytes" in low) and ("time" in low or "cputime" in low) and "busbw" in low:
        return low
    return None


def _keys_for(columns: list[str]) -> list[str]:
    """Our key for every header column, in order (the second timed group gets ``inplace_``)."""
    keys, groups = [], 0
    for c in columns:
        if c in ("time", "cputime"):
            groups += 1
        if c in _LEAD and groups == 0:
            keys.append(_LEAD[c])
            continue
        base = _TIMED.get(c, c)  # unknown statistics (i_min, i_p99, ...) keep their own name
        keys.append(base if groups <= 1 else f"inplace_{base}")
    return keys


def _value(key: str, text: str):
    if key in ("dtype", "redop"):
        return text
    # N/A is what nccl-tests prints for an unchecked #wrong (-c 0); "nan" is a number no run measures, so it
    # stays a float and _check_row refuses it as it refuses "inf" (read as "not printed", its row vanished)
    if text.upper() in ("N/A", "NA", "-"):
        return None
    try:
        if key in ("nbytes", "count", "root") or key.endswith("wrong") and re.fullmatch(r"-?\d+", text):
            return int(text)
        return float(text)
    except ValueError:
        return None


def _finite(text: str) -> float | None:
    """``text`` as a finite float, or None (``1.2.3``, ``inf``, ``1e999``)."""
    try:
        f = float(text)
    except ValueError:
        return None
    return f if math.isfinite(f) else None


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


# More data rows than this is not one nccl-tests run (-b 8 -e 8G -f 2 prints 31; the finest sweeps a few
# thousand): refused while reading, so a pasted log of millions of lines costs one pass and no memory.
MAX_ROWS = 65_536


def _check_row(row: dict, lineno: int) -> None:
    """The range checks JSON rows get (sim.io.validation): sizes 0..1 PiB, finite non-negative times and
    bandwidths, and no ``#wrong`` elements (a run that computed wrong results measures nothing)."""
    from .validation import MAX_BYTES, MAX_US
    where = f"nccl-tests line {lineno}"
    if row["nbytes"] is None or not 0 <= row["nbytes"] <= MAX_BYTES:
        size = row["nbytes"] if row["nbytes"] is None or len(str(row["nbytes"])) < 20 else f"a {len(str(row['nbytes']))}-digit number"
        raise CollsimError(f"{where}: size {size} is out of range: it must be 0 to {MAX_BYTES:,} bytes (1 PiB): is the file damaged?")
    for k in ("time_us", "inplace_time_us", "algbw_GBps", "busbw_GBps", "inplace_algbw_GBps", "inplace_busbw_GBps"):
        v = row[k]
        if v is not None and not (math.isfinite(v) and 0 <= v <= (MAX_US if k.endswith("_us") else 1e9)):
            raise CollsimError(f"{where}: {k} {v:g} is out of range: times must be finite, 0..{MAX_US:g} us, bandwidths "
                               "0..1e9 GB/s: is the file damaged? (fix or delete that row)")
    for k in ("wrong", "inplace_wrong"):
        v = row[k]
        if isinstance(v, int) and v > 0:
            raise CollsimError(f"{where}: #wrong is {v} at size {row['nbytes']}: nccl-tests found wrong results, so its "
                               "times measure a broken run: fix the run (or drop those rows) before comparing")


def parse_nccl_tests(text: str, max_rows: int = MAX_ROWS) -> list[dict]:
    """Every data row of nccl-tests output ``text``, in order; keys as in the module docstring. Each row
    is range-checked (:func:`_check_row`); more than ``max_rows`` rows are refused.

    Raises :class:`CollsimError` if no row can be read.
    """
    text = program_output(text)   # an NCCL_DEBUG=INFO log's records cut the table's rows: re-joined
    rows: list[dict] = []
    keys: list[str] | None = None
    short: tuple[int, int, int] | None = None   # the last result row cut short, and the last line with text
    last = 0
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        last = lineno
        if "#" in line:
            cols = _header_columns(line[line.index("#"):])
            if cols is not None:
                keys = _keys_for(cols)
            continue
        if " NCCL INFO " in line or " NCCL WARN " in line:
            continue   # NCCL's own log lines, interleaved by NCCL_DEBUG=INFO: "Channel 00/16 : 0 7 6 ..." is no result
        fields = line.split()
        layout = keys
        if layout is None:
            names = _FALLBACK.get(len(fields)) or next((v for k, v in _FALLBACK.items() if len(fields) > k and
                                                        _is_number(fields[-k])), None)
            if names is None:
                continue
            layout = _keys_for(list(names))
        if len(fields) < len(layout):
            if fields[0].isdigit() and len(fields) > 1 and _is_number(fields[1]):
                short = (lineno, len(fields), len(layout))   # a row cut short: fatal only if the file ends there
            continue
        fields = fields[len(fields) - len(layout):]  # drop an MPI/Slurm prefix
        if not (fields[0].isdigit() and _is_number(fields[1])):
            continue  # not a data line (a warning, an "Avg bus bandwidth" line without '#', ...)
        row = {k: None for k in KEYS}
        for k, f in zip(layout, fields):
            row[k] = _value(k, f)
        if row["time_us"] is None:
            continue
        _check_row(row, lineno)
        rows.append(row)
        if len(rows) > max_rows:
            raise CollsimError(f"the nccl-tests output has more than {max_rows:,} result rows (line {lineno}): one run has a "
                               "few dozen; split the file per run, or keep one line per size")
    if not rows:
        raise CollsimError("no nccl-tests result rows found: pass the text printed by all_reduce_perf (or another "
                           "*_perf binary), including its '#  size  count  type ...' header line")
    if short is not None and short[0] == last:   # the output stops inside a row: the run (or the copy) was cut, and scored it would pass as whole
        raise CollsimError(f"nccl-tests line {short[0]} is a result row cut short ({short[1]} of {short[2]} columns) and the "
                           "output ends there: the file looks truncated; use the complete output (or delete that line)")
    return rows


def collective_from_rows(rows: list[dict], nranks: int | None = None) -> str | None:
    """The collective a table that names none must be, from its own columns, or None where they do not say:
    busbw/algbw is 2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter and all_to_all, and 1
    for broadcast and reduce. With ``nranks`` known, every row's ratio must be 2(n-1)/n; without, above 1
    (every row's) can only be all_reduce's (n >= 3).

    >>> collective_from_rows([{"algbw_GBps": 10.0, "busbw_GBps": 17.5}]), collective_from_rows([{"algbw_GBps": 10.0, "busbw_GBps": 8.75}])
    ('all_reduce', None)
    >>> collective_from_rows([{"algbw_GBps": 10.0, "busbw_GBps": 17.5}], nranks=16)   # 1.875 for 16 ranks
    """
    # rows of 1 GB/s and more: the table prints two decimals, so 0.01 GB/s of algbw says nothing of the ratio;
    # a ratio of 1.33 (n = 3) is then told from 1 with room to spare
    ratios = [r["busbw_GBps"] / r["algbw_GBps"] for r in rows if (r.get("algbw_GBps") or 0) >= 1.0]
    if nranks:
        fits = all(abs(x - 2 * (nranks - 1) / nranks) < 0.02 for x in ratios)
    else:
        fits = all(x > 1.1 for x in ratios)
    return "all_reduce" if ratios and fits else None


def all_reduce_by_columns_note(source: str) -> str:
    """The line a reader prints when :func:`collective_from_rows` named the collective a table does not."""
    return (f"collsim: {source!r} names no collective; its busbw/algbw, 2(n-1)/n on every row, says all_reduce "
            "(--collective to say otherwise)")


def _library_version(text: str) -> str | None:
    """The NCCL release of nccl-tests' banner ``# nccl-tests version 2.17.6 nccl-headers=21903 nccl-library=21903``
    (nccl-tests 2.14+): NCCL_VERSION_CODE, major x 10000 + minor x 100 + patch since NCCL 2.9 (21903 is 2.19.3).

    >>> _library_version("# nccl-tests version 2.17.6 nccl-headers=21903 nccl-library=21903"), _library_version("")
    ('2.19.3', None)
    """
    m = re.search(r"nccl-library=(\d{5,6})\b", text)
    if not m:
        return None
    code = int(m.group(1))
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def parse_nccl_tests_meta(text: str) -> dict:
    """What the output says about the run: ``collective`` (from ``all_reduce_perf`` in the command line
    or banner, else None), ``nranks`` (the ``#  Rank  N ...`` device lines, else None), ``nccl_version`` (the
    ``NCCL version`` line, else the banner's ``nccl-library=`` code) and ``avg_busbw_GBps`` (the footer), when printed; ``gpus_per_process``: the GPUs one thread launches
    (``-g N``, the header's ``# nThread 1 nGpus N``), 1 when the header does not say.

    >>> parse_nccl_tests_meta("# Collective test starting: all_gather_perf\\n#  Rank  0 Group 0 Pid 1 on h device 0\\n")
    {'collective': 'all_gather', 'nranks': 1, 'nccl_version': None, 'avg_busbw_GBps': None, 'gpus_per_process': 1}
    >>> parse_nccl_tests_meta("# nThread 1 nGpus 8 minBytes 8 maxBytes 128")["gpus_per_process"]
    8
    """
    named = {"alltoall": "all_to_all"}
    found = sorted({named.get(c, c) for c in _COLLECTIVE_RE.findall(text)}
                   | {c for c in re.findall(r"collsim bench: (\w+) on ", text)})
    if len(found) > 1:  # several runs pasted into one file: their rows would be merged as one sweep
        raise CollsimError(f"this output holds runs of {len(found)} collectives ({', '.join(found)}): several nccl-tests "
                           "outputs concatenated? Keep one collective per file")
    coll = found[0] if found else None
    ranks = re.findall(r"#\s*Rank\s+(\d{1,7})\s", text)
    runs: list[list[int]] = []
    current: list[int] = []   # the rank lines of each run: a new run starts at a second "Rank 0"
    for r in ranks:
        if r.lstrip("0") == "" and current:
            runs.append(current)
            current = []
        current.append(int(r))
    if current:
        runs.append(current)
    sizes = sorted({max(g) + 1 for g in runs})
    if len(runs) > 1:   # of one rank count too: every size would be scored twice, as if one sweep
        raise CollsimError(f"this output holds {len(runs)} runs, of {' and '.join(map(str, sizes))} ranks (a second "
                           "'#  Rank  0' device list): several nccl-tests outputs concatenated? Keep one run per file "
                           "(their rows would be scored as one sweep)")
    ver = re.search(r"NCCL version (\d+\.\d+\.\d+)", text)
    version = ver.group(1) if ver else _library_version(text)
    avg = re.search(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)", text)
    gpus = re.search(r"nThread\s+\d+\s+nGpus\s+(\d{1,4})\b", text)
    return {"collective": coll, "nranks": max(int(r) for r in ranks) + 1 if ranks else None,
            "nccl_version": version, "avg_busbw_GBps": _finite(avg.group(1)) if avg else None,
            "gpus_per_process": max(1, int(gpus.group(1))) if gpus else 1}
