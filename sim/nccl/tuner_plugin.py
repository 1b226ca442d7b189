"""Tuner plugins: a library NCCL asks for the (algorithm, protocol) of each collective before it takes its own.

NCCL (2.19+) loads the library named by ``NCCL_TUNER_PLUGIN``; from 2.21 it also looks for a tuner in the
net plugin. A plugin sees NCCL's cost table and may set one pair's cost to 0, which NCCL then picks, unless
``NCCL_ALGO``/``NCCL_PROTO`` or the platform ruled that pair out (its cost is "ignore").

collsim models one plugin, **aws-ofi-nccl's region tuner** (``src/tuner/nccl_ofi_regions.cpp``), as
released in aws-ofi-nccl 1.15 to 1.17 (June 2025 to January 2026). On a P5/P5e instance (8 H100/H200 and
32 EFA interfaces) it splits the (message size, ranks) plane into polygons, each naming the pair to use;
the first polygon holding the point whose pair NCCL can run wins, and a point in none is left to NCCL. It
leaves communicators of 2 nodes or fewer to NCCL, and at 8 GPUs per node defines all_reduce only.
aws-ofi-nccl 1.18 draws the polygons in log-log coordinates instead: collsim does not model that release.

The polygons are the plugin's published vertices (read at tag v1.16.3), not fitted to any measurement.

>>> from sim.nccl.machine import machine
>>> from sim.presets import load_topology
>>> m = machine(load_topology("dgx-h100:nodes=32,nics_per_node=8,nic_gbps=400,fabric=efa2"))
>>> aws_ofi_pairs("all_reduce", 2 << 30, m)[0], aws_ofi_pairs("all_reduce", 64 << 20, m)[0]
(('ring', 'LL128'), ('tree', 'LL128'))
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:   # config names the plugin before the machine model is imported
    from .machine import Machine

AWS_OFI = "aws-ofi-nccl region tuner (v1.15-v1.17)"
FIRST_RELEASE = (2, 19)        # NCCL loads tuner plugins from 2.19 (NCCL_TUNER_PLUGIN)
_MAX_SIZE = 100.0 * 1024 ** 3  # TUNER_MAX_SIZE (nccl_ofi_tuner_common.h)
_MAX_RANKS = 1024.0 * 1024     # TUNER_MAX_RANKS
_EPS = 1e-10                   # the plugin's tolerance for "on an edge"

Point = tuple[float, float]


def extend_region(a: Point, b: Point, z: Point = (_MAX_SIZE, _MAX_RANKS)) -> Point:
    """The point where the line through ``a`` and ``b`` leaves the box below ``z`` (the plugin's
    ``extend_region``: how a polygon reaches the edge of the plane)."""
    if a[0] == b[0]:
        return (a[0], z[1])
    if a[1] == b[1]:
        return (z[0], a[1])
    m = (a[1] - b[1]) / (a[0] - b[0])
    c = b[1] - m * b[0]
    y = m * z[0] + c
    return (z[0], y) if y < z[1] else ((z[1] - c) / m, z[1])


def _on_segment(p: Point, a: Point, b: Point) -> bool:
    """``p`` on the segment a-b: its distance to the segment's line under the plugin's tolerance, and its
    projection between the ends. (The distance by the cross product: at coordinates of 1e11 bytes a
    projected point would lose the tolerance to rounding.)"""
    dx, dy = b[0] - a[0], b[1] - a[1]
    length = (dx * dx + dy * dy) ** 0.5
    if length == 0:
        return p == a
    if abs(dx * (p[1] - a[1]) - dy * (p[0] - a[0])) / length >= _EPS:
        return False
    t = ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / (length * length)
    return -_EPS <= t <= 1 + _EPS


def region_position(p: Point, vertices: tuple[Point, ...]) -> int:
    """1 inside the polygon, 0 on an edge, -1 outside: the plugin's ``is_inside_region``."""
    n = len(vertices)
    if any(_on_segment(p, vertices[i], vertices[(i + 1) % n]) for i in range(n)):
        return 0
    inside = False
    for i in range(n):   # ray casting: an odd number of edges crossed to the right means inside
        (x1, y1), (x2, y2) = vertices[i], vertices[(i + 1) % n]
        if (y1 > p[1]) != (y2 > p[1]) and p[0] < x1 + (p[1] - y1) * (x2 - x1) / (y2 - y1):
            inside = not inside
    return 1 if inside else -1


def region_holds(p: Point, vertices: tuple[Point, ...]) -> bool:
    """Whether the plugin takes the polygon's pair at ``p``: inside or on an edge (``in_out >= 0``)."""
    return region_position(p, vertices) >= 0


def _p5_all_reduce_8ppn() -> tuple[tuple[str, str, tuple[Point, ...]], ...]:
    """P5/P5e, 8 ranks per node, all_reduce: ``region_init_internal_p5_p5e`` in the plugin's order."""
    # the plugin extends two lines to the plane's edge, each twice under a region's name: the vertical at
    # 384 MiB (tree/LL128's right side, NVLSTree's left) and the line through (7.5 GiB, 160) and (9 GiB, 192)
    # (NVLSTree's lower side, ring/Simple's upper one)
    at_384m = extend_region((402653184, 2048), (402653184, 4096))
    past_9g = extend_region((8053063680, 160), (9663676416, 192))
    return (
        ("tree", "LL128", ((0, 16), (31457280, 16), (37748736, 32), (117440512, 64), (301989888, 128),
                           (301989888, 256), (335544320, 512), (536870912, 1024), (402653184, 2048),
                           (402653184, 4096), at_384m, (0, at_384m[1]))),
        ("nvls_tree", "Simple", ((31457281, 16), (_MAX_SIZE, 16), (31457281, 16))),
        ("ring", "LL128", ((31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
                           (1342177280, 160), (2147483648, 256), (1074790400, 256), (444596224, 160),
                           (301989888, 128), (117440512, 64), (37748736, 32))),
        ("nvls_tree", "Simple", ((2147483648, 128), (6442450944, 128), (8053063680, 160), (9663676416, 192),
                                 past_9g, at_384m, (402653184, 4096), (402653184, 2048), (536870912, 1024),
                                 (335544320, 512), (301989888, 256), (310378496, 160), (444596224, 160),
                                 (1074790400, 256), (2684354560, 256), (2147483648, 224), (1342177280, 160))),
        ("ring", "Simple", ((1073741824, 17), (past_9g[0], 17), past_9g, (9663676416, 192),
                            (8053063680, 160), (2684354560, 64), (1610612736, 32))),
    )


_P5_AR_8PPN = _p5_all_reduce_8ppn()


def is_p5(m: Machine) -> bool:
    """A P5/P5e node as collsim describes one: 8 Hopper GPUs on NVSwitch, EFA v2 (32 x 100 Gb/s, given as
    8 x 400), one process per GPU."""
    return m.arch == "hopper" and m.fabric == "efa2" and m.ppn == 8 and m.gpus_per_process == 1


def aws_ofi_pairs(collective: str, nbytes: int, m: Machine) -> list[tuple[str, str]]:
    """The pairs aws-ofi-nccl's region tuner would set to cost 0 here, in the plugin's order (it takes the first
    NCCL can run); [] where it leaves the choice to NCCL."""
    if collective != "all_reduce" or not is_p5(m) or m.nnodes <= 2 or m.nranks != 8 * m.nnodes:
        return []
    p = (float(nbytes), float(m.nranks))
    return [(a, proto) for a, proto, poly in _P5_AR_8PPN if region_holds(p, poly)]


def plugin_pairs(plugin: str, release_key: tuple, collective: str, nbytes: int, m: Machine) -> list[tuple[str, str]]:
    """The pairs the configured plugin would pick, first choice first ([]: NCCL chooses). Only aws-ofi-nccl's
    region tuner is modelled; NCCL before 2.19 loads no tuner plugin."""
    if plugin != AWS_OFI or tuple(release_key[:2]) < FIRST_RELEASE:
        return []
    return aws_ofi_pairs(collective, nbytes, m)


__all__ = ["AWS_OFI", "aws_ofi_pairs", "extend_region", "is_p5", "plugin_pairs", "region_holds", "region_position"]
