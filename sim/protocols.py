"""Protocols: how a transfer's bytes become time on the wire.

``ideal`` is the pure latency-bandwidth link model: a message of B bytes on a link of bandwidth W and
latency L takes L + B/W. NCCL's protocols (LL, LL128, Simple) change the payload efficiency (LL sends
4 data bytes per 8, LL128 120 per 128), add per-hop latency, and cut data into chunks that pipeline;
their numbers come from NCCL's source (see ``docs/nccl-model.md``).

>>> IDEAL.wire_bytes(1000)
1000.0
>>> get_protocol("LL").payload_efficiency
0.5
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import CollsimError


@dataclass(frozen=True)
class Protocol:
    """How transfers behave on the wire.

    payload_efficiency: data bytes per wire byte (LL 0.5, LL128 120/128, Simple 1.0).
    hop_latency_us: extra latency per transfer, on top of the links' own (NCCL's per-hop hw latency).
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
        return nbytes / self.payload_efficiency


IDEAL = Protocol("ideal")

# The NCCL protocols. Efficiencies and line sizes from NCCL's device.h (LL: 8-byte data+flag pairs,
# LL128: 120 data bytes per 128-byte line, Simple: plain copies with a fence per chunk); the latency
# and chunk sizes here are the defaults the engine uses when no hardware tuning is applied.
LL = Protocol("LL", payload_efficiency=0.5, hop_latency_us=0.6, chunk_bytes=64 << 10)
LL128 = Protocol("LL128", payload_efficiency=120 / 128, hop_latency_us=1.9, chunk_bytes=512 << 10)
SIMPLE = Protocol("Simple", payload_efficiency=1.0, hop_latency_us=3.4, chunk_bytes=2 << 20)

PROTOCOLS = {p.name: p for p in (IDEAL, LL, LL128, SIMPLE)}


def get_protocol(name: "str | Protocol") -> Protocol:
    """Look up ``ideal``, ``LL``, ``LL128`` or ``Simple`` (case-insensitive)."""
    if isinstance(name, Protocol):
        return name
    for key, proto in PROTOCOLS.items():
        if key.lower() == str(name).strip().lower():
            return proto
    raise CollsimError(f"unknown protocol {name!r}: choose one of {', '.join(PROTOCOLS)} (or auto)")
