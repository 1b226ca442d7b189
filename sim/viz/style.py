"""Shared conventions for collsim's figures: size labels (powers of 1024, as nccl-tests' sizes) and a
log2 size axis.

>>> size_label(1 << 20), size_label(3 << 30), size_label(8)
('1 MiB', '3 GiB', '8 B')
"""
from __future__ import annotations

from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter


def size_label(nbytes: float) -> str:
    """``1048576 -> '1 MiB'``: sizes in powers of 1024 (nccl-tests' K/M/G), with the unit spelt out."""
    for suffix, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= mult:
            v = nbytes / mult
            return f"{v:.0f} {suffix}" if v == int(v) else f"{v:.3g} {suffix}"
    return f"{nbytes:.0f} B"


def short_size(nbytes: float) -> str:
    """Tick label: ``'1M'``, ``'64K'``, ``'8'`` (nccl-tests' -b/-e spelling)."""
    for suffix, mult in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= mult:
            v = nbytes / mult
            return f"{v:.0f}{suffix}" if v == int(v) else f"{v:.2g}{suffix}"
    return f"{nbytes:.0f}"


def size_axis(ax, axis: str = "x", label: str = "message size (bytes; K, M, G = 2^10, 2^20, 2^30)",
              max_ticks: int = 9) -> None:
    """Log2 axis with ticks at powers of two spelt like nccl-tests (8, 1K, 1M, 1G). Call after plotting:
    the ticks span the data limits, spaced so that at most ``max_ticks`` are labelled."""
    import math
    set_scale = ax.set_xscale if axis == "x" else ax.set_yscale
    set_scale("log", base=2)
    target = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    a, b = math.ceil(math.log2(max(lo, 1))), math.floor(math.log2(max(hi, 1)))
    step = 1
    while (b - a) // step + 1 > max_ticks:
        step += 1
    step = next(s for s in (1, 2, 5, 10, 20, 30) if s >= step)   # divisors of 10: 1K, 1M, 1G stay ticks
    start = a + (-a) % step if (b - a) >= step else a   # prefer multiples of the step: 1K, 1M, 1G line up
    target.set_major_locator(FixedLocator([2.0 ** k for k in range(start, b + 1, step)]))
    target.set_minor_locator(FixedLocator([2.0 ** k for k in range(a, b + 1)]))
    target.set_major_formatter(FuncFormatter(lambda v, _pos: short_size(v)))
    target.set_minor_formatter(NullFormatter())
    (ax.set_xlabel if axis == "x" else ax.set_ylabel)(label)
