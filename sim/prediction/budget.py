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

from ..collectives import Collective, get_collective
from ..errors import CollsimError

PROGRAM_BYTES_PER_OP = 40        # src, dst (int32), chunk, step (int64 / int32), channel, reduce + slack
SIMULATED_BYTES_PER_OP = 130     # dependencies (sorts, CSR successors), routes, start/end times, stamps
BASE_BYTES = 120 << 20           # interpreter, numpy, simpy, the topology
ENGINE_OPS_PER_S = 120_000       # simulated ops per second on a busy 2-core machine (hardware presets)
BUILD_OPS_PER_S = 8_000_000      # program ops built per second
ROUTE_S_FAT_TREE = 3e-4          # one route on a preset's fat tree (Dijkstra over two hosts and the fabric)
ROUTE_S_OTHER = 2e-5             # one route on a textbook topology (neighbours, found at once)
AUTO_ENGINE_SECONDS = 1.0        # --model auto runs the engine when its estimate is below this
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
    return f"{nbytes / 1e9:.1f} GB" if nbytes >= 1e8 else f"{nbytes / 1e6:.0f} MB"


def ops_per_piece(algorithm: str, collective: str | Collective, n: int, topo=None) -> int:
    """Ops of one channel and one piece of ``algorithm`` over ``n`` ranks (closed forms; exact for the
    ring and direct algorithms, within a small factor for the hierarchical ones)."""
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
    if algorithm in ("recursive_hd",):
        return 2 * n * max(1, math.ceil(math.log2(max(n, 2))))
    if algorithm == "binomial":
        return n - 1
    gpn = max(1, int((topo.hardware.gpus_per_node if topo is not None else 0) or 8))
    if algorithm.startswith("nvls"):
        return n * (2 * gpn + 8)
    if algorithm.startswith("collnet"):
        return n * 8
    return 4 * n * max(1, gpn)   # hierarchical_ring and anything new: generous


def engine_estimate(algorithm: str, collective: str | Collective, topo, nchannels: int, pieces: int, nccl: bool,
                    ops_budget: int = 60_000) -> Estimate:
    """Cost of one engine run: ``nccl`` runs cap the simulated pieces at ``ops_budget`` ops (and run a
    second, half-size program to extrapolate); rotation-symmetric rings simulate one op in n."""
    n = topo.nranks
    one = ops_per_piece(algorithm, collective, n, topo) * max(1, nchannels)
    if nccl and pieces > 1:
        sim_pieces = min(pieces, max(2, ops_budget // max(1, one)))
        program_ops = one * sim_pieces
        simulated = program_ops + (one * (sim_pieces // 2) if sim_pieces < pieces else 0)
    else:
        program_ops = simulated = one * max(1, pieces)
    if algorithm == "ring" and topo.hardware.symmetry == "rotation" and not get_collective(collective).pairwise:
        simulated = max(1, simulated // n)
    nbytes = BASE_BYTES + program_ops * PROGRAM_BYTES_PER_OP + simulated * SIMULATED_BYTES_PER_OP
    # one route per distinct (src, dst) pair: about 6 per rank for trees, fewer for rings; direct sends
    # between every pair (1,024 GPUs: a million routes, most of a 4.5-minute run)
    pairs = min(simulated, n * (n - 1) if algorithm == "direct" else 6 * n * (max(1, nchannels) if algorithm != "ring" else 1))
    route_s = ROUTE_S_FAT_TREE if topo.hardware.nodes_per_leaf and topo.nhosts > 1 else ROUTE_S_OTHER
    seconds = simulated / ENGINE_OPS_PER_S + program_ops / BUILD_OPS_PER_S + pairs * route_s
    return Estimate(program_ops, simulated, nbytes, seconds)


def check_memory(what: str, need: int, limit: int | None, options: str) -> None:
    """Refuse (one clear error) if ``need`` bytes exceed ``limit`` (default: half the available memory)."""
    limit = default_max_memory() if limit is None else limit
    if need > limit:
        raise CollsimError(f"{what} needs about {gb(need)}, more than --max-memory {gb(limit)}: {options}")


__all__ = ["engine_estimate", "plan_tasks", "check_plan", "MAX_PLAN_TASKS", "estimate_program_bytes", "estimate_verify_bytes", "check_verify", "check_memory", "default_max_memory", "parse_memory",
           "Estimate", "ops_per_piece", "AUTO_ENGINE_SECONDS"]
