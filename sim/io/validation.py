"""One check for every number a user gives: specs, files, flags, calibrations, workloads.

:func:`number` accepts ints and floats only (not ``True``, not ``"fast"``), refuses NaN, infinities and
integers too large for a float (a 300-digit YAML integer), and checks a range; the message names the
value, the limit and the fix. :func:`whole` does the same for counts. The limits below are far above
any real machine, so they only ever stop a typo or a hostile input, and each says why it exists.

>>> number(25, "bandwidth_GBps", low=0, low_open=True)
25.0
>>> number(float("inf"), "latency_us", low=0)
Traceback (most recent call last):
...
sim.errors.CollsimError: latency_us inf is not a finite number: give a value such as 1.5 (at least 0)
>>> whole("8", "n")
Traceback (most recent call last):
...
sim.errors.CollsimError: n '8' is not a whole number (got a str): give a value such as 8 (any whole number)
"""
from __future__ import annotations

import math
import numbers

from ..errors import CollsimError

# The largest buffer any sweep may use: 1 PiB (2**50 B). GPU memories are ~2**37 B; a sweep past this is a
# typo (1e308K), and keeping sizes below 2**53 keeps every byte count exact in a float.
MAX_BYTES = 1 << 50
# A sweep of more sizes than this would run for hours (and hold every row in memory): nccl-tests' usual
# -b 8 -e 8G -f 2 is 31 sizes; -b 1M -e 1G -i 1M is 1024; -b 64K -e 1G -i 64K, about the finest sweep
# anyone runs, is 16,384. -b 8 -e 8T with the default -i 1M would be 8 million.
MAX_SWEEP_SIZES = 65_536
# Bandwidths above 1e9 GB/s (an exabyte per second) and latencies above 1e9 us (17 minutes) describe no
# hardware; they are typos that would silently make one link free or dominant.
MAX_GBPS = 1e9
MAX_US = 1e9
# ... and below 1e-6 GB/s (a kilobyte per second) a link is a typo too: a denormal bandwidth overflowed the
# engine's times to infinity, which JSON cannot carry (a hostile tester's trial, twenty-ninth pass)
MIN_GBPS = 1e-6
# World sizes: the largest jobs run ~1e5 GPUs; above 2**20 ranks no topology is meant.
MAX_RANKS = 1 << 20
# What collsim builds, presets and topology files alike (the one wording of the limit: presets, files, README)
MAX_GPUS = 1 << 17
GPU_LIMIT = f"collsim builds at most {MAX_GPUS:,} GPUs"
# Any other real-valued preset parameter (oversubscription, a ratio, a count given as a float): 1e12 is
# far past every one of them and keeps products of a few of them finite.
MAX_PARAM = 1e12
# Channels per collective: NCCL uses at most 32 (MAXCHANNELS is 32 in NCCL 2.x, 64 on some builds);
# 256 leaves room for what-if studies and keeps the engine's state per channel bounded.
MAX_CHANNELS = 256


def _show(x) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e7 else f"{x:g}"


def _describe_range(low, high, low_open: bool, high_open: bool) -> str:
    parts = []
    if low is not None:
        parts.append(f"{'above' if low_open else 'at least'} {_show(low)}")
    if high is not None:
        parts.append(f"{'below' if high_open else 'at most'} {_show(high)}")
    return " and ".join(parts) if parts else "any finite number"


def number(value, what: str, *, low: float | None = None, high: float | None = None, low_open: bool = False,
           high_open: bool = False, example: str = "1.5") -> float:
    """``value`` as a float when it is a finite int/float within [low, high] (open ends with ``*_open``)."""
    rng = _describe_range(low, high, low_open, high_open)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CollsimError(f"{what} must be a number, got {value!r} (a {type(value).__name__}): give a value such as "
                           f"{example} ({rng})")
    try:
        f = float(value)
    except OverflowError:
        raise CollsimError(f"{what} is a {len(str(abs(value)))}-digit integer, too large for any hardware: give a value "
                           f"such as {example} ({rng})") from None
    if not math.isfinite(f):
        raise CollsimError(f"{what} {f} is not a finite number: give a value such as {example} ({rng})")
    if (low is not None and (f < low or (low_open and f == low))) or (high is not None and (f > high or (high_open and f == high))):
        raise CollsimError(f"{what} {_show(value)} is out of range: it must be {rng}")
    return f


def whole(value, what: str, *, low: int | None = None, high: int | None = None, example: str = "8") -> int:
    """``value`` as an int when it is a whole number (an int, or a float with no fraction) in [low, high]."""
    rng = _describe_range(low, high, False, False) if (low is not None or high is not None) else "any whole number"
    if isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
        value = int(value)   # numpy's integers (not int subclasses): a sweep built with numpy passes them
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise CollsimError(f"{what} {value!r} is not a whole number (got a {type(value).__name__}): give a value such as "
                           f"{example} ({rng})")
    n = int(value)
    if (low is not None and n < low) or (high is not None and n > high):
        shown = str(n) if len(str(n)) <= 24 else f"a {len(str(abs(n)))}-digit number"
        raise CollsimError(f"{what} {shown} is out of range: it must be {rng}")
    return n


def parse_number(text: str, what: str, **limits) -> float:
    """A number typed on the command line or in a spec (``"1.5"``, ``"inf"`` refused), checked by :func:`number`."""
    try:
        value = float(str(text).strip())
    except ValueError:
        raise CollsimError(f"{what} {text!r} is not a number: give a value such as {limits.get('example', '1.5')}") from None
    return number(value, what, **limits)


def bandwidth_GBps(value, what: str) -> float:
    """A link/NIC/switch bandwidth: finite, from :data:`MIN_GBPS` to :data:`MAX_GBPS`."""
    f = number(value, what, high=MAX_GBPS, example="100")
    if f <= 0:
        raise CollsimError(f"{what} is {_show(f)}: bandwidth must be a positive number of GB/s, e.g. 100")
    if f < MIN_GBPS:
        raise CollsimError(f"{what} {f:g} GB/s is below {MIN_GBPS:g} GB/s (a kilobyte per second), no link's speed: "
                           "give GB/s, e.g. 100")
    return f


def latency_us(value, what: str) -> float:
    """A latency or overhead: zero or more, finite, at most :data:`MAX_US`."""
    f = number(value, what, high=MAX_US, example="1.5")
    if f < 0:
        raise CollsimError(f"{what} is {_show(f)}: latency must be zero or more microseconds (a negative one would make "
                           "the step free)")
    return f


def sweep_length(minbytes: int, maxbytes: int, factor: float, step: int) -> int:
    """How many sizes ``-b/-e/-f/-i`` make, computed without making them (so a huge sweep is refused at once)."""
    if factor and factor > 1:
        if minbytes <= 0:
            return 1 + sweep_length(1, maxbytes, factor, step) if maxbytes >= 1 else 1
        if maxbytes < minbytes:
            return 0
        return int(math.floor(math.log(maxbytes / minbytes) / math.log(factor) + 1e-9)) + 1
    if step <= 0:
        return 1 if minbytes == maxbytes else 2
    return (maxbytes - minbytes) // step + 1


def check_sweep_length(minbytes: int, maxbytes: int, factor: float, step: int) -> None:
    """Refuse a sweep of more than :data:`MAX_SWEEP_SIZES` sizes before any of it runs."""
    count = sweep_length(minbytes, maxbytes, factor, step)
    if count > MAX_SWEEP_SIZES:
        raise CollsimError(f"-b {minbytes} -e {maxbytes} makes {count:,} sizes, over the limit of {MAX_SWEEP_SIZES:,}: "
                           f"use a factor such as -f 2 (or a larger -i, or a narrower -b/-e)")
