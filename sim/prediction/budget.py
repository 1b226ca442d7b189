"""Memory and time budgets: what a run will cost, estimated before it starts.

The engine holds every op of a Program (a few int arrays) and, for the ops it simulates, dependency
and event-loop state; both grow as the collective's transfers do (2(n-1) x n for a ring all-reduce,
half a billion at n = 16,384). :func:`engine_estimate` counts them from closed forms (building the
program to count it would already cost what is being estimated) and prices them in bytes and seconds,
so that ``--model auto`` can choose the engine only where it fits, and every model can refuse up front,
with the estimate and the options, instead of ending in the OOM killer or a ``MemoryError``.

Bytes per op were measured with ``ru_maxrss`` on this project's benchmarks (``benchmarks/run.py``): a
1024-rank op-by-op ring all-reduce (2.1 M ops) peaks at 384 MB, 32 MB of it the interpreter and numpy;
a symmetric run keeps the program (about 40 B/op) but simulates one op in n.

>>> estimate_program_bytes(2_095_104) // 2**20
79
>>> parse_memory("1.5G"), parse_memory("512M")
(1500000000, 512000000)
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

import numpy as np

from ..algorithms import get_algorithm
from ..collectives import Collective, get_collective
from ..errors import CollsimError
from ..nccl.constants import LL_FORWARD_BYTES, NVLS_MAX_HEADS
from ..nccl.execution import OPS_BUDGET, PROBE_PIECES_MAX, nccl_channels
from ..nccl.protocols import IDEAL, nccl_chunk_bytes

PROGRAM_BYTES_PER_OP = 40        # src, dst (int32), chunk, step (int64 / int32), channel, reduce + slack
SIMULATED_BYTES_PER_OP = 130     # dependencies (sorts, CSR successors), routes, start/end times, stamps
BASE_BYTES = 120 << 20           # interpreter, numpy, simpy, the topology
ENGINE_OPS_PER_S = 120_000       # simulated ops per second on a busy 2-core machine (hardware presets)
BUILD_OPS_PER_S = 8_000_000      # program ops built per second
ROUTE_S_FAT_TREE = 3e-4          # one route on a preset's fat tree (Dijkstra over two hosts and the fabric)
ROUTE_S_OTHER = 2e-5             # one route on a textbook topology (neighbours, found at once)
ROUTE_BYTES_PER_HOP = 200        # a hop of a route: its (slot, serialisation, latency) tuple, then three table cells
AUTO_ENGINE_SECONDS = 1.0        # --model auto runs the engine when its estimate is below this
AUTO_FALLBACK_SECONDS = 60.0     # ... or, where the flow model cannot run it, up to this (refused above)
# Peak bytes per op while a one-piece program over every rank is built and its per-step link loads summed
# (the step model, sim/prediction/flow_steps.py; alpha-beta builds it too, for its steps): measured with
# ru_maxrss, recursive_hd all_reduce on dgx-h100:nodes=256 (8.4 M ops) 1.02 GB, on nodes=512 (33.5 M ops)
# 3.9 GB; hierarchical_ring on nodes=256 (8.4 M ops) 1.03 GB; recursive_hd all_gather (4.2 M ops) 0.54 GB.
FULL_PROGRAM_BYTES_PER_OP = 120
# ``collsim plan``: one task per kernel of rank 0's step. Measured on this project's 2-core machine: a
# ZeRO-3 step of 5,000 microbatches x 24 layers (600,000 tasks) took 33 s and peaked at 578 MB.
PLAN_BYTES_PER_TASK = 800
PLAN_TASKS_PER_S = 18_000
MAX_PLAN_TASKS = 1_000_000       # about a minute: a step with more kernels is refused, with the options


_AVAILABLE: list = [float("-inf"), 0]   # (when read, bytes): /proc/meminfo is read at most once a second
AVAILABLE_TTL_S = 1.0


def available_memory_bytes() -> int:
    """Memory the machine can still give (``MemAvailable``; physical memory where that is unknown), as read
    at most :data:`AVAILABLE_TTL_S` ago: a sweep asks before every size and algorithm, and opening
    /proc/meminfo each time was 2% of a cross-validation."""
    now = time.monotonic()
    if now - _AVAILABLE[0] >= AVAILABLE_TTL_S:
        _AVAILABLE[:] = [now, _read_available_memory_bytes()]
    return _AVAILABLE[1]


def _read_available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 8 << 30


def default_max_memory() -> int:
    """``--max-memory``'s default: half of the memory available now."""
    return available_memory_bytes() // 2


def parse_memory(text) -> int:
    """``"2G"``, ``"512M"``, ``"1.5GB"``, ``"1000000"`` -> bytes (decimal units, like the sizes)."""
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        s = str(text).strip().upper().removesuffix("B").removesuffix("I")
        scale = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}.get(s[-1:], 1)
        try:
            value = float(s[:-1] if scale != 1 else s) * scale
        except ValueError:
            raise CollsimError(f"--max-memory {text!r}: give a size such as 2G or 512M") from None
    if not math.isfinite(value) or value <= 0:
        raise CollsimError(f"--max-memory {text!r}: must be a positive size such as 2G")
    return int(value)


def estimate_program_bytes(nops: int) -> int:
    """Memory a Program of ``nops`` ops takes to hold and check (``collsim verify`` calls this first)."""
    return int(nops) * PROGRAM_BYTES_PER_OP


def estimate_verify_bytes(collective: str, nranks: int, algorithm: str | None = None, nchannels: int = 1,
                          pipeline: int = 1) -> int:
    """Memory ``collsim verify`` needs for one program: the program, its ops as Python lists, and the
    symbolic state (one ``nranks``-bit set per rank and chunk; chunks taken as ``nranks`` per piece).
    ``algorithm`` None (a user's file): priced as a ring."""
    slots = max(1, nchannels) * max(1, pipeline)
    nops = ops_per_piece(algorithm or "ring", collective, nranks) * slots
    state = nranks * nranks * slots * (nranks // 8 + 36)
    return BASE_BYTES + estimate_program_bytes(nops) + nops * 4 * 8 + state


def check_verify(collective: str, nranks: int, algorithm: str | None = None, nchannels: int = 1, pipeline: int = 1,
                 max_memory: int | None = None) -> None:
    """Refuse a ``collsim verify`` job whose estimate exceeds the memory budget, before building it."""
    need = estimate_verify_bytes(collective, nranks, algorithm, nchannels, pipeline)
    check_memory(f"verifying {algorithm or 'the program'} {collective} on {nranks} ranks", need, max_memory,
                 "verify fewer ranks (e.g. --ranks 2-64): a proof on small worlds covers the pattern")


def plan_tasks(layers: int, microbatches: int, grad_bytes: int, bucket_bytes: int, first_bucket_bytes: int,
               strategy: str, tp: int = 1, pp: int = 1, replicas: int = 1) -> tuple[int, int]:
    """(tasks, gradient buckets) of one training step as :func:`sim.planning.step.build_step` lays it out,
    from closed forms: per microbatch and layer a forward and a backward (two halves and two tensor-
    parallel all_reduces each with ``tp > 1``), ZeRO-3's gathers and reduce_scatters per layer, the
    buckets' collectives once per step.

    >>> plan_tasks(24, 1, 2_000_000_000, 25 << 20, 25 << 20, "ddp")   # ddp-1b: 48 layer tasks, 77 buckets
    (126, 77)
    """
    per_stage = max(1, layers // max(1, pp))
    per_layer = 1 if tp == 1 else 4
    zero3 = strategy == "zero3"
    buckets = 0 if zero3 else 1 + max(0, math.ceil((grad_bytes - first_bucket_bytes) / max(1, bucket_bytes)))
    per_bucket = 1 + (strategy in ("zero1", "zero2")) + (strategy != "ddp" and replicas > 1)
    tasks = microbatches * per_stage * (2 * per_layer + (3 + (replicas > 1) if zero3 else 0))
    tasks += (2 * microbatches + 1 if pp > 1 else 0) + buckets * per_bucket + 1
    return tasks, buckets


def check_plan(name: str, layers: int, microbatches: int, grad_bytes: int, bucket_bytes: int, first_bucket_bytes: int,
               strategy: str, tp: int = 1, pp: int = 1, replicas: int = 1, max_memory: int | None = None) -> int:
    """Refuse a ``collsim plan`` step whose task count would take more than :data:`MAX_PLAN_TASKS` (about
    a minute) or more memory than the budget, before anything is built; returns the estimated tasks."""
    tasks, buckets = plan_tasks(layers, microbatches, grad_bytes, bucket_bytes, first_bucket_bytes, strategy, tp, pp, replicas)
    need = BASE_BYTES + (tasks + layers) * PLAN_BYTES_PER_TASK
    limit = default_max_memory() if max_memory is None else max_memory
    if tasks > MAX_PLAN_TASKS or need > limit:
        what = f"{microbatches:,} microbatch(es) x {layers // max(1, pp):,} layer(s) per stage"
        what += f", {buckets:,} gradient bucket(s) of {bucket_bytes / (1 << 20):.3g} MiB" if buckets else ""
        options = []
        if buckets * 4 > tasks or not (microbatches > 1 or layers > 1000):
            need_mb = grad_bytes / (MAX_PLAN_TASKS // 4) / (1 << 20)
            options.append(f"a larger parallelism.bucket_mb (at least {need_mb:.2g})")
        if microbatches > 1:
            options.append("fewer parallelism.microbatches (a step's time grows about linearly with them: plan a few "
                           "and scale)")
        if layers > 1000:
            options.append("fewer model.layers")
        raise CollsimError(f"plan of workload {name!r}: one step is about {tasks:,} tasks ({what}), about "
                           f"{tasks / PLAN_TASKS_PER_S:.0f} s and {gb(need)}, more than the plan's budget of "
                           f"{MAX_PLAN_TASKS:,} tasks and {gb(limit)}: use " + ", or ".join(options))
    return tasks


@dataclass(frozen=True)
class Estimate:
    """What one engine run will cost: ops in the program, ops it simulates, bytes and seconds."""

    program_ops: int
    simulated_ops: int
    bytes: int
    seconds: float

    def describe(self, memory: bool = True) -> str:
        ops = f"{self.program_ops:,} ops ({self.simulated_ops:,} simulated)"
        return f"{ops}, about {gb(self.bytes)} and {self.seconds:.0f} s" if memory else f"{ops}, about {self.seconds:.0f} s"


def gb(nbytes: float) -> str:
    """A memory size for a message: GB from 0.1 GB, MB from 1 MB, else kB or bytes (a tiny --max-memory
    once read back as "0 MB").

    >>> gb(2.5e9), gb(3e6), gb(1024), gb(12)
    ('2.5 GB', '3 MB', '1 kB', '12 B')
    """
    if nbytes >= 1e8:
        return f"{nbytes / 1e9:.1f} GB"
    if nbytes >= 1e6:
        return f"{nbytes / 1e6:.0f} MB"
    return f"{nbytes / 1e3:.0f} kB" if nbytes >= 1e3 else f"{nbytes:.0f} B"


def ops_per_piece(algorithm: str, collective: str | Collective, n: int, topo=None) -> int:
    """Ops of one channel and one piece of ``algorithm`` over ``n`` ranks (closed forms; exact for the
    ring, direct and textbook algorithms, within a small factor for the hierarchical ones)."""
    coll = get_collective(collective)
    if algorithm == "ring":
        if coll.pairwise:
            return n * n * (n - 1) // 2
        if coll.rooted:
            return n - 1
        return n * coll.ring_steps(n)
    if algorithm in ("direct", "pat"):   # pat: every rank receives n - 1 shards, one op each
        return n * (n - 1)
    if algorithm == "p2p":   # every pair, plus the PXN hop of each block that changes host and rail
        k = max(1, int((topo.hardware.gpus_per_node if topo is not None else 0) or 1))
        m = n // k if n % k == 0 else 1
        return n * (n - 1) + n * (m - 1) * (k - 1)
    if algorithm == "tree":
        return 4 * (n - 1) if coll.passes == 2 else n - 1   # all_reduce: up and down two trees
    if algorithm == "recursive_hd":
        return recursive_hd_ops(coll, n)
    if algorithm == "binomial":
        return n - 1
    if algorithm == "hierarchical_ring":
        k = n // max(1, int(topo.nhosts)) if topo is not None and n % max(1, int(topo.nhosts)) == 0 else 1
        m = n // k      # m hosts of k GPUs: phases 1 and 3 move k - 1 shards of m sub-chunks per host ring
        return 2 * (k - 1) * k * m * m + 2 * (m - 1) * m * k
    gpn = max(1, int((topo.hardware.gpus_per_node if topo is not None else 0) or 8))
    if algorithm.startswith("nvls"):
        return n * (2 * gpn + 8)
    if algorithm.startswith("collnet"):
        return n * 8
    return 4 * n * max(1, gpn)   # anything new: generous


def recursive_hd_ops(collective: str | Collective, n: int) -> int:
    """Ops of one piece of ``recursive_hd`` (:mod:`sim.algorithms.classic`), grown as n^2: with p2 the
    largest power of two <= n and e = n - p2 folded ranks, all_reduce cuts the buffer into p2 chunks and
    every halving (and doubling) step i moves p2 / 2^(i+1) of them per rank, p2 (p2 - 1) in all, plus
    e p2 each way to fold; reduce_scatter and all_gather move the n shards, n (p2 - 1), plus e n (and e).

    >>> [recursive_hd_ops("all_reduce", n) for n in (8, 6)], recursive_hd_ops("all_gather", 16384)
    ([112, 40], 268419072)
    """
    coll = get_collective(collective)
    p2 = 1 << (max(2, n).bit_length() - 1)
    e = n - p2
    if coll.name == "all_reduce":
        return 2 * p2 * (p2 - 1) + 2 * e * p2
    return n * (p2 - 1) + e * n + (e if coll.name == "reduce_scatter" else 0)


def _domains(topo, n: int) -> tuple[int, int]:
    """(domains, GPUs per domain) of a regular cluster: hosts, or the NVLink domains the hardware names."""
    m = int(getattr(topo.hardware, "nodes", None) or getattr(topo, "nhosts", 1) or 1) if topo is not None else 1
    return (m, n // m) if m >= 1 and n % m == 0 else (1, n)


def one_piece(algorithm: str, collective: str | Collective, topo) -> tuple[int, int]:
    """(ops, steps) of one channel and one piece of ``algorithm`` on ``topo``, from closed forms (checked
    against the built programs by tests/scale/test_textbook_budget.py): the steps are what the engine's
    probe reads (:func:`sim.nccl.execution.steady_state_pieces` simulates at least steps + 2 pieces, up
    to ``PROBE_PIECES_MAX``); an algorithm without a closed form is priced at that most.

    >>> from sim.presets import load_topology
    >>> one_piece("nvls_tree", "all_reduce", load_topology("dgx-h100:nodes=2"))   # 16 GPUs, 2 domains of 8
    (608, 6)
    """
    coll = get_collective(collective)
    n = topo.nranks
    ops, steps = ops_per_piece(algorithm, coll, n, topo), None
    m, k = _domains(topo, n)
    depth = (m - 1).bit_length()          # ceil(log2 m): NCCL's double binary tree over the domains
    if algorithm == "ring":
        steps = n - 1 if coll.rooted or coll.pairwise else coll.ring_steps(n)
    elif algorithm == "direct":
        steps = 1
    elif algorithm == "p2p":              # a second step where blocks hop through a rail proxy (PXN)
        steps = 2 if ops > n * (n - 1) else 1
    elif algorithm in ("binomial", "pat"):
        steps = (n - 1).bit_length()
    elif algorithm == "recursive_hd":
        p2 = 1 << (n.bit_length() - 1)
        lg, fold = p2.bit_length() - 1, 2 * (n != p2)
        steps = (2 * lg if coll.name == "all_reduce" else lg) + fold
    elif algorithm == "hierarchical_ring":
        steps = 2 * (k - 1) + 2 * (m - 1)
    elif algorithm == "tree":             # a chain through each domain, the tree across: up (and down)
        steps = coll.passes * (k - 1 + depth)
    elif algorithm == "nvls_tree" and coll.name == "all_reduce" and m > 1:
        heads = min(NVLS_MAX_HEADS, k)    # into the switch and out, per head and tree; the trees' edges
        ops, steps = 4 * heads * (m * k + 2 * m - 1), 4 + 2 * depth
    elif algorithm == "nvls" and m == 1:
        heads = min(NVLS_MAX_HEADS, k) if coll.name == "all_reduce" else k
        passes = 2 if coll.name == "all_reduce" else 1
        ops, steps = passes * heads * (k + 1), 2 * passes
    return ops, PROBE_PIECES_MAX if steps is None else steps


def engine_estimate(algorithm: str, collective: str | Collective, topo, nchannels: int, pieces: int, nccl: bool,
                    ops_budget: int = OPS_BUDGET) -> Estimate:
    """Cost of one engine run: ``nccl`` runs cap the simulated pieces at ``ops_budget`` ops, but simulate
    at least steps + 2 of them (up to ``PROBE_PIECES_MAX``), as :func:`sim.nccl.execution.steady_state_pieces`
    does, and run a second, half-size program to extrapolate; rotation-symmetric rings simulate one op in n."""
    n = topo.nranks
    if nccl and pieces > 1:
        per, steps = one_piece(algorithm, collective, topo)
        one = per * max(1, nchannels)
        sim_pieces = min(pieces, max(2, min(steps + 2, PROBE_PIECES_MAX), ops_budget // max(1, one)))
        program_ops = one * sim_pieces
        simulated = program_ops + (one * (sim_pieces // 2) if sim_pieces < pieces else 0)
    else:
        one = ops_per_piece(algorithm, collective, n, topo) * max(1, nchannels)
        program_ops = simulated = one * max(1, pieces)
    if algorithm == "ring" and topo.hardware.symmetry == "rotation" and not get_collective(collective).pairwise:
        simulated = max(1, simulated // n)
    nbytes = BASE_BYTES + program_ops * PROGRAM_BYTES_PER_OP + simulated * SIMULATED_BYTES_PER_OP
    # one route per distinct (src, dst) pair: about 6 per rank for trees, fewer for rings; direct sends
    # between every pair (1,024 GPUs: a million routes, most of a 4.5-minute run)
    pairs = min(simulated, n * (n - 1) if algorithm == "direct" else 6 * n * (max(1, nchannels) if algorithm != "ring" else 1))
    route_s = ROUTE_S_FAT_TREE if topo.hardware.nodes_per_leaf and topo.nhosts > 1 else ROUTE_S_OTHER * _hub_factor(topo)
    # the routes themselves: the event loop holds each as a row of its longest route's length, hop by hop. A
    # fat tree's routes are a few hops; a ring topology's (ring:n=N) reach N/2, and a tree on ring:n=131072 once
    # asked for 224 GiB after 43 s of building, where this estimate now switches model or refuses up front
    hops = route_hops(topo) if algorithm != "ring" else 1
    nbytes += pairs * hops * ROUTE_BYTES_PER_HOP
    seconds = simulated / ENGINE_OPS_PER_S + program_ops / BUILD_OPS_PER_S + pairs * route_s
    return Estimate(program_ops, simulated, nbytes, seconds)


def route_hops(topo) -> int:
    """Links on the route from rank 0 to the rank halfway round: the length a route can reach on this
    topology (a few on switched and fat-tree machines, N/2 on a ring of N). The topology caches its routes,
    so asking again costs nothing (and no cache here holds topologies alive)."""
    n = topo.nranks
    return max(1, len(topo.route(0, n // 2))) if n > 1 else 1


def _hub_factor(topo) -> float:
    """How much longer a route search takes on a topology with a hub: a switch with thousands of links is
    scanned link by link by every search through it. sqrt(largest out-degree / 1,024), at least 1: measured
    on flat topology files of 16,384 / 32,768 / 131,072 GPUs around one switch (8.5 / 46 / 225 s for
    one 1 MiB all_reduce; estimated 3 / 7 / 25 s without it, 8 / 22 / 178 s with it)."""
    ends = getattr(topo, "link_ends", None)   # (a stand-in with only a size and a hardware has no links)
    if ends is None or len(ends[0]) == 0:
        return 1.0
    src = ends[0]
    return max(1.0, math.sqrt(float(np.bincount(src).max()) / 1024))


def full_program_estimate(algorithm: str, collective: str | Collective, topo) -> Estimate:
    """What timing ``algorithm`` costs at the least, whatever the model, where it is a textbook algorithm
    (not NCCL's for this collective): the engine, the step model (:mod:`sim.prediction.flow_steps`) and
    alpha-beta all build its one-piece program over every rank, and for ``recursive_hd``,
    ``hierarchical_ring`` and ``direct`` that program grows as n^2 (ring all_to_all as n^3)."""
    ops = ops_per_piece(algorithm, collective, topo.nranks, topo)
    return Estimate(ops, ops, BASE_BYTES + ops * FULL_PROGRAM_BYTES_PER_OP, ops / BUILD_OPS_PER_S)


def full_program_refusal(algorithm: str, collective: str | Collective, topo, max_memory: int | None = None) -> str | None:
    """None if :func:`full_program_estimate` fits ``max_memory`` (default half the available memory),
    else why not and what to do instead, in one line (``collsim simulate`` refuses the algorithm, or
    leaves it out of ``-a all``, with it, before anything is built)."""
    coll = get_collective(collective)
    est = full_program_estimate(algorithm, coll, topo)
    limit = default_max_memory() if max_memory is None else max_memory
    if est.bytes <= limit:
        return None
    n, fit = topo.nranks, 2
    while fit < n and BASE_BYTES + ops_per_piece(algorithm, coll, 2 * fit) * FULL_PROGRAM_BYTES_PER_OP <= limit:
        fit *= 2
    gpn = int(getattr(topo.hardware, "gpus_per_node", None) or 0)
    fewer = f"{fit:,} GPUs" + (f" (nodes={fit // gpn})" if gpn > 1 and fit >= gpn else "")
    return (f"{algorithm} {coll.name} over {n:,} GPUs is a program of {est.program_ops:,} ops, about {gb(est.bytes)} "
            f"to build and time, more than --max-memory {gb(limit)}: simulate fewer GPUs (at most about {fewer}) "
            f"or raise --max-memory")


def run_estimate(collective: str | Collective, nbytes: int, topo, algorithm: str, protocol: str,
                 nchannels: int | None = None, pipeline: int | None = None) -> Estimate:
    """:func:`engine_estimate` of the engine run that times one (algorithm, protocol) at ``nbytes``, with the
    channels and pieces NCCL's plan gives it (the same closed forms as the API's ``--model auto`` choice)."""
    coll = get_collective(collective)
    pipelined = coll.name in get_algorithm(algorithm).pipelined
    if protocol != IDEAL.name:
        _, nch = nccl_channels(topo, algorithm, nchannels)
        chunk = nccl_chunk_bytes(algorithm, protocol)
        if protocol == "LL" and algorithm != "ring":   # as sim.nccl.execution.plan_nccl: LL trees pipeline by lines
            chunk = min(chunk, LL_FORWARD_BYTES)
        pieces = pipeline or (max(1, math.ceil(nbytes / nch / chunk)) if pipelined else 1)
    else:
        nch = nchannels or 1
        pieces = pipeline or (16 if pipelined else 1)
    return engine_estimate(algorithm, coll.name, topo, nch, pieces, protocol != IDEAL.name)


def check_memory(what: str, need: int, limit: int | None, options: str) -> None:
    """Refuse (one clear error) if ``need`` bytes exceed ``limit`` (default: half the available memory)."""
    limit = default_max_memory() if limit is None else limit
    if need > limit:
        raise CollsimError(f"{what} needs about {gb(need)}, more than --max-memory {gb(limit)}: {options}")


__all__ = ["engine_estimate", "one_piece", "recursive_hd_ops", "full_program_estimate", "full_program_refusal",
           "run_estimate", "plan_tasks", "check_plan", "MAX_PLAN_TASKS", "estimate_program_bytes", "estimate_verify_bytes", "check_verify", "check_memory", "default_max_memory", "parse_memory",
           "Estimate", "ops_per_piece", "AUTO_ENGINE_SECONDS", "AUTO_FALLBACK_SECONDS"]
