"""Protocols: how a transfer's bytes become time on the wire, and NCCL's protocol constants.

``ideal`` is the pure latency-bandwidth link model: a message of B bytes on a link of bandwidth W and
latency L takes L + B/W. NCCL's protocols change three things (numbers from NCCL's ``device.h``,
``comm.h`` and ``tuning.cc``; see ``docs/nccl-model.md``):

* payload: LL sends 16-byte lines, each two 4-byte data words with a 4-byte flag (1/2 of the wire is data), LL128 sends
  128-byte lines with 120 data bytes (15/16), Simple sends plain data (1) but fences every chunk;
* latency: NCCL's per-hop latency table (``HW_LATENCY_US``, by link class, algorithm and protocol) and
  a fixed base latency per algorithm and protocol (``BASE_LATENCY_US``: kernel launch and setup);
* chunking: each channel's data moves in chunks carved from a fixed buffer (``BUFFER_BYTES`` over
  ``NCCL_STEPS`` slots), so pipelined algorithms (trees, chains, NVLS) pipeline at that grain.

>>> IDEAL.wire_bytes(1000)
1000.0
>>> get_protocol("LL").payload_efficiency, get_protocol("LL128").wire_bytes(120)
(0.5, 128.0)
>>> BUFFER_BYTES["Simple"] // NCCL_STEPS, nccl_chunk_bytes("ring", "Simple")   # one step, a ring chunk
(524288, 2097152)
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CollsimError


@dataclass(frozen=True)
class Protocol:
    """How transfers behave on the wire.

    payload_efficiency: data bytes per wire byte (LL 0.5, LL128 120/128, Simple 1.0).
    hop_latency_us: extra latency per transfer, on top of the links' own (the engine adds it to every op).
    chunk_bytes: pipeline granularity: algorithms that pipeline cut each channel's data into pieces of
        about this many bytes (None: the algorithm's own default).
    launch_us: fixed cost per collective (kernel launch and base latency), added once.
    """

    name: str
    payload_efficiency: float = 1.0
    hop_latency_us: float = 0.0
    chunk_bytes: int | None = None
    launch_us: float = 0.0

    def wire_bytes(self, nbytes: float) -> float:
        """Bytes on the wire for ``nbytes`` of payload."""
        return nbytes / self.payload_efficiency


# ---- NCCL's wire formats (src/include/device.h) -------------------------------------------------------
NCCL_STEPS = 8                       # slots per connection buffer
LL_LINE_BYTES, LL_DATA_BYTES = 16, 8           # ncclLLFifoLine: data1 flag1 data2 flag2 (4 B each)
LL128_LINE_BYTES, LL128_DATA_BYTES = 128, 120  # 16 uint64 per line, 15 carry data, 1 the flag
# Default buffer per connection: LL 8 lines/thread x 512 threads x 8 steps x 16 B; LL128 120 elements x
# 640 threads x 8 steps x 8 B; Simple NCCL_BUFFSIZE = 4 MiB.
BUFFER_BYTES = {"LL": 8 * 512 * NCCL_STEPS * LL_LINE_BYTES, "LL128": 120 * 640 * NCCL_STEPS * 8, "Simple": 4 << 20}
CHUNK_STEPS = NCCL_STEPS // 2        # ring all_reduce/all_gather/reduce_scatter (Simple)
THREAD_THRESHOLD = {"LL": 8, "LL128": 8, "Simple": 64}      # bytes per thread before NCCL adds channels (comm.h)

IDEAL = Protocol("ideal")
# The NCCL protocols as seen by the engine when no hardware is known: payload efficiency from the wire
# format, NVLink ring per-hop latency from NCCL's table, a ring chunk. ``sim.nccl_run`` specialises them
# per algorithm and topology (latency by link class, NCCL's chunk rules).
LL = Protocol("LL", payload_efficiency=LL_DATA_BYTES / LL_LINE_BYTES, hop_latency_us=0.6,
              chunk_bytes=BUFFER_BYTES["LL"] // NCCL_STEPS // 2)
LL128 = Protocol("LL128", payload_efficiency=LL128_DATA_BYTES / LL128_LINE_BYTES, hop_latency_us=1.9,
                 chunk_bytes=BUFFER_BYTES["LL128"] // NCCL_STEPS * LL128_DATA_BYTES // LL128_LINE_BYTES)
SIMPLE = Protocol("Simple", payload_efficiency=1.0, hop_latency_us=3.4,
                  chunk_bytes=BUFFER_BYTES["Simple"] // NCCL_STEPS * CHUNK_STEPS)

PROTOCOLS = {p.name: p for p in (IDEAL, LL, LL128, SIMPLE)}
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")


def get_protocol(name: "str | Protocol") -> Protocol:
    """Look up ``ideal``, ``LL``, ``LL128`` or ``Simple`` (case-insensitive)."""
    if isinstance(name, Protocol):
        return name
    for key, proto in PROTOCOLS.items():
        if key.lower() == str(name).strip().lower():
            return proto
    raise CollsimError(f"unknown protocol {name!r}: choose one of {', '.join(PROTOCOLS)} (or auto)")


# ---- NCCL's latency tables (src/graph/tuning.cc, NCCL 2.27.7), microseconds ---------------------------
# Index order of NCCL's enums: algorithms Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree (PAT has
# no table in 2.27: its latency is a formula); protocols LL, LL128, Simple. ``p2p`` is not a collective
# algorithm in NCCL but how it runs all_to_all (grouped send/recv); its rows are the ring's (one hop per
# peer message), see sim/algorithms/alltoall.py.
NCCL_ALGORITHMS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat", "p2p")
BASE_LATENCY_US = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4),
    "collnet_direct": (0.0, 0.0, 0.0), "collnet_chain": (0.0, 0.0, 0.0),
    "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0), "pat": (8.0, 8.0, 8.0), "p2p": (6.6, 14.0, 8.4),
}
HW_LATENCY_US = {  # [link class][algorithm] -> (LL, LL128, Simple): latency of one hop
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4), "collnet_direct": (0.0, 0.0, 3.7),
               "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 25.0), "nvls_tree": (0.0, 0.0, 25.0),
               "pat": (0.0, 0.0, 4.0), "p2p": (0.6, 1.9, 3.4)},
    "pcie": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "collnet_direct": (0.0, 0.0, 3.7),
             "collnet_chain": (0.0, 0.0, 2.8), "nvls": (0.0, 0.0, 0.0), "nvls_tree": (0.0, 0.0, 0.0),
             "pat": (0.0, 0.0, 4.0), "p2p": (1.0, 2.5, 5.7)},
    "net": {"tree": (5.0, 8.5, 14.0), "ring": (2.7, 4.0, 14.0), "collnet_direct": (0.0, 0.0, 31.0),
            "collnet_chain": (0.0, 0.0, 30.0), "nvls": (0.0, 0.0, 18.0), "nvls_tree": (0.0, 0.0, 14.0),
            "pat": (0.0, 0.0, 14.0), "p2p": (2.7, 4.0, 14.0)},
}


def _pindex(proto: str) -> int:
    try:
        return NCCL_PROTOCOLS.index(get_protocol(proto).name)
    except ValueError:
        raise CollsimError(f"protocol {proto!r} is not one of NCCL's ({', '.join(NCCL_PROTOCOLS)})") from None


def base_latency_us(algorithm: str, proto: str) -> float:
    """NCCL's fixed latency of one collective (``baseLat``), in us.

    >>> base_latency_us("ring", "LL"), base_latency_us("tree", "Simple"), base_latency_us("nvls", "Simple")
    (6.6, 8.4, 0.0)
    """
    return BASE_LATENCY_US[algorithm][_pindex(proto)]


def hop_latency_us(link_class: str, algorithm: str, proto: str) -> float:
    """NCCL's latency of one hop (``hwLat``) over ``link_class`` nvlink|pcie|net, in us.

    >>> hop_latency_us("nvlink", "ring", "LL128"), hop_latency_us("net", "collnet_chain", "Simple")
    (1.9, 30.0)
    """
    return HW_LATENCY_US[link_class][algorithm][_pindex(proto)]


def nccl_chunk_bytes(algorithm: str, proto: str, nbytes_per_channel: float | None = None, depth: int = 1) -> int:
    """Bytes one pipeline chunk of ``algorithm`` carries per channel with ``proto`` (NCCL's enqueue.cc).

    Ring Simple moves ``CHUNK_STEPS`` buffer steps per chunk (2 MiB); other algorithms one step
    (Simple 512 KiB); LL carries half its 64 KiB step as data, LL128 15/16 of its step; CollNet chains
    use at most 256 KiB and NVLS 128 KiB. For small messages NCCL halves the chunk until the pipeline
    holds enough chunks: here while fewer than ``8 * depth`` chunks per channel, down to 32 KiB.

    >>> nccl_chunk_bytes("tree", "Simple"), nccl_chunk_bytes("nvls", "Simple"), nccl_chunk_bytes("ring", "LL")
    (524288, 131072, 32768)
    >>> nccl_chunk_bytes("collnet_chain", "Simple", nbytes_per_channel=4 << 20, depth=16)
    32768
    """
    p = get_protocol(proto).name
    step = BUFFER_BYTES[p] // NCCL_STEPS
    chunk = step * (CHUNK_STEPS if (p == "Simple" and algorithm == "ring") else 1)
    if p == "LL":
        chunk //= 2
    elif p == "LL128":
        chunk = chunk * LL128_DATA_BYTES // LL128_LINE_BYTES
    if algorithm == "collnet_chain":
        chunk = min(chunk, 256 << 10)
    elif algorithm in ("nvls", "nvls_tree"):
        chunk = min(chunk, 128 << 10)
    if nbytes_per_channel is not None and algorithm != "ring":
        while nbytes_per_channel / chunk < 8 * depth and chunk > 32 << 10:
            chunk //= 2
    return chunk
