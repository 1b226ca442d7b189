"""Topologies from YAML or JSON files, parsed safely (``yaml.safe_load``, size and count limits).

Format (YAML shown; JSON has the same keys)::

    name: dgx1-cube-mesh           # optional
    defaults: {bandwidth_GBps: 25, latency_us: 0.7, kind: nvlink}   # optional, for links
    nodes:
      - {name: gpu0, kind: gpu, host: 0}          # kind: gpu | nic | switch | cpu
      - {name: sw, kind: switch, reduce: sharp}   # reduce: sharp | nvls (in-network reduction)
    links:
      - {src: gpu0, dst: gpu1, duplex: true}      # duplex: also add dst -> src
      - {src: gpu0, dst: sw, bandwidth_GBps: 50, latency_us: 1, kind: net}

Shorthand: ``gpus: 8`` instead of a node list declares gpu0..gpu7.
"""
from __future__ import annotations

import math
import os
import re

from ..errors import CollsimError
from ..io.printable import printable
from ..io.safe_io import load_json, load_yaml, read_input
from ..io.validation import GPU_LIMIT, MAX_GPUS, MAX_RANKS, bandwidth_GBps, latency_us, whole
from . import Link, Node, Topology
from .fabrics import get_fabric
from .hardware import Hardware

MAX_FILE_BYTES = 32 << 20
MAX_ITEMS = 2_000_000
_NODE_KEYS = {"name", "kind", "host", "reduce", "reduce_bandwidth_GBps", "reduce_latency_us", "label"}
_LINK_KEYS = {"src", "dst", "bandwidth_GBps", "latency_us", "kind", "duplex"}
_META_COUNTS = {"nodes", "gpus", "nranks", "gpus_per_node", "nics_per_node", "nvlink_links"}
_META_FLAGS = {"nvswitch", "nvls_sharp"}
# `nvidia-smi topo -m` output, the likeliest other file given here: its matrix's first row reads "GPU0  X  ..."
# (sim/topology/nvidia_smi.py reads it; not imported here, as that reader builds through the presets)
_NVIDIA_SMI_ROW = re.compile(r"^\s*GPU0\s+X(?:\s|$)", re.M)


def load_topology_file(path: str) -> Topology:
    """Read a topology from ``path`` (.yaml/.yml/.json): a regular file, parsed safely (duplicate keys and
    deep nesting refused, see :mod:`sim.io.safe_io`)."""
    if not os.path.exists(path):
        _refuse_parameters(path)
        raise CollsimError(f"topology file {path!r} does not exist: give a path to a .yaml/.json file or a preset such as ring:n=8")
    text = read_input(path, "topology file", MAX_FILE_BYTES)
    if _NVIDIA_SMI_ROW.search(text):   # say what the file is, not where YAML fails on it
        raise CollsimError(f"{path!r} holds `nvidia-smi topo -m` output, not a topology file: make one with `collsim topo "
                           f"--from-nvidia-smi {path}:gpu=NAME --format json > t.json` (NAME: h100, a100, ...), then pass -t t.json")
    data = load_json(text, path) if path.lower().endswith(".json") else load_yaml(text, path)
    return topology_from_dict(data, source=path)


def _refuse_parameters(spec: str) -> None:
    """``FILE:key=value`` where FILE exists: topology files take no parameters (only presets and NCCL's .xml
    do), so say that rather than that ``FILE:key=value`` does not exist."""
    cut = next((i for i, ch in enumerate(spec) if ch == ":" and os.path.isfile(spec[:i])), None)
    if cut is None:
        return
    path, params = spec[:cut], spec[cut + 1:]
    if path.lower().endswith((".yaml", ".yml", ".json")):
        raise CollsimError(f"topology file {path!r} takes no parameters (':{params}'): only presets (NAME:key=value) and NCCL "
                           f"topology files (FILE.xml:key=value) do; drop ':{params}' and pass the file, or make a file with "
                           f"them from the spec it came from (`collsim topo SPEC:{params} --format json > t.json`)")
    raise CollsimError(f"{path!r} is not a topology file that takes parameters (':{params}'): only presets (NAME:key=value) "
                       f"and NCCL topology files (FILE.xml:key=value) do; for `nvidia-smi topo -m` output use `collsim topo "
                       f"--from-nvidia-smi {spec} --format json > t.json`, then -t t.json")


def _check_meta(meta: dict, source: str) -> dict:
    """Hardware facts the NCCL model reads: numbers where numbers are meant, in range."""
    for key, value in meta.items():
        k = str(key)
        what = f"topology file {source!r}: meta.{k}"
        if k.lower().endswith("_gbps"):
            if k.lower().startswith("nic_") and value == 0 and meta.get("nics_per_node") == 0:
                continue  # a box without NICs: no NIC speed to check
            if k.lower().startswith("nvlink") and value == 0 and meta.get("nvlink_links") == 0:
                continue  # PCIe GPUs without NVLink (what `collsim topo pcie:... --format json` writes)
            bandwidth_GBps(value, what)
        elif k.endswith("_us"):
            latency_us(value, what)
        elif k in _META_COUNTS or k.endswith(("_links", "_per_node")):
            # a single box may have no NICs (nics_per_node: 0) and PCIe GPUs no NVLinks
            whole(value, what, low=0 if k in ("nvlink_links", "nics_per_node") else 1, high=MAX_RANKS)
        elif k in _META_FLAGS and not isinstance(value, bool):
            raise CollsimError(f"{what} {value!r} must be true or false")
    return meta


def topology_from_dict(data, source: str = "<dict>") -> Topology:
    """Build and validate a topology from plain data (the file format above)."""
    if not isinstance(data, dict):
        raise CollsimError(f"topology file {source!r} must hold a mapping with 'nodes' (or 'gpus') and 'links', not {type(data).__name__}")
    unknown = set(data) - {"name", "nodes", "gpus", "links", "defaults", "meta"}
    if unknown:
        raise CollsimError(f"topology file {source!r}: unknown key(s) {', '.join(sorted(map(str, unknown)))}: use name, nodes, gpus, links, defaults, meta")
    # Names are the file's text, printed in every report header (and the file's own name may hold anything):
    # control characters, bidi overrides and line breaks are escaped here, once, so none reaches a terminal
    # or breaks nccl-tests' one-line '#' header. Node names are escaped alike in nodes and links, so a link
    # still finds its node (two names equal once escaped are refused as a name used twice).
    name = printable(data.get("name") or os.path.basename(source))
    nodes_raw = data.get("nodes")
    if nodes_raw is None and "gpus" in data:
        count = data["gpus"]
        count = whole(count, f"topology file {source!r}: gpus", low=2, high=MAX_ITEMS)
        nodes_raw = [{"name": f"gpu{i}", "kind": "gpu"} for i in range(count)]
    if not isinstance(nodes_raw, list) or not nodes_raw:
        raise CollsimError(f"topology file {source!r}: 'nodes' must be a non-empty list of {{name, kind}} mappings")
    links_raw = data.get("links")
    if not isinstance(links_raw, list) or not links_raw:
        raise CollsimError(f"topology file {source!r}: 'links' must be a non-empty list of {{src, dst, bandwidth_GBps, latency_us}} mappings")
    if len(nodes_raw) + len(links_raw) > MAX_ITEMS:
        raise CollsimError(f"topology file {source!r} has more than {MAX_ITEMS} nodes and links")
    defaults = data.get("defaults") or {}
    if not isinstance(defaults, dict) or set(defaults) - {"bandwidth_GBps", "latency_us", "kind"}:
        raise CollsimError(f"topology file {source!r}: 'defaults' may set bandwidth_GBps, latency_us and kind only")
    nodes = []
    for i, n in enumerate(nodes_raw):
        where = f"topology file {source!r}, node #{i}"
        if not isinstance(n, dict):
            raise CollsimError(f"{where}: must be a mapping like {{name: gpu0, kind: gpu}}")
        bad = set(n) - _NODE_KEYS
        if bad:
            raise CollsimError(f"{where}: unknown key(s) {', '.join(sorted(map(str, bad)))}; allowed: {', '.join(sorted(_NODE_KEYS))}")
        if not isinstance(n.get("name"), (str, int)) or isinstance(n.get("name"), bool):
            raise CollsimError(f"{where}: 'name' is missing or not a string")
        host = n.get("host")
        if host is not None and (not isinstance(host, int) or isinstance(host, bool) or host < 0):
            raise CollsimError(f"{where}: host must be a whole number from 0 (the server index), got {host!r}")
        nodes.append(Node(printable(n["name"]), str(n.get("kind", "gpu")), host, n.get("reduce"),
                          bandwidth_GBps(n["reduce_bandwidth_GBps"], f"{where}: reduce_bandwidth_GBps")
                          if "reduce_bandwidth_GBps" in n else math.inf,
                          latency_us(n.get("reduce_latency_us", 0.0), f"{where}: reduce_latency_us"),
                          printable(n.get("label", ""))))
    links = []
    for i, l in enumerate(links_raw):
        where = f"topology file {source!r}, link #{i}"
        if not isinstance(l, dict):
            raise CollsimError(f"{where}: must be a mapping like {{src: gpu0, dst: gpu1, bandwidth_GBps: 100}}")
        bad = set(l) - _LINK_KEYS
        if bad:
            raise CollsimError(f"{where}: unknown key(s) {', '.join(sorted(map(str, bad)))}; allowed: {', '.join(sorted(_LINK_KEYS))}")
        if "src" not in l or "dst" not in l:
            raise CollsimError(f"{where}: needs both 'src' and 'dst'")
        merged = {**defaults, **l}
        if "bandwidth_GBps" not in merged:
            raise CollsimError(f"{where}: no bandwidth_GBps (set it on the link or under defaults)")
        bw = bandwidth_GBps(merged["bandwidth_GBps"], f"{where}: bandwidth_GBps")
        lat = latency_us(merged.get("latency_us", 0.0), f"{where}: latency_us")
        kind = str(merged.get("kind", "nvlink"))
        src, dst = printable(l["src"]), printable(l["dst"])
        links.append(Link(src, dst, bw, lat, kind))
        if l.get("duplex"):
            links.append(Link(dst, src, bw, lat, kind))
    meta = data.get("meta") or {}
    if not isinstance(meta, dict):
        raise CollsimError(f"topology file {source!r}: 'meta' must be a mapping")
    # the summary prints meta's keys and text values (`collsim topo`): escaped as the names are
    meta = {printable(k) if isinstance(k, str) else k: printable(v) if isinstance(v, str) else v for k, v in meta.items()}
    meta = _check_meta(meta, source)
    if "fabric" in meta:   # the scale-out network (sim.topology.fabrics.FABRICS)
        try:
            meta = {**meta, "fabric": get_fabric(meta["fabric"]).name}
        except CollsimError as e:
            raise CollsimError(f"topology file {source!r}: meta: {e}") from None
    gpus = sum(1 for n in nodes if n.kind == "gpu")
    if gpus > MAX_GPUS:   # the presets' limit holds for files too (README: at most 131,072 GPUs)
        raise CollsimError(f"topology file {source!r} has {gpus:,} GPUs: {GPU_LIMIT}; describe a slice of the cluster")
    return Topology.build(name, nodes, links, Hardware.from_meta(meta, f"topology file {source!r}: meta"))
