"""Assignment a3: predict the ring/tree crossover and the SHARP gain on a cluster, then check with the simulator.

The cluster: n GPUs, one per server, each with one link of ``bandwidth_GBps`` (decimal GB/s, each
direction) to a single switch; ``latency_us`` is the GPU-to-GPU latency through it (preset
``switch:n=N,bandwidth_GBps=B,latency_us=A``; ``sharp=1`` makes the switch reduce, as IB SHARP does).
All times are all_reduce times in microseconds with the ideal protocol. The student writes formulas:

* ``ring_steps(n)``, ``tree_steps(n)``: communication steps of one piece of data;
* ``ring_us(n, nbytes, bandwidth_GBps, latency_us)``: ring all-reduce time;
* ``tree_us(...)``: double-binary-tree all-reduce time (pipelined: large messages cost ~2S/B, because
  every GPU is an inner node of one tree and sends its half up once and down twice);
* ``crossover_nbytes(n, bandwidth_GBps, latency_us)``: the size where the ring starts to win;
* ``sharp_us(...)``: in-network (CollNet/SHARP) all-reduce time; ``sharp_speedup(...)`` = ring / SHARP.

Checks compare them with the engine: exact for the ring and the step counts, within 25 % for the
tree at 1 KiB and 1 GiB, within 15 % for SHARP, and the crossover must be consistent with the student's
own formulas and put the simulator's winner on the right side (a factor 8 either way). The prediction
functions may not run the simulator (the grader blocks it while calling them): predict, then check.

>>> TITLE
'predict the ring/tree crossover and the SHARP gain'
"""
from __future__ import annotations

from .checks import Fail, call, close, need, run_checks

TITLE = "predict the ring/tree crossover and the SHARP gain"
NOTEBOOK = "a3_ring_tree_sharp.ipynb"
FUNCTIONS = ("ring_steps", "tree_steps", "ring_us", "tree_us", "crossover_nbytes", "sharp_us", "sharp_speedup")
CLUSTERS = ((8, 25.0, 5.0), (16, 25.0, 5.0), (32, 50.0, 2.0))   # (n, bandwidth_GBps, latency_us)
KIB, MIB, GIB = 1 << 10, 1 << 20, 1 << 30


def _spec(n, bw, lat, sharp=False):
    return f"switch:n={n},bandwidth_GBps={bw:g},latency_us={lat:g}" + (",sharp=1" if sharp else "")


def _sim(algorithm, n, nbytes, bw, lat):
    import sim
    return sim.simulate("all_reduce", nbytes, _spec(n, bw, lat, algorithm == "collnet_direct"), algorithm=algorithm,
                        protocol="ideal")


def predict(ns, name, *args) -> float:
    value = call(ns, name, *args, forbid=("simulator",))   # a prediction is a formula: the engine refuses to run
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise Fail(f"`{name}{args}` returned {value!r}; return a number", expected="a number", got=repr(value)[:80]) from None
    if not value == value or value < 0:   # NaN or negative
        raise Fail(f"`{name}{args}` returned {value}; return a non-negative number", expected=">= 0", got=f"{value}")
    return value


def defines(ns):
    for f in FUNCTIONS:
        need(ns, f)
    return "all seven functions defined"


def steps(ns):
    import sim
    for n, _bw, _lat in CLUSTERS:
        for algo, fn in (("ring", "ring_steps"), ("tree", "tree_steps")):
            want = sim.build_program(algo, "all_reduce", n).steps
            got = predict(ns, fn, n)
            if got != want:
                hint = ("reduce-scatter then all-gather, n-1 steps each" if algo == "ring" else
                        "up the tree to the root then back down: twice its depth, and a binary tree over n "
                        "ranks is ceil(log2 n) deep")
                raise Fail(f"{fn}({n}) = {got:g}, but the simulator's {algo} all-reduce takes {want} steps ({hint})",
                           expected=f"{want}", got=f"{got:g}")
    return "ring 2(n-1) and tree 2*ceil(log2 n) steps, as the Programs say"


def ring(ns):
    for n, bw, lat in CLUSTERS:
        for S in (KIB, MIB, GIB):
            want = _sim("ring", n, S, bw, lat).time_us
            got = predict(ns, "ring_us", n, S, bw, lat)
            if not close(got, want, 0.01):
                raise Fail(f"ring_us({n}, {S}, {bw:g}, {lat:g}) = {got:.2f} us, the simulator says {want:.2f} us "
                           f"({(got - want) / want:+.0%}): count the steps, and the bytes of one step (S/n)",
                           expected=f"{want:.2f} us", got=f"{got:.2f} us")
    return "the ring formula matches the engine within 1%"


def tree(ns):
    for n, bw, lat in CLUSTERS:
        for S, regime in ((KIB, "latency"), (GIB, "bandwidth")):
            want = _sim("tree", n, S, bw, lat).time_us
            got = predict(ns, "tree_us", n, S, bw, lat)
            if not close(got, want, 0.25):
                hint = ("at 1 KiB only latency counts: how many hops does one piece cross?" if regime == "latency" else
                        "at 1 GiB only bandwidth counts: how many bytes leave the busiest GPU? (each GPU is an inner "
                        "node of one of the two trees: it sends its half up, and twice down to its two children)")
                raise Fail(f"tree_us({n}, {S}, {bw:g}, {lat:g}) = {got:.1f} us, the simulator says {want:.1f} us "
                           f"({(got - want) / want:+.0%}, more than 25% off): {hint}",
                           expected=f"{want:.1f} us (within 25%)", got=f"{got:.1f} us")
    return "the tree formula is within 25% of the engine at 1 KiB and 1 GiB"


def crossover(ns):
    for n, bw, lat in CLUSTERS[:2]:
        x = predict(ns, "crossover_nbytes", n, bw, lat)
        if not 64 <= x <= 64 * GIB:
            raise Fail(f"crossover_nbytes({n}, {bw:g}, {lat:g}) = {x:.3g} bytes: expected a size between 64 B and 64 GiB")
        r, t = predict(ns, "ring_us", n, x, bw, lat), predict(ns, "tree_us", n, x, bw, lat)
        if not close(r, t, 0.05):
            raise Fail(f"at your crossover {x:.3g} B (n={n}) your own formulas disagree: ring {r:.1f} us, tree {t:.1f} us; "
                       "the crossover is the size where ring_us == tree_us")
        lo, hi = max(int(x / 8), 8), int(x * 8)
        if _sim("tree", n, lo, bw, lat).time_us > _sim("ring", n, lo, bw, lat).time_us:
            raise Fail(f"n={n}: at {lo} B (your crossover / 8) the simulator's ring already beats the tree: your crossover is too large")
        if _sim("ring", n, hi, bw, lat).time_us > _sim("tree", n, hi, bw, lat).time_us:
            raise Fail(f"n={n}: at {hi} B (your crossover x 8) the simulator's tree still beats the ring: your crossover is too small")
    return "consistent with your formulas; the simulator agrees on the winner a factor 8 either side"


def sharp(ns):
    for n, bw, lat in CLUSTERS:
        for S in (KIB, 256 * MIB):
            want = _sim("collnet_direct", n, S, bw, lat).time_us
            got = predict(ns, "sharp_us", n, S, bw, lat)
            if not close(got, want, 0.15):
                raise Fail(f"sharp_us({n}, {S}, {bw:g}, {lat:g}) = {got:.1f} us, the simulator's collnet_direct says "
                           f"{want:.1f} us ({(got - want) / want:+.0%}): with SHARP each GPU sends its buffer once to the "
                           "switch and receives the sum once; how many hops, how many bytes per link?",
                           expected=f"{want:.1f} us (within 15%)", got=f"{got:.1f} us")
    return "the SHARP formula is within 15% of the engine"


def speedup(ns):
    for n, bw, lat in CLUSTERS:
        S = 256 * MIB
        want = _sim("ring", n, S, bw, lat).time_us / _sim("collnet_direct", n, S, bw, lat).time_us
        got = predict(ns, "sharp_speedup", n, S, bw, lat)
        if not close(got, want, 0.10):
            raise Fail(f"sharp_speedup({n}, 256 MiB, {bw:g}, {lat:g}) = {got:.3f}, the simulator says {want:.3f}: at large "
                       "sizes the gain is the ratio of the bytes each GPU sends", expected=f"{want:.3f}", got=f"{got:.3f}")
    return "the SHARP gain at 256 MiB matches the engine within 10%"


def check(ns: dict):
    base = ["defines the seven functions"]
    return run_checks(ns, [
        ("defines the seven functions", defines, [], 0),
        ("step counts", steps, base),
        ("ring time (exact)", ring, base),
        ("tree time (within 25%)", tree, base),
        ("crossover size", crossover, ["ring time (exact)", "tree time (within 25%)"]),
        ("SHARP time (within 15%)", sharp, base),
        ("SHARP gain", speedup, base),
    ])


__all__ = ["check", "TITLE", "NOTEBOOK"]
