"""The CPU's private cache, and how much faster a copy runs inside it: what the gloo host model's cache
knee needs (:mod:`real.compare.hostmodel`).

A rank's copies and reductions run faster while the buffers they touch fit in the core's private cache
(L2 on current x86 and Arm servers) than once they spill to the shared last-level cache or memory.
Two measurable quantities describe that knee:

* the private cache's size, read from Linux's ``/sys/devices/system/cpu/cpu0/cache/index*/``
  (``level``, ``type``, ``size`` such as ``2048K``, ``shared_cpu_list``): the largest data/unified cache
  that only cpu0 uses;
* the copy speedup: a ``numpy`` copy whose source and destination fill half that cache, against one
  of 8x the cache, each the best of a few repeats (about 60 ms in all).

Both are recorded by ``collsim bench`` in its JSON (``env.cpu_cache``), so a calibration made
elsewhere uses the cache of the machine that measured. Values in ``/sys`` are parsed strictly (a
number with an optional K/M/G suffix, under 64 bytes of text); anything else means "unknown", never a
guess.

>>> parse_cache_size("2048K"), parse_cache_size("105M"), parse_cache_size("lots")
(2097152, 110100480, None)
"""
from __future__ import annotations

import os
import re
import time

SYS_CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"
MAX_FIELD_BYTES = 64
_SIZE = re.compile(r"\s*(\d{1,9})\s*([KMG]?)\s*", re.I)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
SPEEDUP_RANGE = (1.0, 8.0)   # a measured ratio outside this is a disturbed measurement, not a cache


def parse_cache_size(text: str) -> int | None:
    """``'2048K'`` -> 2097152 bytes; None for anything that is not a size."""
    m = _SIZE.fullmatch(text or "")
    return int(m.group(1)) * _UNITS[m.group(2).upper()] if m else None


def _field(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FIELD_BYTES).decode("ascii", errors="replace").strip()
    except OSError:
        return None


def read_caches(root: str = SYS_CACHE_DIR) -> list[dict]:
    """Every data/unified cache of cpu0 under ``root``: ``{"level", "bytes", "private"}``."""
    try:
        names = sorted(n for n in os.listdir(root) if re.fullmatch(r"index\d{1,2}", n))
    except OSError:
        return []
    caches = []
    for name in names:
        d = os.path.join(root, name)
        kind, level, size = _field(os.path.join(d, "type")), _field(os.path.join(d, "level")), _field(os.path.join(d, "size"))
        nbytes = parse_cache_size(size or "")
        if kind not in ("Data", "Unified") or not (level or "").isdigit() or not nbytes:
            continue
        shared = _field(os.path.join(d, "shared_cpu_list"))
        caches.append({"level": int(level), "bytes": nbytes, "private": shared in ("0", None)})
    return caches


def private_cache_bytes(caches: list[dict]) -> tuple[int, int] | None:
    """``(level, bytes)`` of the largest cache only one core uses, or None."""
    private = [c for c in caches if c["private"]]
    if not private:
        return None
    best = max(private, key=lambda c: (c["bytes"], c["level"]))
    return best["level"], best["bytes"]


def copy_GBps(nbytes: int, repeats: int = 5, budget_bytes: int = 64 << 20) -> float:
    """Copy rate (read + write, GB/s) of a ``nbytes`` buffer into another: the best of ``repeats``."""
    import numpy as np
    src = np.ones(max(nbytes, 1), dtype=np.uint8)
    dst = np.empty_like(src)
    inner = max(1, budget_bytes // max(nbytes, 1) // repeats)
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(inner):
            np.copyto(dst, src)
        best = min(best, (time.perf_counter() - t) / inner)
    return 2 * src.nbytes / best / 1e9


def cache_record(root: str = SYS_CACHE_DIR, measure: bool = True) -> dict | None:
    """What ``collsim bench`` records as ``env.cpu_cache``, or None where ``/sys`` gives no private cache."""
    caches = read_caches(root)
    found = private_cache_bytes(caches)
    if found is None:
        return None
    level, nbytes = found
    rec = {"level": level, "private_bytes": nbytes, "source": root,
           "llc_bytes": max((c["bytes"] for c in caches), default=None)}
    if measure:
        inside, beyond = copy_GBps(nbytes // 4), copy_GBps(nbytes * 4)   # working sets C/2 and 8C
        rec.update({"copy_GBps_in_cache": round(inside, 2), "copy_GBps_beyond": round(beyond, 2),
                    "copy_speedup": round(min(max(inside / beyond, SPEEDUP_RANGE[0]), SPEEDUP_RANGE[1]), 3)})
    return rec
