"""How a transfer's bytes become time on the wire, as the engines see it: a :class:`Protocol` record.

The engines take a ``Protocol`` object and read four numbers from it; they do not know NCCL. The NCCL
protocols (LL, LL128, Simple: :mod:`sim.nccl.protocols`) are instances built in the NCCL layer from
NCCL's constants, so the engine layer sits below the NCCL layer (imports point down).

>>> IDEAL.wire_bytes(1000)
1000.0
"""
from __future__ import annotations

from dataclasses import dataclass


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


IDEAL = Protocol("ideal")
