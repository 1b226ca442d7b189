"""NCCL releases as the model knows them: which algorithms each one has and the numbers its tuner used.

Every fact below was read in NCCL's source at the tag named (``git show TAG:src/graph/tuning.cc``,
``src/include/collectives.h``); a release inherits everything it does not change from the one before.
Only facts the tuner model (:mod:`sim.nccl.tuner`) uses are here; ``docs/nccl-model.md`` has the table.

* ``through``: the last minor release an entry stands for, where NCCL changed its tables before the next entry
  (2.8: 2.8-2.9; 2.10-2.17 are scored with 2.18's rules).
* ``ag_rs_algorithms``: the algorithms NCCL's tuner considers for all_gather / reduce_scatter
  (2.18: ring only; 2.19 added NVLS; 2.21 CollNetDirect; 2.23 PAT, "1 GPU per node" ``ncclPatEnable``).
* ``base_latency`` / ``hw_latency``: ``baseLat`` / ``hwLat`` overrides against 2.27.7's tables
  (:data:`sim.nccl.constants.BASE_LATENCY_US`, :data:`~sim.nccl.constants.HW_LATENCY_US`).
* ``ring_ll_quarter``: 2.18-2.20 credit ring LL with 1/4 of the bus bandwidth across nodes (and for
  all_reduce/reduce; 1/3 otherwise); 2.21 on with 1/2.
* ``ring_ll128_one_gpu``: ring LL128's factor with one GPU per node (0.7 before 2.23, then 0.92).
* ``ll_max_hopper``: Hopper's ``llMaxBws`` row (87.7/22.5/19.0 before 2.21, then 141/45/35).
* ``nvls_tree_ratio_old``: 2.18's NVLSTree algBw ratio ``.70 nNodes / (2 (nNodes - 1))`` (5/6 later).
* ``ring_ar_inter_steps_2n``: ring all_reduce counts ``2 nNodes`` network steps before 2.23, then ``2 (nNodes-1)``.
* ``net_tree_row_one_gpu``: from 2.23 a network hop with one GPU per node costs the tree row of ``hwLat``.
* ``pat_bus_factor``: PAT's busBw factor (.85 in 2.23, .75 from 2.24).
* ``ll128_blackwell``: the release knows Blackwell (2.25 on): LL128 enabled on compute capability 10.0 (``case
  100``), and a Blackwell row in its per-architecture tables. Before it ``tuning.cc`` reads a compute
  capability of 10.0 as Hopper (``compCapIndex = minCompCap >= 90 ? HOPPER_COMPCAP_IDX : ...``), so the tuner
  takes Hopper's rows for Blackwell GPUs (:meth:`Release.table_arch`).
* ``nvls_efficiency_model``: from 2.28 NCCL credits NVLS/NVLSTree with ``bwIntra x nvlsEfficiency x
  (nch-1)/nch`` (x2 for all_reduce, x (ppn-1)/ppn otherwise), capped for NVLSTree by
  ``perChMaxNVLSTreeBws`` (``nvls_tree_caps``), converted to algBw like a ring (``nRanks/nsteps``)
  instead of 2.19-2.27's 5/6, and needs at least 2 NVLS channels.
* ``blackwell_caps``: Blackwell rows of ``perChMaxRingLL128Bws``/``perChMaxTreeLL128Bws``/``perChMaxTreeBws``
  when they differ from 2.27's.
* ``nvls_tree_correction_x86``: from 2.29 ``ncclTopoGetAlgoTime`` multiplies NVLSTree all_reduce's bandwidth by
  ``treeCorrectionFactor`` (grown to 24 sizes, 64 B .. 512 MiB) on Blackwell with x86 hosts, as it always
  did for trees (NVIDIA's own view that NVLSTree runs below its formula at mid sizes there).

A table entry holds one minor release, read at its newest tag; where a patch release of it differs, the
entry says so (2.29.2-2.29.6 capped Blackwell's ring LL128 at 34.5/34.6/34.5 GB/s per channel, 2.29.7 at 40).

>>> release("2.18").ag_rs_algorithms, release("2.27").ag_rs_algorithms, release("2.9.9").version
(('ring',), ('ring', 'nvls', 'collnet_direct', 'pat'), '2.8')
>>> release("2.25").version, release("2.26").version   # a release between two entries has the older one's rules
('2.25', '2.25')
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import CollsimError


@dataclass(frozen=True)
class Release:
    """One NCCL release's facts (see the module docstring for each field)."""

    version: str
    tag: str
    ag_rs_algorithms: tuple[str, ...]
    base_latency: dict = field(default_factory=dict)      # algorithm -> (LL, LL128, Simple) us
    hw_latency: dict = field(default_factory=dict)        # (link class, algorithm) -> (LL, LL128, Simple) us
    ring_ll_quarter: bool = False
    ring_ll128_one_gpu: float = 0.92
    ll_max_hopper: tuple[float, float, float] = (141.0, 45.0, 35.0)
    nvls_tree_ratio_old: bool = False
    ring_ar_inter_steps_2n: bool = False
    net_tree_row_one_gpu: bool = True
    pat_bus_factor: float = 0.75
    ll128_blackwell: bool = True
    blackwell_caps: dict = field(default_factory=dict)    # table name -> (N1, N2, N4)
    nvls_efficiency_model: bool = False                   # 2.28+ NVLS busBw (nvlsEfficiency, n/nsteps)
    nvls_tree_caps: dict = field(default_factory=dict)    # arch -> perChMaxNVLSTreeBws (N1, N2, N4)
    nvls_tree_correction_x86: bool = False                # 2.29+: treeCorrectionFactor on Blackwell NVLSTree, x86
    through: tuple[int, int] | None = None                # the last minor release the entry stands for (None: up to the next)
    notes: str = ""

    def __hash__(self) -> int:
        """By version and tag (one release each in the table; its dict fields are not hashable), so an
        :class:`~sim.nccl.config.NcclConfig` keys the prediction caches (:mod:`sim.nccl.context`)."""
        return hash((self.version, self.tag))

    def table_arch(self, arch: str | None) -> str | None:
        """The GPU generation whose row of NCCL's per-architecture tables this release reads for ``arch``: Hopper's
        for a Blackwell GPU before 2.25, which had no Blackwell row (``tuning.cc`` ``compCapIndex``).

        >>> release("2.18").table_arch("blackwell"), release("2.25").table_arch("blackwell")
        ('hopper', 'blackwell')
        """
        return "hopper" if arch == "blackwell" and not self.ll128_blackwell else arch

    @property
    def max_channels(self) -> int:
        """MAXCHANNELS (``device.h``): 32 up to 2.24, 64 from 2.25. NCCL clamps NCCL_MIN/MAX_NCHANNELS (and CTAs)
        to it ("limiting to" in its warning)."""
        return 64 if self.key() >= (2, 25) else 32

    @property
    def per_collective_lists(self) -> bool:
        """NCCL_ALGO/NCCL_PROTO take ``allreduce:tree;allgather:ring`` from 2.24 (``parseList``'s prefixes); before,
        such a token names nothing, and NCCL_ALGO then leaves no algorithm."""
        return self.key() >= (2, 24)

    @property
    def algo_fallback(self) -> bool:
        """Up to 2.23, without CollNet an NCCL_ALGO that leaves no ring, tree, NVLS or NVLSTree gets ring and tree
        back ("If user has hard set NCCL_ALGO=COLLNET, ignore it", ``tuning.cc``); 2.24 dropped the rule."""
        return self.key() < (2, 24)

    @property
    def has_pat(self) -> bool:
        return "pat" in self.ag_rs_algorithms

    def key(self) -> tuple[int, int]:
        major, minor = self.version.split(".")
        return int(major), int(minor)


_OLD_LAT = {  # 2.19-2.22 hwLat rows that differ from 2.27 (tree Simple 28 us on every link, NVLS 23/25)
    ("nvlink", "tree"): (0.6, 1.25, 28.0), ("pcie", "tree"): (1.0, 1.9, 28.0), ("net", "tree"): (5.0, 8.5, 28.0),
}

_R218 = Release(
    "2.18", "v2.18.6-1", ("ring",),
    base_latency={"tree": (6.8, 14.0, 0.0), "nvls": (0.0, 0.0, 23.0), "nvls_tree": (0.0, 0.0, 23.0)},
    hw_latency={("nvlink", "collnet_direct"): (0.0, 0.0, 8.0), ("nvlink", "collnet_chain"): (0.0, 0.0, 4.75),
                ("nvlink", "nvls"): (0.0, 0.0, 0.0), ("nvlink", "nvls_tree"): (0.0, 0.0, 0.0),
                ("pcie", "tree"): (1.0, 1.9, 6.0), ("pcie", "collnet_direct"): (0.0, 0.0, 8.0),
                ("pcie", "collnet_chain"): (0.0, 0.0, 8.0),
                ("net", "collnet_direct"): (0.0, 0.0, 10.7), ("net", "collnet_chain"): (0.0, 0.0, 14.0),
                ("net", "nvls_tree"): (0.0, 0.0, 19.0)},
    ring_ll_quarter=True, ring_ll128_one_gpu=0.7, ll_max_hopper=(87.7, 22.5, 19.0), nvls_tree_ratio_old=True,
    ring_ar_inter_steps_2n=True, net_tree_row_one_gpu=False, ll128_blackwell=False,
    notes="all_gather/reduce_scatter: ring only; no PAT")
# 2.8-2.9: the latency tables of v2.8.4-1 (the same at v2.9.9-1), every other rule as 2.18's (below). NCCL kept
# this baseLat through 2.17, but its hwLat moved in between (the network ring Simple hop: 9.6 us at 2.8, 2.9 and
# 2.17, 28 at 2.13), so the entry stands for 2.8 and 2.9 only and 2.10-2.17 keep 2.18's rules
_R28 = replace(_R218, version="2.8", tag="v2.8.4-1",
               base_latency={"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4),
                             "nvls": (0.0, 0.0, 23.0), "nvls_tree": (0.0, 0.0, 23.0)},
               hw_latency={**_R218.hw_latency,
                           ("nvlink", "tree"): (0.52, 1.25, 28.0), ("nvlink", "ring"): (0.47, 1.9, 3.4),
                           ("pcie", "tree"): (1.0, 1.9, 28.0), ("pcie", "ring"): (1.0, 2.5, 5.7),
                           ("net", "tree"): (5.0, 8.5, 28.0), ("net", "ring"): (2.7, 4.0, 9.6)},
               through=(2, 9),
               notes="2.8-2.9's latency tables (baseLat, hwLat; v2.8.4-1 = v2.9.9-1); every other rule as 2.18's")
_R219 = replace(_R218, version="2.19", tag="v2.19.4-1", ag_rs_algorithms=("ring", "nvls"),
                base_latency={"tree": (6.8, 14.0, 0.0)},
                hw_latency={**_OLD_LAT, ("nvlink", "nvls"): (0.0, 0.0, 23.0), ("nvlink", "nvls_tree"): (0.0, 0.0, 23.0)},
                nvls_tree_ratio_old=False, notes="NVLS all_gather/reduce_scatter; tree Simple hop 28 us")
_R221 = replace(_R219, version="2.21", tag="v2.21.5-1", ag_rs_algorithms=("ring", "nvls", "collnet_direct"),
                hw_latency=dict(_OLD_LAT), ring_ll_quarter=False, ll_max_hopper=(141.0, 45.0, 35.0),
                notes="CollNetDirect all_gather/reduce_scatter; ring LL at 1/2; Hopper llMaxBw 141")
_R223 = replace(_R221, version="2.23", tag="v2.23.4-1", ag_rs_algorithms=("ring", "nvls", "collnet_direct", "pat"),
                base_latency={}, hw_latency={}, ring_ll128_one_gpu=0.92, ring_ar_inter_steps_2n=False,
                net_tree_row_one_gpu=True, pat_bus_factor=0.85,
                notes="PAT for all_gather/reduce_scatter with 1 GPU per node (NCCL_PAT_ENABLE); tree Simple hop 4/14 us")
_R224 = replace(_R223, version="2.24", tag="v2.24.3-1", pat_bus_factor=0.75, notes="PAT busBw x .75 (was .85)")
_R225 = replace(_R224, version="2.25", tag="v2.25.1-1", ll128_blackwell=True, notes="LL128 on Blackwell (sm100)")
_R227 = replace(_R225, version="2.27", tag="v2.27.7-1", notes="the tables of sim/nccl/constants.py")
_R228 = replace(_R227, version="2.28", tag="v2.28.9-1",
                hw_latency={("net", "nvls_tree"): (0.0, 0.0, 20.9)},
                blackwell_caps={"ring_ll128": (73.4, 34.6, 73.4), "tree_ll128": (55.6, 31.67, 20.0),
                                "tree": (70.0, 42.8, 24.0)},
                nvls_efficiency_model=True,
                nvls_tree_caps={"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 43.8)},
                notes="NVLS busBw from nvlsEfficiency (algBw as a ring's); NVLSTree network hop 20.9 us; "
                      "Blackwell per-channel caps lowered")
_R229 = replace(_R228, version="2.29", tag="v2.29.7-1",
                blackwell_caps={**_R228.blackwell_caps, "ring_ll128": (40.0, 40.0, 40.0)},
                nvls_tree_correction_x86=True,
                notes="Blackwell ring LL128 cap 40 GB/s per channel (34.5/34.6/34.5 in 2.29.2-2.29.6); "
                      "treeCorrectionFactor on NVLSTree all_reduce on Blackwell with x86 hosts")
_R230 = replace(_R229, version="2.30", tag="v2.30.7-1",
                nvls_tree_caps={"hopper": (0.0, 57.7, 45.5), "blackwell": (0.0, 96.0, 80.0)},
                notes="Blackwell NVLSTree N4 cap 80")

RELEASES: tuple[Release, ...] = (_R28, _R218, _R219, _R221, _R223, _R224, _R225, _R227, _R228, _R229, _R230)
LATEST = RELEASES[-1]
OLDEST = RELEASES[0]


def parse_version(text) -> tuple[int, int]:
    """``"2.27"``, ``"2.27.7"`` or ``"2.27.7-1"`` -> (2, 27); a clear error otherwise."""
    s = str(text).strip().lstrip("v")
    parts = s.split("-")[0].split(".")
    try:
        major, minor = int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        raise CollsimError(f"NCCL version {text!r} is not MAJOR.MINOR: give one such as 2.27 "
                           f"(modelled: {', '.join(r.version for r in RELEASES)})") from None
    return major, minor


def patch_asked(version, rel: Release) -> str:
    """``"2.27.3"`` where a patch release was asked for and ``rel``'s rules are another's (v2.27.7-1): collsim
    reads one release of each minor version, so ``collsim simulate``'s header says whose rules ran.

    >>> patch_asked("2.27.3", release("2.27")), patch_asked("2.27", release("2.27")), patch_asked("2.27.07", release("2.27"))
    ('2.27.3', '', '')
    """
    def numbers(text: str) -> tuple[int, ...] | None:
        try:
            return tuple(int(p) for p in str(text).strip().lstrip("v").split("-")[0].split("."))
        except ValueError:
            return None
    asked, read = numbers(version), numbers(rel.tag or "")
    if not isinstance(version, str) or not asked or len(asked) < 3 or not read or asked[:3] == read[:3]:
        return ""
    return ".".join(map(str, asked[:3]))


def release(version=None) -> Release:
    """The rules of NCCL ``version`` (default: the newest documented): the newest table entry not after it."""
    if version is None or version == "":
        return LATEST
    if isinstance(version, Release):
        return version
    want = parse_version(version)
    if want < OLDEST.key():
        raise CollsimError(f"NCCL {version} is older than the oldest release collsim models ({OLDEST.version}): "
                           f"give --nccl-version {OLDEST.version} or later")
    if want > LATEST.key():
        raise CollsimError(f"NCCL {version} is newer than the newest release collsim documents ({LATEST.version}): "
                           f"give --nccl-version {LATEST.version} or older")
    gap = _between(want)
    if gap is not None:
        entry, nxt = gap
        last = ".".join(map(str, entry.through or entry.key()))
        raise CollsimError(f"NCCL {version} falls between the releases collsim models ({entry.version} stands for "
                           f"{entry.version}-{last}, and NCCL changed its latency tables before {nxt.version}): give "
                           f"--nccl-version {nxt.version}, whose rules validate scores such a run with, or {entry.version}")
    return [r for r in RELEASES if r.key() <= want][-1]


def _between(key: tuple[int, int]) -> tuple[Release, Release] | None:
    """(entry, next entry) where ``key`` is past what an entry stands for (``through``) and before the next."""
    for r, nxt in zip(RELEASES, RELEASES[1:]):
        if r.through is not None and r.through < key < nxt.key():
            return r, nxt
    return None


def nearest_documented(key: tuple[int, int]) -> Release | None:
    """The documented release that stands for ``key`` (MAJOR, MINOR) outside them: the oldest for an older one,
    the newest for a newer one, the next entry for one between an entry's last minor and the next (a 2.13 run
    is scored with 2.18's rules); None for a key an entry stands for.

    >>> nearest_documented((2, 6)).version, nearest_documented((2, 13)).version, nearest_documented((2, 9))
    ('2.8', '2.18', None)
    """
    gap = _between(key)
    if gap is not None:
        return gap[1]
    return OLDEST if key < OLDEST.key() else LATEST if key > LATEST.key() else None


def unmodelled_spans() -> list[tuple[str, str]]:
    """(the minor releases between an entry's last one and the next entry, the entry whose rules they get), as
    :func:`nearest_documented` maps them: [("2.10-2.17", "2.18")]."""
    return [(f"{r.through[0]}.{r.through[1] + 1}-{nxt.key()[0]}.{nxt.key()[1] - 1}", nxt.version)
            for r, nxt in zip(RELEASES, RELEASES[1:]) if r.through is not None and (r.through[0], r.through[1] + 1) < nxt.key()]


def rules_why(version: str, rel: Release) -> str:
    """Why a run of NCCL ``version`` is predicted with entry ``rel``'s rules ("" for its own minor release's).

    >>> rules_why("2.13.4", release("2.18"))[:48]
    ' (collsim does not model 2.10-2.17: NCCL changed'
    """
    key = parse_version(version)
    if key == rel.key():
        return ""
    if key < OLDEST.key():
        return f" ({version} is older than the oldest release collsim models)"
    if key > LATEST.key():
        return f" ({version} is newer than the newest release collsim models)"
    gap = _between(key)
    if gap is not None:   # between an entry's last release and the next entry (2.10-2.17): the next one's
        span = next(s for s, entry in unmodelled_spans() if entry == gap[1].version)
        return (f" (collsim does not model {span}: NCCL changed its latency tables in between; such a run gets the "
                "next modelled release's rules, as collsim validate scores it)")
    stands = f"{rel.version}-{rel.through[0]}.{rel.through[1]}" if rel.through else "it"
    return (f" ({version} is not in collsim's table of releases, which lists those where NCCL changed what the model "
            f"reads: {rel.version}'s entry stands for {stands})")


__all__ = ["LATEST", "OLDEST", "RELEASES", "Release", "nearest_documented", "parse_version", "release", "rules_why",
           "unmodelled_spans"]
