"""Algorithm and protocol selection, like NCCL's tuner: predict every usable pair, keep the fastest.

``--algorithm X`` / ``--protocol Y`` pin one side, as ``NCCL_ALGO`` / ``NCCL_PROTO`` do.

With NCCL's protocols the choice is NCCL's own (``select="nccl"``, the default): its cost model
(:mod:`sim.nccl.tuner`) ranks every (algorithm, protocol) pair and the cheapest wins, whatever the chosen
model then predicts for it. That is what NCCL does (and what nccl-tests measures), and it keeps a sweep
fast: the engine runs once per size, for the chosen pair only. ``select="fastest"`` runs the chosen
model on every pair NCCL can run there and keeps the fastest: what forcing ``NCCL_ALGO``/``NCCL_PROTO``
could get (:func:`faster_choice` tells how much faster it is than NCCL's pick, and which variables).

Algorithms NCCL does not have (``recursive_hd``, ``binomial``...) are not candidates for ``auto``; pin
one with ``--algorithm`` and its protocol is picked by the chosen model's own times. With
``--protocol ideal`` (the pure latency-bandwidth model) every registered algorithm competes on the
chosen model's times.

>>> import sim
>>> [sim.simulate("all_reduce", s, "dgx-h100").algorithm for s in (1 << 10, 64 << 20)]
['ring', 'nvls']
"""
from __future__ import annotations

from dataclasses import replace

from ..algorithms import candidates
from ..collectives import NCCL_FUNC_NAMES, get_collective
from ..engine.result import Result
from ..errors import CollsimError
from .constants import NCCL_ALGORITHMS
from .protocols import IDEAL
from .recipe import protocols_for

SELECTIONS = ("nccl", "fastest")
NOTE_MARGIN = 0.10     # an alternative is worth a note when it is more than 10% faster than NCCL's pick
# faster_choice runs the engine only on pairs NCCL's own model puts within 1.6x of its pick, so a default
# `collsim simulate` stays about as quick as the one engine run it makes (3x ran 4 more engine runs on
# dgx-h100:nodes=2 at 32 MiB and took 2.6x as long). Why 1.6 loses no note: over 570 alternatives within
# 3x (single nodes from dgx-a100 to gb200-nvl72, 2- and 4-node IB/RoCE/SHARP clusters, pcie; 5 collectives;
# 1 KiB-64 MiB) every one the engine put more than 10% ahead of NCCL's pick, the tuner had put within 1.42x
# of it (tests/tune/test_faster_choice_range.py re-checks the closest cases against all pairs within 3x).
NOTE_TUNER_RANGE = 1.6
# NCCL_ALGO / NCCL_PROTO spellings (NCCL's ncclAlgoStr / ncclProtoStr)
NCCL_ALGO_NAMES = {"tree": "Tree", "ring": "Ring", "collnet_direct": "CollNetDirect", "collnet_chain": "CollNetChain",
                   "nvls": "NVLS", "nvls_tree": "NVLSTree", "pat": "PAT"}


def nccl_env(algorithm: str, protocol: str) -> str:
    """``NCCL_ALGO=Ring NCCL_PROTO=Simple``: the variables that force a pair on NCCL.

    >>> nccl_env("nvls_tree", "LL128")
    'NCCL_ALGO=NVLSTree NCCL_PROTO=LL128'
    """
    return f"NCCL_ALGO={NCCL_ALGO_NAMES.get(algorithm, algorithm)} NCCL_PROTO={protocol}"


def choose(coll, nbytes: int, topo, predict, *, algorithm="auto", protocol="auto", model="engine", usable=None,
           select="nccl") -> Result:
    """The selected pair's Result (``select``: nccl or fastest, see the module docstring); ``explain``
    records how it was chosen.

    ``predict(algorithm, protocol)``: the chosen model's prediction of one pair (a Result; the API's
    predictor table supplies it, so selection imports no model); ``model`` names it in the explanation;
    ``usable``: the algorithms that can run here, if already known."""
    from .tuner import rank_pairs
    if select not in SELECTIONS:
        raise CollsimError(f"unknown selection {select!r}: choose nccl (NCCL's own choice) or fastest (the model's fastest "
                           "NCCL-runnable pair)")
    if algorithm != "auto":
        algos = [algorithm]
    else:
        algos = list(usable) if usable is not None else candidates(coll, topo.nranks, topo)
    if not algos:
        raise CollsimError(f"no algorithm can run {coll.name} on {topo.name}")
    protos = protocols_for(protocol)
    run = predict
    if IDEAL.name not in protos:
        nccl_algos = [a for a in algos if a in NCCL_ALGORITHMS]
        ranked = rank_pairs(coll, nbytes, topo, nccl_algos, protos) if nccl_algos else []
        if ranked and select == "fastest":
            results = [run(t.algorithm, t.protocol) for t in ranked]
            best = min(results, key=lambda r: r.time_us)   # ties keep NCCL's ranking order
            nccl = results[0]
            how = {"selected_by": f"fastest by the {model} model among the pairs NCCL can run",
                   "nccl_choice": f"{nccl.algorithm}/{nccl.protocol} {nccl.time_us:.4g} us"}
            if best is not nccl:
                how["nccl_env"] = nccl_env(best.algorithm, best.protocol)
            return best.with_explain(**how)
        if not ranked and nccl_algos:
            _refuse_if_configured_out(coll, nbytes, topo, nccl_algos, protos)
        if ranked:
            best = ranked[0]
            from .config import current
            return run(best.algorithm, best.protocol).with_explain(
                selected_by=best.detail.get("chosen_by") or f"NCCL {current().version} tuner model",
                tuner_ranking=", ".join(f"{t.algorithm}/{t.protocol} {t.time_us:.4g} us" for t in ranked[:4]))
    best = None
    from .tuner import protocol_not_run
    for a in algos:
        for p in protos:
            if len(protos) > 1 and protocol_not_run(a, p):   # auto: only the protocols NCCL has kernels for
                continue
            r = run(a, p)
            if best is None or r.time_us < best.time_us:
                best = r
    how = {"selected_by": f"fastest by the {model} model"}
    from ..algorithms import in_nccl
    if not in_nccl(best.algorithm, coll):
        how["nccl_cannot_run"] = (f"{best.algorithm} is a textbook algorithm, not one of NCCL's for "
                                  f"{coll.name}: NCCL cannot run this pick")
    return best.with_explain(**how)


def _refuse_if_configured_out(coll, nbytes: int, topo, algos, protos) -> None:
    """NCCL fails a collective whose every (algorithm, protocol) its release or NCCL_* variables rule out;
    so does collsim, naming why (other reasons keep the model's own fallback)."""
    from .config import current, use
    from .tuner import tuner_terms
    reasons: list[str] = []   # what the release or variables rule out
    machine: list[str] = []   # why the machine rules out the rest
    for a in algos:
        for p in protos:
            why = tuner_terms(coll, nbytes, topo, a, p).detail.get("disabled", "")
            if why and why not in reasons + machine:
                (reasons if why.startswith("NCCL") else machine).append(why)
    if reasons:
        cfg = current()
        named = {a for f, names in cfg.algos if f == NCCL_FUNC_NAMES[get_collective(coll).name] for a in names}
        with use(replace(cfg, algos=(), protos=())):   # why the machine, not the lists, rules each named one out
            for a in NCCL_ALGORITHMS:
                if a in named:
                    why = tuner_terms(coll, nbytes, topo, a, "Simple").detail.get("disabled", "")
                    if why and f"{a}: {why}" not in machine:
                        machine.append(f"{a}: {why}")
        env = " ".join(f"{k}={v}" for k, v in cfg.env)
        # the machine's reasons first: NCCL_ALGO=CollNetDirect without SHARP fails for want of SHARP, not of a ring
        raise CollsimError(f"NCCL {cfg.version}{' with ' + env if env else ''} can run no algorithm for "
                           f"{get_collective(coll).name} here: {'; '.join(machine[:2] + reasons[:3])}: change "
                           "--nccl-env/--nccl-version or the pinned algorithm")


def faster_choice(chosen: Result, coll, nbytes: int, topo, predict) -> Result | None:
    """The fastest other pair NCCL can run when ``predict(algorithm, protocol)`` (the model that timed
    ``chosen``) says it is more than NOTE_MARGIN faster than ``chosen`` (NCCL's pick), else None; its
    ``explain`` names the ``NCCL_ALGO``/``NCCL_PROTO`` that would get it."""
    from .constants import NCCL_PROTOCOLS
    from .tuner import rank_pairs
    if chosen.protocol not in NCCL_PROTOCOLS:
        return None
    algos = [a for a in candidates(coll, topo.nranks, topo) if a in NCCL_ALGORITHMS]
    ranked = rank_pairs(coll, nbytes, topo, algos, NCCL_PROTOCOLS)
    best = None
    for t in ranked:
        if (t.algorithm, t.protocol) == (chosen.algorithm, chosen.protocol):
            continue
        if t.time_us > NOTE_TUNER_RANGE * ranked[0].time_us:
            break   # ranked is sorted: the rest are further off still
        r = predict(t.algorithm, t.protocol)
        if best is None or r.time_us < best.time_us:
            best = r
    if best is None or best.time_us >= chosen.time_us * (1 - NOTE_MARGIN):
        return None
    return best.with_explain(nccl_env=nccl_env(best.algorithm, best.protocol), faster_by=1 - best.time_us / chosen.time_us)


# above this many GPUs the flow model's other pairs are not timed for the '+' note (131,072 GPUs: 10 s for the
# answer, over 30 with every pair); the table says so (sim.commands.simulate)
FLOW_CHECK_MAX_RANKS = 16_384


def faster_note(chosen: Result, coll, nbytes: int, topo, predict, *, model: str, protocol: str = "auto",
                select: str = "nccl") -> Result | None:
    """:func:`faster_choice` where the note applies: beside NCCL's own choice (``select="nccl"``, protocol
    ``auto``) timed by the engine or the flow model (the flow model's pairs cost a fraction of a second
    each even at 16,384 GPUs; a planner's trial, twenty-ninth pass, found NCCL's pick 17-70% behind another
    pair there with no '+'); else None. ``predict``: the same pipeline that timed ``chosen`` (its
    runs are cached, so a pair timed already is not run again)."""
    if select != "nccl" or protocol != "auto" or model not in ("engine", "auto", "flow") or chosen.model not in ("engine", "flow"):
        return None
    if chosen.model == "flow" and topo.nranks > FLOW_CHECK_MAX_RANKS:   # every pair's run would triple the answer's time
        return None
    return faster_choice(chosen, coll, nbytes, topo, predict)
