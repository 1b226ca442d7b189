"""NCCL as a run configured it: the release (:mod:`sim.nccl.versions`) and the NCCL_* variables.

The tuner reads the configuration in force through one context, :func:`current` (a
:class:`contextvars.ContextVar`, the newest release with no variables unless a block says otherwise), as
it reads the calibration (:mod:`sim.nccl.calibration`): ``sim.simulate(..., nccl_version=, nccl_env=)``
and ``collsim simulate --nccl-version/--nccl-env`` put one in force with :func:`use`.

Variables the model honours (:data:`HONOURED`); any other ``NCCL_*`` is listed in
:attr:`NcclConfig.ignored` (the CLI prints them on one stderr line):

* ``NCCL_ALGO``, ``NCCL_PROTO``: NCCL's own syntax (``tuning.cc parseList``): ``Ring,Tree``,
  ``^NVLS`` (all but), ``allreduce:tree;allgather:ring`` (per collective, ``;``-separated, only the
  first list without a prefix; from 2.24, before which a prefixed token names nothing), case-insensitive; up
  to 2.23, without CollNet, a list leaving no ring, tree, NVLS or NVLSTree gets ring and tree back, as NCCL
  gives them; an NCCL_PROTO list that enables LL128 (``LL128``, ``^LL``)
  forces it on past NCCL's hardware check, as NCCL itself does (:meth:`NcclConfig.proto_forced`);
* ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` and ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS``: bounds on the
  channels NCCL runs (a CTA runs one channel), the maximum first and then the minimum, as ``connect.cc`` does
  (a minimum above the maximum duplicates the first channels); below the search's channels they also bound the
  bandwidth (each channel at most its search speed) and the NICs a ring crosses on (one per distinct channel);
  NVLS's own channels know only the CTA bounds (``transport/nvls.cc``);
* ``NCCL_NVLS_ENABLE=0`` (no NVLS/NVLSTree), ``NCCL_COLLNET_ENABLE=0`` (no CollNet, hence no multi-node
  NVLS), ``NCCL_PAT_ENABLE=0`` (no PAT; 1 or 2 leave it to NCCL's own rule: one GPU per node);
* three libfabric variables of the aws-ofi-nccl plugin's transport on Slingshot (cxi), which decide what
  receiving a small message costs (:func:`sim.nccl.tuner._recv_copy_us`): ``FI_CXI_RX_MATCH_MODE``
  (``hardware``, the provider's default; ``software``; ``hybrid``), ``FI_HMEM_CUDA_USE_GDRCOPY`` (0/1) and
  ``FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD`` (bytes; 4096 by default). collsim takes GDRCopy as in use only where
  a run sets ``FI_HMEM_CUDA_USE_GDRCOPY=1``: libfabric uses it by default only when it was built with it and
  the gdrdrv kernel module is loaded, which a run's variables do not say;
* ``NCCL_BUFFSIZE``, ``NCCL_LL128_BUFFSIZE``, ``NCCL_LL_BUFFSIZE``: bytes of a connection's buffer for Simple,
  LL128 and LL (``init.cc``: 4 MiB, 4,915,200 and 524,288 by default). An eighth of it (``NCCL_STEPS``) is
  one step, and a chunk is a step (trees, CollNet) or four (ring Simple), before NCCL's small-size halving
  (``enqueue.cc``), so it sets the grain the model pipelines at. NVLS keeps its own chunk
  (``NCCL_NVLS_CHUNKSIZE``) and point-to-point sends theirs (``NCCL_P2P_*_CHUNKSIZE``, not modelled);
* ``NCCL_TUNER_PLUGIN`` naming aws-ofi-nccl's tuner (a library name containing ``ofi``, such as
  ``libnccl-ofi-tuner.so``): its region tuner picks the pair on P5/P5e all_reduce
  (:mod:`sim.nccl.tuner_plugin`). Any other plugin is listed as ignored: collsim predicts NCCL's own choice.

>>> c = make_config(env="NCCL_ALGO=^NVLS,NCCL_MIN_NCHANNELS=32,NCCL_IB_HCA=mlx5")
>>> c.algo_enabled("all_reduce", "nvls"), c.algo_enabled("all_reduce", "ring"), c.min_channels, c.ignored
(False, True, 32, ('NCCL_IB_HCA',))
>>> make_config(env="NCCL_ALGO=allreduce:tree").algo_enabled("all_gather", "ring")
True
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields
from functools import cached_property

from ..collectives import NCCL_FUNC_NAMES
from ..errors import CollsimError
from . import tuner_plugin, versions
from .constants import BUFFER_BYTES

# NCCL's spellings (ncclAlgoStr / ncclProtoStr) -> collsim's names; "CollNet" is the pre-2.14 spelling
ALGO_NAMES = {"tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
              "collnet": "collnet_direct", "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
PROTO_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
HONOURED = {
    "NCCL_ALGO": "algorithms NCCL may use (NCCL syntax: Ring,Tree / ^NVLS / allreduce:tree;allgather:ring)",
    "NCCL_PROTO": "protocols NCCL may use (LL, LL128, Simple; same syntax); a list that enables LL128 forces it past "
                  "NCCL's hardware check (paths, GPU), as NCCL does",
    "NCCL_MIN_NCHANNELS": "at least this many channels run (NCCL's estimate, and so its choice, counts its search's)",
    "NCCL_MAX_NCHANNELS": "at most this many channels run (likewise)",
    "NCCL_MIN_CTAS": "at least this many CTAs (= channels), NVLS's channels too",
    "NCCL_MAX_CTAS": "at most this many CTAs (= channels), NVLS's channels too",
    "NCCL_NVLS_ENABLE": "0 disables NVLS and NVLSTree",
    "NCCL_COLLNET_ENABLE": "0 disables CollNet (and with it multi-node NVLS)",
    "NCCL_PAT_ENABLE": "0 disables PAT",
    "FI_CXI_RX_MATCH_MODE": "Slingshot (cxi) tag matching: hardware (default), software or hybrid; with software every "
                            "small message is copied from a host buffer into GPU memory",
    "FI_HMEM_CUDA_USE_GDRCOPY": "1: that copy goes through GDRCopy (cheap) up to FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD; "
                                "otherwise cudaMemcpy (taken as off unless set to 1)",
    "FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD": "largest message (bytes) GDRCopy copies (default 4096)",
    "NCCL_BUFFSIZE": "bytes of a connection's Simple buffer (default 4 MiB): an eighth is one step, the chunk of trees "
                     "and CollNet, four steps a ring's (NVLS and point-to-point sends keep their own chunk)",
    "NCCL_LL128_BUFFSIZE": "bytes of a connection's LL128 buffer (default 4915200): an eighth is one LL128 chunk",
    "NCCL_LL_BUFFSIZE": "bytes of a connection's LL buffer (default 524288): an eighth is one LL step",
    "NCCL_TUNER_PLUGIN": "aws-ofi-nccl's tuner (a name containing 'ofi', e.g. libnccl-ofi-tuner.so; NCCL 2.19+): its "
                         "region tuner (aws-ofi-nccl 1.15-1.17) picks all_reduce's pair on P5/P5e over more than 2 nodes; "
                         "any other plugin is ignored",
}
# Variables that describe the machine a run had rather than NCCL's choices: the model takes them from the
# topology spec, and the CLI says which parameter when a run passes them as variables
IN_TOPOLOGY = {
    "NCCL_P2P_LEVEL": "give it as the pcie preset's p2p_level= (e.g. pcie:gpus=8,sockets=2,gpus_per_switch=1,p2p_level=SYS)",
    "NCCL_P2P_DISABLE": "give p2p=0 in a pcie preset (every pair through host memory)",
}
# the libfabric variables among them (read from the shell with the NCCL_* ones)
NET_VARIABLES = tuple(k for k in HONOURED if k.startswith("FI_"))
RX_MATCH_MODES = ("hardware", "software", "hybrid")
SAFE_DEVMEM_COPY_DEFAULT = 4096   # libfabric prov/cxi: CXIP_SAFE_DEVMEM_COPY_THRESH
MAX_COPY_THRESHOLD = 1 << 40
MAX_ENV_TEXT = 4096          # one variable's value; NCCL's own lists are a few dozen characters
MAX_CHANNELS = 64            # MAXCHANNELS (device.h)
# NCCL_BUFFSIZE and its LL/LL128 siblings -> the protocol whose buffer they size (init.cc buffSizes[])
BUFFSIZE_VARIABLES = {"NCCL_BUFFSIZE": "Simple", "NCCL_LL128_BUFFSIZE": "LL128", "NCCL_LL_BUFFSIZE": "LL"}
MIN_BUFFER_BYTES, MAX_BUFFER_BYTES = 64 << 10, 1 << 30   # 8 steps of 8 KiB .. 1 GiB a connection


@dataclass(frozen=True)
class NcclConfig:
    """A release plus the variables set. ``algos`` / ``protos``: per NCCL function name, the enabled
    collsim names (None: NCCL's default, everything). Hashable, so it can key caches."""

    release: versions.Release = versions.LATEST
    requested: str = ""                    # the version as asked (``2.26`` runs 2.25's rules)
    env: tuple[tuple[str, str], ...] = ()  # the honoured variables as given
    ignored: tuple[str, ...] = ()
    algos: tuple = ()                      # ((func, frozenset), ...)
    protos: tuple = ()
    min_channels: int | None = None        # NCCL_MIN_NCHANNELS and NCCL_MIN_CTAS, the larger
    max_channels: int | None = None        # NCCL_MAX_NCHANNELS and NCCL_MAX_CTAS, the smaller
    min_ctas: int | None = None            # NCCL_MIN_CTAS alone: NVLS's channels know only the CTA bounds
    max_ctas: int | None = None
    nvls: bool = True
    collnet: bool = True
    pat: bool = True
    rx_match: str = "hardware"             # FI_CXI_RX_MATCH_MODE
    gdrcopy: bool = False                  # FI_HMEM_CUDA_USE_GDRCOPY=1
    safe_devmem_copy: int = SAFE_DEVMEM_COPY_DEFAULT
    tuner_plugin: str = ""                 # sim.nccl.tuner_plugin.AWS_OFI, or "" (NCCL's own tuner)
    buffsizes: tuple[tuple[str, int], ...] = ()   # (protocol, bytes) set by NCCL_BUFFSIZE / NCCL_LL*_BUFFSIZE

    @cached_property
    def _hash(self) -> int:
        return hash(tuple(getattr(self, f.name) for f in fields(self)))

    def __hash__(self) -> int:
        # keys every cached prediction with the calibration (sim.nccl.context): hashed once, not per lookup,
        # as the calibration is
        return self._hash

    def __getstate__(self) -> dict:
        # a string's hash differs from process to process: a pickled copy computes its own
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}

    @property
    def version(self) -> str:
        return self.requested or self.release.version

    @property
    def pays_rendezvous(self) -> bool:
        """Whether a network message at or above the transport's rendezvous threshold pays a rendezvous under
        this tag-matching mode: not with hybrid matching (:func:`sim.nccl.tuner._rendezvous_us` says why)."""
        return self.rx_match != "hybrid"

    def buffer_bytes(self, proto: str) -> int:
        """Bytes of a connection's buffer for ``proto`` (LL, LL128, Simple): the run's NCCL_*BUFFSIZE, else
        NCCL's default (``init.cc``)."""
        for name, size in self.buffsizes:   # at most three pairs; no mapping built on this hot path
            if name == proto:
                return size
        return BUFFER_BYTES[proto]

    def algo_enabled(self, collective, algorithm: str, collnet: bool = False, machine_off: frozenset = frozenset()) -> bool:
        """Whether NCCL_ALGO lets ``algorithm`` run ``collective``; ``collnet``: the machine runs CollNet (SHARP),
        without which NCCL up to 2.23 gives ring and tree back to a list that leaves none of ring, tree, NVLS and
        NVLSTree (:attr:`sim.nccl.versions.Release.algo_fallback`), counting as left out what it had already
        turned off for the machine (``machine_off``: NVLS across nodes without CollNet, NVLSTree on one node)."""
        if _enabled(self.algos, collective, algorithm):
            return True
        return (algorithm in ("ring", "tree") and self.release.algo_fallback and not (collnet and self.collnet)
                and not any(_enabled(self.algos, collective, a) and a not in machine_off
                            for a in ("ring", "tree", "nvls", "nvls_tree")))

    def proto_enabled(self, collective, protocol: str) -> bool:
        return _enabled(self.protos, collective, protocol)

    def proto_forced(self, collective, protocol: str) -> bool:
        """Whether NCCL_PROTO turns ``protocol`` on for ``collective`` outright. NCCL starts LL128 at "decide from
        the hardware" (``protoEnable`` 2) and checks its paths and GPUs only then (``tuning.cc``: ``if (pEnable
        == 2 && p == NCCL_PROTO_LL128)``); a list that enables it (``LL128``, ``LL128,Simple``, ``^LL``) sets 1,
        which skips the check ("not tested and may cause silent data corruption", NCCL's comment)."""
        func = NCCL_FUNC_NAMES[collective if isinstance(collective, str) else collective.name]
        return any(f == func and protocol in names for f, names in self.protos)

    def channels(self, nch: int) -> int:
        """The channels NCCL runs of the ``nch`` it would run unbounded, in NCCL's order (``connect.cc``
        ``ncclTopoPostset``): at most NCCL_MAX_NCHANNELS (or CTAs) of them, then duplicated up to
        NCCL_MIN_NCHANNELS (or CTAs), so a minimum above the maximum wins ("We permit combining max, then
        min, to only use the first channels, then duplicate them").

        >>> make_config(env="NCCL_MAX_NCHANNELS=2,NCCL_MIN_NCHANNELS=8").channels(16)
        8
        >>> make_config(env="NCCL_MAX_NCHANNELS=8,NCCL_MIN_NCHANNELS=2").channels(16)
        8
        """
        return _bounded(nch, self.min_channels, self.max_channels)

    def nvls_channels(self, nch: int) -> int:
        """The channels NCCL's NVLS kernels run of the ``nch`` NVLS_NCHANNELS gives: bounded by the CTA variables
        only (``transport/nvls.cc``: ``nvlsChannels = max(minCTAs, min(maxCTAs, channels))``); NCCL_MIN/MAX_NCHANNELS
        bound the rings' and trees' channels, not these.

        >>> make_config(env="NCCL_MAX_NCHANNELS=1").nvls_channels(16), make_config(env="NCCL_MAX_CTAS=4").nvls_channels(16)
        (16, 4)
        """
        return _bounded(nch, self.min_ctas, self.max_ctas)

    def distinct_channels(self, nch: int) -> int:
        """Of the ``nch`` channels NCCL would run unbounded, those that are not copies NCCL_MIN_NCHANNELS
        made: NCCL_MAX_NCHANNELS keeps the first ones, and a minimum only duplicates what is left. A ring
        crosses nodes on one NIC per distinct channel, so these, not :meth:`channels`, say how many NICs
        carry it (NCCL_MAX_NCHANNELS=1 with NCCL_MIN_NCHANNELS=4: four CTAs, all on the first channel's NIC).

        >>> make_config(env="NCCL_MAX_NCHANNELS=1,NCCL_MIN_NCHANNELS=4").distinct_channels(16)
        1
        """
        return min(nch, self.max_channels) if self.max_channels else nch


CHANNEL_VARIABLES = {"NCCL_MIN_NCHANNELS": "min_nch", "NCCL_MAX_NCHANNELS": "max_nch",
                     "NCCL_MIN_CTAS": "min_ctas", "NCCL_MAX_CTAS": "max_ctas"}


def _channel_bounds(given: dict, max_channels: int) -> dict:
    """The configuration's channel bounds from the variables ``given`` (``CHANNEL_VARIABLES``' keys), as NCCL takes
    them: each clamped to the release's MAXCHANNELS; a CTA minimum above the CTA maximum lowered to it (``init.cc``
    envConfigOverride: "minCTAs %d is larger than maxCTAs %d, set both to %d"), where NCCL_MIN_NCHANNELS above
    NCCL_MAX_NCHANNELS stands and wins (``connect.cc``); the rings' bounds combine both pairs (the larger minimum,
    the smaller maximum), NVLS's are the CTAs' alone.

    >>> _channel_bounds({"min_ctas": 8, "max_ctas": 2}, 64)["min_channels"], _channel_bounds({"min_nch": 8, "max_nch": 2}, 64)["min_channels"]
    (2, 8)
    """
    b = {k: min(v, max_channels) for k, v in given.items() if v}
    if b.get("min_ctas") and b.get("max_ctas") and b["min_ctas"] > b["max_ctas"]:
        b["min_ctas"] = b["max_ctas"]
    lows = [b[k] for k in ("min_nch", "min_ctas") if b.get(k)]
    highs = [b[k] for k in ("max_nch", "max_ctas") if b.get(k)]
    return {"min_channels": max(lows) if lows else None, "max_channels": min(highs) if highs else None,
            "min_ctas": b.get("min_ctas"), "max_ctas": b.get("max_ctas")}


def _bounded(nch: int, low: int | None, high: int | None) -> int:
    """``nch`` at most ``high``, then at least ``low`` (NCCL's order, so a minimum above the maximum wins); None or
    0 is no bound."""
    if high:
        nch = min(nch, high)
    return max(nch, low) if low else nch


def _enabled(table, collective, name: str) -> bool:
    func = NCCL_FUNC_NAMES[collective if isinstance(collective, str) else collective.name]
    for f, names in table:
        if f == func:
            return name in names
    return True


DEFAULT = NcclConfig()
_CURRENT: ContextVar[NcclConfig] = ContextVar("collsim_nccl_config", default=DEFAULT)


def current() -> NcclConfig:
    """The configuration in force (:data:`DEFAULT`: the newest release, no variables)."""
    return _CURRENT.get()


@contextmanager
def use(config: NcclConfig):
    token = _CURRENT.set(config)
    try:
        yield config
    finally:
        _CURRENT.reset(token)


def _parse_list(value: str, var: str, names: dict) -> tuple:
    """NCCL's parseList: ``[^]a,b;func:[^]c`` -> ((func, frozenset of enabled collsim names), ...)."""
    funcs = list(NCCL_FUNC_NAMES.values())
    every = frozenset(names.values())
    table = {}
    for i, token in enumerate(t for t in value.split(";") if t.strip()):
        head, sep, elems = token.partition(":")
        prefix: str | None = head
        if not sep:
            if i:
                raise CollsimError(f"{var}={value!r}: every list after the first needs a collective prefix "
                                   "(e.g. allreduce:tree), as NCCL requires")
            prefix, elems = None, token
        exclude = elems.strip().startswith("^")
        chosen = set()
        for e in elems.strip().lstrip("^").split(","):
            key = e.strip().lower()
            if key not in names:
                raise CollsimError(f"{var}={value!r}: unknown element {e.strip()!r}: use "
                                   f"{', '.join(sorted({k for k in names if k != 'collnet'}))}")
            chosen.add(names[key])
        enabled = every - chosen if exclude else frozenset(chosen)
        targets = [f for f in funcs if prefix is None or f.lower() == prefix.strip().lower()]
        if not targets:
            raise CollsimError(f"{var}={value!r}: unknown collective prefix {prefix!r}: use "
                               f"{', '.join(f.lower() for f in funcs)}")
        for f in targets:
            table[f] = frozenset(enabled)
    return tuple(sorted(table.items()))


def absent_from_release(var: str, rel: versions.Release) -> str | None:
    """Why release ``rel`` reads no ``var`` at all (None where it does): a variable of a later release."""
    if var == "NCCL_PAT_ENABLE" and not rel.has_pat:
        return "has no PAT (from 2.23), so it reads no such variable"
    return None


def _parse_flat(value: str, names: dict) -> tuple:
    """NCCL's parseList before 2.24, for every collective alike: comma-separated names, ``^`` first to enable all
    but them; a token that is no name (``allreduce:tree``, ``NVLS;allreduce:tree``) matches nothing."""
    exclude = value.strip().startswith("^")
    chosen = {names[t.strip().lower()] for t in value.strip().lstrip("^").split(",") if t.strip().lower() in names}
    enabled = frozenset(names.values()) - chosen if exclude else frozenset(chosen)
    return tuple((f, enabled) for f in sorted(set(NCCL_FUNC_NAMES.values())))


def _whole(value: str, var: str, example: int, unit: str = "") -> int:
    """``value`` as an int, or a one-line error naming ``var`` and an example."""
    try:
        return int(value.strip())
    except ValueError:
        raise CollsimError(f"{var}={value!r} is not a whole number{unit}: give e.g. {var}={example}") from None


def _count(value: str, var: str) -> int:
    """A channel count of 1 or more; above the release's MAXCHANNELS NCCL clamps it (so does make_config)."""
    n = _whole(value, var, 16)
    if n < 1:
        raise CollsimError(f"{var}={n} is out of range: NCCL runs at least 1 channel (and at most {MAX_CHANNELS}, 32 before 2.25)")
    return n


def _flag(value: str, var: str) -> bool:
    v = value.strip()
    if v not in ("0", "1", "2"):
        raise CollsimError(f"{var}={value!r}: give 0 (off) or 1 (on)")
    return v != "0"


def _bool(value: str, var: str) -> bool:
    v = value.strip().lower()
    if v not in ("0", "1", "true", "false", "yes", "no", "on", "off"):
        raise CollsimError(f"{var}={value!r}: give 0 (off) or 1 (on)")
    return v in ("1", "true", "yes", "on")


def _bytes(value: str, var: str) -> int:
    n = _whole(value, var, 16384, " of bytes")
    if not 0 <= n <= MAX_COPY_THRESHOLD:
        raise CollsimError(f"{var}={n} is out of range: give 0..{MAX_COPY_THRESHOLD} bytes")
    return n


def _buffer(value: str, var: str) -> int:
    n = _whole(value, var, 8 << 20, " of bytes")
    if not MIN_BUFFER_BYTES <= n <= MAX_BUFFER_BYTES:
        raise CollsimError(f"{var}={n} is out of range: give {MIN_BUFFER_BYTES}..{MAX_BUFFER_BYTES} bytes "
                           f"(NCCL cuts a buffer into 8 steps; its default is {BUFFER_BYTES[BUFFSIZE_VARIABLES[var]]})")
    return n


# what an empty variable's message suggests
EXAMPLES = {"NCCL_ALGO": "NCCL_ALGO=Ring", "NCCL_PROTO": "NCCL_PROTO=Simple", "NCCL_MIN_NCHANNELS": "NCCL_MIN_NCHANNELS=32",
            "NCCL_MAX_NCHANNELS": "NCCL_MAX_NCHANNELS=8", "FI_CXI_RX_MATCH_MODE": "FI_CXI_RX_MATCH_MODE=hardware"}


def split_env(text: str) -> list[tuple[str, str]]:
    """``"NCCL_ALGO=Ring,NCCL_MIN_NCHANNELS=32"`` -> pairs. A comma starts a new variable only when an
    ``NCCL_NAME=`` (or ``FI_NAME=``) follows it, so list values (``NCCL_ALGO=Ring,Tree``) keep their commas."""
    pairs: list[list[str]] = []
    for piece in str(text).split(","):
        head, eq, rest = piece.partition("=")
        if eq and head.strip().upper().startswith(("NCCL_", "FI_")) and head.strip().replace("_", "").isalnum():
            pairs.append([head.strip(), rest])   # as given: NCCL's names are case-sensitive (nccl_algo is not NCCL_ALGO)
        elif pairs:
            pairs[-1][1] += "," + piece
        elif piece.strip():
            raise CollsimError(f"--nccl-env {text!r}: {piece!r} is not NCCL_NAME=VALUE: give e.g. "
                               "NCCL_ALGO=Ring,NCCL_MIN_NCHANNELS=32")
    return [(k, v) for k, v in pairs]


def make_config(version=None, env=None) -> NcclConfig:
    """A :class:`NcclConfig` from ``version`` (``"2.27"``, default the newest) and ``env`` (a mapping,
    a list of pairs or ``"K=V,K=V"`` text)."""
    rel = versions.release(version)
    if env is None:
        pairs = []
    elif isinstance(env, str):
        pairs = split_env(env)
    elif isinstance(env, dict):   # names as given: getenv is case-sensitive, and NCCL would not read nccl_algo
        pairs = [(str(k), str(v)) for k, v in env.items()]
    else:
        pairs = [(str(k), str(v)) for k, v in env]
    kw: dict = {}
    bounds: dict[str, int] = {}   # min_nch, max_nch, min_ctas, max_ctas as given
    honoured, ignored = [], []
    for var, value in pairs:
        if len(value) > MAX_ENV_TEXT:
            raise CollsimError(f"{var}: value of {len(value)} characters is too long (at most {MAX_ENV_TEXT})")
        if (var not in HONOURED or (var == "NCCL_TUNER_PLUGIN" and "ofi" not in value.lower())
                or absent_from_release(var, rel)):
            ignored.append(var)   # unknown, a tuner plugin collsim does not model, or a variable this release lacks
            continue
        if not value.strip():   # "NCCL_ALGO=" silently meant the default; say which variable is empty
            raise CollsimError(f"{var} is set to nothing: give it a value (e.g. {EXAMPLES.get(var, var + '=...')}) or "
                               "leave it out")
        honoured.append((var, value))
        if var in ("NCCL_ALGO", "NCCL_PROTO"):
            key, names = ("algos", ALGO_NAMES) if var == "NCCL_ALGO" else ("protos", PROTO_NAMES)
            # NCCL before 2.24 reads no collective prefix: its parseList splits on commas only
            flat = not rel.per_collective_lists and (":" in value or ";" in value)
            kw[key] = _parse_flat(value, names) if flat else _parse_list(value, var, names)
        elif var in CHANNEL_VARIABLES:
            bounds[CHANNEL_VARIABLES[var]] = _count(value, var)
        elif var == "FI_CXI_RX_MATCH_MODE":
            mode = value.strip().lower()
            if mode not in RX_MATCH_MODES:
                raise CollsimError(f"{var}={value!r}: give one of {', '.join(RX_MATCH_MODES)}")
            kw["rx_match"] = mode
        elif var == "FI_HMEM_CUDA_USE_GDRCOPY":
            kw["gdrcopy"] = _bool(value, var)
        elif var == "FI_CXI_SAFE_DEVMEM_COPY_THRESHOLD":
            kw["safe_devmem_copy"] = _bytes(value, var)
        elif var == "NCCL_TUNER_PLUGIN":
            kw["tuner_plugin"] = tuner_plugin.AWS_OFI
        elif var in BUFFSIZE_VARIABLES:
            sizes = dict(kw.get("buffsizes", ()))
            sizes[BUFFSIZE_VARIABLES[var]] = _buffer(value, var)
            kw["buffsizes"] = tuple(sorted(sizes.items()))
        else:
            kw[{"NCCL_NVLS_ENABLE": "nvls", "NCCL_COLLNET_ENABLE": "collnet", "NCCL_PAT_ENABLE": "pat"}[var]] = _flag(value, var)
    kw.update(_channel_bounds(bounds, rel.max_channels))
    # a minimum above the maximum is NCCL's own combination, not a mistake: the first MAX channels, duplicated
    # up to MIN (NcclConfig.channels)
    requested = "" if version in (None, "") else ".".join(map(str, versions.parse_version(version)))
    return NcclConfig(rel, requested, tuple(honoured), tuple(sorted(set(ignored))), **kw)


def case_config(case: dict) -> NcclConfig:
    """The configuration a published case ran with: its ``nccl_version`` (default: the one in force), clamped to
    the releases collsim models (a 2.6 run is scored with the oldest's, 2.8, a 2.13 run with 2.18's), and its
    ``nccl_env`` (a mapping or ``"K=V,..."``; variables the model does not honour are ignored)."""
    version = case.get("nccl_version")
    if version in (None, "") and not case.get("nccl_env"):
        return current()   # the configuration in force: the newest release unless a block says otherwise
    try:
        if version not in (None, ""):
            nearest = versions.nearest_documented(versions.parse_version(version))
            version = nearest.version if nearest else version
        return make_config(version, case.get("nccl_env") or None)
    except CollsimError as e:
        raise CollsimError(f"case {str(case.get('id'))[:40]}: {e}") from None


def env_from_shell(environ=None) -> list[tuple[str, str]]:
    """Every ``NCCL_*`` variable of the environment and the libfabric ones the model honours
    (``--nccl-env-from-shell``)."""
    environ = os.environ if environ is None else environ
    return sorted((k, v) for k, v in environ.items() if k.startswith("NCCL_") or k in NET_VARIABLES)


def describe_honoured() -> str:
    """One line per honoured variable (for ``--help`` and the docs)."""
    return "; ".join(f"{k}: {v}" for k, v in HONOURED.items())


__all__ = [
    "DEFAULT",
    "HONOURED",
    "IN_TOPOLOGY",
    "NET_VARIABLES",
    "NcclConfig",
    "case_config",
    "current",
    "describe_honoured",
    "env_from_shell",
    "make_config",
    "split_env",
    "use",
]
