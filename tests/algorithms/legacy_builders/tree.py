"""NCCL's double binary tree: two complementary trees, each carrying half the data, pipelined.

Across hosts the ranks form binary trees in *in-order* labelling: host position x with lowest set bit
L sits at level log2(L); its parent is whichever of x-L, x+L has bit 2L set (x-L if x+L is past the
end), and position 0 is the root above the top node. Tree 0 uses positions = host indices; tree 1 is
tree 0 mirrored (host h at position m-1-h) when the host count m is even, shifted by one (host h at
position h-1) when it is odd, so that (m even) every host that is a leaf in one tree is interior in
the other and the two trees' sends fall on different links. Inside a host the GPUs form a chain; the
chain's *head* joins the inter-host tree (tree 0's head is the host's first GPU, tree 1's its last, so
the two trees leave through different NICs on a rail-optimised cluster), as NCCL's TREE pattern does.
Any world size works, not only powers of two.

all_reduce: each tree reduces its half up to its root and broadcasts it back down (NCCL's
``reduce up, broadcast down``); a rank sends up once its children have, so with ``D`` the height of
the tree over ranks a piece takes ``2D`` steps: ``D = (ppn - 1) + ceil(log2 m)`` for m hosts of ppn GPUs
(ppn = 1: ``D = ceil(log2 n)``). broadcast/reduce use one tree (tree 0, relabelled so the root is
position 0 and its host's head): ``D`` steps. Pieces (channels x pipeline) follow each other one step
apart, which is what makes the tree reach full bandwidth.

>>> from sim.algorithms import build_program
>>> build_program("tree", "all_reduce", 8).steps, build_program("tree", "all_reduce", 64).steps
(6, 12)
"""
from __future__ import annotations

import numpy as np

from sim.program import Program

from .registry import algorithm

# Pieces in flight per (src, dst) connection: NCCL's NCCL_STEPS buffer slots. The engine honours
# ``params["window"]`` so a pipelined multi-phase program shares links between its phases.
WINDOW = 8


# ---- helpers shared with the other hierarchical algorithms --------------------------------------------
def host_groups(topology, n: int) -> list[list[int]]:
    """Ranks 0..n-1 grouped by host (server); without a topology every rank is its own host."""
    if topology is None:
        return [[r] for r in range(n)]
    groups = [[r for r in h if r < n] for h in topology.hosts]
    return [g for g in groups if g]


def uniform_hosts(topology, n: int) -> str | None:
    """None if every host has the same number of ranks, else the reason (for ``requirement``)."""
    sizes = {len(g) for g in host_groups(topology, n)}
    if len(sizes) > 1:
        return f"hosts have different GPU counts ({', '.join(map(str, sorted(sizes)))}): it needs the same number on every host"
    return None


def bit_tree(m: int) -> np.ndarray:
    """Parent of every position 0..m-1 of the in-order binary tree rooted at 0 (root's parent is -1).

    >>> bit_tree(8).tolist()   # 0 -> 4 -> {2, 6} -> {1, 3, 5, 7}
    [-1, 2, 4, 2, 0, 6, 4, 6]
    """
    parent = np.full(m, -1, np.int64)
    for x in range(1, m):
        low = x & -x
        up = x - low if x & (low << 1) else x + low
        parent[x] = up if up < m else x - low
    return parent


def double_tree(m: int) -> tuple[np.ndarray, np.ndarray]:
    """Parents of hosts 0..m-1 in NCCL's two trees (tree 1 mirrored for even m, shifted for odd m)."""
    t0 = bit_tree(m)
    pos = (m - 1 - np.arange(m)) if m % 2 == 0 else (np.arange(m) - 1) % m   # host -> position in tree 1
    host_at = np.empty(m, np.int64)
    host_at[pos] = np.arange(m)
    p = t0[pos]
    t1 = np.where(p < 0, -1, host_at[np.maximum(p, 0)])
    return t0, t1


def rank_tree(groups: list[list[int]], host_parent: np.ndarray, head_last: bool, n: int) -> np.ndarray:
    """Parent of every rank: a chain inside each host ending at its head, heads joined as ``host_parent``."""
    parent = np.full(n, -1, np.int64)
    heads = [g[-1] if head_last else g[0] for g in groups]
    for h, g in enumerate(groups):
        chain = g[::-1] if head_last else g           # chain[0] is the head
        for a, b in zip(chain[1:], chain[:-1]):
            parent[a] = b
        if host_parent[h] >= 0:
            parent[heads[h]] = heads[host_parent[h]]
    return parent


def heights(parent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(height, depth) of every node of a tree given by parents: leaves have height 0, the root depth 0."""
    n = len(parent)
    depth = np.full(n, -1, np.int64)
    for r in range(n):                      # walk up to a node of known depth, then fill the path
        path, x = [], r
        while x >= 0 and depth[x] < 0:
            path.append(x)
            x = parent[x]
        d = depth[x] if x >= 0 else -1
        for y in reversed(path):
            d += 1
            depth[y] = d
    height = np.zeros(n, np.int64)
    for r in np.argsort(-depth, kind="stable"):   # deepest first: children before parents
        if parent[r] >= 0:
            height[parent[r]] = max(height[parent[r]], height[r] + 1)
    return height, depth


def tree_ops(parent: np.ndarray, up: bool, down: bool, chunk: int, step0: int = 0):
    """Ops of one piece over one tree: reduce to the root (``up``) then broadcast from it (``down``).

    Returns (src, dst, chunk, step, reduce) arrays and the number of steps used.
    """
    height, depth = heights(parent)
    kids = np.flatnonzero(parent >= 0)
    D = int(height.max())
    cols = [[], [], [], [], []]
    if up:
        cols = [kids, parent[kids], np.full(len(kids), chunk), step0 + height[kids], np.ones(len(kids), bool)]
    if down:
        base = step0 + (D if up else 0)
        down_cols = [parent[kids], kids, np.full(len(kids), chunk), base + depth[parent[kids]], np.zeros(len(kids), bool)]
        cols = [np.concatenate([a, b]) for a, b in zip(cols, down_cols)] if up else down_cols
    return [np.asarray(c) for c in cols], D * (int(up) + int(down))


def tile(cols, nbase: int, nchannels: int, pipeline: int):
    """Repeat one piece's schedule for every (channel, piece): base chunk c becomes ``c * slots + slot``
    (shard-major, like the ring), piece ``p`` runs ``p`` steps later. Returns the op columns and channel."""
    src, dst, chunk, step, red = (np.asarray(c) for c in cols)
    slots = nchannels * pipeline
    k = len(src)
    slot = np.repeat(np.arange(slots), k)
    rep = lambda a: np.tile(a, slots)
    return (rep(src), rep(dst), rep(chunk) * slots + slot, rep(step) + slot % pipeline, rep(red)), slot // pipeline, nbase * slots


def concat(*parts):
    """Concatenate (src, dst, chunk, step, reduce) column tuples."""
    return [np.concatenate([np.asarray(p[i]) for p in parts]) for i in range(5)]


# ---- the algorithm -------------------------------------------------------------------------------------
@algorithm("tree", ("all_reduce", "broadcast", "reduce"),
           "NCCL double binary tree (chain inside hosts); log-depth latency, ~S/B bandwidth for all_reduce",
           pipelined=("all_reduce", "broadcast", "reduce"))
def build_tree(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0) -> Program:
    groups = host_groups(topology, n)
    params = {"nchannels": nchannels, "pipeline": pipeline, "hosts": len(groups), "window": WINDOW}
    if coll.name == "all_reduce":
        t0, t1 = double_tree(len(groups))
        parts, steps = [], 0
        for t, (hp, last) in enumerate(((t0, False), (t1, True))):
            cols, s = tree_ops(rank_tree(groups, hp, last, n), True, True, chunk=t)
            parts.append(cols)
            steps = max(steps, s)
        (src, dst, chunk, step, red), channel, nchunks = tile(concat(*parts), 2, nchannels, pipeline)
        return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm="tree",
                                steps=steps, params=params)
    # broadcast / reduce: one tree whose root is `root` (its host first, `root` heading that host)
    h_root = next(i for i, g in enumerate(groups) if root in g)
    order = groups[h_root:] + groups[:h_root]
    g0 = order[0]
    order[0] = g0[g0.index(root):] + g0[:g0.index(root)]
    parent = rank_tree(order, bit_tree(len(order)), False, n)
    cols, steps = tree_ops(parent, coll.name == "reduce", coll.name == "broadcast", chunk=0)
    (src, dst, chunk, step, red), channel, nchunks = tile(cols, 1, nchannels, pipeline)
    return Program.from_ops(coll, n, nchunks, src, dst, chunk, step, red, channel=channel, algorithm="tree",
                            steps=steps, root=root, params=params)
