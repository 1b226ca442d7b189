"""``p2p``: all_to_all the way NCCL runs it, as grouped point-to-point sends (``ncclSend``/``ncclRecv``
to every peer inside one ``ncclGroupStart/End``), not as a collective algorithm.

* Inside a node every rank sends its block for each local peer straight over NVLink/NVSwitch (or PCIe),
  all peers at once over all channels (NCCL's p2p transport; ``NCCL_P2P_NVL_CHUNKSIZE``).
* Across nodes NCCL uses PXN (PCI x NVLink, ``NCCL_PXN_DISABLE=0``, default since 2.12): a block for
  GPU j of another node first moves over NVLink to the local GPU with j's local index, the one on j's
  rail, and leaves through that GPU's NIC, so the message crosses only j's rail leaf (no spine hop, and
  the NIC next to the proxy GPU is used). A block whose sender is already on j's rail goes out of its own
  NIC. Hosts must have the same GPU count (else every block is sent directly).

The program has two steps (step 0: local sends and hops to the rail proxy; step 1: proxy -> remote GPU);
``pipeline`` pieces let the proxy forward one piece while the next arrives, as NCCL's chunked p2p does.

>>> from sim.algorithms import build_program
>>> from sim.presets import load_topology
>>> p = build_program("p2p", "all_to_all", 16, topology=load_topology("dgx-h100:nodes=2"))
>>> p.steps, p.nops   # 16 x 15 blocks; 8 x 7 per node cross it via a proxy (two ops each)
(2, 352)
"""
from __future__ import annotations

import numpy as np

from ..chunk_program import ChunkProgram
from . import algorithm
from .tree import host_groups


def _hosts(topology, n: int) -> list[list[int]]:
    groups = host_groups(topology, n)
    return groups if len({len(g) for g in groups}) == 1 else [[r] for r in range(n)]


@algorithm("p2p", ("all_to_all",), "NCCL's all_to_all: grouped point-to-point sends, over NVLink in a node and "
           "through the rail-aligned NIC (PXN) across nodes", pipelined=("all_to_all",), nccl=("all_to_all",))
def build_p2p(coll, n: int, *, topology=None, nchannels: int = 1, pipeline: int = 1, root: int = 0):
    groups = _hosts(topology, n)
    host_of, local_of = np.empty(n, np.int64), np.empty(n, np.int64)
    for h, g in enumerate(groups):
        host_of[g], local_of[g] = h, np.arange(len(g))
    p = ChunkProgram(coll, n, n * n)
    a, b = p.grid(n, n)
    a, b = a[a != b], b[a != b]
    relay = (host_of[a] != host_of[b]) & (local_of[a] != local_of[b])
    proxy = np.array([groups[host_of[s]][local_of[d]] for s, d in zip(a[relay], b[relay])], np.int64)
    p.send(a[~relay], b[~relay], chunk=a[~relay] * n + b[~relay], step=0)        # block (a -> b) is chunk a*n + b
    if relay.any():
        p.send(a[relay], proxy, chunk=a[relay] * n + b[relay], step=0)           # over NVLink to b's rail
        p.send(proxy, b[relay], chunk=a[relay] * n + b[relay], step=1)           # out of the proxy's NIC
    return p.program("p2p", steps=2 if relay.any() else 1, nchannels=nchannels, pipeline=pipeline, pxn=bool(relay.any()))
