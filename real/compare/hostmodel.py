"""Host-side work a CPU collective does besides sending bytes: staging copies and reductions.

On GPUs NCCL reduces inside its kernels while the data streams, so the simulator's links are the whole
story. torch's gloo backend on CPUs is different in two ways, and both are counted here in **bytes of
memory traffic per rank** (a copy of m bytes reads m and writes m: 2m):

* ``all_reduce`` (gloo's ring, in place on the user's tensor): every rank adds the (n-1)/n of the
  buffer it receives into its own: read both, write one, ``3 (n-1)/n * S``.
* ``all_gather`` (torch's ``all_gather_single`` on gloo): torch allocates a fresh flat output of S
  bytes for every call (the kernel zeroes its pages: S written), gloo copies the rank's own shard into
  it (2 S/n), and torch copies the flat output into the user's tensor (2 S): ``(3 + 2/n) * S``.

Other collectives are not modelled (``None``): their prediction is the links' time alone.

**The cache knee** (``torch-gloo-cache``; calibration's ``auto`` picks it for gloo on one host when the
bench recorded the CPU's cache). Those copies run faster while the buffers a call touches fit in the core's private
cache (:mod:`real.measure.cpucache`: its size from ``/sys``, and the speedup ``k`` of a copy inside it over one
beyond it, both measured by ``collsim bench``). A rank's working set is ``S`` for all_reduce (in place;
gloo's receive segments are small) and ``(2 + 1/n) S`` for all_gather (the shard, the fresh output and
the user's tensor). The share of it that fits is ``f = min(1, C / working set)``, and host work costs
``1 - f (1 - 1/k)`` of its out-of-cache time (:func:`cache_factor`): all of it at ``k`` times the rate
when the buffers fit, the out-of-cache rate as they grow far past ``C``. Over ten measured sweep pairs
it made the held-out all_reduce error smaller (median 23.5% against 29.5%) and the fitted bandwidth
steadier from run to run, though not in every run (docs/compare.md has the numbers).

On one host over loopback TCP the wire is memory traffic too: sending m bytes copies them from the
user's buffer into the kernel and the receiver copies them out, so a rank that sends m and receives m
moves ``4 m`` bytes (:data:`LOOPBACK_BYTES_PER_WIRE_BYTE`). One memory rate therefore prices both the
links and the host work, and calibration fits that one rate (see :mod:`real.compare.calibrate`).

>>> host_bytes("torch-gloo", "all_reduce", 1 << 20, 2)
1572864.0
>>> host_bytes("torch-gloo", "all_gather", 1 << 20, 2) / (1 << 20)
4.0
>>> host_bytes("none", "all_gather", 1 << 20, 2)
0.0
>>> cache_factor("all_reduce", 1 << 20, 2, {"private_bytes": 2 << 20, "copy_speedup": 2.0})
0.5
"""
from __future__ import annotations

import os

from sim.collectives import get_collective
from sim.errors import CollsimError

HOST_MODELS = ("none", "torch-gloo", "torch-gloo-cache")   # -cache: torch-gloo with the cache knee
LOOPBACK_BYTES_PER_WIRE_BYTE = 4.0

# Per collective, (nranks, nbytes) -> bytes: the collectives the host model covers (the module docstring
# derives each); any other collective is not modelled (None).
_HOST_BYTES = {"all_reduce": lambda n, s: 3.0 * (n - 1) / n * s,
               "all_gather": lambda n, s: (3.0 + 2.0 / n) * s}
_WORKING_SET_BYTES = {"all_reduce": lambda n, s: s,
                      "all_gather": lambda n, s: (2.0 + 1.0 / n) * s}


def host_bytes(model: str, collective: str, nbytes: float, nranks: int) -> float | None:
    """Bytes of host memory traffic per rank beyond the wire for one call (None: not modelled)."""
    if model not in HOST_MODELS:
        raise CollsimError(f"unknown host model {model!r}: choose one of {', '.join(HOST_MODELS)}")
    if model == "none":
        return 0.0
    # torch-gloo-cache counts the same bytes (the knee prices them)
    form = _HOST_BYTES.get(get_collective(collective).name)
    return None if form is None else form(nranks, float(nbytes))


def default_host_model(backend: str | None, label: str = "") -> str:
    """``torch-gloo`` for measurements made with torch's gloo backend, ``none`` otherwise (NCCL)."""
    if (backend or "").lower() == "gloo" or ":gloo:" in label:
        return "torch-gloo"
    return "none"


def working_set_bytes(collective: str, nbytes: float, nranks: int) -> float | None:
    """Bytes of buffers one rank's host work touches in one call (None: not modelled)."""
    form = _WORKING_SET_BYTES.get(get_collective(collective).name)
    return None if form is None else form(nranks, float(nbytes))


def cache_factor(collective: str, nbytes: float, nranks: int, cache: dict | None) -> float:
    """The share of its out-of-cache time a call's host work takes: ``1 - f (1 - 1/k)`` with ``f`` the
    part of the working set that fits in ``cache["private_bytes"]`` and ``k = cache["copy_speedup"]``;
    1.0 without a usable cache record."""
    c = (cache or {}).get("private_bytes")
    k = (cache or {}).get("copy_speedup")
    ws = working_set_bytes(collective, nbytes, nranks)
    if not isinstance(c, (int, float)) or not isinstance(k, (int, float)) or c <= 0 or k < 1 or not ws:
        return 1.0
    fits = min(1.0, float(c) / ws)
    return 1.0 - fits * (1.0 - 1.0 / float(k))


def cpu_cache_of(measurements: list) -> dict | None:
    """The first file's ``env.cpu_cache`` (:func:`real.measure.cpucache.cache_record`) when it holds a usable
    private-cache size and copy speedup, reduced to those (and where they came from); else None."""
    for m in measurements:
        rec = m.env.get("cpu_cache") if isinstance(m.env, dict) else None
        if not isinstance(rec, dict):
            continue
        size, k = rec.get("private_bytes"), rec.get("copy_speedup")
        if (isinstance(size, int) and not isinstance(size, bool) and 0 < size <= 1 << 34
                and isinstance(k, (int, float)) and not isinstance(k, bool) and 1.0 <= k <= 8.0):
            return {"private_bytes": size, "copy_speedup": float(k), "level": rec.get("level"),
                    "source": f"env.cpu_cache of {os.path.basename(m.source)}"}
    return None
