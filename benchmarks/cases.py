"""What the scale benchmark measures: collsim cases and the bare simpy reference, one per process.

Each case is a function ``(nranks) -> dict`` that builds what it needs from nothing (topology, program)
and returns ``transfers`` (chunk transfers the answer covers), ``simulated`` (transfers the engine
actually stepped through), ``events`` (simpy events) and ``time_us`` (the predicted time). The driver
(``run.py``) calls :func:`measure` in a fresh process per point, so each peak RSS is that point's own.

The reference is the least a simpy simulation of the same traffic can do: one process per rank that
yields one ``timeout`` per transfer it sends (no links, no routes, no dependencies). Dividing collsim's
wall time by the reference's, measured back to back on the same machine, gives a ratio that holds on a
noisy machine; a ratio below 1 means collsim predicts the collective faster than simpy can merely
count its transfers.
"""
from __future__ import annotations

import resource
import time

GiB = 1 << 30


def ring_symmetric(n: int) -> dict:
    """Ring all-reduce, 1 GiB, ideal protocol, on a ring: the engine's rotation quotient (default)."""
    import sim
    r = sim.simulate("all_reduce", GiB, f"ring:n={n},bandwidth_GBps=100,latency_us=1", algorithm="ring", protocol="ideal")
    return {"transfers": r.explain["ops"], "simulated": r.explain["simulated_ops"], "time_us": r.time_us}


def _op_by_op(algorithm: str, coll: str, n: int, topology: str, nchannels: int = 1) -> dict:
    from sim.algorithms import build_program
    from sim.engine import simulate_program
    from sim.presets import load_topology
    topo = load_topology(topology)
    p = build_program(algorithm, coll, n, topology=topo, nchannels=nchannels)
    run = simulate_program(p, topo, GiB, symmetry="off")
    return {"transfers": p.nops, "simulated": len(run.op_index), "events": run.events, "time_us": run.time_us}


def ring_op_by_op(n: int) -> dict:
    """The same ring all-reduce with the symmetry shortcut off: every transfer is simulated."""
    return _op_by_op("ring", "all_reduce", n, f"ring:n={n},bandwidth_GBps=100,latency_us=1")


def switch_contention(n: int) -> dict:
    """Ring all-reduce, 4 channels, on one switch, op by op: every port is shared by 4 channels (FIFO)."""
    return _op_by_op("ring", "all_reduce", n, f"switch:n={n},bandwidth_GBps=100,latency_us=1", nchannels=4)


def dgx_hierarchical(n: int) -> dict:
    """Ring all-reduce, ideal protocol, on n/8 DGX H100 nodes (NVSwitch + 8 NICs on a fat tree, whose
    spine the nodes' flows share); no rotation symmetry, so the engine runs op by op."""
    import sim
    r = sim.simulate("all_reduce", GiB, f"dgx-h100:nodes={n // 8}", algorithm="ring", protocol="ideal", model="engine")
    return {"transfers": r.explain["ops"], "simulated": r.explain["simulated_ops"], "time_us": r.time_us}


CASES = {
    "ring": (ring_symmetric, "ring all_reduce on ring:n=N (rotation symmetry, default)"),
    "ring-op": (ring_op_by_op, "same, symmetry off (op by op)"),
    "switch-4ch": (switch_contention, "ring all_reduce, 4 channels sharing each port of switch:n=N, op by op"),
    "dgx": (dgx_hierarchical, "ring all_reduce on dgx-h100:nodes=N/8 (shared spine, no symmetry), op by op"),
}


def bare_simpy(nranks: int, transfers: int) -> dict:
    """The reference: ``nranks`` simpy processes sharing ``transfers`` timeouts (one per transfer)."""
    import simpy
    env = simpy.Environment()
    per, extra = divmod(transfers, nranks)

    def rank(env, count):
        for _ in range(count):
            yield env.timeout(1)

    for r in range(nranks):
        env.process(rank(env, per + (r < extra)))
    env.run()
    return {"transfers": transfers, "simulated": transfers, "events": transfers}


def measure(case: str, nranks: int, rounds: int = 1) -> dict:
    """Best wall time of ``case`` and of the bare simpy reference for the same transfers, run alternately
    ``rounds`` times in this process (noise only ever adds time, so the minima are the fair pair), and
    this process's peak RSS (collsim's: the reference needs a few MB).

    A small warm-up run of each comes first, so imports (timed separately, end to end, by ``run.py``)
    are not counted."""
    CASES[case][0](16)
    bare_simpy(2, 2)
    best, ref, out = float("inf"), float("inf"), {}
    for _ in range(max(1, rounds)):
        t = time.perf_counter()
        out = CASES[case][0](nranks)
        best = min(best, time.perf_counter() - t)
        t = time.perf_counter()
        bare_simpy(nranks, out["transfers"])
        ref = min(ref, time.perf_counter() - t)
    out.update(case=case, nranks=nranks, wall_s=best, ref_wall_s=ref, ratio=best / ref,
               peak_rss_MB=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return out
