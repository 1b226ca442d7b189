"""Cross-validation of the model's fitted constants (``collsim validate --cross-validate [--by case|system]``).

For every case k of the set (``--by case``), or every system with all its cases (``--by system``), every
fitted constant of :mod:`sim.nccl.calibration` is refitted on the other cases only, and the cases left
out are predicted with those values: their errors are out of sample. The fit is the
acceptance rule itself: each constant minimises the pooled median relative error over the training rows
it affects, by a small grid search:

* ``efficiency.<fabric>``: busbw rows (sizes >= 64 MiB) of the multi-node cases of that fabric; each
  grid value is one engine run per row, and busbw is interpolated linearly between grid values;
* ``p2p_share.<fabric>``: busbw rows of the multi-node all_to_all cases of that fabric (NCCL's grouped
  point-to-point sends) whose every GPU has GPUDirect RDMA to a NIC, with the fabric's efficiency at its
  value fitted on the other collectives; these rows fit nothing else;
* ``no_gdr_p2p_share``: busbw rows of the multi-node all_to_all cases on nodes with GPUs that reach no NIC
  within the host bridge (``gpus_without_gdr``), with the fabric's efficiency, path and p2p share as just
  fitted: the staging through host memory is theirs alone, so a fold without them keeps the prior (1.0)
  and a fold with only them keeps ``p2p_share.<fabric>`` at its prior;
* ``host_bounce_efficiency`` / ``host_bounce_duplex_efficiency``: busbw rows of the cases without
  peer-to-peer (``p2p=0``), one-way (2-GPU broadcast/reduce) and the others;
* ``gdr_host_bridge_efficiency``: busbw rows of the multi-node cases whose GPUDirect RDMA crosses the CPU's
  root complex (A100 nodes with the NIC on a CPU root port), with each fabric's efficiency at its value
  fitted on the cases without that path, so a fabric's efficiency is the NIC's and this the path's;
* ``nvls_tree_share``: busbw rows of the multi-node all_reduce cases on NVLS nodes of at most 8 GPUs whose
  busbw moves with it (NVLSTree bound by NVLink: the 2-node H100 runs), with each fabric's efficiency at
  its value just fitted;
* ``nvls_loss_per_doubling``: busbw rows of the all_reduce cases on NVLS domains of more than 8 GPUs
  (GB200 NVL72 racks); these fit nothing else (across racks their NICs carry a 32nd of the data, so the
  fabric's efficiency hardly moves them);
* ``latency.<fabric>``: time rows (sizes <= 64 KiB) of the multi-node cases of that fabric other than
  all_to_all (whose small sizes are its per-peer cost's), without copies where it has runs without
  (one run per grid value and row);
* ``net_overhead.<fabric>``: what every step of a ring across nodes costs at least (NCCL's
  ``getNetOverhead`` generalised per fabric): small- and mid-size time rows of the fabric's multi-node
  cases other than all_to_all, alternating with ``latency.<fabric>``; fitted first per net plugin (the
  fabrics aws-ofi-nccl drives share one value), then per fabric around it (:func:`_fit_per_plugin`);
* ``rendezvous_us.<fabric>`` (fabrics whose transport has a rendezvous threshold: Slingshot): small- and
  mid-size time rows of the fabric's multi-node cases other than those with hybrid tag matching (which
  pay none); prior 0 (no public figure);
* ``recv_copy_us.<fabric>`` (fabrics whose provider can match tags in software: Slingshot): small- and
  mid-size time rows of the fabric's multi-node cases that ran with software matching (the only rows it
  moves); prior 0 (no public figure for a small cudaMemcpy through a provider's progress);
* ``tree_chunk_lag_us`` (a deep tree's lag per level and chunk, :func:`sim.nccl.execution.tree_chunk_lag_us`):
  the mid- and large-size time rows NCCL runs as tree/Simple in the multi-node all_reduce cases, last,
  with each case's bandwidth constants as just fitted and every other constant at its prior (so one run
  per row and bandwidth value serves every fold: a row's time is linear in the lag). Those rows also fit
  the bandwidth and rendezvous constants, each with the lag at its prior 0, so the two groups can absorb
  the same residual; what the folds measure is the sum;
* ``launch_overhead_us`` (time rows of the one-node cases: the host's cost, with no network latency to
  confound it), ``per_gpu_launch_us`` (cases run with ``-g N``, N > 1) and ``p2p_peer.<fabric>`` (small-
  and mid-size rows of the fabric's multi-node all_to_all, those without software tag matching where it
  has any: the copy is what the others add, :func:`_without_copies`): these add the same time to every (algorithm,
  protocol) NCCL could pick, so the time of a row is linear in them and needs no new run.

Cases run with an NCCL release whose rules collsim does not model whole (2.8 and 2.9: their latency tables,
2.18's other rules) are scored but fit nothing (:func:`modelled_release`). While one group is fitted the other group stays at its *prior* (:data:`PRIORS`: public figures, never
fitted on a case), so no constant fitted with case k inside reaches its own fold. A constant with no
training row left (the only case of its fabric is the one scored) takes its prior; a bandwidth constant is
fitted only on sweeps past their ramp (:func:`on_plateau`: reaching :data:`PLATEAU_BYTES`, or flat over their last two doublings; Olivia's, which stops at 128 MiB still rising, is not). Runs are memoised
per (case, size, grid value), so the folds share them: the cost is about one run per row and grid value.

The runs a search is about to ask for are made first, row by row (:func:`_prefetch`), with ``jobs`` > 1
on that many forked worker processes, and the search itself reads them from the memo: the fit, and so
every figure, is the serial one; only the wall time changes.
"""
from __future__ import annotations

import multiprocessing
import statistics
from collections.abc import Iterable

import numpy as np

from .. import api
from ..collectives import get_collective
from ..nccl import calibration, versions
from ..nccl import config as nccl_config
from ..nccl.execution import is_duplex
from ..nccl.machine import machine, with_gpus_per_process
from ..presets import load_topology
from ..topology.fabrics import PLUGINS
from ..topology.hardware import gdr_host_bridge_loss

BW_MIN_BYTES = 64 << 20
# A case fits a bandwidth constant only if its sweep reaches this size; a sweep that stops short of it is
# scored but fits none. An efficiency is a plateau's share of line rate, and a sweep that ends at 128 MiB
# is still on the ramp up to it: Sigma2 Olivia's busbw rose 15% between 64 and 128 MiB, CSCS Alps's
# 2-node all_reduces 14%. Fitted on Olivia's two rows alone (the fold that leaves Alps out), Slingshot's
# efficiency fell to 0.7, and every Alps all_reduce came out 20-27% too slow. Every other sweep of the
# set reaches 1 GiB (rows at 8-16 GiB, such as GB300-128-AR's two, are past any ramp however few they are).
# A shorter sweep whose busbw has stopped rising is on its plateau too (:func:`on_plateau`): the PCIe servers'
# sweeps of 2026 stop at 128 MiB, flat from 16 MiB (8 RTX 4090 through host memory: 14.9, 15.0, 14.9, 14.5).
PLATEAU_BYTES = 256 << 20
PLATEAU_RISE = 0.03   # at most this rise of busbw over a sweep's last two doublings: flat
LAT_MAX_BYTES = 64 << 10
EFFICIENCY_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)   # busbw is interpolated linearly in between
P2P_SHARE_GRID = (0.2, 0.4, 0.6, 0.8, 1.0)
BOUNCE_GRID = (0.4, 0.5, 0.6, 2 / 3, 0.7, 0.8, 0.9, 1.0)
NVLS_LOSS_GRID = (0.0, 0.025, 0.05, 0.075, 0.1, 0.15)
FABRIC_LATENCY_GRID = (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 80.0)
NET_OVERHEAD_GRID = (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0, 20.0)
RENDEZVOUS_GRID = (0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0, 15.0, 20.0, 25.0, 30.0, 40.0)
RECV_COPY_GRID = (0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 12.0, 15.0, 20.0)
P2P_PEER_GRID = np.arange(0.0, 30.01, 0.25)
TREE_LAG = "tree_chunk_lag_us"
NO_GDR = "no_gdr_p2p_share"
TREE_LAG_GRID = np.round(np.arange(0.0, 3.001, 0.02), 2)   # linear: the grid costs no runs
LINEAR_GRID = {"launch_overhead_us": np.arange(0.0, 15.01, 0.25), "per_gpu_launch_us": np.arange(0.0, 10.01, 0.25)}
PRIORS = {"launch_overhead_us": 5.0, "per_gpu_launch_us": 2.5,
          # NCCL's own model of GPUs without peer-to-peer: the host-memory path at the PCIe rate (its topology
          # search charges that path no bounce penalty), until a case says otherwise
          "host_bounce_efficiency": 1.0, "host_bounce_duplex_efficiency": 1.0,
          "nvls_loss_per_doubling": 0.0,   # NCCL's own model: nvlsEfficiency whatever the domain size
          "gdr_host_bridge_efficiency": 1.0,   # NCCL's own model: no penalty for the path
          "no_gdr_p2p_share": 1.0,   # NCCL's own model: a GPU without GPUDirect sends at the network's rate
          "nvls_tree_share": 1.0,   # NCCL's own model: NVLSTree's NVLink at NVLS's rate
          # not fitted: a published measurement (nccl #1940), the same in every fold
          "blackwell_nvlink_hop_us": calibration.DEFAULTS["blackwell_nvlink_hop_us"],
          TREE_LAG: 0.0,   # NCCL's own model: a tree's chunks cost their bytes, whatever its depth
          **{f"efficiency.{f.name}": f.efficiency for f in calibration.FABRICS.values()},
          **{f"latency.{f.name}": f.latency_us for f in calibration.FABRICS.values()},
          **{f"p2p_share.{f.name}": f.p2p_share for f in calibration.FABRICS.values()},
          # 0: NCCL's own getNetOverhead (1-2 us, tuned on InfiniBand) for every fabric
          **{f"net_overhead.{f.name}": 0.0 for f in calibration.FABRICS.values()},
          # the proxy posting and completing one send/recv pair: a few us on any fabric (NCCL's own
          # netOverhead, 1-2 us per operation, twice per pair, plus the progress loop)
          **{f"p2p_peer.{f.name}": 5.0 for f in calibration.FABRICS.values()},
          # no public figure for what a rendezvous costs through a provider's progress: none until cases say
          **{f"rendezvous_us.{f.name}": 0.0 for f in calibration.FABRICS.values() if f.rdzv_threshold_bytes},
          # nor for a small cudaMemcpy issued from a provider's progress (NCCL's own model has no copy)
          **{f"recv_copy_us.{f.name}": 0.0 for f in calibration.FABRICS.values() if f.software_matching}}


class Case:
    """One case's rows, what it depends on, and memoised predictions."""

    def __init__(self, case: dict, algorithm=None, protocol=None):
        self.id, self.raw = case["id"], case
        self.system = case.get("system") or case["id"]    # a case without a system is its own system
        self.nccl = nccl_config.case_config(case)
        self.topo = with_gpus_per_process(load_topology(case["topology"]), case.get("gpus_per_process"))
        self.coll = get_collective(case.get("collective", "all_reduce"))
        self.algo = algorithm or case.get("algorithm") or "auto"
        self.proto = protocol or case.get("protocol") or "auto"
        m = machine(self.topo)
        self.fabric = m.fabric if m.nnodes > 1 else None
        self.gpus = m.gpus_per_process
        self.nranks = m.nranks
        self.remote_peers = (m.nranks - m.ppn) if (m.nnodes > 1 and self.coll.pairwise) else 0
        self.p2p_off = self.topo.hardware.p2p is False
        self.duplex = is_duplex(self.coll, self.topo)
        self.host_bridge = bool(self.fabric) and gdr_host_bridge_loss(self.topo.hardware)
        # all_to_all from GPUs without GPUDirect RDMA (their nearest NIC beyond the host bridge): staged sends
        self.no_gdr = bool(self.remote_peers) and bool(self.topo.hardware.gpus_without_gdr)
        # the run matched tags in software on a provider that copies small messages then (Slingshot's cxi)
        self.software_matching = (bool(self.fabric) and self.nccl.rx_match == "software"
                                  and calibration.get_fabric(self.fabric).software_matching)
        # its network messages above the transport's threshold pay a rendezvous (none with hybrid matching)
        self.pays_rendezvous = bool(self.fabric) and self.nccl.pays_rendezvous
        nvls = bool(self.topo.reducing_switches("nvls"))
        self.large_nvls = nvls and m.ppn > 8 and self.coll.passes == 2   # NVLS all_reduce
        # may run NVLSTree (NVLS in each node, a tree across them): only all_reduce has one
        self.nvls_tree = nvls and m.nnodes > 1 and self.coll.name == "all_reduce"
        rows = [r for r in case["rows"] if r["size"] > 0 and r["time_us"] > 0]
        self.bw_rows = [r for r in rows if r["size"] >= BW_MIN_BYTES and r.get("busbw", 0) > 0]
        self.lat_rows = [r for r in rows if r["size"] <= LAT_MAX_BYTES]
        self.mid_rows = [r for r in rows if LAT_MAX_BYTES < r["size"] < BW_MIN_BYTES]
        self.past_ramp = on_plateau(rows, self.bw_rows)   # may fit bandwidth constants
        # which constants of PRIORS this case's runs can read (:meth:`reads`): the others are keyed at their
        # priors, so a fold that moves another fabric's efficiency finds this case's runs made already
        self._reads = tuple(name in self.reads() for name in _ORDER)
        self._memo: dict[tuple, dict[int, tuple]] = {}   # values key (:meth:`key`) -> size -> run

    def reads(self) -> set[str]:
        """The fitted constants this case's runs can depend on (a superset: where in doubt, it reads it).
        Another fabric's constants never reach it, nor those of paths it does not have: the host bounce
        without ``p2p=0`` (:func:`sim.nccl.execution.link_efficiency`), GPUDirect through the host bridge,
        the staged all_to_all of GPUs without GPUDirect, NVLSTree's share without NVLSTree (all_reduce on
        NVLS nodes across nodes), a large NVLS domain's loss on NVLS domains of 8 GPUs or fewer (0
        doublings). ``tests/model/test_crossval_caches.py`` moves every other constant and finds the runs
        unchanged."""
        names = {"launch_overhead_us", "per_gpu_launch_us", "blackwell_nvlink_hop_us", TREE_LAG}
        if self.fabric:
            names |= {name for name in PRIORS if name.partition(".")[2] == self.fabric}
        names |= {"host_bounce_efficiency", "host_bounce_duplex_efficiency"} if self.p2p_off else set()
        names |= {"gdr_host_bridge_efficiency"} if self.host_bridge else set()
        names |= {NO_GDR} if self.no_gdr else set()
        names |= {"nvls_tree_share"} if self.nvls_tree else set()
        nvls = bool(self.topo.reducing_switches("nvls"))
        names |= {"nvls_loss_per_doubling"} if nvls and (self.topo.hardware.gpus_per_node or 1) > 8 else set()
        return names

    def key(self, values: dict) -> tuple:
        """``values`` as this case's memo key (:func:`_values_key`), with every constant it does not
        read (:meth:`reads`) at its prior: the runs it keys differ only in what they read."""
        key = _values_key(values)
        if key[:1] == ("items",):
            return key
        return tuple(v if read else p for v, read, p in zip(key, self._reads, _PRIOR_VALUES))

    def run(self, size: int, values: dict):
        return self.runs([size], values)[0]

    def runs(self, sizes, values: dict) -> list[tuple[float, float]]:
        """(time us, busbw GB/s) at each of ``sizes`` with the constants ``values``, memoised."""
        return [hit[:2] for hit in self._runs(sizes, values)]

    def tree_lag_units(self, sizes, values: dict) -> list[float]:
        """What ``tree_chunk_lag_us`` multiplies at each of ``sizes`` (0 where NCCL runs no tree/Simple
        across nodes): a row's time is its time at lag 0 plus the constant times this, less what NCCL's
        kernel cap hides (:meth:`lag_slack`)."""
        return [hit[2] for hit in self._runs(sizes, values)]

    def lag_slack(self, sizes, values: dict) -> list[float]:
        """The lag each of ``sizes`` hides under NCCL's kernel cap at most (:func:`sim.nccl.execution.kernel_capped`):
        a row's time at lag ``v`` is ``t0 + max(0, v x units - slack)``."""
        return [hit[3] for hit in self._runs(sizes, values)]

    def _runs(self, sizes, values: dict) -> list[tuple[float, float, float, float]]:
        memo = self._memo.setdefault(self.key(values), {})   # keyed once for every size: the searches ask for millions
        out = []
        for size in sizes:
            hit = memo.get(size)
            if hit is None:
                with calibration.override(values), nccl_config.use(self.nccl):
                    q = api.simulate(self.coll, size, self.topo, self.algo, self.proto)
                ex = q.explain or {}
                hit = memo[size] = (q.time_us, q.busbw_GBps, float(ex.get("tree_lag_units", 0.0)),
                                    float(ex.get("tree_lag_slack_us", 0.0)))
            out.append(hit)
        return out

    def rate_keys(self) -> list[str]:
        """Every bandwidth constant this case's runs read (:meth:`bw_keys` is the one its rows fit): its
        fabric's efficiency, and the share of it its path or its many-peer sends keep, or the NVLS loss."""
        keys = [f"efficiency.{self.fabric}"] if self.fabric else []
        keys += [f"p2p_share.{self.fabric}"] * bool(self.fabric and self.remote_peers) + [NO_GDR] * self.no_gdr
        keys += ["gdr_host_bridge_efficiency"] * self.host_bridge + ["nvls_tree_share"] * self.nvls_tree
        return keys + ["nvls_loss_per_doubling"] * self.large_nvls

    def bw_keys(self) -> list[str]:
        """The bandwidth constants this case's busbw rows are fitted for."""
        if self.large_nvls:   # bound by the rack's NVLink (its NICs carry a 32nd of the data): NVLS alone
            return ["nvls_loss_per_doubling"]
        keys = []
        if self.fabric and self.remote_peers:   # many-peer p2p: its own share of the fabric's efficiency
            keys.append(NO_GDR if self.no_gdr else f"p2p_share.{self.fabric}")   # or of that, staged
        elif self.host_bridge:   # the path's share of the fabric's efficiency (fitted on the other cases)
            keys.append("gdr_host_bridge_efficiency")
        elif self.fabric:
            keys.append(f"efficiency.{self.fabric}")
            # NVLSTree's share of NVLS's NVLink rate: fitted on the runs NVLink bounds (_sensitive picks them)
            keys += ["nvls_tree_share"] * self.nvls_tree
        elif self.p2p_off:
            keys.append("host_bounce_duplex_efficiency" if self.duplex else "host_bounce_efficiency")
        return keys


def on_plateau(rows: list[dict], bw_rows: list[dict]) -> bool:
    """Whether a sweep's busbw rows are past its ramp: it reaches :data:`PLATEAU_BYTES`, or its busbw rose at
    most :data:`PLATEAU_RISE` from a quarter of its largest size to that size (Olivia's rose 45%, CSCS Alps's
    2-node all_reduces 43%; a sweep that falls at its end, as host memory's does, is flat)."""
    if not bw_rows:
        return False
    last = max(bw_rows, key=lambda r: r["size"])
    if last["size"] >= PLATEAU_BYTES:
        return True
    before = [r for r in rows if r["size"] == last["size"] // 4 and r.get("busbw", 0) > 0]
    return bool(before) and last["busbw"] <= (1 + PLATEAU_RISE) * before[0]["busbw"]


def _values_key(values: dict) -> tuple:
    """``values`` as a hashable key. Every set of values the fits make holds exactly the constants of
    :data:`PRIORS`: those are keyed by their values in that order (looked up, not sorted: the searches make
    millions of keys); any other mapping by its sorted items. :func:`_key_values` inverts it."""
    if len(values) == len(_ORDER):
        try:
            return tuple(map(values.__getitem__, _ORDER))
        except KeyError:
            pass
    return ("items", *sorted(values.items()))


def _key_values(key: tuple) -> dict:
    """The values :func:`_values_key` made ``key`` of."""
    return dict(key[1:]) if key[:1] == ("items",) else dict(zip(_ORDER, key))


# The worker pool of a parallel cross-validation: forked after the cases are prepared, so each worker holds
# the same Case objects (found by their index in _CASES) and runs what the parent asks, memoising it too.
_CASES: list[Case] = []
_POOL = None
_SCORE: tuple = ()   # (validate's scorer, its keyword arguments): how a worker scores a case left out


def _score_one(task: tuple) -> tuple:
    """In a worker (or in this process): case ``index`` scored with the constants of the fold that left it out."""
    index, fitted = task
    score_case, kwargs = _SCORE
    with calibration.override(fitted):
        return index, score_case(_CASES[index].raw, **kwargs)


def _run_values(task: tuple) -> tuple:
    """In a worker: the runs of one case at one size with several sets of values, one after the other (they
    differ in time constants mostly, so the engine's caches answer all but the first)."""
    index, size, keys = task
    return index, size, [(key, _CASES[index]._runs([size], _key_values(key))[0]) for key in keys]


def _prefetch(needs: Iterable[tuple[Case, list[dict], dict]]) -> None:
    """Make the runs ``needs`` asks for ((case, rows, values) each) that are not memoised yet, row by row
    (a row's runs at every value one after the other, so the engine's caches answer all but the first:
    the values differ in time constants mostly), on the worker pool if there is one, and memoise them."""
    batches: dict[tuple, dict] = {}   # (case, size) -> the values it is missing (a dict: ordered, unique)
    for case, rows, values in needs:
        key = case.key(values)
        memo = case._memo.get(key, {})
        for r in rows:
            if r["size"] not in memo:
                batches.setdefault((case, r["size"]), {})[key] = None
    if _POOL is None:
        for (case, size), keys in batches.items():
            for key in keys:
                case._runs([size], _key_values(key))
        return
    # the longest first (a row's runs cost about their number times the ranks simulated), so two workers
    # do not end a batch with one of them running a large cluster's row alone
    tasks = sorted(((_CASES.index(case), size, list(keys)) for (case, size), keys in batches.items()),
                   key=lambda t: -len(t[2]) * _CASES[t[0]].nranks)
    for index, size, results in _POOL.imap_unordered(_run_values, tasks):
        for key, result in results:
            _CASES[index]._memo.setdefault(key, {})[size] = result


# The grid searches made so far in this cross-validation, by everything their result depends on (the
# training cases, by identity, and the values of the constants their rows read): most folds of
# ``--by case`` leave out a case that a given constant is not fitted on, so its search is the one the
# other folds made already. Exact: a search is a function of its key alone. Emptied by cross_validate.
_SEARCHES: dict[tuple, float] = {}

TIE = 0.005   # medians closer than half a percentage point are a tie, broken toward the prior


def _median(xs) -> float:
    return statistics.median(xs) if xs else float("inf")


def _score(errors, value: float, prior: float) -> tuple:
    """Sort key of a candidate value: its pooled median error (to :data:`TIE`), then its distance from the
    prior, so data that cannot tell two values apart leaves the constant at its public figure."""
    return round(_median(errors) / TIE), abs(value - prior)


def _bw_errors(case: Case, key: str, value: float, base: dict | None = None) -> list[float]:
    """busbw errors of ``case`` with bandwidth constant ``key`` = ``value`` (others as in ``base``, by
    default their priors), interpolating between the grid runs."""
    base = base or PRIORS
    grid = _grid(key)
    i = int(np.clip(np.searchsorted(grid, value) - 1, 0, len(grid) - 2))
    lo, hi = grid[i], grid[i + 1]
    w = (value - lo) / (hi - lo)
    out = []
    sizes = [r["size"] for r in case.bw_rows]
    for r, (_, a), (_, b) in zip(case.bw_rows, case.runs(sizes, {**base, key: lo}), case.runs(sizes, {**base, key: hi})):
        out.append(abs(a + w * (b - a) - r["busbw"]) / r["busbw"])
    return out


def _grid(key: str) -> tuple:
    # the host-bridge share is an efficiency too (a share of line rate): the same grid
    return (EFFICIENCY_GRID if key.startswith("efficiency.") or key in ("gdr_host_bridge_efficiency", "nvls_tree_share") else P2P_SHARE_GRID if key.startswith("p2p_share.") or key == NO_GDR else NVLS_LOSS_GRID if key == "nvls_loss_per_doubling"
            else BOUNCE_GRID)


# The time constants a time row is run with (:func:`_lat_values`); the others a time fit searches (the launch
# overheads, all_to_all's per-peer cost) are linear: added to the runs' times afterwards, they cost no run.
RUN_TIME_KINDS = ("latency.", "net_overhead.", "rendezvous_us.", "recv_copy_us.")


def _lat_values(case: Case, fit: dict) -> dict:
    """What a time row of ``case`` is run with: its fabric's latency constants as in ``fit``, the rest (the
    linear constants among them, added afterwards) at their priors."""
    values = dict(PRIORS)
    if case.fabric:
        for kind in RUN_TIME_KINDS:
            k = kind + case.fabric
            if k in PRIORS:
                values[k] = fit.get(k, PRIORS[k])
    return values


def _lat_base(case: Case, fit: dict, rows: list[dict]) -> list[float]:
    """Times of ``rows`` with the fabric's latency constants as in ``fit`` and the linear constants at their priors."""
    values = _lat_values(case, fit)
    return [t for t, _ in case.runs([r["size"] for r in rows], values)]


def _lat_errors(case: Case, fit: dict, mid: bool = False, base: list[float] | None = None) -> list[float]:
    """Relative time errors of the small-size rows (and the mid-size ones with ``mid``) under ``fit``;
    ``base``: their times at ``fit``'s run constants (:func:`_lat_base`), where the caller has them."""
    rows = case.lat_rows + (case.mid_rows if mid else [])
    if base is None:
        base = _lat_base(case, fit, rows)
    peer = f"p2p_peer.{case.fabric}" if case.fabric else None
    shift = ((fit["launch_overhead_us"] - PRIORS["launch_overhead_us"])
             + (case.gpus - 1) * (fit["per_gpu_launch_us"] - PRIORS["per_gpu_launch_us"])
             + (case.remote_peers * (fit[peer] - PRIORS[peer]) if peer else 0.0))
    return [abs(t + shift - r["time_us"]) / r["time_us"] for t, r in zip(base, rows)]


# releases whose rules collsim models whole: runs of older ones are scored but fit nothing
FITTED_SINCE = (2, 18)


def modelled_release(case: Case) -> bool:
    """Whether ``case`` ran an NCCL release collsim models whole (or does not say): a 2.8 or 2.9 run is still
    scored (with 2.8's latency tables and 2.18's other rules), but fits nothing, since its NCCL made choices
    and had costs (no PXN, older p2p and channel logic) that no modelled release has."""
    version = case.raw.get("nccl_version")
    return not version or versions.parse_version(str(version)) >= FITTED_SINCE


def fit(cases: list[Case]) -> dict:
    """Every fitted constant from ``cases`` (the training set), by the grid searches described above."""
    cases = [c for c in cases if modelled_release(c)]
    out = dict(PRIORS)
    # bandwidth: one constant per fabric / host bounce, each from its own cases' busbw rows; then the
    # host-bridge path's share of the fabric efficiencies just fitted, and NVLSTree's share of NVLS's rate
    # on top of them; the NVLS loss of large domains on that share; the p2p shares last (they scale both)
    # (each base holds only the values its cases depend on, so the memoised runs are shared by the folds)
    bridge, tree_share, loss = "gdr_host_bridge_efficiency", "nvls_tree_share", "nvls_loss_per_doubling"
    order = {bridge: 1, tree_share: 2, loss: 3, NO_GDR: 5}
    for key in sorted({k for c in cases if c.bw_rows for k in c.bw_keys()},
                      key=lambda k: (4 if k.startswith("p2p_share.") else order.get(k, 0), k)):
        if key == bridge:
            base = _with_fitted_efficiencies([c for c in cases if c.host_bridge], out)
        elif key == tree_share:
            base = _with_fitted_efficiencies([c for c in cases if c.nvls_tree], out)
        elif key == loss:
            base = {**PRIORS, tree_share: out[tree_share]}
        elif key.startswith("p2p_share."):
            fabric = key.partition(".")[2]
            base = {**PRIORS, f"efficiency.{fabric}": out[f"efficiency.{fabric}"], bridge: out[bridge]}
        elif key == NO_GDR:   # on top of everything else those runs read, as just fitted
            base = {**PRIORS, **{k: out[k] for c in cases if c.no_gdr for k in c.rate_keys() if k != key}}
        else:
            base = None
        out[key] = fit_bandwidth(cases, key, base)
    # latency: coordinate descent over the fabric latencies and the three linear constants
    lat_cases = [c for c in cases if c.lat_rows]
    # the launch overhead is the host's, measured where no network adds its own latency: one-node cases
    # (fitted on every case it drifted with the largest multi-node system's network, 0.75 to 11.5 us by fold)
    one_node = [c for c in lat_cases if not c.fabric]
    # per fabric, the cases with small- or mid-size rows: all_to_all fits the per-peer cost, the rest the
    # per-step overhead of rings across nodes (all_to_all's p2p sends have their own per-peer constant)
    ring_train: dict[str, list[Case]] = {}
    peer_train: dict[str, list[Case]] = {}
    for c in cases:
        if c.fabric and (c.lat_rows or c.mid_rows):
            (peer_train if c.remote_peers else ring_train).setdefault(c.fabric, []).append(c)
    # the per-peer cost on the runs no copy touches only: with none, its prior (:func:`_without_copies`)
    groups = {"launch_overhead_us": one_node or lat_cases, "per_gpu_launch_us": [c for c in lat_cases if c.gpus > 1],
              **{f"p2p_peer.{f}": _uncopied(train) for f, train in sorted(peer_train.items())}}
    fabrics = sorted({c.fabric for c in lat_cases if c.fabric})
    for _ in range(3):
        before = dict(out)
        for f in fabrics:
            key = f"latency.{f}"
            out[key] = _fit_time(FABRIC_LATENCY_GRID, _latency_train(lat_cases, f), out, [key], PRIORS[key], mid=False)
        # a ring step's software cost belongs to the net plugin: fitted per plugin first, then per fabric
        _fit_per_plugin("net_overhead", ring_train, out, NET_OVERHEAD_GRID)
        for f in sorted(set(ring_train) | set(peer_train)):   # the rendezvous: small and mid rows, where it has one
            key = f"rendezvous_us.{f}"
            train = ring_train.get(f, []) + peer_train.get(f, [])
            paying = [c for c in train if c.pays_rendezvous]
            if key in PRIORS and paying:
                out[key] = _fit_time(RENDEZVOUS_GRID, paying, out, [key], PRIORS[key])
            key = f"recv_copy_us.{f}"   # the copies: the rows of runs with software matching, where it has one
            copied = [c for c in train if c.software_matching]
            if key in PRIORS and copied:
                out[key] = _fit_time(RECV_COPY_GRID, copied, out, [key], PRIORS[key])
        for key, train in groups.items():
            if train:   # the per-peer cost also shows in all_to_all's mid sizes (thousands of peers at scale)
                mid = key.startswith("p2p_peer.")
                out[key] = _fit_time(P2P_PEER_GRID if mid else LINEAR_GRID[key], train, out, [key], PRIORS[key], mid=mid)
        if out == before:   # a fixed point: another round would fit the same values again (exact, and it
            break           # saves a third of a fold's runs where the first round already settled)
    out[TREE_LAG] = _fit_tree_lag([c for c in cases if c.fabric and c.coll.name == "all_reduce"], out)
    return out


def _with_fitted_efficiencies(cases: list[Case], out: dict) -> dict:
    """The priors, with the efficiency of each fabric of ``cases`` as fitted in ``out``: the base of a share
    fitted on top of those efficiencies (the host bridge's, NVLSTree's)."""
    return {**PRIORS, **{f"efficiency.{c.fabric}": out[f"efficiency.{c.fabric}"] for c in cases}}


def _latency_train(lat_cases: list[Case], fabric: str) -> list[Case]:
    """The cases ``latency.<fabric>`` is fitted on: those of the fabric with small-size rows, less its
    all_to_all runs where it has others (their small sizes are the per-peer cost's, ``p2p_peer``: CSCS
    Alps's two all_to_alls, whose small sizes the model put 2x too slow for that reason, were among the
    few runs without copies and held Slingshot's latency at 0), and less the runs
    with software tag matching where the fabric also has runs without it. A copied message pays the latency
    and the copy (``recv_copy_us``), so on those runs the two trade off one for the other, and fitted one
    after the other on every run they settled where the first one fitted had taken it all: in the fold
    that leaves ALCF Polaris out, latency 6 us and copy 2 us (small-size median 25.5% on the training
    runs) where latency 0 and copy 8 give 17.8%. Fitted on the runs no copy touches, the latency is what
    it is alone, and the copy is what the other runs add to it."""
    train = [c for c in lat_cases if c.fabric == fabric]
    rings = [c for c in train if not c.remote_peers]   # all_to_all's small sizes are its per-peer cost's
    return _without_copies(rings or train)


def _uncopied(train: list[Case]) -> list[Case]:
    """The runs of ``train`` no receive copy touches (no software tag matching): all that fits
    ``p2p_peer.<fabric>``, which keeps its prior where there are none (:func:`_without_copies` says why)."""
    return [c for c in train if not c.software_matching]


def _without_copies(train: list[Case]) -> list[Case]:
    """``train`` less its runs with software tag matching, where it also has runs without: a copied message
    pays the copy (``recv_copy_us``) on top of what a constant fitted on ``train`` stands for, so the two
    trade off on those runs (:func:`_latency_train`), and the constant is what the runs without copies say.
    The copy is then fitted on the others with it. The all_to_all per-peer cost is fitted on the runs
    without copies only, and keeps its prior where a fold has none: ALCF Polaris's all_to_alls (software
    matching) cost 10-23 us per remote peer, CSCS Alps's (hardware matching) 2.6; one pooled value (7.5)
    made Alps's small sizes 3x too slow in sample, and fitted on Polaris alone (11.75 in the fold that
    leaves Alps out) 4-5x too slow out of sample."""
    plain = _uncopied(train)
    return plain if plain and len(plain) < len(train) else train


def _fit_tree_lag(train: list[Case], fitted: dict) -> float:
    """``tree_chunk_lag_us`` from the mid- and large-size time rows of ``train`` (multi-node all_reduce)
    that NCCL runs as a tree with Simple or LL128, each case's bandwidth constants as ``fitted`` on the same training set and
    every other constant at its prior. A row's time is ``t0 + max(0, lag x units - slack)`` (:meth:`Case.tree_lag_units`,
    :meth:`Case.lag_slack`: the part NCCL's kernel cap hides),
    so one run per row and bandwidth value serves every grid value and every fold. A tie goes to the prior (0).

    The lag is what a deep tree loses beyond what the fabric's rate says, so it is fitted on top of that
    rate as fitted, not as the public figure: with every constant at its prior, the rows of a fabric whose
    prior is above its fitted efficiency asked the lag for the difference (Slingshot's prior of 0.97,
    nccl #1272, against 0.82 fitted on Alps: in the fold that leaves Together AI out, the lag doubled to
    1.3 us and its B200 trees came out 13-17% too slow where 0.7 put them within 10%)."""
    needs = [(c, c.mid_rows + c.bw_rows, _bandwidth_values(c, fitted)) for c in train]
    _prefetch(needs)
    rows = []   # (time at lag 0, units, slack, measured time) of the rows it affects (NCCL's tree/Simple or LL128 across nodes)
    for c, measured, values in needs:
        rows += [(t, u, sl, r["time_us"]) for (t, _, u, sl), r in zip(c._runs([r["size"] for r in measured], values), measured)
                 if u > 0]
    if not rows:
        return PRIORS[TREE_LAG]
    return float(min(TREE_LAG_GRID, key=lambda v: _score([abs(t + max(0.0, v * u - sl) - m) / m for t, u, sl, m in rows],
                                                         v, PRIORS[TREE_LAG])))


def _bandwidth_values(case: Case, fitted: dict) -> dict:
    """The priors, with the bandwidth constants ``case``'s runs read (:meth:`Case.rate_keys`) as in
    ``fitted``: only those, so folds that agree on them share runs."""
    return {**PRIORS, **{k: fitted[k] for k in case.rate_keys()}}


def _fit_time(grid, train: list[Case], out: dict, keys: list[str], prior: float, mid: bool = True) -> float:
    """The value of ``grid`` that minimises the pooled time error of the small-size rows of ``train`` (and
    the mid-size ones with ``mid``) with every constant of ``keys`` at it and the others as in ``out``; a
    tie goes to the value nearest ``prior`` (:func:`_score`). A search already made with the same
    training cases and the same values of the constants their time rows read is answered from
    :data:`_SEARCHES`."""
    grid = tuple(float(g) for g in grid)
    reads = sorted({name for c in train for name in _time_reads(c)} - set(keys))
    memo_key = ("time", grid, tuple(keys), prior, mid, tuple(train), tuple(out[n] for n in reads))
    if memo_key not in _SEARCHES:
        _SEARCHES[memo_key] = _search_time(grid, train, out, keys, prior, mid)
    return _SEARCHES[memo_key]


def _time_reads(case: Case) -> list[str]:
    """The fitted constants a time row of ``case`` depends on: those it is run with (:func:`_lat_values`)
    and the linear ones added to its runs (:func:`_lat_errors`)."""
    names = ["launch_overhead_us", "per_gpu_launch_us"]
    if case.fabric:
        names += [k for k in (*(kind + case.fabric for kind in RUN_TIME_KINDS), f"p2p_peer.{case.fabric}") if k in PRIORS]
    return names


def _search_time(grid: tuple, train: list[Case], out: dict, keys: list[str], prior: float, mid: bool) -> float:
    """:func:`_fit_time`'s grid search."""
    rows = {c: c.lat_rows + (c.mid_rows if mid else []) for c in train}
    if any(k.startswith(RUN_TIME_KINDS) for k in keys):
        _prefetch((c, rows[c], _lat_values(c, {**out, **dict.fromkeys(keys, v)})) for v in grid for c in train)
        bases: dict[Case, list[float]] = {}
    else:   # linear constants: every grid value reads the same runs, made and looked up once
        _prefetch((c, rows[c], _lat_values(c, out)) for c in train)
        bases = {c: _lat_base(c, out, rows[c]) for c in train}
    return float(min(grid, key=lambda v: _score(
        [e for c in train for e in _lat_errors(c, {**out, **dict.fromkeys(keys, v)}, mid=mid, base=bases.get(c))],
        v, prior)))


def _fit_per_plugin(kind: str, train: dict[str, list[Case]], out: dict, grid) -> None:
    """Fit ``<kind>.<fabric>`` (a per-step cost of the net plugin) into ``out``: one value per plugin on the
    small- and mid-size rows of every training case of its fabrics, then each fabric with training cases
    of its own refitted with the plugin's value as its prior; a fabric with none takes the plugin's value.
    The fabrics of NCCL's own transport (InfiniBand, RoCE) are fitted one by one around NCCL's figure,
    which was measured on that transport (pooled, RoCE's cross-rack GB200 runs dragged InfiniBand to 4 us
    and a 4-node InfiniBand run's small sizes 49 points off).

    What a ring step costs in software is the plugin's proxy posting and completing its messages, so a
    fabric whose cases cannot tell (the GH200 Slingshot runs pick trees; the other p5 runs are 2-node
    trees) borrows it from the fabrics the same plugin drives instead of falling back to NCCL's InfiniBand
    figure. Measured: out of sample, ALCF Polaris (Slingshot) gets 6 us from AWS p5 (EFA), p5 gets 8 from
    Polaris; each in sample fits its own. The per-peer cost of all_to_all was tried the same way and
    is not pooled: EFA's SRD and Slingshot's cxi differ there (3.75 against 7.75 us per peer in sample),
    and pooled, p5's all_to_all mid sizes went from 21% to 42% off at 8 nodes and to 106% at 32."""
    for plugin in sorted({calibration.FABRICS[f].plugin for f in train}):
        members = [f for f in calibration.FABRICS if calibration.FABRICS[f].plugin == plugin]
        pooled = None   # NCCL's own transport: its figures were measured on it and stay each fabric's prior
        if not PLUGINS[plugin].nccl_own:
            keys = [f"{kind}.{f}" for f in members]
            pooled = _fit_time(grid, [c for f in members for c in train.get(f, [])], out, keys, PRIORS[keys[0]])
        for f in members:
            key = f"{kind}.{f}"
            if train.get(f):
                out[key] = _fit_time(grid, train[f], out, [key], PRIORS[key] if pooled is None else pooled)
            elif pooled is not None:
                out[key] = pooled


def fit_bandwidth(cases: list[Case], key: str, base: dict | None = None) -> float:
    """Bandwidth constant ``key`` fitted on the busbw rows of those ``cases`` it affects (others as in
    ``base``, by default their priors), on the sweeps past their ramp (:func:`on_plateau`); its prior when
    none of them does. A search already made with the same candidates and base is answered from
    :data:`_SEARCHES` (it is a function of them alone)."""
    candidates = [c for c in cases if key in c.bw_keys() and c.past_ramp]
    values = base or PRIORS
    memo_key = ("bandwidth", key, tuple(candidates), _values_key(values))
    if memo_key not in _SEARCHES:
        _SEARCHES[memo_key] = _search_bandwidth(candidates, key, base)
    return _SEARCHES[memo_key]


def _search_bandwidth(candidates: list[Case], key: str, base: dict | None) -> float:
    """:func:`fit_bandwidth`'s grid search over ``candidates`` (the cases whose busbw rows may fit ``key``)."""
    values = base or PRIORS
    _prefetch((c, c.bw_rows, {**values, key: v}) for v in _sensitivity_values(key) for c in candidates)
    train = [c for c in candidates if _sensitive(c, key, base)]
    if not train:
        return PRIORS[key]
    grid = _grid(key)
    _prefetch((c, c.bw_rows, {**values, key: v}) for v in grid for c in train)
    fine = np.arange(grid[0], grid[-1] + 1e-9, 0.005 if key == "nvls_loss_per_doubling" else 0.01)
    return float(min(fine, key=lambda v: _score([e for c in train for e in _bw_errors(c, key, v, base)], v, PRIORS[key])))


SENSITIVITY = 1.1   # nvls_loss_per_doubling: a case fits it only if its busbw moves >= 10% across its grid
ELASTICITY = 0.25   # the others: only if busbw moves with the constant near its prior (d ln busbw / d ln value)


_ORDER = tuple(PRIORS)   # the order of _values_key's keys
_PRIOR_VALUES = tuple(PRIORS.values())


def _sensitive(case: Case, key: str, base: dict | None) -> bool:
    """Whether ``case``'s busbw depends on ``key`` where the constant is: a case bound elsewhere says
    nothing about it, and fitted on it the constant runs wherever it absorbs that other bound. GB200
    racks across 20 domains run at the NVLink's pace whatever the NICs do; a 2-node p5 all_reduce
    (NVLSTree) is NVLink-bound at EFA's prior efficiency and only becomes NIC-bound far below it, so fitted
    on the 2-node p5 runs EFAv2's efficiency fell to 0.61, which then made the 4- to 32-node p5 runs (bound
    by their NICs) 20-38% too slow. Measured as the elasticity of busbw between the two grid values around
    the prior (the public figure, independent of the cases): at least :data:`ELASTICITY`."""
    values = base or PRIORS
    lo_v, hi_v = _sensitivity_values(key)
    sizes = [r["size"] for r in case.bw_rows]
    lo = [b for _, b in case.runs(sizes, {**values, key: lo_v})]
    hi = [b for _, b in case.runs(sizes, {**values, key: hi_v})]
    ratio = statistics.median(h / l for h, l in zip(hi, lo) if l > 0 and h > 0)
    if key == "nvls_loss_per_doubling":
        return max(ratio, 1 / ratio) >= SENSITIVITY
    return float(np.log(ratio) / np.log(hi_v / lo_v)) >= ELASTICITY


def _sensitivity_values(key: str) -> tuple[float, float]:
    """The two values of ``key`` whose busbw :func:`_sensitive` compares: the grid's ends for the NVLS loss,
    else the grid values around the prior."""
    grid = _grid(key)
    if key == "nvls_loss_per_doubling":
        return grid[0], grid[-1]
    lo_v = max([g for g in grid if g < PRIORS[key]] or [grid[-2]])
    return lo_v, min(g for g in grid if g > lo_v)


BY = ("case", "system")


def cross_validate(cases: list[dict], score_case, *, algorithm=None, protocol=None, model: str = "auto",
                   by: str = "case", jobs: int = 1) -> tuple[list[dict], dict]:
    """(per-case scores out of sample, the in-sample fit). ``score_case`` is validate's scorer.

    ``by="case"`` leaves one case out at a time; ``by="system"`` every case of one ``system`` at once
    (a case without ``system`` is its own), so no constant is fitted on the machine it then predicts.
    ``jobs``: worker processes making the fits' runs (1: in this process; the result is the same)."""
    if by not in BY:
        raise ValueError(f"--by {by!r}: choose case or system")
    global _POOL, _SCORE
    _CASES[:] = [Case(c, algorithm, protocol) for c in cases]
    _SCORE = (score_case, {"model": model, "algorithm": algorithm, "protocol": protocol})
    _SEARCHES.clear()
    try:
        if jobs <= 1 or "fork" not in multiprocessing.get_all_start_methods():   # workers must inherit the cases
            return _cross_validate(_CASES, by)
        with multiprocessing.get_context("fork").Pool(jobs) as pool:
            _POOL = pool
            return _cross_validate(_CASES, by)
    finally:
        _POOL, _SCORE = None, ()
        _CASES.clear()
        _SEARCHES.clear()


def _cross_validate(prepared: list[Case], by: str) -> tuple[list[dict], dict]:
    group = (lambda c: c.system) if by == "system" else (lambda c: c.id)
    fitted_for: dict[int, dict] = {}   # index of a case -> the constants fitted without its group
    for g in dict.fromkeys(group(c) for c in prepared):
        fitted = fit([c for c in prepared if group(c) != g])
        fitted_for.update((k, fitted) for k, case in enumerate(prepared) if group(case) == g)
    scores: list = [None] * len(prepared)
    folds = sorted(fitted_for.items(), key=lambda kv: -prepared[kv[0]].nranks)   # the largest first (above)
    done = _POOL.imap_unordered(_score_one, folds) if _POOL is not None else map(_score_one, folds)
    for k, s in done:
        s["fitted"] = {key: round(v, 4) for key, v in fitted_for[k].items() if _relevant(prepared[k], key)}
        scores[k] = s
    return scores, fit(prepared)


def _relevant(case: Case, key: str) -> bool:
    return (key == "launch_overhead_us" or (key == "per_gpu_launch_us" and case.gpus > 1)
            or (case.remote_peers > 0 and key == f"p2p_peer.{case.fabric}") or key in case.bw_keys()
            or (case.host_bridge and key == "gdr_host_bridge_efficiency") or (case.no_gdr and key == NO_GDR)
            or (key == TREE_LAG and case.fabric is not None and case.coll.name == "all_reduce")
            or (case.fabric is not None and key in (f"latency.{case.fabric}", f"net_overhead.{case.fabric}"))
            or (case.pays_rendezvous and key == f"rendezvous_us.{case.fabric}")
            or (case.software_matching and key == f"recv_copy_us.{case.fabric}"))


__all__ = ["cross_validate", "fit", "fit_bandwidth", "PRIORS", "Case", "BY"]
