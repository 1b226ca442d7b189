"""Sizes and sweeps in nccl-tests' conventions.

Sizes accept K/M/G/T suffixes meaning powers of 1024 (as nccl-tests' ``-b 8 -e 128M``); bandwidths are
decimal GB/s (1e9 bytes per second), as nccl-tests prints them.

>>> parse_size("4K"), parse_size("1G"), parse_size("512")
(4096, 1073741824, 512)
>>> size_sweep(parse_size("1K"), parse_size("16K"), factor=4)
[1024, 4096, 16384]
"""
from __future__ import annotations

import math

from .errors import CollsimError
from .io.validation import MAX_BYTES, check_sweep_length

_SUFFIX = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def parse_size(text: str | int) -> int:
    """Parse ``"8"``, ``"64K"``, ``"1M"``, ``"8G"`` (also ``"64KB"``, ``"1MiB"``) into bytes."""
    if isinstance(text, int):
        if text < 0:
            raise CollsimError(f"size {text} is negative: give a byte count such as 8, 64K or 1G")
        if text > MAX_BYTES:
            raise CollsimError(f"size {text} B is over the {format_size(MAX_BYTES)} limit (no GPU holds such a buffer): "
                               "give a byte count such as 8, 64K or 1G")
        return text
    s = str(text).strip().upper().replace("IB", "").rstrip("B") if str(text).strip() else ""
    num, suffix = s, ""
    if s and s[-1] in "KMGT":
        num, suffix = s[:-1], s[-1]
    try:
        value = float(num)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value):
        raise CollsimError(f"cannot read size {text!r}: use a byte count with an optional K/M/G/T suffix, e.g. 8, 64K, 1G")
    nbytes = value * _SUFFIX[suffix]
    if not math.isfinite(nbytes) or nbytes > MAX_BYTES:
        raise CollsimError(f"size {text!r} is over the {format_size(MAX_BYTES)} limit (no GPU holds such a buffer): "
                           "give a byte count such as 8, 64K or 1G")
    if nbytes < 0 or nbytes != int(nbytes):
        raise CollsimError(f"size {text!r} is not a whole, non-negative number of bytes")
    return int(nbytes)


def size_sweep(minbytes: int, maxbytes: int, factor: float = 0.0, step: int = 0) -> list[int]:
    """Sizes from ``minbytes`` to ``maxbytes``: multiplied by ``factor`` (nccl-tests ``-f``), or
    increased by ``step`` (``-i``) when no factor is given."""
    if minbytes > maxbytes:
        raise CollsimError(f"minimum size {minbytes} B is larger than maximum size {maxbytes} B: swap -b and -e")
    if factor != factor or factor in (float("inf"), float("-inf")):
        raise CollsimError(f"step factor {factor} is not a number: use e.g. -f 2")
    if not factor or factor > 1:  # (a factor below 1 is refused below)
        check_sweep_length(minbytes, maxbytes, factor, step)
    if factor and factor > 1:
        sizes: list[int] = []
        s: float = minbytes
        while s <= maxbytes:
            sizes.append(int(s))
            s = s * factor if s > 0 else 1
        return sizes
    if factor != factor or factor in (float("inf"), float("-inf")):
        raise CollsimError(f"step factor {factor} is not a number: use e.g. -f 2")
    if factor and factor <= 1:
        raise CollsimError(f"step factor {factor} must be larger than 1 (e.g. -f 2)")
    if step <= 0:
        return [minbytes] if minbytes == maxbytes else [minbytes, maxbytes]
    return list(range(minbytes, maxbytes + 1, step))


def format_size(nbytes: int) -> str:
    """Short human form: 1024 -> '1K', 3<<20 -> '3M', 1000 -> '1000'."""
    for suffix, mult in (("T", 1 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult}{suffix}"
    return str(nbytes)
