"""Rotation symmetry shared by the engine, the flow model and traces.

A program (``Program.rotation``) and a topology (``meta['symmetry'] == 'rotation'``) that are both
invariant under "every rank moves to rank+1" let the engine simulate one op per orbit, each link
standing for its whole orbit (:func:`link_orbits`); :class:`Quotient` maps any op to its orbit's
representative, which is how a symmetric run's times are expanded back to every op.

>>> from sim.presets import load_topology
>>> orbits = link_orbits(load_topology("ring:n=4"))
>>> len(set(orbits.tolist()))   # the 8 directed links of a 4-ring form 2 orbits (clockwise, counter-clockwise)
2
"""
from __future__ import annotations

import numpy as np

from .errors import CollsimError
from .program import Program
from .topology import Topology


def cycles(perm: np.ndarray):
    """Cycle decomposition: (cycle id, position in cycle, cycle offsets, cycle members, cycle lengths)."""
    n = len(perm)
    cid = np.full(n, -1, np.int64)
    pos = np.zeros(n, np.int64)
    members, offsets, lengths = [], [], []
    for start in range(n):
        if cid[start] >= 0:
            continue
        offsets.append(len(members))
        c, k = start, 0
        while cid[c] < 0:
            cid[c], pos[c] = len(lengths), k
            members.append(c)
            c, k = perm[c], k + 1
        lengths.append(k)
    return cid, pos, np.asarray(offsets), np.asarray(members), np.asarray(lengths)


def link_orbits(topo: Topology) -> np.ndarray | None:
    """Orbit id of every link under "GPU i -> GPU i+1", or None if the topology is not symmetric."""
    n = topo.nranks
    node_map = np.arange(len(topo.nodes))
    for r, g in enumerate(topo.gpus):
        node_map[g] = topo.gpus[(r + 1) % n]
    by_ends = {(topo.node_index[l.src], topo.node_index[l.dst]): i for i, l in enumerate(topo.links)}
    perm = np.empty(len(topo.links), np.int64)
    for i, l in enumerate(topo.links):
        img = by_ends.get((node_map[topo.node_index[l.src]], node_map[topo.node_index[l.dst]]))
        if img is None:
            return None
        a, b = topo.links[i], topo.links[img]
        if (a.bandwidth_GBps, a.latency_us) != (b.bandwidth_GBps, b.latency_us):
            return None
        perm[i] = img
    cid, _, _, _, lengths = cycles(perm)
    if (lengths != n).any():
        return None  # a link fixed by the rotation (switch-to-switch) would stand for several images
    return cid


class Quotient:
    """Maps any op to the representative of its orbit (the image whose shift is undone)."""

    def __init__(self, p: Program):
        self.p = p
        self.cid, self.pos, self.off, self.mem, self.len = cycles(p.rotation)
        n = p.nranks
        self.shift = np.where(p.src < n, p.src, np.where(p.dst < n, p.dst, -1)).astype(np.int64)
        self.reps = np.flatnonzero(self.shift == 0)
        self.index = {self._key(p.src[i], p.dst[i], p.chunk[i], i): j for j, i in enumerate(self.reps)}

    def _key(self, s, d, c, i):
        p = self.p
        return (int(s), int(d), int(c), int(p.step[i]), int(p.channel[i]), bool(p.reduce[i]))

    def rep_of(self, ops: np.ndarray) -> np.ndarray:
        p, n = self.p, self.p.nranks
        k = self.shift[ops]
        unrot = lambda a: np.where(a < n, (a - k) % n, a)
        cid = self.cid[p.chunk[ops]]
        chunk = self.mem[self.off[cid] + (self.pos[p.chunk[ops]] - k) % self.len[cid]]
        src, dst = unrot(p.src[ops]), unrot(p.dst[ops])
        out = np.empty(len(ops), np.int64)
        for j, (s, d, c, i) in enumerate(zip(src, dst, chunk, ops)):
            rep = self.index.get(self._key(s, d, c, i))
            if rep is None:
                raise CollsimError(f"program {p.algorithm!r} declares rotation symmetry but op {i} has no image with src 0")
            out[j] = rep
        return out
