"""Measured results, read from ``collsim bench --format json`` or from raw nccl-tests text.

Both become a :class:`Measurement`: which collective, how many ranks, and one :class:`MeasuredRow` per
size with the out-of-place and in-place times (us). The text reader is
:func:`sim.io.nccl_tests_format.parse_nccl_tests`, which reads the current column layout (``redop root
... #wrong``) and the older ones (``error`` and no ``root``) from their header line.

The collective of a text file comes from its banner (``# Collective test starting: all_reduce_perf``)
or command line (``all_gather_perf -b 8 ...``), else from ``collective=``; the rank count from the
``#  Rank  N ...`` device lines, else from the busbw/algbw ratio (the bus factor), else ``nranks=``.

>>> m = read_measurement_text('''# Collective test starting: all_reduce_perf
... #  Rank  0 Group  0 Pid 1 on a device  0 [0x07] NVIDIA A100-SXM4-80GB
... #  Rank  1 Group  0 Pid 2 on a device  1 [0x0b] NVIDIA A100-SXM4-80GB
... #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
...      1048576        262144     float     sum      -1    29.80   35.19   35.19      0    29.50   35.54   35.54      0
... ''')
>>> m.collective, m.nranks, m.rows[0].nbytes, m.rows[0].time("best")
('all_reduce', 2, 1048576, 29.5)
"""
from __future__ import annotations

import json
import math
import os
import re
from dataclasses import dataclass, field, replace

from sim.collectives import get_collective
from sim.errors import CollsimError
from sim.io.nccl_tests_format import all_reduce_by_columns_note, collective_from_rows, parse_nccl_tests, parse_nccl_tests_meta
from sim.io.safe_io import read_input
from sim.io.validation import MAX_BYTES, MAX_RANKS

MAX_FILE_BYTES = 64 << 20
TIME_CHOICES = ("best", "out-of-place", "in-place")
STATISTICS = ("median", "mean", "min", "auto")
DEFAULT_STATISTIC = "median"   # issue 16: compare and calibrate use the median unless told otherwise


@dataclass(frozen=True)
class MeasuredRow:
    """One measured size. Times in microseconds; ``None`` where the source has no such column."""

    nbytes: int
    time_us: float | None                 # out-of-place
    inplace_time_us: float | None = None
    count: int | None = None
    dtype: str | None = None
    redop: str | None = None
    wrong: float | None = None            # #wrong elements (or the old max-error column)
    # what collsim bench records beside the mean (None in nccl-tests text and older JSON)
    median_time_us: float | None = None
    inplace_median_time_us: float | None = None
    min_time_us: float | None = None
    inplace_min_time_us: float | None = None
    samples_us: tuple[float, ...] = ()            # every timed iteration, out-of-place
    inplace_samples_us: tuple[float, ...] = ()

    def time(self, which: str = "best") -> float | None:
        """The time to compare with: ``best`` (the faster of out-of-place and in-place: interference on
        a shared machine only ever adds time, and both run the same collective), ``out-of-place`` (the
        first columns, nccl-tests' headline), or ``in-place``."""
        if which == "out-of-place":
            return self.time_us
        if which == "in-place":
            return self.inplace_time_us
        if which != "best":
            raise CollsimError(f"unknown measured time {which!r}: choose one of {', '.join(TIME_CHOICES)}")
        times = [t for t in (self.time_us, self.inplace_time_us) if t is not None and t > 0]
        return min(times) if times else None

    def observations(self) -> list[float]:
        """Every positive time this row holds (out-of-place, in-place): calibration fits them all."""
        return [t for t, _ in self.observed_samples()]

    def observed_samples(self) -> list[tuple[float, tuple[float, ...]]]:
        """:meth:`observations`, each with the timed iterations behind it (``()`` where not recorded):
        what calibration's bootstrap resamples."""
        return [(t, xs) for t, xs in ((self.time_us, self.samples_us), (self.inplace_time_us, self.inplace_samples_us))
                if t is not None and t > 0]


@dataclass(frozen=True)
class Measurement:
    """A measured sweep of one collective on ``nranks`` ranks."""

    source: str                      # file path (or "<text>")
    kind: str                        # "collsim-json" or "nccl-tests"
    collective: str
    nranks: int
    rows: tuple[MeasuredRow, ...]
    backend: str | None = None       # gloo / nccl when known
    label: str = ""                  # where it ran: "local:gloo:2", a GPU name...
    env: dict = field(default_factory=dict)

    statistic: str = "mean"          # which statistic of the iterations the rows' times are (with_statistic)
    statistic_note: str = ""         # why it is not the one asked for, when it is not

    @property
    def sizes(self) -> list[int]:
        return [r.nbytes for r in self.rows]

    def describe(self) -> str:
        where = f" on {self.label}" if self.label else ""
        return (f"{self.collective}, {self.nranks} ranks{where} ({len(self.rows)} sizes "
                f"{_size(min(self.sizes))}..{_size(max(self.sizes))}, {os.path.basename(self.source)})")


def noisy_sizes(m: Measurement) -> list[int]:
    """Sizes whose recorded iterations disagree by collsim bench's own test (:func:`real.measure.bench_report.noise_warning`:
    interquartile range over 25% of the median, or a mean 1.5x the median)."""
    from real.measure.bench_report import NOISY_MEAN_RATIO, NOISY_SPREAD, row_spread
    noisy = []
    for r in m.rows:
        spread = row_spread({"time_samples_us": list(r.samples_us), "inplace_time_samples_us": list(r.inplace_samples_us)})
        ratio = max((t / med for t, med in ((r.time_us, r.median_time_us), (r.inplace_time_us, r.inplace_median_time_us))
                     if t and med), default=1.0)
        if (spread or 0.0) > NOISY_SPREAD or ratio > NOISY_MEAN_RATIO:
            noisy.append(r.nbytes)
    return noisy


def with_statistic(m: Measurement, statistic: str = DEFAULT_STATISTIC) -> Measurement:
    """``m`` with each row's out-of-place and in-place time replaced by ``statistic`` of its timed
    iterations: ``mean`` (what nccl-tests prints), ``median`` (a few stalled iterations do not move
    it; the default), ``min`` (the least disturbed iteration), or ``auto`` (opt-in): the median, unless
    the bench's own noise test flags the file (:func:`noisy_sizes`), then the minimum. Why offer
    ``auto``: on a shared machine the load of other processes changes from minute to minute, and a load
    that stalls half the iterations moves the median with it (gloo all_gather sweeps on 2 busy cores:
    fitted bandwidth 1.04-1.36 GB/s over four runs with the median, 1.53-1.66 with the minimum;
    docs/compare.md). Files that record only the mean
    (nccl-tests text, older collsim JSON) keep it, and ``statistic_note`` says so.

    >>> row = MeasuredRow(4096, 30.0, 28.0, median_time_us=12.0, inplace_median_time_us=11.0)
    >>> m = with_statistic(Measurement("<x>", "collsim-json", "all_reduce", 2, (row,)), "median")
    >>> m.rows[0].time("best"), m.statistic
    (11.0, 'median')
    """
    if statistic not in STATISTICS:
        raise CollsimError(f"unknown --statistic {statistic!r}: choose one of {', '.join(STATISTICS)}")
    if statistic == "auto":
        noisy = noisy_sizes(m)
        picked = with_statistic(m, "min" if noisy else "median")
        if noisy and picked.statistic == "min":
            return replace(picked, statistic_note=(
                f"{os.path.basename(m.source)}: iterations are noisy at {len(noisy)} of {len(m.rows)} sizes, so the "
                "minimum of each size's iterations is used, not the median (--statistic median to insist)"))
        return picked
    if statistic == "mean" or m.statistic == statistic:
        return replace(m, statistic=m.statistic if statistic == "mean" else statistic)
    rows, missing = [], 0
    for r in m.rows:
        out, inp = getattr(r, f"{statistic}_time_us"), getattr(r, f"inplace_{statistic}_time_us")
        if out is None and inp is None:
            missing += 1
            rows.append(r)
        else:
            rows.append(replace(r, time_us=out, inplace_time_us=inp))
    if missing == len(m.rows):
        return replace(m, statistic="mean", statistic_note=(
            f"{os.path.basename(m.source)} records only the mean of its iterations (nccl-tests' time), so it is "
            f"compared on the mean, not the {statistic}"))
    note = (f"{missing} of {len(m.rows)} sizes record only the mean and use it" if missing else "")
    return replace(m, rows=tuple(rows), statistic=statistic, statistic_note=note)


def size_text(nbytes: int) -> str:
    """``65536 -> '64 KiB'``, ``1000 -> '1000 B'``: sizes in powers of 1024, unit spelt out."""
    for suffix, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult} {suffix}"
    return f"{nbytes} B"


def _size(n: int) -> str:
    from sim.units import format_size
    return format_size(n)


# Sizes one comparison predicts (each a simulation, ~0.05 s on a laptop): nccl-tests' finest usual sweep,
# -b 1M -e 1G -i 1M, has 1,024.
MAX_SIZES = 2048
SECONDS_PER_SIZE = 0.05


def read_measurement(path: str, collective: str | None = None, nranks: int | None = None) -> Measurement:
    """Read ``path``: collsim's bench JSON, or nccl-tests text (detected from the content).

    ``collective`` / ``nranks`` fill in what a text file does not say (and must agree with what a JSON
    file says).
    """
    if not os.path.exists(path):
        raise CollsimError(f"measured file {path!r} does not exist: pass the output of `collsim bench --format json` "
                           "or of an nccl-tests binary such as all_reduce_perf")
    text = read_input(path, "measured file", MAX_FILE_BYTES)  # regular files only (not /dev/zero, a FIFO)
    if text.lstrip().startswith("["):   # JSON, but not the object collsim bench writes
        raise CollsimError(f"measured file {path!r} is a JSON list, not `collsim bench --format json` output (an object "
                           "with 'results') nor nccl-tests text")
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise CollsimError(f"measured file {path!r} starts like JSON but is not valid JSON ({e.msg} at line "
                               f"{e.lineno}): re-run `collsim bench --format json > FILE`") from None
        except RecursionError:
            raise CollsimError(f"measured file {path!r} nests too deeply to be a benchmark output") from None
        return measurement_from_json(doc, path, collective, nranks)
    return read_measurement_text(text, path, collective, nranks)


def measurement_from_json(doc, source: str = "<json>", collective: str | None = None,
                          nranks: int | None = None) -> Measurement:
    """A Measurement from collsim's JSON contract ``{"collective", "nranks", "results": [...]}``."""
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise CollsimError(f"{source!r} is JSON but not a collsim result: it needs a 'results' list "
                           "(the output of `collsim bench --format json`)")
    coll = get_collective(doc.get("collective") or collective or _missing("collective", source)).name
    if collective and get_collective(collective).name != coll:
        raise CollsimError(f"{source!r} measures {coll}, not {collective}: drop --collective or pick the right file")
    n = doc.get("nranks") or nranks or _missing("nranks", source)
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= MAX_RANKS:
        shown = repr(n) if len(repr(n)) < 30 else f"a {len(repr(n))}-character value"
        raise CollsimError(f"{source!r}: nranks {shown} must be a whole number from 2 to {MAX_RANKS} (a collective needs "
                           "two ranks)")
    if nranks and nranks != n:
        raise CollsimError(f"{source!r} was measured on {n} ranks, not {nranks}: drop --nranks")
    rows = []
    for i, r in enumerate(doc["results"]):
        if not isinstance(r, dict) or not isinstance(r.get("nbytes"), int) or not 0 <= r["nbytes"] <= MAX_BYTES:
            raise CollsimError(f"{source!r}: result #{i} has no whole 'nbytes' from 0 to {MAX_BYTES} (1 PiB)")
        rows.append(MeasuredRow(r["nbytes"], _num(r.get("time_us")), _num(r.get("inplace_time_us")),
                                r.get("count"), r.get("dtype"), r.get("redop"), _num(r.get("wrong")),
                                _num(r.get("median_time_us")), _num(r.get("inplace_median_time_us")),
                                _num(r.get("min_time_us")), _num(r.get("inplace_min_time_us")),
                                _samples(r.get("time_samples_us")), _samples(r.get("inplace_time_samples_us"))))
    backend = doc.get("backend")
    return _finish(Measurement(source, "collsim-json", coll, n, tuple(rows), backend, str(doc.get("topology") or ""),
                               doc.get("env") if isinstance(doc.get("env"), dict) else {}))


def read_measurement_text(text: str, source: str = "<text>", collective: str | None = None,
                          nranks: int | None = None) -> Measurement:
    """A Measurement from raw nccl-tests output (or collsim bench's table, which has the same layout)."""
    raw = parse_nccl_tests(text)
    meta = parse_nccl_tests_meta(text)
    coll = meta["collective"]
    if coll is None and "collsim bench:" in text:
        coll = text.split("collsim bench:", 1)[1].split()[0]  # our own table's title line
    if collective:
        wanted = get_collective(collective).name
        if coll and get_collective(coll).name != wanted:
            raise CollsimError(f"{source!r} says it measures {coll}, not {wanted}: drop --collective or pick the right file")
        coll = wanted
    if coll is None:   # older nccl-tests print no *_perf name: all_reduce's columns still say it (as validate reads them)
        coll = collective_from_rows(raw, nranks or meta["nranks"])
        if coll is None:
            _missing("collective", source)
        import sys
        print(all_reduce_by_columns_note(os.path.basename(source)), file=sys.stderr)
    coll = get_collective(coll).name
    sizes = len({r["nbytes"] for r in raw})
    if sizes > MAX_SIZES:   # counted before any is simulated: each size is one prediction
        raise CollsimError(f"{source!r} measures {sizes:,} distinct sizes; comparing them would take about "
                           f"{sizes * SECONDS_PER_SIZE / 60:.0f} min, over the limit of {MAX_SIZES:,} sizes: keep a sweep such as "
                           "-b 8 -e 8G -f 2 (31 sizes), or split the file")
    seen: set = set()
    twice = sorted({r["nbytes"] for r in raw if r["nbytes"] in seen or seen.add(r["nbytes"])})
    if twice:   # one nccl-tests run prints each size once: two rows would be scored as two sizes of one sweep
        raise CollsimError(f"{source!r} measures {len(twice)} size(s) twice (first: {twice[0]} B): several runs in one "
                           "file? Keep one row per size (one run per file)")
    rows = tuple(MeasuredRow(r["nbytes"], _num(r["time_us"]), _num(r["inplace_time_us"]), r["count"], r["dtype"],
                             r["redop"], _num(r["wrong"])) for r in raw)
    n = nranks or meta["nranks"] or _ranks_from_bus_factor(coll, raw)
    if not n:
        _missing("nranks", source)
    if n < 2:
        raise CollsimError(f"{source!r} shows {n} rank(s): a collective needs two, pass --nranks if the output lists only some")
    label = _gpu_name(text)
    backend = "nccl"  # nccl-tests' binaries run NCCL; our own table says its backend in the title
    if "collsim bench:" in text:  # our own table: "# collsim bench: all_gather on local:gloo:2, impl torch, ..."
        title = next(line for line in text.splitlines() if "collsim bench:" in line)
        label = title.split(" on ", 1)[1].split(",", 1)[0].strip() if " on " in title else label
        backend = label.split(":")[1] if label.count(":") >= 2 else backend
    env = {k: v for k, v in meta.items() if v is not None}
    p2p = re.search(r"^#\s*p2p latency:\s*([0-9.]+) us", text, re.M)   # collsim bench's table header
    if p2p:
        env["p2p_latency_us"] = float(p2p.group(1))
    return _finish(Measurement(source, "nccl-tests", coll, n, rows, backend, label, env))


def _finish(m: Measurement) -> Measurement:
    if not m.rows:
        raise CollsimError(f"{m.source!r} holds no measured sizes")
    if not any(r.time("best") for r in m.rows):
        raise CollsimError(f"{m.source!r}: no size has a positive time")
    return m


def _samples(v) -> tuple[float, ...]:
    """The positive finite numbers of a JSON list (an iteration list), or () for anything else."""
    if not isinstance(v, list):
        return ()
    vals = [_num(x) for x in v]
    return tuple(x for x in vals if x is not None and x > 0)


def _num(v):
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _missing(what: str, source: str):
    flag = {"collective": "--collective all_reduce (or all_gather, ...)", "nranks": "--nranks N"}[what]
    raise CollsimError(f"{source!r} does not say its {what}: pass {flag}")


def _ranks_from_bus_factor(collective: str, rows: list[dict]) -> int | None:
    """Invert nccl-tests' bus factor busbw/algbw (2(n-1)/n or (n-1)/n) on the row where rounding hurts least."""
    coll = get_collective(collective)
    best = max((r for r in rows if r.get("algbw_GBps") and r.get("busbw_GBps")), key=lambda r: r["algbw_GBps"],
               default=None)
    if best is None or coll.rooted:
        return None
    ratio = best["busbw_GBps"] / best["algbw_GBps"]
    frac = ratio / coll.passes   # (n-1)/n
    if not 0.4 < frac < 1:
        return None
    return max(2, round(1 / (1 - frac)))


def _gpu_name(text: str) -> str:
    for line in text.splitlines():
        if "Rank" in line and "device" in line and "]" in line:
            return line.rsplit("]", 1)[1].strip()
    return ""
