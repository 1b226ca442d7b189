"""Flight-recorder entries and dumps in PyTorch's format (``torch.distributed`` flight recorder 2.x).

Each rank keeps a list of entries, one per collective it enqueued; a dump is one dict per rank::

    {"version": "2.10", "comm_lib_version": ..., "pg_config": {pg_name: {"name", "desc", "ranks"}},
     "pg_status": {pg_name: {"last_enqueued_collective", "last_started_collective",
                             "last_completed_collective"}},
     "nccl_comm_state": {}, "entries": [entry, ...]}

with entries carrying ``record_id`` (per process), ``pg_id``, ``process_group`` ([name, desc]),
``collective_seq_id`` (per process group, from 1), ``profiling_name`` (``"nccl:all_reduce"``),
``input_sizes``/``output_sizes`` (tensor shapes), ``input_dtypes``/``output_dtypes`` (``"Float"``...),
``state`` (``scheduled`` -> ``started`` -> ``completed``), ``time_created_ns``,
``time_discovered_started_ns``, ``time_discovered_completed_ns``, ``duration_ms``, ``timeout_ms``,
``retired``. ``ranks`` in ``pg_config`` is a string (``"[0, 1, 2]"``) as PyTorch writes it. Times
here are simulated nanoseconds from the start of the run.

>>> e = new_entry(0, "0", "default_pg", 1, "all_reduce", 4096, "float32", 4, created_us=1.5, timeout_ms=1000)
>>> e["profiling_name"], e["input_sizes"], e["state"], e["time_created_ns"]
('nccl:all_reduce', [[1024]], 'scheduled', 1500)
"""
from __future__ import annotations

import json
import os
import re

from ..collectives import COLLECTIVES
from ..errors import CollsimError
from ..io.safe_io import write_output
from .loader import RefusedDump, dump_rank, read_raw, shown_items
from .rank_workload import DTYPES

VERSION = "2.10"  # the flight-recorder format version torch 2.13 writes
SIM_LIB = "collsim-sim"   # the comm_lib_version of the dumps collsim writes: how --dump knows its own


def shapes(op: str, count: int, group_size: int) -> tuple[list, list]:
    """(input_sizes, output_sizes) for ``count`` elements in nccl-tests' convention."""
    if op == "barrier":
        return [[1]], [[1]]  # ProcessGroupNCCL's barrier is an all_reduce of one element
    coll = COLLECTIVES.get(op)
    if coll is not None and coll.sharded:   # all_gather gathers shards; reduce_scatter (reduces) leaves one
        shard, whole = [[count // group_size]], [[count]]
        return (whole, shard) if coll.reduces else (shard, whole)
    return [[count]], [[count]]


def ns(t_us: float | None) -> int | None:
    return None if t_us is None else int(round(t_us * 1e3))


def new_entry(record_id: int, pg_name: str, pg_desc: str, seq: int, op: str, nbytes: int, dtype: str,
              group_size: int, created_us: float, timeout_ms: float) -> dict:
    """A freshly enqueued (``scheduled``) entry."""
    fr_dtype, esize = DTYPES[dtype]
    ins, outs = shapes(op, nbytes // esize, group_size)
    return {
        "record_id": record_id, "pg_id": int(pg_name), "process_group": [pg_name, pg_desc],
        "collective_seq_id": seq, "p2p_seq_id": 0, "op_id": seq, "is_p2p": False,
        "profiling_name": "nccl:" + ("all_reduce_barrier" if op == "barrier" else op),
        "input_sizes": ins, "input_dtypes": [fr_dtype] * len(ins),
        "output_sizes": outs, "output_dtypes": [fr_dtype] * len(outs),
        "state": "scheduled", "retired": False, "timeout_ms": int(timeout_ms), "duration_ms": None,
        "time_created_ns": ns(created_us), "time_discovered_started_ns": None,
        "time_discovered_completed_ns": None, "thread_id": "0", "thread_name": "pt_main_thread",
        "frames": [],
    }


def dump(entries: list[dict], groups: dict, rank: int, config: dict | None = None) -> dict:
    """A rank's dump: ``groups`` maps pg name -> ProcessGroup; only groups holding ``rank`` appear.
    ``config``: this rank's ``pg_config``, made by the caller (``RunResult.dumps`` shares one member list per
    group between all its members' dumps, instead of writing and scanning it once per rank)."""
    if config is None:
        config = {name: {"name": name, "desc": g.desc, "ranks": json.dumps(list(g.ranks))}
                  for name, g in groups.items() if rank in g.ranks}
    status = {}
    for name in config:
        seqs = [(e["collective_seq_id"], e["state"]) for e in entries if e["process_group"][0] == name]
        status[name] = {
            "last_enqueued_collective": max((s for s, _ in seqs), default=-1),
            "last_started_collective": max((s for s, st in seqs if st in ("started", "completed")), default=-1),
            "last_completed_collective": max((s for s, st in seqs if st == "completed"), default=-1),
        }
    return {
        "version": VERSION, "comm_lib_version": SIM_LIB,
        "pg_config": {name: dict(cfg) for name, cfg in config.items()},
        "pg_status": status, "nccl_comm_state": {}, "entries": [dict(e) for e in entries],
    }


def _ours(path: str) -> bool:
    """Whether ``path`` is a dump collsim's simulator wrote (``rank_N.json`` saying ``comm_lib_version: collsim-sim``)."""
    if not re.fullmatch(r"rank_\d+\.json", os.path.basename(path)):
        return False
    try:
        return read_raw(path).get("comm_lib_version") == SIM_LIB
    except RefusedDump:
        return False


def check_dump_dir(directory: str, keep_simulated: bool = True, flag: str = "--dump", writes=None,
                   world: int | None = None) -> None:
    """Refuse ``directory`` for new dumps when it holds dumps collsim did not simulate: the analyzer reads
    every file named like a rank's dump as one job's, so a real incident's ``_dump_3`` beside a simulated
    ``rank_3.json`` makes the folder unreadable, and a user's own ``rank_0.json`` would be replaced. An earlier
    simulation's ``rank_N.json`` may be replaced by the new run's of the same rank; nothing else is touched. ``keep_simulated=False`` (``flight demo``, whose gloo
    job writes ``rank_N`` pickles that would sit beside a simulation's ``rank_N.json``) refuses every dump.
    ``writes``: the ranks the new run writes, of ``world``; an earlier simulation's dump of a rank of this job
    that it does not write (one that crashes) is refused too: it would be read as this job's, the crash unseen.
    Nothing is deleted: which files to drop is the user's call (ranks past ``world`` are :func:`stale_dumps`).
    Called before any work, so a refused folder costs nothing and loses nothing."""
    if not os.path.exists(directory):
        return
    if not os.path.isdir(directory):
        raise CollsimError(f"{flag} {directory}: it is a file, not a folder: give a folder for the dumps")
    # the files load_dir would read as dumps (a FIFO or /dev/zero link is neither read there nor here)
    try:
        names = os.listdir(directory)
    except OSError as e:
        raise CollsimError(f"{flag} {directory}: cannot list it ({e.strerror}): give a readable folder") from None
    present = sorted(n for n in names if not n.startswith(".") and dump_rank(n) is not None
                     and os.path.isfile(os.path.join(directory, n)))
    foreign = [n for n in present if not (keep_simulated and _ours(os.path.join(directory, n)))]
    if foreign:
        names_text = shown_items(foreign, 4)
        what = "flight-recorder dumps collsim did not simulate" if keep_simulated else "flight-recorder dumps"
        raise CollsimError(f"{flag} {directory} holds {what} ({names_text}): the new dumps would replace them or "
                           "mix with them (flight analyze reads a folder as one job's dumps); give a new or empty folder")
    if writes is not None:
        ranks = set(writes)
        world = max(ranks, default=-1) + 1 if world is None else world
        stale = [n for n in present if dump_rank(n) not in ranks and dump_rank(n) < world]
        if stale:
            raise CollsimError(f"{flag} {directory} holds an earlier simulation's dumps of ranks that write none in this "
                               f"run (they crash): {shown_items(stale, 4)}; flight analyze would read them as this "
                               "job's; delete them or give a new or empty folder")


def stale_dumps(directory: str, written) -> list[str]:
    """The dumps in ``directory`` named like a rank's that ``written`` (ranks) does not include: an earlier,
    larger simulation's, left as they are (:func:`write_dumps` refused the ones of this job's ranks)."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    ranks = set(written)
    return sorted((n for n in names if not n.startswith(".") and dump_rank(n) is not None and dump_rank(n) not in ranks
                   and os.path.isfile(os.path.join(directory, n))), key=lambda n: (dump_rank(n), n))


def write_dumps(directory: str, dumps: dict[int, dict], world: int | None = None) -> list[str]:
    """Write ``rank_<r>.json`` for each rank's dump (of ``world`` ranks); returns the paths written. A folder
    holding dumps other than collsim's simulated ones, or a simulated one of a rank of this job that writes
    none, is refused (:func:`check_dump_dir`)."""
    check_dump_dir(directory, writes=dumps, world=world)
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise CollsimError(f"cannot create dump directory {directory!r} ({e.strerror}): pick a writable path") from None
    paths = []
    for rank, d in sorted(dumps.items()):
        path = os.path.join(directory, f"rank_{rank}.json")
        write_output(path, json.dumps(d, indent=1), "--dump")  # atomic; never over an input, never via a link
        paths.append(path)
    return paths
