"""What the model reads besides its arguments, as one hashable key for caches.

A prediction depends on its inputs (topology, collective, size, algorithm, protocol, options) and on
the settings in force through documented contexts: the fitted calibration
(:func:`sim.nccl.calibration.current`) and the NCCL release and variables
(:func:`sim.nccl.config.current`). A cache of anything the model computes keys by both, so a
cross-validation fold or an ``NCCL_ALGO`` block never reads a value computed under other settings, and
nothing ever needs clearing.

:func:`cached` is that cache for pure functions of hashable arguments: an LRU keyed by the arguments
and :func:`key`, counting its hits and misses (``info()``).

>>> from sim.nccl import calibration
>>> key() == key()
True
>>> with calibration.override({"launch_overhead_us": 1.0}):
...     key() == key(calibration.DEFAULT)
False
"""
from __future__ import annotations

import functools
from collections import OrderedDict

from . import calibration, config


def key(cal: calibration.Calibration | None = None) -> tuple:
    """The settings in force (or ``cal`` and the rest in force), hashable: the calibration and the NCCL
    release and variables (:mod:`sim.nccl.config`)."""
    return (cal or calibration.current(),) + _nccl_config()


def _nccl_config() -> tuple:
    return (config.current(),)


def cached(maxsize: int = 4096):
    """Decorate a pure function of hashable arguments: results kept per (arguments, :func:`key`), the
    least recently used dropped beyond ``maxsize``. Results are shared: callers must not mutate them.
    Unhashable arguments run the function uncached."""
    def wrap(fn):
        store: OrderedDict = OrderedDict()
        counts = {"hits": 0, "misses": 0}

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            k = (args, tuple(sorted(kwargs.items())), key())
            try:
                hit = k in store
            except TypeError:           # an unhashable argument: compute, keep nothing
                return fn(*args, **kwargs)
            if hit:
                counts["hits"] += 1
                store.move_to_end(k)
                return store[k]
            counts["misses"] += 1
            value = store[k] = fn(*args, **kwargs)
            if len(store) > maxsize:
                store.popitem(last=False)
            return value

        def clear() -> None:
            store.clear()
            counts.update(hits=0, misses=0)

        inner.info = lambda: dict(counts, size=len(store))   # type: ignore[attr-defined]
        inner.clear = clear                                  # type: ignore[attr-defined]
        return inner
    return wrap


__all__ = ["cached", "key"]
