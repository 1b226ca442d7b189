"""Textbook topologies: ``ring``, ``fully-connected`` and ``switch``.

Each GPU is its own host here (a flat network, no NVLink island inside a server), so hierarchical
algorithms see one GPU per node. ``latency_us`` is always the GPU-to-GPU latency: on ``switch`` each of
the two hops through the switch gets half of it, so a message costs the same on all three.
"""
from __future__ import annotations

from ..errors import CollsimError
from ..topology import Link, Node, Topology
from . import register


def _check(name: str, n: int, bandwidth_GBps: float, latency_us: float) -> None:
    if n < 2:
        raise CollsimError(f"preset {name!r}: n={n} GPUs is too few: a collective needs n >= 2")
    if n > 1 << 17:
        from .hardware import GPU_LIMIT
        raise CollsimError(f"preset {name!r}: n={n} must be a whole number from 2 to {1 << 17} ({GPU_LIMIT})")
    if not bandwidth_GBps > 0:
        raise CollsimError(f"preset {name!r}: bandwidth_GBps={bandwidth_GBps} must be positive (GB/s per link direction)")
    if not latency_us >= 0:
        raise CollsimError(f"preset {name!r}: latency_us={latency_us} must be zero or more")


def _gpus(n: int) -> list[Node]:
    return [Node(f"gpu{i}", "gpu") for i in range(n)]


@register("ring", "n GPUs in a bidirectional ring, one link each way between neighbours")
def ring(n: int = 8, bandwidth_GBps: float = 100.0, latency_us: float = 1.0, kind: str = "nvlink") -> Topology:
    _check("ring", n, bandwidth_GBps, latency_us)
    links = []
    for i in range(n):
        j = (i + 1) % n
        links.append(Link(f"gpu{i}", f"gpu{j}", bandwidth_GBps, latency_us, kind))
        if n > 2:  # with two GPUs the loop already lists both directions
            links.append(Link(f"gpu{j}", f"gpu{i}", bandwidth_GBps, latency_us, kind))
    return Topology.build(f"ring:n={n}", _gpus(n), links,
                          {"bandwidth_GBps": bandwidth_GBps, "latency_us": latency_us, "symmetry": "rotation"})


@register("fully-connected", "n GPUs, a direct link each way between every pair")
def fully_connected(n: int = 8, bandwidth_GBps: float = 100.0, latency_us: float = 1.0, kind: str = "nvlink") -> Topology:
    _check("fully-connected", n, bandwidth_GBps, latency_us)
    if n > 512:
        raise CollsimError(f"preset 'fully-connected': n={n} would need {n * (n - 1)} links; use switch:n={n} for large flat networks")
    links = [Link(f"gpu{i}", f"gpu{j}", bandwidth_GBps, latency_us, kind) for i in range(n) for j in range(n) if i != j]
    return Topology.build(f"fully-connected:n={n}", _gpus(n), links,
                          {"bandwidth_GBps": bandwidth_GBps, "latency_us": latency_us, "symmetry": "rotation"})


@register("switch", "n GPUs on one switch (sharp=1: the switch reduces in the network, like SHARP/NVLS)")
def switch(n: int = 8, bandwidth_GBps: float = 100.0, latency_us: float = 1.0, sharp: bool = False,
           nvls: bool = False, reduce_bandwidth_GBps: float = float("inf"), kind: str = "net") -> Topology:
    _check("switch", n, bandwidth_GBps, latency_us)
    reduce = "nvls" if nvls else ("sharp" if sharp else None)
    if reduce and not reduce_bandwidth_GBps > 0:
        raise CollsimError(f"preset 'switch': reduce_bandwidth_GBps={reduce_bandwidth_GBps} must be positive")
    sw = Node("switch", "switch", reduce=reduce, reduce_bandwidth_GBps=reduce_bandwidth_GBps)
    links = []
    for i in range(n):
        links.append(Link(f"gpu{i}", "switch", bandwidth_GBps, latency_us / 2, kind))
        links.append(Link("switch", f"gpu{i}", bandwidth_GBps, latency_us / 2, kind))
    return Topology.build(f"switch:n={n}" + (f",{reduce}=1" if reduce else ""), _gpus(n) + [sw], links,
                          {"bandwidth_GBps": bandwidth_GBps, "latency_us": latency_us, "symmetry": "rotation"})
