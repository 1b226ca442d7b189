"""Which launcher started this process, and this rank's place in the job (no torch here).

``collsim bench`` runs as one rank of a job started by any of:

- **collsim itself** (``--nprocs N``): :mod:`real.measure.launch` sets torch's variables and ``COLLSIM_LOCAL_RUN=1``;
- **torchrun** (``torch.distributed.run``, one or more agents): ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
  ``MASTER_ADDR`` (``LOCAL_WORLD_SIZE``, ``MASTER_PORT``); torchrun's agent serves the rendezvous store;
- **MPI** (``mpirun``), as nccl-tests' MPI build: Open MPI's ``OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK``,
  MPICH/Intel MPI (hydra)'s ``PMI_RANK``/``PMI_SIZE`` with ``MPI_LOCALRANKID``/``MPI_LOCALNRANKS``,
  MVAPICH's ``MV2_COMM_WORLD_*``;
- **Slurm** (``srun``): ``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``, ``SLURM_NODEID``, inside a job
  step (``SLURM_STEP_NODELIST``; a batch script's own shell has ``SLURM_PROCID=0`` too, but no step, and
  ``collsim bench`` there starts its own ranks).

The closest launcher wins: torchrun's variables over MPI's over Slurm's (``srun torchrun ...`` and
``mpirun`` inside an allocation both leave Slurm's variables behind). Under MPI and Slurm, collsim's
rank 0 serves the rendezvous (:mod:`real.measure.rendezvous`) at ``MASTER_ADDR`` (Slurm: else the first host of
the step's node list), port ``MASTER_PORT`` (Slurm: else one derived from the job and step id, so two
jobs sharing a node do not collide; MPI: else 29500). When every rank runs on this host the default
address is 127.0.0.1, so nothing listens on the network.

Stale or partial variables (``RANK=5 WORLD_SIZE=2``, ``OMPI_COMM_WORLD_RANK`` without its size) are
refused with the variable names and the fix, rather than joining a job that does not exist.

>>> expand_hostlist("node[01-03,07],gpu7")
['node01', 'node02', 'node03', 'node07', 'gpu7']
>>> job = detect({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
...               "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
>>> job.launcher, job.rank, job.world, job.master_addr, job.master_port
('mpi', 1, 2, '127.0.0.1', 29500)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass

from sim.errors import CollsimError

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "LOCAL_RANK")
DEFAULT_PORT = 29500           # torch's and torchrun's default
SLURM_PORT_BASE, SLURM_PORT_SPAN = 20000, 40000   # derived ports lie in 20000..59999
MAX_HOSTS = 65536              # a node list longer than this is refused (bounded work on an env variable)
LOOPBACK = "127.0.0.1"

# (family, rank var, size var, local rank var, local size var)
MPI_FAMILIES = (
    ("Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("MVAPICH", "MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"),
    ("MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
)


@dataclass(frozen=True)
class Job:
    """This process's place in a job. ``serve_store``: collsim's rank 0 serves the rendezvous store
    (False under torchrun, whose agent serves it). ``local_world``/``nnodes``: None where unknown."""

    launcher: str            # "local", "torchrun", "mpi" or "slurm"
    rank: int
    world: int
    local_rank: int
    local_world: int | None
    master_addr: str
    master_port: int
    serve_store: bool
    nnodes: int | None = None
    detail: str = ""         # which variables were read, for messages and the JSON

    def torch_env(self) -> dict[str, str]:
        """The same facts as torch's variables (what torch, NCCL and :mod:`real.measure.backends` read)."""
        env = {"RANK": str(self.rank), "WORLD_SIZE": str(self.world), "LOCAL_RANK": str(self.local_rank),
               "MASTER_ADDR": self.master_addr, "MASTER_PORT": str(self.master_port)}
        if self.local_world is not None:
            env["LOCAL_WORLD_SIZE"] = str(self.local_world)
        return env


def expand_hostlist(text: str, limit: int = MAX_HOSTS) -> list[str]:
    """Slurm's compressed host list (``node[01-04,07],gpu7``, ``r[1-2]n[1-2]``) as host names, zero padding
    kept. Raises CollsimError on a malformed list or one over ``limit`` hosts."""
    hosts: list[str] = []
    for item in _split_top(text.strip()):
        hosts.extend(_expand_one(item, limit - len(hosts), text))
    if not hosts:
        raise CollsimError(f"Slurm node list {text!r} names no host: is SLURM_STEP_NODELIST set by srun?")
    return hosts


def _split_top(text: str) -> list[str]:
    """Split at commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if depth < 0 or depth > 1:
            raise CollsimError(f"Slurm node list {text!r} has unbalanced or nested brackets")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise CollsimError(f"Slurm node list {text!r} has an unclosed bracket")
    items.append(text[start:])
    return [s for s in (x.strip() for x in items) if s]


_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


def _expand_one(item: str, room: int, whole: str) -> list[str]:
    m = re.match(r"^([^\[\]]*)\[([^\[\]]*)\](.*)$", item)
    if not m:
        if "[" in item or "]" in item:
            raise CollsimError(f"Slurm node list {whole!r}: cannot read {item!r}")
        return [item]
    head, body, tail = m.groups()
    out: list[str] = []
    for part in body.split(","):
        r = _RANGE.match(part.strip())
        if not r:
            raise CollsimError(f"Slurm node list {whole!r}: {part!r} is not a number or a range like 01-04")
        lo, hi = r.group(1), r.group(2) or r.group(1)
        if int(hi) < int(lo):
            raise CollsimError(f"Slurm node list {whole!r}: range {part!r} runs backwards")
        if int(hi) - int(lo) + 1 > room - len(out):
            raise CollsimError(f"Slurm node list {whole!r} names more than {MAX_HOSTS} hosts")
        width = len(lo)
        for n in range(int(lo), int(hi) + 1):
            for rest in _expand_one(tail, room - len(out), whole) if "[" in tail else [tail]:
                out.append(f"{head}{n:0{width}d}{rest}")
                if len(out) > room:
                    raise CollsimError(f"Slurm node list {whole!r} names more than {MAX_HOSTS} hosts")
    return out


def _ints(environ, names: list[str], label: str, fix: str) -> list[int]:
    try:
        return [int(environ[k]) for k in names]
    except ValueError:
        shown = " ".join(f"{k}={environ[k]!r}" for k in names)
        raise CollsimError(f"{label} variables must be whole numbers ({shown}): {fix}") from None


def _check_place(label: str, rank: int, world: int, local: int, local_world: int | None, shown: str, fix: str) -> None:
    ok = world >= 1 and 0 <= rank < world and 0 <= local <= rank
    if local_world is not None:
        ok = ok and 1 <= local_world <= world and local < local_world
    if not ok:
        raise CollsimError(f"{label} variables {shown} do not describe a job (need 0 <= local rank <= rank < size): "
                           f"stale from another job? {fix}")


def _port(environ, default: int, fix: str) -> int:
    raw = environ.get("MASTER_PORT")
    if raw is None:
        return default
    try:
        port = int(raw)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise CollsimError(f"MASTER_PORT={raw!r} is not a TCP port (1..65535): {fix}")
    return port


def _torchrun(environ) -> Job | None:
    present = [k for k in (*TORCHRUN_VARS, "MASTER_PORT", "LOCAL_WORLD_SIZE") if k in environ]
    # MASTER_ADDR/MASTER_PORT alone are how mpirun -x and srun users name the rendezvous: not torchrun's
    if not [k for k in present if k not in ("MASTER_ADDR", "MASTER_PORT")]:
        return None
    local_run = environ.get("COLLSIM_LOCAL_RUN") == "1"
    fix = "unset " + " ".join(present) + " to start local ranks, or run under torchrun"
    missing = [k for k in TORCHRUN_VARS if k not in environ]
    if missing:
        raise CollsimError(f"torchrun variables {', '.join(present)} are set but {', '.join(missing)} not: stale from "
                           f"another job? {fix}")
    rank, world, local = _ints(environ, ["RANK", "WORLD_SIZE", "LOCAL_RANK"], "torchrun", fix)
    lw = _ints(environ, ["LOCAL_WORLD_SIZE"], "torchrun", fix)[0] if "LOCAL_WORLD_SIZE" in environ else None
    port = _port(environ, DEFAULT_PORT, fix)
    shown = f"RANK={rank} WORLD_SIZE={world} LOCAL_RANK={local}" + (f" LOCAL_WORLD_SIZE={lw}" if lw else "")
    _check_place("torchrun", rank, world, local, lw, shown, fix)
    nnodes = None
    if "GROUP_WORLD_SIZE" in environ and environ["GROUP_WORLD_SIZE"].isdigit():
        nnodes = int(environ["GROUP_WORLD_SIZE"])   # torchrun: number of agents (nodes)
    # torchrun's agent serves the store when it says so; else (an older torchrun, RANK... set by hand) rank 0
    # serves it as torch would, but bound to MASTER_ADDR only
    agent = environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    return Job("local" if local_run else "torchrun", rank, world, local, lw, environ["MASTER_ADDR"], port,
               serve_store=local_run or not agent, nnodes=nnodes, detail=shown)


def _mpi(environ) -> Job | None:
    for family, rk, sz, lr, ls in MPI_FAMILIES:
        present = [k for k in (rk, sz) if k in environ]
        if not present:
            continue
        fix = f"unset {' '.join(present)} (left from another MPI job?) or start collsim bench with mpirun"
        if len(present) < 2:
            missing = rk if rk not in environ else sz
            raise CollsimError(f"{family} variable {present[0]} is set but {missing} not: {fix}")
        rank, world = _ints(environ, [rk, sz], family, fix)
        local = _ints(environ, [lr], family, fix)[0] if lr in environ else (rank if world == 1 else None)
        lw = _ints(environ, [ls], family, fix)[0] if ls in environ else None
        if local is None:
            raise CollsimError(f"{family}: {rk} and {sz} are set but not {lr}, so the rank's GPU is unknown: {fix}")
        shown = f"{rk}={rank} {sz}={world} {lr}={local}" + (f" {ls}={lw}" if lw is not None else "")
        _check_place(family, rank, world, local, lw, shown, fix)
        one_host = lw == world
        addr = environ.get("MASTER_ADDR") or (LOOPBACK if one_host else None)
        if not addr:
            raise CollsimError(f"{family} job of {world} ranks across hosts: MPI does not tell a rank where rank 0 runs; "
                               "pass it, e.g. mpirun -x MASTER_ADDR=<rank 0's host> -x MASTER_PORT=29500 ...")
        return Job("mpi", rank, world, local, lw, addr, _port(environ, DEFAULT_PORT, fix), serve_store=True,
                   nnodes=1 if one_host else None, detail=f"{family}: {shown}")
    return None


def _slurm(environ) -> Job | None:
    if "SLURM_PROCID" not in environ or not ("SLURM_STEP_NODELIST" in environ or "SLURM_STEP_ID" in environ):
        return None   # not inside an srun step (a batch script's shell): collsim starts its own ranks
    fix = "run collsim bench under srun (one task per GPU), or unset the SLURM_* variables to start local ranks"
    need = ["SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_STEP_NODELIST"]
    missing = [k for k in need if k not in environ]
    if missing:
        raise CollsimError(f"Slurm step variables {', '.join(missing)} are not set (srun sets them all): {fix}")
    rank, world, local, node = _ints(environ, need[:4], "Slurm", fix)
    hosts = expand_hostlist(environ["SLURM_STEP_NODELIST"])
    if "SLURM_STEP_NUM_TASKS" in environ and environ["SLURM_STEP_NUM_TASKS"] != str(world):
        raise CollsimError(f"SLURM_NTASKS={world} but SLURM_STEP_NUM_TASKS={environ['SLURM_STEP_NUM_TASKS']}: stale "
                           f"variables from an outer step? {fix}")
    shown = f"SLURM_PROCID={rank} SLURM_NTASKS={world} SLURM_LOCALID={local} SLURM_NODEID={node}"
    _check_place("Slurm", rank, world, local, None, shown, fix)
    if not 0 <= node < len(hosts):
        raise CollsimError(f"SLURM_NODEID={node} is not a node of SLURM_STEP_NODELIST "
                           f"({len(hosts)} hosts): stale variables? {fix}")
    addr = environ.get("MASTER_ADDR") or (LOOPBACK if len(hosts) == 1 else hosts[0])
    try:
        job_id, step = int(environ.get("SLURM_JOB_ID", "0")), int(environ.get("SLURM_STEP_ID", "0"))
    except ValueError:
        job_id, step = 0, 0
    derived = SLURM_PORT_BASE + (job_id * 16 + step) % SLURM_PORT_SPAN   # same on every rank of the step
    return Job("slurm", rank, world, local, None, addr, _port(environ, derived, fix), serve_store=True,
               nnodes=len(hosts), detail=shown)


def detect(environ=None) -> Job | None:
    """This rank's :class:`Job`, or None when no launcher started this process (collsim starts its own
    ranks). Raises CollsimError for stale or partial variables (see the module docstring)."""
    environ = os.environ if environ is None else environ
    return _torchrun(environ) or _mpi(environ) or _slurm(environ)
