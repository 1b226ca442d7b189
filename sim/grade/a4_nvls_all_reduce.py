"""Assignment a4: the NVLS (NVLink SHARP) all-reduce as a Program, and its traffic saving.

The machine: ``switch:n=N,nvls=1``, N GPUs each with one link pair to an NVSwitch that can reduce
(agent N of a Program, named ``"switch"``). NVLS's rules, as NCCL's kernels use the hardware: the switch
sums what GPUs push into it (``multimem.ld_reduce`` gives the sum to the GPU that reads it) and copies
what one GPU writes to every GPU (``multimem.st``); it never sends on its own. The student writes:

* ``nvls_all_reduce(nranks) -> sim.Program`` (nchunks = nranks; shard k owned by rank k), in the notebook
  four ``p.steps(1)`` loops of the chunk-program language with ``switch = p.switch("switch")``;
* ``ring_link_bytes(n, nbytes)``, ``nvls_link_bytes(n, nbytes)``: bytes one GPU sends on its link to
  the switch in a ring all-reduce and in NVLS;  ``traffic_saving(n)``: their ratio.

The checks, in order: it returns an all_reduce Program that names the switch; ``sim.verify`` proves it
(n = 2..8); only GPU<->switch transfers; 4 steps (reduce-scatter into and out of the switch, then the
owners' multicast); the engine's per-link bytes on ``switch:n=8,nvls=1`` equal NVLS's (n+1)/n S on
every link; the student's byte formulas match the engine's ``link_bytes`` for their program and for
collsim's ring (within 1 %); and ``traffic_saving`` is the ratio 2(n-1)/(n+1), which tends to 2.

>>> TITLE
'the NVLS all-reduce and its 2x traffic saving'
"""
from __future__ import annotations

from .checks import Fail, call, close, need, program_from, run_checks

TITLE = "the NVLS all-reduce and its 2x traffic saving"
NOTEBOOK = "a4_nvls_all_reduce.ipynb"
FUNCTION = "nvls_all_reduce"
FORMULAS = ("ring_link_bytes", "nvls_link_bytes", "traffic_saving")
SIZES = tuple(range(2, 9))
N, S = 8, 64 << 20


def _topology(n):
    from sim.presets import load_topology
    return load_topology(f"switch:n={n},nvls=1")


def _program(ns, n):
    p = program_from(ns, FUNCTION, (n,), "all_reduce", n, own=("nvls",))   # not the library's NVLS
    if tuple(p.switches) != ("switch",):
        raise Fail(f"`{FUNCTION}({n})` names switches {list(p.switches)}; send to and from `switch = p.switch(\"switch\")` "
                   f"(switches=(\"switch\",) in Program.from_ops) so that agent {n} is the NVSwitch of "
                   f"switch:n={n},nvls=1", expected="switches=('switch',)", got=f"switches={tuple(p.switches)}")
    return p


def _bytes(student, name, *args) -> float:
    value = call(student, name, *args, forbid=("simulator",))
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise Fail(f"`{name}{args}` returned {value!r}; return a number", expected="a number", got=repr(value)[:80]) from None
    return value


def defines(ns):
    for f in (FUNCTION, *FORMULAS):
        need(ns, f)
    return "all four functions defined"


def returns_program(ns):
    for n in SIZES:
        _program(ns, n)
    return f"all_reduce Programs with the switch for n = {SIZES[0]}..{SIZES[-1]}"


def correct(ns):
    import sim
    for n in (4, 8, 2, 3, 5, 6, 7):
        try:
            sim.verify(_program(ns, n))
        except sim.VerificationError as e:
            raise Fail(f"n={n}: {e}", expected="every rank ends with the sum of every chunk", got=str(e)[:200]) from None
    return f"sim.verify proves it for n = {SIZES[0]}..{SIZES[-1]}"


def through_switch(ns):
    for n in (4, 8):
        p = _program(ns, n)
        gpu_to_gpu = (p.src < n) & (p.dst < n)
        if gpu_to_gpu.any():
            i = int(gpu_to_gpu.argmax())
            raise Fail(f"n={n}: at step {int(p.step[i])} rank {int(p.src[i])} sends chunk {int(p.chunk[i])} straight to rank "
                       f"{int(p.dst[i])}; on an NVSwitch machine every transfer goes through the switch (agent {n})",
                       expected="only GPU<->switch transfers", got=f"rank {int(p.src[i])} -> rank {int(p.dst[i])}")
    return "every transfer goes between a GPU and the switch"


def steps(ns):
    for n in (4, 8):
        p = _program(ns, n)
        if p.nrounds != 4 or p.steps != 4:
            raise Fail(f"n={n}: your Program has {p.nrounds} rounds and declares steps={p.steps}; NVLS takes 4: GPUs push "
                       "every shard into the switch (reduce), each owner reads its shard's sum, writes it back, the "
                       "switch multicasts it", expected="4 rounds, steps=4", got=f"{p.nrounds} rounds, steps={p.steps}")
    return "4 steps: into the switch, sum to the owner, owner back to the switch, multicast"


def link_bytes(ns):
    from sim.engine import simulate_program
    run = simulate_program(_program(ns, N), _topology(N), S)
    want = (N + 1) / N * S
    topo = _topology(N)
    for k, link in enumerate(topo.links):
        got = float(run.link_bytes[k])
        if not close(got, want, 0.01):
            raise Fail(f"on switch:n={N},nvls=1 at 64 MiB the link {link.src}->{link.dst} carries {got / S:.3f} S; NVLS "
                       f"carries (n+1)/n S = {want / S:.3f} S on every link (S of pushes plus S/n of the owner's write "
                       "up; S/n of the sum plus S of multicast down). The switch cannot multicast a sum by itself: the "
                       "owner reads it, then writes it", expected=f"{want / S:.3f} S", got=f"{got / S:.3f} S")
    return f"every GPU<->switch link carries (n+1)/n S = {want / S:.3f} S (the engine's link_bytes)"


def formulas(ns):
    import sim
    from sim.engine import simulate_program
    for n in (4, 8):
        topo = _topology(n)
        mine = float(simulate_program(_program(ns, n), topo, S).link_bytes.max())
        ring = float(simulate_program(sim.build_program("ring", "all_reduce", n), topo, S).link_bytes.max())
        for name, engine in (("nvls_link_bytes", mine), ("ring_link_bytes", ring)):
            got = _bytes(ns, name, n, S)
            if not close(got, engine, 0.01):
                raise Fail(f"`{name}({n}, {S})` = {got:.4g} bytes; the engine's busiest link carries {engine:.4g} "
                           f"({engine / S:.3f} S) ({(got - engine) / engine:+.0%})", expected=f"{engine:.4g}", got=f"{got:.4g}")
    return "your byte formulas match the engine's link_bytes for n = 4 and 8"


def saving(ns):
    for n in (4, 8, 64, 1024):
        want = 2 * (n - 1) / (n + 1)
        got = _bytes(ns, "traffic_saving", n)
        if not close(got, want, 0.01):
            raise Fail(f"`traffic_saving({n})` = {got:.4g}; ring bytes / NVLS bytes per link is {want:.4g} for n={n}",
                       expected=f"{want:.4g}", got=f"{got:.4g}")
    return "traffic_saving = 2(n-1)/(n+1): 1.56x at n=8, approaching 2x"


def check(ns: dict):
    gate = ["defines the four functions"]
    return run_checks(ns, [
        ("defines the four functions", defines, [], 0),
        ("returns an all_reduce Program with the switch", returns_program, gate),
        ("correct (sim.verify)", correct, ["returns an all_reduce Program with the switch"]),
        ("only GPU<->switch transfers", through_switch, ["returns an all_reduce Program with the switch"]),
        ("4 steps", steps, ["returns an all_reduce Program with the switch"]),
        ("NVLS bytes on every link", link_bytes, ["correct (sim.verify)"]),
        ("byte formulas = engine", formulas, ["correct (sim.verify)"]),
        ("traffic saving", saving, gate),
    ])


__all__ = ["check", "TITLE", "NOTEBOOK"]
