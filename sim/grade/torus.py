"""A 2D torus of GPUs, for assignment a2 (and anyone who wants one).

GPU ``(i, j)`` of a ``rows x cols`` torus is rank ``i * cols + j``; it has a link each way to its four
neighbours ``(i, j±1)`` and ``(i±1, j)``, with wrap-around (a dimension of size 2 has one neighbour,
so one link pair, not two). Every link direction has ``bandwidth_GBps`` (decimal GB/s) and
``latency_us``.

>>> t = torus2d(4, 4)
>>> t.nranks, len(t.links)          # 16 GPUs x 4 neighbours, one link each way
(16, 64)
>>> sorted(torus_neighbours(4, 4, 5))
[1, 4, 6, 9]
"""
from __future__ import annotations

from ..errors import CollsimError
from ..topology import Link, Node, Topology


def torus_neighbours(rows: int, cols: int, rank: int) -> set[int]:
    """Ranks one link away from ``rank`` on a ``rows x cols`` torus."""
    i, j = divmod(rank, cols)
    out = {((i + di) % rows) * cols + (j + dj) % cols for di, dj in ((0, 1), (0, -1), (1, 0), (-1, 0))}
    out.discard(rank)
    return out


def torus2d(rows: int = 4, cols: int = 4, bandwidth_GBps: float = 100.0, latency_us: float = 1.0) -> Topology:
    """Build the torus; see the module docstring."""
    if not (isinstance(rows, int) and isinstance(cols, int)) or rows < 1 or cols < 1 or rows * cols < 2:
        raise CollsimError(f"torus2d({rows!r}, {cols!r}): rows and cols must be whole numbers with rows*cols >= 2")
    if not bandwidth_GBps > 0 or not latency_us >= 0:
        raise CollsimError("torus2d: bandwidth_GBps must be positive and latency_us zero or more")
    n = rows * cols
    nodes = [Node(f"gpu{r}", "gpu", label=f"({r // cols},{r % cols})") for r in range(n)]
    links = [Link(f"gpu{r}", f"gpu{q}", bandwidth_GBps, latency_us, "nvlink")
             for r in range(n) for q in sorted(torus_neighbours(rows, cols, r))]
    return Topology.build(f"torus{rows}x{cols}", nodes, links,
                          {"bandwidth_GBps": bandwidth_GBps, "latency_us": latency_us, "rows": rows, "cols": cols})


__all__ = ["torus2d", "torus_neighbours"]
