"""Preset topologies by name, and the spec syntax ``NAME[:key=value,...]``.

A preset is a function that takes keyword parameters and returns a :class:`~sim.topology.Topology`.
:func:`register` declares it with its parameters and their types, so a spec is checked before the
builder runs: an unknown name or key, or a value of the wrong type, is a clear error.

>>> from sim.presets import load_topology
>>> load_topology("ring:n=4,bandwidth_GBps=50").nranks
4
"""
from __future__ import annotations

import inspect
import os
import weakref
from dataclasses import dataclass, replace
from typing import Callable

from ..errors import CollsimError
from ..io.validation import (
    GPU_LIMIT,
    MAX_GBPS,
    MAX_PARAM,
    MAX_RANKS,
    MAX_US,
    MIN_GBPS,
    bandwidth_GBps,
    number,
    parse_number,
    whole,
)
from ..topology import Topology


@dataclass(frozen=True)
class Preset:
    name: str
    builder: Callable[..., Topology]
    params: dict  # name -> (type, default)
    summary: str


_PRESETS: dict[str, Preset] = {}
# topologies a preset builder made, as built (an NCCL XML's machine too: the preset's own links, renamed): the
# large-scale model rebuilds a replica from their spec without checking them (sim.prediction.replica.preset_of)
AS_BUILT: "weakref.WeakSet[Topology]" = weakref.WeakSet()


def register(name: str, summary: str):
    """Decorator: declare ``builder(**params)`` as preset ``name``; the signature's defaults and
    annotations (int/float/bool/str) are the parameters."""
    def deco(fn):
        sig = inspect.signature(fn)
        params = {}
        for p in sig.parameters.values():
            typ = p.annotation if isinstance(p.annotation, type) else {"int": int, "float": float, "bool": bool, "str": str}.get(str(p.annotation).split(" ")[0], str)
            params[p.name] = (typ, p.default)
        _PRESETS[name] = Preset(name, fn, params, summary)
        return fn
    return deco


def presets() -> dict[str, Preset]:
    _load_builtin()
    return dict(_PRESETS)


def _load_builtin() -> None:
    import importlib.util

    from . import simple  # noqa: F401  (registers ring, fully-connected, switch)
    if importlib.util.find_spec(f"{__name__}.hardware") is not None:
        from . import hardware  # noqa: F401  (dgx-*, gb200-nvl72, hgx-a100-4, pcie)


def _convert(preset: Preset, key: str, raw: str):
    """A spec value as the parameter's type, finite and in range (``n=inf``, ``n=1e400`` are refused)."""
    typ, _ = preset.params[key]
    what = f"preset {preset.name!r}: {key}"
    if typ is bool:
        low = raw.strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise CollsimError(f"{what}={raw!r} is not on or off: use 1 or 0 (true/false, yes/no, on/off)")
    if typ is int:
        try:
            value = float(raw)
        except ValueError:
            raise CollsimError(f"{what}={raw!r} is not a valid int: give a whole number such as 8") from None
        # the whole-number check first, without the generic bound: the preset states its own range
        # ("nodes=2.5 ... at most 1048576" named a limit no preset has)
        count = whole(whole(number(value, what, example="8"), what), what)
        if count > MAX_RANKS:   # a GPU count said as the presets' own limits say it (nodes=16385: "... 131,072 GPUs")
            limit = GPU_LIMIT if key in ("nodes", "gpus", "n", "gpus_per_node") else f"at most {MAX_RANKS}"
            raise CollsimError(f"{what}={count} is out of range ({limit}): give a smaller {key}")
        return count
    if typ is float:  # finite and within the documented limits (sim.io.validation); builders check the rest
        value = parse_number(raw, what)
        # the limits here; a zero or negative value gets the builder's own message
        if key.endswith("GBps"):
            return bandwidth_GBps(value, what) if value > 0 else value
        if key.endswith("gbps"):   # a NIC speed in Gb/s: the same limits, in bits
            value = number(value, what, high=8 * MAX_GBPS, example="400")
            if 0 < value < 8 * MIN_GBPS:
                raise CollsimError(f"{what} {value:g} Gb/s is below {8 * MIN_GBPS:g} Gb/s, no NIC's speed: give Gb/s, e.g. 400")
            return value
        if key.endswith("_us"):
            return number(value, what, high=MAX_US, example="1.5")
        return number(value, what, high=MAX_PARAM)
    return raw
    return raw


def parse_spec(spec: str) -> tuple[str, dict[str, str]]:
    """``"ring:n=8,latency_us=1"`` -> ``("ring", {"n": "8", "latency_us": "1"})``."""
    name, _, rest = spec.strip().partition(":")
    params: dict[str, str] = {}
    for item in filter(None, (s.strip() for s in rest.split(","))):
        key, eq, value = item.partition("=")
        if not eq or not key.strip() or not value.strip():
            raise CollsimError(f"cannot read {item!r} in topology spec {spec!r}: write key=value pairs separated by commas, e.g. ring:n=8,bandwidth_GBps=100")
        if key.strip() in params:
            raise CollsimError(f"topology spec {spec!r} sets {key.strip()!r} twice: give each key once")
        params[key.strip()] = value.strip()
    return name.strip(), params


def spec_notes(spec: "str | object") -> list[str]:
    """What a preset spec means where a reader may take it otherwise (printed by ``collsim simulate``).

    >>> spec_notes("gb200-nvl72:nodes=18,gpus_per_node=4")[0][:60]
    'gb200-nvl72: nodes=18,gpus_per_node=4 is 18 separate NVLink '
    >>> spec_notes("gb200-nvl72:nodes=2"), spec_notes("dgx-h100:nodes=4")
    ([], [])
    """
    from .hardware import RACK_SCALE_GPUS
    if not isinstance(spec, str) or spec.lower().endswith((".json", ".yaml", ".yml", ".xml", ".txt")):
        return []
    try:
        name, params = parse_spec(spec)
        rack, preset = RACK_SCALE_GPUS.get(name), presets().get(name)
        if not rack or preset is None:
            return []
        nodes, per_node = (_convert(preset, k, params[k]) if k in params else None for k in ("nodes", "gpus_per_node"))
    except CollsimError:
        return []   # a bad spec is refused, with its own message, where it is loaded
    if nodes and nodes > 1 and per_node and per_node < rack:
        return [f"{name}: nodes={nodes},gpus_per_node={per_node} is {nodes} separate NVLink domains of {per_node} GPUs "
                f"joined by the network (a node here is one NVLink domain, not a compute tray); one rack of {rack} GPUs on "
                f"NVLink is {name}:nodes=1, {nodes} racks {name}:nodes={nodes}"]
    return []


def split_xml_spec(spec: str):
    """``"node.xml:nodes=2,fabric=roce"`` -> ``("node.xml", {"nodes": "2", "fabric": "roce"})``; None when
    the spec is not an XML file.

    >>> split_xml_spec("a/b.XML:nodes=2"), split_xml_spec("dgx-h100:nodes=2")
    (('a/b.XML', {'nodes': '2'}), None)
    """
    i = spec.lower().rfind(".xml")
    if i < 0 or not (spec[i + 4:] == "" or spec[i + 4:].startswith(":")):
        return None
    return spec[:i + 4], parse_spec("xml" + spec[i + 4:])[1]


def load_topology_xml(path: str, params: dict[str, str]) -> Topology:
    """The cluster an NCCL topology XML file describes: its node as the matching hardware preset
    (:mod:`sim.topology.nccl_xml` says what is read), with the spec's other keys passed to that preset."""
    from ..topology.nccl_xml import node_preset_from_xml
    preset_spec, read = node_preset_from_xml(path, params)
    topo = load_topology(preset_spec)
    hardware = replace(topo.hardware, source_xml=os.path.abspath(path), xml_preset=preset_spec, xml_read=tuple(read))
    built = Topology.build(f"{os.path.basename(path)}({topo.name})", topo.nodes, topo.links, hardware)
    AS_BUILT.add(built)
    return built


def load_topology(spec: "str | Topology") -> Topology:
    """A topology from a preset spec, a ``.yaml``/``.yml``/``.json`` path, an NCCL topology ``.xml``
    (``FILE.xml[:nodes=N,...]``, :mod:`sim.topology.nccl_xml`), or a Topology (returned as is)."""
    if isinstance(spec, Topology):
        return spec
    if not isinstance(spec, str) or not spec.strip():
        raise CollsimError("no topology given: pass a preset spec such as ring:n=8 or a .yaml/.json file")
    xml = split_xml_spec(spec)
    if xml is not None:   # NCCL's topology XML, FILE.xml[:nodes=N,...]
        return load_topology_xml(*xml)
    if spec.lower().endswith((".yaml", ".yml", ".json")) or os.sep in spec:
        from ..topology.files import load_topology_file
        return load_topology_file(spec)
    if spec.startswith("local:") and not os.path.exists(spec):
        # the "topology" field of collsim bench's JSON names where it ran (local:gloo:2), not a machine to model
        raise CollsimError(f"{spec!r} names where collsim bench ran, not a topology: calibrate the machine first "
                           "(collsim calibrate BENCH.json --out local.yaml) and pass --topology local.yaml, or give a preset")
    name, raw = parse_spec(spec)
    table = presets()
    if name not in table and os.path.isfile(name):   # a file in this folder (dgx.txt, t.json:nodes=2): its own message
        from ..topology.files import load_topology_file
        return load_topology_file(spec)
    if name not in table:
        raise CollsimError(f"unknown topology preset {name!r}: choose one of {', '.join(sorted(table))}, or give a .yaml/.json file")
    preset = table[name]
    kwargs = {}
    for key, value in raw.items():
        if key not in preset.params:
            raise CollsimError(f"preset {name!r} has no parameter {key!r}: its parameters are {', '.join(preset.params)}")
        kwargs[key] = _convert(preset, key, value)
    topo = preset.builder(**kwargs)
    AS_BUILT.add(topo)
    return topo
