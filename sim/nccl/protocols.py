"""Protocols: how a transfer's bytes become time on the wire (NCCL's constants: :mod:`sim.nccl.constants`).

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

from ..engine.transfer import IDEAL, Protocol
from ..errors import CollsimError
from . import config as _config
from .constants import (
    BASE_LATENCY_US,
    BUFFER_BYTES,
    CHUNK_STEPS,
    COLLNET_CHAIN_MAX_CHUNK_BYTES,
    HW_LATENCY_US,
    LL128_DATA_BYTES,
    LL128_LINE_BYTES,
    LL_DATA_BYTES,
    LL_LINE_BYTES,
    MIN_CHUNK_BYTES,
    MIN_CHUNKS_PER_CHANNEL,
    NCCL_PROTOCOLS,
    NCCL_STEPS,
    NVLS_CHUNK_BYTES,
)


def _chunk(algorithm: str, p: str) -> int:
    """NCCL's chunk per channel for ``algorithm`` with protocol name ``p`` before the small-size rule:
    the one home of the chunk size (:func:`nccl_chunk_bytes` and the protocols' defaults read it)."""
    # the run's buffer (NCCL_BUFFSIZE and its LL siblings) sets the step, except where NCCL cuts the chunk
    # from its own parameter: NVLS (NCCL_NVLS_CHUNKSIZE) and point-to-point sends (NCCL_P2P_*_CHUNKSIZE)
    own = algorithm in ("nvls", "nvls_tree", "p2p")
    step = (BUFFER_BYTES[p] if own else _config.current().buffer_bytes(p)) // NCCL_STEPS
    chunk = step * (CHUNK_STEPS if (p == "Simple" and algorithm == "ring") else 1)
    if p == "LL":
        chunk //= 2
    elif p == "LL128":
        chunk = chunk * LL128_DATA_BYTES // LL128_LINE_BYTES
    if algorithm == "collnet_chain":
        chunk = min(chunk, COLLNET_CHAIN_MAX_CHUNK_BYTES)
    elif algorithm in ("nvls", "nvls_tree"):
        chunk = min(chunk, NVLS_CHUNK_BYTES)
    return chunk


def _nvlink_ring_hop_us(p: str) -> float:
    return HW_LATENCY_US["nvlink"]["ring"][NCCL_PROTOCOLS.index(p)]


# The NCCL protocols as seen by the engine when no hardware is known: payload efficiency from the wire
# format, NVLink ring per-hop latency from NCCL's table, a ring chunk. ``sim.nccl.execution`` specialises them
# per algorithm and topology (latency by link class, NCCL's chunk rules).
LL = Protocol("LL", payload_efficiency=LL_DATA_BYTES / LL_LINE_BYTES, hop_latency_us=_nvlink_ring_hop_us("LL"),
              chunk_bytes=_chunk("ring", "LL"))
LL128 = Protocol("LL128", payload_efficiency=LL128_DATA_BYTES / LL128_LINE_BYTES, hop_latency_us=_nvlink_ring_hop_us("LL128"),
                 chunk_bytes=_chunk("ring", "LL128"))
SIMPLE = Protocol("Simple", payload_efficiency=1.0, hop_latency_us=_nvlink_ring_hop_us("Simple"),
                  chunk_bytes=_chunk("ring", "Simple"))

PROTOCOLS = {p.name: p for p in (IDEAL, LL, LL128, SIMPLE)}


def get_protocol(name: "str | Protocol") -> Protocol:
    """Look up ``ideal``, ``LL``, ``LL128`` or ``Simple`` (case-insensitive)."""
    if isinstance(name, Protocol):
        return name
    proto = PROTOCOLS.get(name) if isinstance(name, str) else None   # the exact name: every hot-path call
    if proto is not None:
        return proto
    for key, proto in PROTOCOLS.items():
        if key.lower() == str(name).strip().lower():
            return proto
    raise CollsimError(f"unknown protocol {name!r}: choose one of {', '.join(PROTOCOLS)} (or auto)")


def _pindex(proto: str) -> int:
    try:
        return NCCL_PROTOCOLS.index(get_protocol(proto).name)
    except ValueError:
        raise CollsimError(f"protocol {proto!r} is not one of NCCL's ({', '.join(NCCL_PROTOCOLS)})") from None


def base_latency_us(algorithm: str, proto: str) -> float:
    """NCCL's fixed latency of one collective (``baseLat``), in us, of the release in force
    (:func:`sim.nccl.config.current`; 2.27's table unless the release changed a row).

    >>> base_latency_us("ring", "LL"), base_latency_us("tree", "Simple"), base_latency_us("nvls", "Simple")
    (6.6, 8.4, 0.0)
    """
    row = _config.current().release.base_latency.get(algorithm) or BASE_LATENCY_US[algorithm]
    return row[_pindex(proto)]


def hop_latency_us(link_class: str, algorithm: str, proto: str) -> float:
    """NCCL's latency of one hop (``hwLat``) over ``link_class`` nvlink|pcie|net, in us, of the release
    in force.

    >>> hop_latency_us("nvlink", "ring", "LL128"), hop_latency_us("net", "collnet_chain", "Simple")
    (1.9, 30.0)
    """
    row = _config.current().release.hw_latency.get((link_class, algorithm)) or HW_LATENCY_US[link_class][algorithm]
    return row[_pindex(proto)]


def nccl_chunk_bytes(algorithm: str, proto: str, nbytes_per_channel: float | None = None, depth: int = 1) -> int:
    """Bytes one pipeline chunk of ``algorithm`` carries per channel with ``proto`` (NCCL's enqueue.cc).

    Ring Simple moves ``CHUNK_STEPS`` buffer steps per chunk (2 MiB); other algorithms one step
    (Simple 512 KiB); LL carries half its 64 KiB step as data, LL128 15/16 of its step; CollNet chains
    use at most 256 KiB and NVLS 128 KiB. For small messages the model halves the chunk while a channel
    holds fewer than ``8 * depth`` chunks (the engine program's depth), down to 32 KiB. That is the
    model's rule, not NCCL's: NCCL 2.18-2.19 halve a tree/Simple chunk against their own tree depth and
    2.20+ never, LL128 trees, CollNet and NVLS have rules of their own (``enqueue.cc``); the engine's
    pipeline and the fitted tree lag (:func:`sim.nccl.execution.tree_lag_units`) are built on this one,
    and moving them to NCCL's was measured and not adopted (docs/accuracy-at-scale.md, thirtieth pass).

    >>> nccl_chunk_bytes("tree", "Simple"), nccl_chunk_bytes("nvls", "Simple"), nccl_chunk_bytes("ring", "LL")
    (524288, 131072, 32768)
    >>> nccl_chunk_bytes("collnet_chain", "Simple", nbytes_per_channel=4 << 20, depth=16)
    32768
    """
    chunk = _chunk(algorithm, get_protocol(proto).name)
    if nbytes_per_channel is not None and algorithm != "ring":
        while nbytes_per_channel / chunk < MIN_CHUNKS_PER_CHANNEL * depth and chunk > MIN_CHUNK_BYTES:
            chunk //= 2
    return chunk
