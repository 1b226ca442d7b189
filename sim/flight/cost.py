"""How long one collective takes, and how link faults change that, at collective granularity.

A cost function is any callable ``duration_us(op, nbytes, group_size) -> float`` (microseconds, sizes
in nccl-tests' convention). Two are provided:

- :class:`AlphaBeta`: textbook ring costs, ``steps * alpha_us + traffic * nbytes / bandwidth``;
- :class:`CollsimCost`: asks collsim's own simulator (``sim.simulate``) on a preset topology resized to
  the group (needs the core simulator).

Link faults (:class:`LinkModel`) act on a collective through the ring its group forms (members in rank
order, wrapping round): a ring runs at the speed of its slowest hop, so only the *bandwidth* part of the
duration is stretched, by ``slowdown``; the latency part is unchanged. The bandwidth part of any cost
function is taken as ``cost(nbytes) - cost(0)`` (exact for alpha-beta, an approximation where the
protocol changes with size).

>>> ab = AlphaBeta(alpha_us=5.0, bandwidth_GBps=100.0)
>>> ab("all_reduce", 100_000_000, 4)   # 2*3*5 us + 2*3/4 * 1e8 B / 100e3 B/us
1530.0
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace

from ..algorithms.analytic import ring_steps
from ..errors import CollsimError

# (latency steps, traffic factor) per collective for a ring of n ranks: the classical alpha-beta model.
_RING = {
    "all_reduce": (lambda n: ring_steps("all_reduce", n), lambda n: 2 * (n - 1) / n),
    "all_gather": (lambda n: ring_steps("all_gather", n), lambda n: (n - 1) / n),
    "reduce_scatter": (lambda n: ring_steps("reduce_scatter", n), lambda n: (n - 1) / n),
    "all_to_all": (lambda n: ring_steps("all_to_all", n), lambda n: (n - 1) / n),
    "broadcast": (lambda n: ring_steps("broadcast", n), lambda n: 1.0),  # pipelined chain: nbytes once over the slowest link
    "reduce": (lambda n: ring_steps("reduce", n), lambda n: 1.0),
    "barrier": (lambda n: ring_steps("all_reduce", n), lambda n: 0.0),   # an all-reduce of nothing
}


@dataclass(frozen=True)
class AlphaBeta:
    """Ring alpha-beta cost: ``alpha_us`` per step, ``bandwidth_GBps`` (decimal GB/s) per link."""
    alpha_us: float = 5.0
    bandwidth_GBps: float = 100.0

    def __post_init__(self):
        if not self.bandwidth_GBps > 0 or self.alpha_us < 0:
            raise CollsimError("alpha_beta cost needs bandwidth_GBps > 0 and alpha_us >= 0")

    def __call__(self, op: str, nbytes: int, group_size: int) -> float:
        if group_size <= 1:
            return 0.0
        steps, traffic = _RING[op]
        return steps(group_size) * self.alpha_us + traffic(group_size) * nbytes / (self.bandwidth_GBps * 1e3)


@dataclass(frozen=True)
class CollsimCost:
    """Durations from ``sim.simulate`` on ``topology`` (a preset spec; ``n`` is set to the group size).

    Results are memoised per instance (one dict owned by the object, not module state)."""
    topology: str = "switch:bandwidth_GBps=100,latency_us=1"
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    def __call__(self, op: str, nbytes: int, group_size: int) -> float:
        if group_size <= 1:
            return 0.0
        key = (op, nbytes, group_size)
        if key not in self._memo:
            try:
                simulate = importlib.import_module("sim").simulate
                presets = importlib.import_module("sim.presets")
            except (ImportError, AttributeError):
                raise CollsimError("cost model 'collsim' needs sim.simulate, which this build lacks: "
                                   "use cost: {model: alpha_beta}") from None
            name, params = presets.parse_spec(self.topology)
            params["n"] = str(group_size)
            spec = name + ":" + ",".join(f"{k}={v}" for k, v in params.items())
            collective = "all_reduce" if op == "barrier" else op
            self._memo[key] = float(simulate(collective, max(nbytes, 8 * group_size), presets.load_topology(spec)).time_us)
        return self._memo[key]


def make_cost(spec: dict | None):
    """A cost function from its scenario form ``{model: alpha_beta, alpha_us:, bandwidth_GBps:}`` or
    ``{model: collsim, topology: "switch:bandwidth_GBps=100"}``."""
    spec = dict(spec or {})
    model = spec.pop("model", "alpha_beta")
    if model == "alpha_beta":
        return AlphaBeta(**{k: float(v) for k, v in spec.items()})
    if model == "collsim":
        return CollsimCost(str(spec.get("topology", CollsimCost.topology)))
    raise CollsimError(f"unknown cost model {model!r}: use alpha_beta or collsim")


def ring_hops(members) -> list[tuple[int, int]]:
    """The ring a group forms: each member sends to the next in rank order, the last to the first."""
    m = sorted(members)
    return [(m[i], m[(i + 1) % len(m)]) for i in range(len(m))] if len(m) > 1 else []


@dataclass(frozen=True)
class LinkModel:
    """Link faults, with an optional world topology (``sim.topology.Topology``) to find routes.

    ``state(members, t)`` says what the group's ring sees at time ``t`` (us): ``(slowdown,
    latency_factor, down)``: the factors on the bandwidth and latency parts of the duration, and whether
    the ring needs a link that is down with no other route (then the collective never completes)."""
    faults: tuple = ()
    topology: object = None

    def change_times(self) -> list[float]:
        return sorted({f.at_us for f in self.faults})

    def state(self, members, t: float) -> tuple[float, float, bool]:
        active = [f for f in self.faults if f.at_us <= t]
        if not active or len(members) < 2:
            return 1.0, 1.0, False
        if self.topology is None:
            return self._state_without_topology(members, active)
        return self._state_with_topology(members, active)

    @staticmethod
    def _state_without_topology(members, active) -> tuple[float, float, bool]:
        # Without routes the link is "used" when its two ranks are neighbours in the group's ring.
        hops = {frozenset(h) for h in ring_hops(members)}
        slowdown = 1.0
        for f in active:
            if frozenset((f.a, f.b)) not in hops:
                continue
            if f.kind == "degraded_link":
                slowdown = max(slowdown, 1.0 / f.bandwidth_fraction)
            elif f.reroute is True:
                slowdown = max(slowdown, 1.0 / f.reroute_bandwidth_fraction)
            else:  # "auto" with no topology: nothing says another route exists
                return slowdown, 1.0, True
        return slowdown, 1.0, False

    def fault_links(self, f) -> set[int]:
        """Indices of the topology links a fault hits: the named ``links`` (labels like
        ``gpu2->switch``), else both directions of the route between its two ranks."""
        topo = self.topology
        if f.links:
            labels = {topo.link_label(i): i for i in range(len(topo.links))}
            missing = [l for l in f.links if l not in labels]
            if missing:
                raise CollsimError(f"link(s) {missing} are not in topology {topo.name!r}: use labels like "
                                   f"{next(iter(labels))}")
            return {labels[l] for l in f.links}
        return set(topo.route(f.a, f.b)) | set(topo.route(f.b, f.a))

    def _state_with_topology(self, members, active) -> tuple[float, float, bool]:
        topo = self.topology
        links, removed = list(topo.links), set()
        for f in active:
            for i in self.fault_links(f):
                if f.kind == "degraded_link":
                    links[i] = replace(links[i], bandwidth_GBps=links[i].bandwidth_GBps * f.bandwidth_fraction)
                else:
                    removed.add(i)
        bw0, lat0 = _ring_speed(topo, members)
        try:
            faulty = type(topo).build(topo.name + "+faults", topo.nodes,
                                      [l for i, l in enumerate(links) if i not in removed], topo.hardware)
        except CollsimError:  # a GPU lost its last route: rings that cross the dead link cannot run
            if {i for a, b in ring_hops(members) for i in topo.route(a, b)} & removed:
                return 1.0, 1.0, True
            faulty = type(topo).build(topo.name + "+faults", topo.nodes, links, topo.hardware)
        bw, lat = _ring_speed(faulty, members)
        return bw0 / bw, (lat / lat0 if lat0 > 0 else 1.0), False


def _ring_speed(topo, members) -> tuple[float, float]:
    """(bandwidth GB/s, latency us) of the group's ring on ``topo``: every hop follows its route; a
    link carrying k hops gives each 1/k of its bandwidth (so a detour that shares links is slower); the
    ring runs at its slowest hop and waits for its longest one."""
    hops = ring_hops(members)
    routes = [topo.route(a, b) for a, b in hops]
    load: dict[int, int] = {}
    for r in routes:
        for i in r:
            load[i] = load.get(i, 0) + 1
    bw = min(min(topo.links[i].bandwidth_GBps / load[i] for i in r) for r in routes)
    lat = max(sum(topo.links[i].latency_us for i in r) for r in routes)
    return bw, lat


def duration_us(cost, op: str, nbytes: int, group_size: int, slowdown: float, latency_factor: float = 1.0) -> float:
    """``cost``'s duration with its bandwidth part stretched by ``slowdown`` and its latency part by
    ``latency_factor``."""
    full = cost(op, nbytes, group_size)
    if slowdown == 1.0 and latency_factor == 1.0:
        return full
    latency = cost(op, 0, group_size)
    return latency * latency_factor + (full - latency) * slowdown
