"""After a rank fails: shrink the communicator, or re-initialise everything? A parameterised cost model.

**Shrink** (NCCL 2.27+ ``ncclCommShrink``): survivors abort the broken communicator's operations,
derive a child communicator without the failed ranks from the parent (one bootstrap all-gather among
the survivors, new rings/trees, new connections) and continue from the state in their memory, losing
only the step in flight. **Re-initialise** (what ``torchrun`` elastic restart does): every process is
restarted, meets at the rendezvous store, builds a communicator from a new unique id (NCCL's bootstrap
all-gathers, topology detection, graph search, connections), reloads the last checkpoint and
recomputes the steps since it.

Both pay detection and abort. What scales with the number of ranks N:

- the rendezvous store is one server: N ranks x ``store_ops_per_rank`` requests of ``store_op_us``
  each, served one at a time (simulated as a simpy queue: the last rank leaves after all of them);
- a bootstrap all-gather is a ring of N-1 hops of ``bootstrap_hop_us``; init runs
  ``init_allgathers`` of them, shrink ``shrink_allgathers`` among the N-f survivors.

Everything else runs on all ranks at once, so its wall time does not grow with N. All parameters are
assumptions stated in :class:`RecoveryParams`, not measurements: change them to match a cluster.

>>> p = RecoveryParams()
>>> round(closed_form("reinit", 64, 1, p)["resume_s"], 4), round(closed_form("shrink", 64, 1, p)["resume_s"], 4)
(143.4634, 62.4124)
"""
from __future__ import annotations

from dataclasses import dataclass, fields

import simpy

from ..errors import CollsimError
from ..io.validation import number, whole

METHODS = ("shrink", "reinit")


@dataclass(frozen=True)
class RecoveryParams:
    """Times in seconds unless the name says ``_us``/``_ms``. Defaults are round, plausible numbers for a
    large GPU cluster (state yours)."""
    detect_s: float = 60.0  # failure -> every survivor knows (a shortened NCCL watchdog timeout)
    abort_s: float = 1.0  # ncclCommAbort of the broken communicator
    process_restart_s: float = 20.0  # reinit: relaunch python, import torch, create the CUDA context
    store_op_us: float = 100.0  # one rendezvous-store request, served one at a time by the store
    store_ops_per_rank: int = 4  # rendezvous: join, publish/fetch the unique id, barrier
    bootstrap_hop_us: float = 200.0  # one hop of NCCL's bootstrap ring (TCP between hosts)
    init_allgathers: int = 3  # bootstrap all-gathers in ncclCommInitRank (peer info, topology, graphs)
    shrink_allgathers: int = 1  # in ncclCommShrink: the parent already knows every peer
    init_fixed_s: float = 2.0  # topology detection, graph search, buffer allocation (per rank, in parallel)
    shrink_fixed_s: float = 1.0  # shrink: graph search and buffers again, topology already known
    connections_per_rank: int = 80  # e.g. 16 channels x (2 ring + 3 tree) peers
    connect_ms: float = 5.0  # one connection (IB queue pair created and exchanged)
    checkpoint_load_s: float = 60.0  # reinit: read model + optimizer state back
    checkpoint_interval_s: float = 1800.0  # reinit loses on average half of it, recomputed after resume
    step_s: float = 2.0  # shrink loses on average half a step

    @classmethod
    def from_dict(cls, d: dict | None) -> "RecoveryParams":
        names = {f.name for f in fields(cls)}
        bad = set(d or {}) - names
        if bad:
            raise CollsimError(f"unknown recovery parameter(s) {sorted(bad)}: use {', '.join(sorted(names))}")
        if d is not None and not isinstance(d, dict):
            raise CollsimError(f"recovery params must be a mapping such as {{detect_s: 30}}, not {str(d)[:40]}")
        # through sim.io.validation: whole numbers where the field is one, finite, 0 .. 1e9
        p = cls(**{k: (whole(v, f"recovery {k}", low=0, high=10 ** 9) if isinstance(getattr(cls, k), int)
                       else number(v, f"recovery {k}", low=0, high=1e9)) for k, v in (d or {}).items()})
        return p


# World sizes a recovery is simulated for (one simpy process per live rank): 16,384 take a few seconds
# (65,536 took 22 s on one loaded core).
MAX_RANKS = 16_384


def _phases(method: str, n: int, failed: int, p: RecoveryParams) -> list[tuple[str, float]]:
    """(phase, seconds) in order; the rendezvous is the simulated one, here in closed form."""
    if method not in METHODS:
        raise CollsimError(f"unknown recovery method {method!r}: use shrink or reinit")
    if not 0 < failed < n:
        raise CollsimError(f"{failed} failed rank(s) out of {n}: need 1 <= failed < ranks")
    connect = p.connections_per_rank * p.connect_ms / 1e3
    common = [("detect failure", p.detect_s), ("abort communicator", p.abort_s)]
    if method == "shrink":
        m = n - failed
        return common + [
            (f"bootstrap all-gather x{p.shrink_allgathers} ({m} ranks)", p.shrink_allgathers * (m - 1) * p.bootstrap_hop_us / 1e6),
            ("rings/trees among survivors", p.shrink_fixed_s),
            ("connections", connect),
        ]
    return common + [
        ("restart processes", p.process_restart_s),
        (f"rendezvous ({n} ranks on one store)", n * p.store_ops_per_rank * p.store_op_us / 1e6),
        (f"bootstrap all-gather x{p.init_allgathers} ({n} ranks)", p.init_allgathers * (n - 1) * p.bootstrap_hop_us / 1e6),
        ("topology, graphs, buffers", p.init_fixed_s),
        ("connections", connect),
        ("reload checkpoint", p.checkpoint_load_s),
    ]


def closed_form(method: str, n: int, failed: int = 1, p: RecoveryParams = RecoveryParams()) -> dict:
    """``{"resume_s", "lost_work_s", "total_s", "phases"}``: seconds from the failure until training
    runs again, the work to recompute, and their sum (back to where it was)."""
    phases = _phases(method, n, failed, p)
    resume = sum(t for _, t in phases)
    lost = p.step_s / 2 if method == "shrink" else p.checkpoint_interval_s / 2
    return {"resume_s": resume, "lost_work_s": lost, "total_s": resume + lost, "phases": phases}


def simulate(method: str, n: int, failed: int = 1, p: RecoveryParams = RecoveryParams()) -> dict:
    """The same recovery run as a simpy model: every live rank is a process; the rendezvous store is a
    one-server queue each rank sends its requests to; the phases every rank runs at the same time
    (bootstrap rounds, graph search, connections) are aggregated into one delay each. Returns the
    closed form's keys plus ``timeline`` [(phase, start_s, end_s)]; ``resume_s`` is when the last rank
    is ready."""
    phases = _phases(method, n, failed, p)
    env = simpy.Environment()
    store = simpy.Resource(env, capacity=1)
    live = n - failed
    timeline, ready = [], []

    def phase(name, seconds):
        start = env.now
        yield env.timeout(seconds)
        timeline.append((name, start, env.now))

    def rank(r, barrier):
        for _ in range(p.store_ops_per_rank):
            with store.request() as req:
                yield req
                yield env.timeout(p.store_op_us / 1e6)
        barrier.append(r)

    def run():
        for name, t in phases:
            if name.startswith("rendezvous"):
                start, done = env.now, []
                # every rank, the replacement of the failed one included, meets at the store
                procs = [env.process(rank(r, done)) for r in range(n)]
                yield env.all_of(procs)
                timeline.append((name, start, env.now))
            else:
                yield from phase(name, t)
        ready.append(env.now)

    env.process(run())
    env.run()
    lost = p.step_s / 2 if method == "shrink" else p.checkpoint_interval_s / 2
    return {"resume_s": ready[0], "lost_work_s": lost, "total_s": ready[0] + lost, "timeline": timeline,
            "ranks": n, "failed": failed, "live": live}


def compare(ranks=(64, 512, 4096), failed: int = 1, p: RecoveryParams = RecoveryParams()) -> list[dict]:
    """One row per N: simulated shrink and reinit times (s) and their ratio."""
    rows = []
    for n in ranks:
        s, r = simulate("shrink", n, failed, p), simulate("reinit", n, failed, p)
        rows.append({"ranks": n, "failed": failed, "shrink_resume_s": s["resume_s"], "reinit_resume_s": r["resume_s"],
                     "shrink_total_s": s["total_s"], "reinit_total_s": r["total_s"],
                     "resume_ratio": r["resume_s"] / s["resume_s"]})
    return rows


def table(rows: list[dict]) -> str:
    """A Markdown table of :func:`compare` rows."""
    out = ["| ranks | failed | shrink: back to training (s) | re-init: back to training (s) | re-init / shrink "
           "| shrink incl. lost work (s) | re-init incl. lost work (s) |",
           "|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['ranks']} | {r['failed']} | {r['shrink_resume_s']:.2f} | {r['reinit_resume_s']:.2f} | "
                   f"{r['resume_ratio']:.2f} | {r['shrink_total_s']:.2f} | {r['reinit_total_s']:.2f} |")
    return "\n".join(out)
