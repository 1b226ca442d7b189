"""Rotation symmetry shared by the engine, the flow model and traces.

A program (``Program.rotation``) and a topology (``hardware.symmetry == 'rotation'``) that are both
invariant under "every rank moves to rank+1" let the engine simulate one op per orbit, each link
standing for its whole orbit (:func:`link_orbits`); :class:`Quotient` maps any op to its orbit's
representative, which is how a symmetric run's times are expanded back to every op.

>>> from sim.presets import load_topology
>>> orbits = link_orbits(load_topology("ring:n=4"))
>>> len(set(orbits.tolist()))   # the 8 directed links of a 4-ring form 2 orbits (clockwise, counter-clockwise)
2
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..errors import CollsimError
from ..program import Program
from ..topology import Topology


def cycles(perm: np.ndarray):
    """Cycle decomposition: (cycle id, position in cycle, cycle offsets, cycle members, cycle lengths)."""
    n = len(perm)
    cid = np.full(n, -1, np.int64)
    pos = np.zeros(n, np.int64)
    members: list[int] = []
    offsets: list[int] = []
    lengths: list[int] = []
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


@lru_cache(maxsize=16)
def host_shift(topo: Topology) -> tuple[int, np.ndarray, np.ndarray] | None:
    """Node-level rotation: "every host moves to the next one" (rank r -> r + g for g GPUs per host).

    Returns ``(g, orbit id of every link, orbit length of every link)``, or None when the hosts are not
    identical images of each other (same nodes in the same order, consecutive ranks, equal links). Host
    nodes map to the next host's node at the same position; nodes outside hosts (the fabric's
    switches) stay, so a fabric link is either fixed (orbit length 1) or moves with the hosts. A fixed
    link would stand for every image's traffic, so the engine uses the shift only when no route it
    simulates crosses one (a single leaf per rail: inter-host routes turn at the leaf).
    """
    hosts = topo.hosts
    m = len(hosts)
    if m < 2:
        return None
    g = len(hosts[0])
    if any(h != tuple(range(i * g, i * g + g)) for i, h in enumerate(hosts)):
        return None
    members: dict[int, list[int]] = {}
    for i, node in enumerate(topo.nodes):
        if node.host is not None:
            members.setdefault(node.host, []).append(i)
    lists = list(members.values())
    if len(lists) != m or len({len(x) for x in lists}) != 1:
        return None
    node_map = np.arange(len(topo.nodes))
    kinds = [[topo.nodes[i].kind for i in x] for x in lists]
    if any(k != kinds[0] for k in kinds):
        return None
    for h, here in enumerate(lists):
        node_map[here] = lists[(h + 1) % m]
    perm = _link_images(topo, node_map)
    if perm is None:
        return None
    cid, _, _, _, lengths = cycles(perm)
    orbit_len = lengths[cid]
    if not np.isin(orbit_len, (1, m)).all():
        return None
    return g, cid, orbit_len


def _link_images(topo: Topology, node_map: np.ndarray) -> np.ndarray | None:
    """Image of every link under ``node_map`` (None if one has no image or a different speed)."""
    index = topo.node_index
    by_ends = {(index[l.src], index[l.dst]): i for i, l in enumerate(topo.links)}
    perm = np.empty(len(topo.links), np.int64)
    for i, l in enumerate(topo.links):
        img = by_ends.get((int(node_map[index[l.src]]), int(node_map[index[l.dst]])))
        if img is None:
            return None
        b = topo.links[img]
        if (l.bandwidth_GBps, l.latency_us) != (b.bandwidth_GBps, b.latency_us):
            return None
        perm[i] = img
    return perm


def find_shift(p: Program, shift: int) -> np.ndarray | None:
    """The chunk permutation under which ``p`` is invariant when every rank r moves to r + ``shift``
    (mod nranks), or None. Found by matching every op with its image and then proved: the image of the
    whole op set, sorted, must equal the op set (programs reducing in switches are not shifted)."""
    n = p.nranks
    if p.switches or n % shift or p.nops == 0:
        return None
    src, dst = p.src.astype(np.int64), p.dst.astype(np.int64)
    step, chan, red = p.step.astype(np.int64), p.channel.astype(np.int64), p.reduce.astype(np.int64)
    nsteps, nch = int(step.max()) + 1, int(chan.max()) + 1

    def key(s, d):
        return (((s * n + d) * nsteps + step) * nch + chan) * 2 + red

    k_orig, k_img = key(src, dst), key((src + shift) % n, (dst + shift) % n)
    # a chunk's image is the chunk whose trajectory (the keys of its ops) is its own, shifted: match the
    # trajectories by a hash summed over each chunk's ops (the proof below makes a collision harmless)
    h_orig, h_img = _trajectory_hash(k_orig, p.chunk, p.nchunks), _trajectory_hash(k_img, p.chunk, p.nchunks)
    order = np.argsort(h_orig, kind="stable")
    at = np.searchsorted(h_orig[order], h_img)
    if (at >= p.nchunks).any() or len(np.unique(h_orig)) != p.nchunks:
        return None
    sigma = order[at]
    if not np.array_equal(h_orig[sigma], h_img) or len(np.unique(sigma)) != p.nchunks:
        return None
    full = np.lexsort((p.chunk, k_orig))
    image = np.lexsort((sigma[p.chunk], k_img))
    if not (np.array_equal(k_orig[full], k_img[image]) and np.array_equal(p.chunk[full], sigma[p.chunk][image])):
        return None
    return sigma


def _trajectory_hash(keys: np.ndarray, chunk: np.ndarray, nchunks: int) -> np.ndarray:
    """Per chunk, a 64-bit hash of the multiset of its ops' keys (a sum of mixed keys, wrapping)."""
    k = keys.astype(np.uint64)
    with np.errstate(over="ignore"):
        mixed = (k * np.uint64(0x9E3779B97F4A7C15)) ^ (k >> np.uint64(29))
        mixed = mixed * np.uint64(0xBF58476D1CE4E5B9)
        mixed ^= mixed >> np.uint64(31)
    out = np.zeros(nchunks, np.uint64)
    np.add.at(out, chunk, mixed)
    return out


class Quotient:
    """Maps any op to the representative of its orbit (the image whose shift is undone).

    ``rotation``: the chunk map of one shift (default ``p.rotation``, for rank r -> r + 1); ``shift``:
    ranks per shift (1, or GPUs per host for the node-level rotation of :func:`host_shift`). The
    representative of an op is its image with the source in the first ``shift`` ranks."""

    def __init__(self, p: Program, rotation: np.ndarray | None = None, shift: int = 1):
        self.p = p
        self.step_ranks = shift
        rot = p.rotation if rotation is None else rotation
        if rot is None:
            raise CollsimError(f"program {p.algorithm!r} has no rotation map: symmetry needs one")
        self.cid, self.pos, self.off, self.mem, self.len = cycles(rot)
        n = p.nranks
        anchor = np.where(p.src < n, p.src, np.where(p.dst < n, p.dst, -1)).astype(np.int64)
        self.shift = np.where(anchor >= 0, anchor // shift, -1)   # shifts that undo to a representative
        self.reps = np.flatnonzero(self.shift == 0)
        self.index = {self._key(p.src[i], p.dst[i], p.chunk[i], i): j for j, i in enumerate(self.reps)}

    def _key(self, s, d, c, i):
        p = self.p
        return (int(s), int(d), int(c), int(p.step[i]), int(p.channel[i]), bool(p.reduce[i]))

    def rep_of(self, ops: np.ndarray) -> np.ndarray:
        p, n = self.p, self.p.nranks
        k = self.shift[ops]
        unrot = lambda a: np.where(a < n, (a - k * self.step_ranks) % n, a)
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
