"""An 80% range with every predicted number, from the model's out-of-sample errors on the public cases.

``collsim validate --cross-validate --by system --write-intervals`` scores every public case with all
fitted constants refitted without the case's whole system, and writes each measured size's residual
``log(measured time / predicted time)`` with its regime to :data:`RESIDUALS` (``sim/data/residuals.json``):
the system, the fabric between the nodes (or the link inside one), the node count, the kind of node (its
NVLink domain and size: ``node4``, ``node`` or ``rack``, :func:`domain`) and the size band (small <= 64 KiB, mid, large >= 64
MiB). Nothing in that file is typed by hand.

For a question (a topology and a size), :func:`interval` weighs the residuals of the same size band by how
near their case is in regime: distance = 3 for another fabric + |log2 nodes - log2 nodes'| / 2, tricube
weights out to the :data:`NEIGHBOURS`-th nearest row's distance plus :data:`BANDWIDTH_MARGIN`
(:func:`_weighted_range`), so the rows measured at the very point asked count most and the range moves
continuously with the node count. The weighted 10th and 90th percentiles of the residuals scale the
predicted time into the 80% range (and busbw, which is size / time, inversely); the range always holds the
prediction itself. A fabric measured on fewer than
:data:`THIN_SYSTEMS` clusters (with that kind of node) gets a wider range, by the share of them missing:
its neighbours are then mostly other fabrics' rows, whose spread says little about its own.

``validated`` is False, with a one-line ``note`` (every reason that applies, ``;``-separated), when the
question lies outside what the public set covers: a fabric no case was measured on with that kind of node,
a collective whose kind (:data:`FAMILIES`: all_reduce; all_gather and reduce_scatter; all_to_all; broadcast
and reduce) no case measured there, or measured there only at other sizes (a size band no case of its kind
measured: the racks' all_reduces start at 512 MiB, the broadcasts between nodes stop at 32 MiB), or more
than :data:`EXTRAPOLATION_LIMIT` times the largest node count validated on that fabric with that kind of
node (where nothing of its kind was measured, the largest of its fabric, else of the set). A range borrowed
from other regimes is doubled, and one beyond that limit is widened by half its log-width per
doubling past it (from 1x at the limit, so the range grows with the distance instead of jumping where
validated ends), both together where both apply: the residuals were not measured there, and a range that pretended
otherwise would be the confident single number this replaces. The kind of node counts because a
rack-scale NVLink domain (a GB200 NVL72 rack is one "node" of 72 GPUs) is not an 8-GPU server: 20 such
racks are not validated by 64 servers on the same InfiniBand (out of sample, 20 GB200 racks ran at half the
busbw the model gives them, outside the unwidened range the servers' residuals gave). The neighbours a
range is drawn from are still chosen by fabric and node count alone, so a validated rack question's range
comes mostly from servers' residuals: the set has too few racks to draw it from racks. Last, a question
is not validated where the public cases measured nearest it (its fabric and kind of node, its collective's
kind and size band: the median error of its node count where measured, else the medians of the measured counts
around it interpolated in log2 of the nodes, else the nearest count's) are themselves missed by more than :data:`MISSED_BAR` out of sample:
the note names them and their error (20 GB200 racks, and 41 as well; Polaris-like all_to_alls).

Intervals are honest only if measured rows fall inside them about 80% of the time out of sample:
``collsim validate --cross-validate --by system`` reports that ``coverage``, each case's interval taken
from the residuals of the *other* systems only (``exclude_system``).

>>> iv = interval(100.0, 50.0, 1 << 30, "dgx-h100:nodes=2048")
>>> iv.time_us_range[0] <= 100.0 <= iv.time_us_range[1], iv.validated
(True, False)
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import CollsimError

RESIDUALS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "residuals.json")
SMALL_MAX_BYTES = 64 << 10
LARGE_MIN_BYTES = 64 << 20
# residual rows behind one range: chosen on the public set, leave one system out, among 48 / 96 / 192 / 384 /
# 768 (coverage 63 / 66 / 77 / 76 / 79% on the 74-case set; on the earlier 68-case set 96 gave 77% and 192
# 76%): an in-sample choice, said so in docs/nccl-model.md
NEIGHBOURS = 192
# how far past the NEIGHBOURS-th nearest row the weights reach 0 (distance units: 0.5 is a doubling of the nodes),
# so that the rows tied with it still weigh in and a regime with more rows than NEIGHBOURS at distance 0 has a width
BANDWIDTH_MARGIN = 0.5
OTHER_FABRIC_DISTANCE = 3.0  # another fabric is as far as 64x the node count
EXTRAPOLATION_LIMIT = 4      # validated up to 4x the largest node count measured on the fabric with its kind of node
# a range whose fabric (with its kind of node) was measured on fewer systems than this is widened by the
# missing share: 1 + (1 - k / THIN_SYSTEMS) times its log-width with k systems (k = 0 is the 2x of an
# unmeasured fabric). Why: the neighbours of a fabric seen on one or two clusters are mostly other
# fabrics' rows, whose spread is not its own (out of sample, the ranges of the two EFA generations, 2
# and 3 systems, held 43% and 71% of their measured rows before this, 58% and 77% after; 3 is where
# the InfiniBand and Slingshot ranges, 7 and 4 systems, stay as they were)
THIN_SYSTEMS = 3
# a question whose nearest measured cases (its fabric and kind of node, its collective's kind, its size band,
# within 2x its node count) the model misses by more than this out of sample (median) is not validated: the
# issue's per-case bar. At least MISSED_MIN_ROWS rows decide it
MISSED_BAR = 0.25
# two rows: p5's mid sizes are one row a case (32 MiB), and 32 nodes read validated beside 16 and 32 missed 92-104%
MISSED_MIN_ROWS = 2
# the most a range's log-width is widened, every reason together: a borrowed range at 16,384 nodes reached
# 0.001x the prediction, which says nothing a 4x wider range does not
MAX_WIDEN = 4.0
# a node of more GPUs than this on NVLink is a rack-scale NVLink domain (GB200/GB300 NVL72), its own regime
RACK_DOMAIN_GPUS = 8
# a node of at most this many GPUs is its own kind: quad boards and GH200 nodes, the Slingshot systems' nodes
SMALL_NODE_GPUS = 4
# how a note names each kind of node ("domain": rack, node or node4)
DOMAIN_WORDS = {"rack": f"nodes of more than {RACK_DOMAIN_GPUS} GPUs on NVLink, rack-scale NVLink domains",
                "node": f"servers of {SMALL_NODE_GPUS + 1} to {RACK_DOMAIN_GPUS} GPUs",
                "node4": f"nodes of at most {SMALL_NODE_GPUS} GPUs"}
# collectives whose measurements validate one another: the same schedules (a ring's all_gather is its
# reduce_scatter run backwards; broadcast and reduce are the same chain)
FAMILIES = {"all_reduce": "all_reduce", "all_gather": "all_gather", "reduce_scatter": "all_gather",
            "all_to_all": "all_to_all", "broadcast": "broadcast", "reduce": "broadcast"}
LOW_Q, HIGH_Q = 10.0, 90.0
MAX_RESIDUAL_BYTES = 8 << 20


@dataclass(frozen=True)
class Interval:
    """80% ranges of time (us) and busbw (GB/s), whether the question is validated, and why not."""

    time_us_range: tuple[float, float]
    busbw_GBps_range: tuple[float, float]
    validated: bool
    note: str = ""
    neighbours: int = 0


BANDS = ("small", "mid", "large")
BAND_WORDS = {"small": "64 KiB or less", "mid": "between 64 KiB and 64 MiB", "large": "64 MiB or more"}


def band(nbytes: int) -> str:
    """small (<= 64 KiB), large (>= 64 MiB) or mid: the regimes ``collsim validate`` scores."""
    return "small" if nbytes <= SMALL_MAX_BYTES else "large" if nbytes >= LARGE_MIN_BYTES else "mid"


def regime(topo) -> tuple[str, int, str]:
    """(fabric, nodes, domain) of a topology: the network between its nodes (``ib``, ``roce``,
    ``slingshot``...), or the link class joining its GPUs where no network does (``nvlink``, ``pcie``);
    its node count; and its kind of node (:func:`domain`)."""
    from ..nccl.machine import machine
    from ..presets import load_topology
    m = machine(load_topology(topo) if isinstance(topo, str) else topo)
    kind = domain(m.ppn, m.intra_class == "nvlink")
    networked = m.nnodes > 1 and m.inter_class == "net"
    if kind == "node4" and not (networked and m.on_fabric):
        # what sets small nodes apart is a real fabric's per-step costs: inside one node, or between the GPUs of
        # a textbook topology (no real node), a 4-GPU box is a server like an 8-GPU one (a thin kind of its own
        # would only widen those ranges from few cases)
        kind = "node"
    if networked:
        return str(m.fabric or "ib"), m.nnodes, kind
    return str(m.inter_class or m.intra_class or "none"), m.nnodes, kind


def domain(gpus_per_node: int, nvlink: bool = True) -> str:
    """``rack`` for a node of more than :data:`RACK_DOMAIN_GPUS` GPUs on NVLink (a rack-scale NVLink
    domain), ``node4`` for a node of at most :data:`SMALL_NODE_GPUS` GPUs (quad boards, GH200 nodes, small
    boxes), else ``node`` (a server of 5 to 8 GPUs, or a larger PCIe box).

    Why the small nodes apart: a ring's fitted per-step software cost on Slingshot was measured on nodes of
    four GPUs and two or four NICs (ALCF Polaris, CSCS Alps, NERSC Perlmutter, Sigma2 Olivia); on 8-GPU,
    8-NIC servers no case measured it, and 32 such servers on Slingshot were called validated with a +-30%
    range while their all_gather ran 9x NCCL's own estimate (a planner's trial, twenty-ninth pass).

    >>> domain(72), domain(8), domain(16, nvlink=False), domain(4), domain(1)
    ('rack', 'node', 'node', 'node4', 'node4')
    """
    if nvlink and gpus_per_node > RACK_DOMAIN_GPUS:
        return "rack"
    return "node4" if gpus_per_node <= SMALL_NODE_GPUS else "node"


@lru_cache(maxsize=4)
def load_residuals(path: str = RESIDUALS) -> tuple:
    """The residual table: a tuple of (system, fabric, nodes, band, log_ratio, domain, collective) rows (a
    row without ``domain`` is a ``node``'s; one without ``collective`` counts as every collective)."""
    from ..io.safe_io import read_input
    if not os.path.exists(path):
        return ()
    try:
        data = json.loads(read_input(path, "residual table", MAX_RESIDUAL_BYTES))
        return tuple(residual_row(r) for r in data["rows"])
    except (ValueError, KeyError, TypeError) as e:
        raise CollsimError(f"{path}: not a residual table ({e}): regenerate it with "
                           "collsim validate --cross-validate --by system --write-intervals") from None


def residual_row(row: dict) -> tuple:
    """A residual row (a dict, as ``--write-intervals`` writes it) as a row of :func:`load_residuals`'s table:
    (system, fabric, nodes, band, log_ratio, domain, collective, case, algorithm); a row without ``domain`` is a
    ``node``'s, one without ``collective`` ("") counts as every collective, one without ``algorithm`` ("": tables
    before the thirty-fourth pass) says nothing of it."""
    return (str(row["system"]), str(row["fabric"]), int(row["nodes"]), str(row["band"]), float(row["log_ratio"]),
            str(row.get("domain", "node")), str(row.get("collective", "")), str(row.get("case", "")),
            str(row.get("algorithm", "")))


def interval(time_us: float, busbw_GBps: float, nbytes: int, topo=None, *, where: tuple | None = None,
             exclude_system: str | None = None, rows: tuple | None = None, collective: str | None = None,
             algorithm: str | None = None) -> Interval:
    """The 80% range of one prediction on ``topo`` (or ``where``: its :func:`regime`, if known, as
    (fabric, nodes) or (fabric, nodes, domain); see the module docstring); ``rows``: a residual table
    (default :func:`load_residuals`; rows without a domain are a ``node``'s), ``exclude_system``: leave
    that system's rows out (cross-validation); ``collective``: the question's (None: not checked);
    ``algorithm``: the prediction's (None: not checked), whose reduction in the network switches across nodes
    (SHARP: CollNet, NVLS with IB SHARP) counts as validated only in a size band where a public case measured it."""
    fabric, nodes, domain_ = _where(where if where is not None else regime(topo))
    table = load_residuals() if rows is None else rows
    b = band(nbytes)
    pool = [r for r in table if r[3] == b and r[0] != exclude_system]
    others = [r for r in table if r[1] == fabric and r[0] != exclude_system]   # measured on this fabric
    mine = [r for r in others if _row_domain(r) == domain_]                     # ... with this kind of node
    measured_nodes = [r[2] for r in mine]
    # name the kind of node where it matters: a rack, or a fabric on which the other kind was measured
    mixed = domain_ == "rack" or any(_row_domain(r) != domain_ for r in others)
    # inside one node (no fabric between nodes) a 4-GPU box counts as a server (regime): say so
    kind_words = f"servers of up to {RACK_DOMAIN_GPUS} GPUs" if domain_ == "node" and fabric in ("nvlink", "pcie") \
        else DOMAIN_WORDS[domain_]
    where_words = f"{fabric} with {kind_words}" if mixed else fabric
    # evidence from few clusters of this fabric: the range is partly borrowed, so wider (none: 2x, below)
    validated, widen = True, 2.0 - min(len({r[0] for r in mine}), THIN_SYSTEMS) / THIN_SYSTEMS
    notes: list[str] = []
    family = FAMILIES.get(collective, collective) if collective is not None else None
    if not measured_nodes:
        notes.append(f"no public case was measured on {where_words}: the range is borrowed from other "
                     f"{'kinds of node' if others else 'fabrics'}")
    elif collective is not None and not _family_measured(collective, others, domain_):
        widen *= 2.0
        seen = sorted({r[6] for r in mine if len(r) > 6})
        notes.append(f"no public {collective} was measured on {where_words} (only {', '.join(seen)}): "
                     "the range is borrowed from other collectives and widened")
    elif family is not None and not any(r[3] == b and _of_family(r, family) for r in mine):
        widen *= 2.0
        bands = sorted({r[3] for r in mine if _of_family(r, family)}, key=BANDS.index)
        notes.append(f"no public {collective} of {b} sizes ({BAND_WORDS[b]}) was measured on {where_words} (only "
                     f"{' and '.join(bands)}): the range is borrowed from other collectives and widened")
    in_net = _switch_reduction(algorithm, nodes)
    if in_net and any(len(r) > 8 and r[8] for r in table):   # the table says which algorithm each row ran
        sharp_bands = sorted({r[3] for r in mine if _switch_reduction(r[8] if len(r) > 8 else "", r[2]) == in_net},
                             key=BANDS.index)
        if b not in sharp_bands:
            widen *= 2.0
            only = f"only {' and '.join(sharp_bands)}" if sharp_bands else "none"
            notes.append(f"no public case measured in-network reduction by {in_net}, {algorithm}, at {b} sizes "
                         f"({BAND_WORDS[b]}) on {where_words} ({only}): the range is borrowed from other algorithms "
                         "and widened")
    # however the range was drawn, one far beyond the node counts measured is extrapolated: widened per doubling
    # past the limit (a range borrowed from other kinds of node or collectives is not narrower for being far from
    # them too). From 1x at the limit: widening by the doublings past the largest count itself made 257 DGX H100s
    # read 138..401 GB/s where 256 read 226..401; and out of sample the rows beyond the limit (p5's 8-32 nodes
    # against 2 measured elsewhere on EFA) were inside their ranges 98% of the time, so no wider start is owed
    reference = measured_nodes or [r[2] for r in others] or [r[2] for r in table if r[0] != exclude_system]
    if reference and nodes > EXTRAPOLATION_LIMIT * max(reference):
        widen *= 1.0 + 0.5 * math.log2(nodes / (EXTRAPOLATION_LIMIT * max(reference)))
        counted = where_words if measured_nodes else (fabric if others else "any fabric")
        notes.append(f"{nodes} nodes is over {EXTRAPOLATION_LIMIT}x the largest node count validated on {counted}: "
                     f"{max(reference)}; extrapolated, range widened")
    if not notes:
        # a rack-scale NVLink domain's collectives are the rack's more than the fabric's, and the set holds two racks'
        # worth of cases per fabric: every rack case is a neighbour (20 GB200 racks missed on InfiniBand had left 8
        # racks on RoCE validated, with a range 18x narrower than on InfiniBand)
        kin = [r for r in table if _row_domain(r) == "rack" and r[0] != exclude_system] if domain_ == "rack" else mine
        missed = _missed_nearby(kin, b, nodes, collective, where_words if domain_ != "rack" else f"any fabric with {DOMAIN_WORDS['rack']}")
        if missed:
            notes.append(missed)
    validated, note = not notes, "; ".join(notes)
    if not pool:
        return Interval((time_us, time_us), (busbw_GBps, busbw_GBps), False,
                        note or "no residuals: run collsim validate --cross-validate --by system --write-intervals", 0)
    dist = np.array([(0.0 if r[1] == fabric else OTHER_FABRIC_DISTANCE) + abs(math.log2(nodes) - math.log2(r[2])) / 2
                     for r in pool])
    lo, hi, used = _weighted_range(np.array([r[4] for r in pool]), dist)
    widen = min(widen, MAX_WIDEN)
    lo, hi = min(lo, 0.0) * widen, max(hi, 0.0) * widen
    t = (time_us * math.exp(lo), time_us * math.exp(hi))
    bw = (busbw_GBps / math.exp(hi), busbw_GBps / math.exp(lo))
    return Interval(t, bw, validated, note, used)


def _weighted_range(res: np.ndarray, dist: np.ndarray) -> tuple[float, float, int]:
    """The 10th and 90th percentiles of residuals ``res`` weighted by their rows' distance ``dist`` to the question,
    and how many rows weighed in.

    A locally weighted quantile (as LOESS weighs a local fit): the bandwidth is the distance of the
    :data:`NEIGHBOURS`-th nearest row plus :data:`BANDWIDTH_MARGIN`, each row weighs ``(1 - (d / h)^3)^3`` (tricube:
    1 at the question's own regime, falling smoothly to 0 at the bandwidth), and the percentiles interpolate
    the weighted empirical distribution. Why not the plain nearest rows: their set changes at once when a
    node count crosses the midpoint between two measured ones, and so did the range (one server more on RoCE
    took a rack's mid-size upper end from 3.3x the prediction to 6.5x); here every weight, and the range, moves
    continuously with the node count, and the rows measured at the very point asked count most."""
    k = min(NEIGHBOURS, len(dist))
    h = float(np.partition(dist, k - 1)[k - 1]) + BANDWIDTH_MARGIN
    w = np.clip(1.0 - (dist / h) ** 3, 0.0, None) ** 3
    order = np.argsort(res, kind="stable")
    v, w = res[order], w[order]
    keep = w > 0
    v, w = v[keep], w[keep]
    # each row's weight centred on its place in the cumulative distribution (Hazen's plotting position, weighted)
    c = (np.cumsum(w) - w / 2) / w.sum()
    lo, hi = (float(np.interp(q / 100.0, c, v)) for q in (LOW_Q, HIGH_Q))
    return lo, hi, int(keep.sum())


# algorithms whose all_reduce reduces in the network (IB SHARP): a node sends its data once and receives the
# result once, where without it it sends and receives 2(k-1)/k of it
IN_NETWORK_REDUCTION = ("collnet_direct", "collnet_chain", "nvls")


def _switch_reduction(algorithm: str | None, nodes: int) -> str:
    """Which way ``algorithm`` reduces in the network's switches across ``nodes`` nodes ("" for none): CollNet (IB
    SHARP, either algorithm), or NVLS across nodes (NVLink SHARP inside each node joined by IB SHARP; inside one
    node NVLS reduces in the NVSwitch, which the set measures), which no CollNet run measures."""
    if algorithm in ("collnet_direct", "collnet_chain"):
        return "IB SHARP (CollNet)"
    if algorithm == "nvls" and nodes > 1:
        return "NVLS across nodes (NVLink SHARP with IB SHARP)"
    return ""


def line_rate_busbw(topo, collective: str, algorithm: str = "") -> float | None:
    """The most busbw (GB/s) the NICs between ``topo``'s nodes can carry for ``collective``, whatever the
    software: the NICs' raw line rate against the bytes a node must send or receive over them. Inside one
    NVLink node of a hardware preset, a GPU's own NVLinks (raw, one direction): every collective's busbw is
    at most what one GPU sends or receives over them (a ring all_reduce sends 2(n-1)/n of the buffer for a
    busbw factor of 2(n-1)/n, an all_gather (n-1)/n for (n-1)/n, a broadcast's root the whole buffer), except
    NVLS, whose switch reduces (None). None off a network and inside a PCIe box.

    With ``k`` nodes of ``g`` GPUs (``n`` ranks) and ``B`` the node's NICs together (GB/s, one direction):
    all_gather and reduce_scatter receive (send) ``(k-1)/k`` of the buffer per node, so busbw =
    ``S (n-1)/n / t <= B (n-1)/n x k/(k-1)``; all_reduce twice that traffic for twice the busbw factor,
    the same bound, or ``2 B (n-1)/n`` where the network reduces (SHARP: the node sends and receives the
    buffer once); broadcast and reduce ``B``; all_to_all sends ``g S (n-g)/n`` per node, ``busbw <= B/g x
    (n-1)/(n-g)``. Every public case's measured busbw is within its bound (``tests/model/test_line_rate_bound.py``).

    >>> round(line_rate_busbw("dgx-h100:nodes=64", "all_reduce", "ring"), 1)   # 8 x 50 GB/s x 511/512 x 64/63
    405.6
    >>> round(line_rate_busbw("dgx-b200:nodes=8", "all_to_all", "p2p"), 2)     # 50 x 63/56
    56.25
    >>> line_rate_busbw("dgx-h100", "all_reduce", "nvls") is None
    True
    >>> line_rate_busbw("hgx-v100-4", "all_gather", "ring"), line_rate_busbw("hgx-v100-4:gpus_per_node=2", "all_reduce", "ring")
    (150.0, 50.0)
    """
    from ..nccl.machine import machine
    from ..presets import load_topology
    topo = load_topology(topo) if isinstance(topo, str) else topo
    m = machine(topo)
    if m.nnodes == 1 and m.arch and m.intra_class == "nvlink":
        if algorithm.startswith("nvls"):
            return None
        gpu = topo.nodes[topo.gpus[0]].name
        return sum(l.bandwidth_GBps for l in topo.links if l.src == gpu and l.kind == "nvlink") or None
    if m.nnodes < 2 or m.inter_class != "net" or not m.nic_GBps or not m.nics:
        return None
    nic, n, k = m.nics * m.nic_GBps, m.nranks, m.nnodes
    g = n // k
    if collective == "all_to_all":
        return nic / g * (n - 1) / (n - g) if n > g else None
    if collective in ("broadcast", "reduce"):
        return nic
    if collective == "all_reduce" and m.sharp and algorithm in IN_NETWORK_REDUCTION:
        return 2 * nic * (n - 1) / n
    return nic * (n - 1) / n * k / (k - 1)


def clip_to_line_rate(iv: Interval, busbw_GBps: float, bound: float | None) -> Interval:
    """``iv`` with its busbw range no higher than ``bound`` (:func:`line_rate_busbw`) nor below the prediction,
    and its time range's low end raised to match (busbw is size / time times a constant): a range drawn
    from log residuals, scaled alike up and down, can otherwise promise more than the links carry."""
    lo_bw, hi_bw = iv.busbw_GBps_range
    if bound is None or hi_bw <= 0:
        return iv
    top = max(busbw_GBps, bound)
    if hi_bw <= top:
        return iv
    t_lo, t_hi = iv.time_us_range
    return Interval((t_lo * hi_bw / top, t_hi), (min(lo_bw, top), top), iv.validated, iv.note, iv.neighbours)


def _where(where: tuple) -> tuple[str, int, str]:
    """(fabric, nodes, domain) from a regime given with or without its domain (without: a ``node``)."""
    return (str(where[0]), int(where[1]), str(where[2]) if len(where) > 2 else "node")


def _of_family(row: tuple, family: str) -> bool:
    """Whether a residual row is of a collective of kind ``family`` (:data:`FAMILIES`); a row that does not say
    its collective counts as any."""
    return len(row) <= 6 or not row[6] or FAMILIES.get(row[6], row[6]) == family


def _family_measured(collective: str, rows: list, domain_: str) -> bool:
    """Whether ``rows`` (of one fabric) hold a case of ``collective``'s kind (:data:`FAMILIES`) with that kind
    of node."""
    family = FAMILIES.get(collective, collective)
    return any(_of_family(r, family) for r in rows if _row_domain(r) == domain_)


def _missed_nearby(mine: list, b: str, nodes: int, collective: str | None, where_words: str) -> str:
    """The note for a question whose nearest measured cases the model misses (:data:`MISSED_BAR`), else "".

    ``mine``: residual rows of the question's fabric and kind of node (other systems' only, in a
    cross-validation; on rack-scale NVLink domains every fabric's rack cases, :func:`interval`), of its size band
    and collective's kind. Each measured node count has its median error; a count measured decides for itself, a
    count between two measured ones takes the two medians interpolated in log2 of the nodes, and one beyond every
    measured count takes the nearest's. Their error is the one ``collsim validate`` scores: busbw for the large band
    (``|e^r - 1|``), time otherwise (``|e^-r - 1|``), ``r`` = log(measured / predicted time). A range drawn from many
    systems' residuals can look narrow where the one system measured like the question is missed by 2x (20 GB200
    racks: validated, with 5 of its 6 measured rows outside their ranges, a planner's trial)."""
    family = FAMILIES.get(collective, collective) if collective else None
    per: dict[int, list[tuple]] = {}
    for r in mine:
        if r[3] == b and (family is None or _of_family(r, family)):
            per.setdefault(r[2], []).append(r)
    if not per:
        return ""
    # A window of rows within 2x had edges whatever its weights: at 80-112 Slingshot nodes only the missed 128-node
    # rows were in it (flagged), at 128 the 256-node ones joined them (validated), so the count of the missed case
    # itself read validated. Per-count medians, interpolated between the measured counts around the question, have none
    def error(r) -> float:
        return abs(math.expm1(r[4])) if b == "large" else abs(math.expm1(-r[4]))
    below, above = [c for c in per if c < nodes], [c for c in per if c > nodes]
    around = ([max(below)] if below else []) + ([min(above)] if above else [])
    if nodes in per:   # a count measured decides for itself; by fewer rows than decide, with the counts around it
        used = [nodes] + (around if len(per[nodes]) < MISSED_MIN_ROWS else [])
        near = [r for c in used for r in per[c]]
        miss = float(np.median([error(r) for r in near]))
        how = "median"
    else:              # between two counts: their medians interpolated in log2 of the nodes; beyond them: the nearest's
        used = around
        near = [r for c in used for r in per[c]]
        med = {c: float(np.median([error(r) for r in per[c]])) for c in used}
        if len(used) == 1:
            miss, how = med[used[0]], "median"
        else:
            lo, hi = used
            t = (math.log2(nodes) - math.log2(lo)) / (math.log2(hi) - math.log2(lo))
            miss, how = med[lo] + t * (med[hi] - med[lo]), "medians interpolated to this node count"
    used = sorted(used)
    if len(near) < MISSED_MIN_ROWS:
        return ""
    if miss <= MISSED_BAR:
        return ""
    cases = sorted({r[7] for r in near if len(r) > 7 and r[7]})
    named = (", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")) if cases else "public cases"
    span = f"{used[0]}" if len(used) == 1 else f"{used[0]}-{used[-1]}"
    what = "busbw" if b == "large" else f"{b}-size time"
    unit = "node" if span == "1" else "nodes"
    return (f"the public cases measured nearest this ({named}: {where_words}, {span} {unit}) are predicted {miss:.0%} off "
            f"out of sample ({what}, {how}): docs/nccl-model.md, Known gaps")


def _row_domain(row: tuple) -> str:
    """A residual row's kind of node (rows of five fields, as older tables and tests give them, are a ``node``'s)."""
    return row[5] if len(row) > 5 else "node"


__all__ = ["FAMILIES", "RESIDUALS", "THIN_SYSTEMS", "Interval", "band", "domain", "interval", "load_residuals", "regime", "residual_row"]
