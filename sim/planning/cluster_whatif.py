"""What-if comparisons: the same workload on other clusters, or with one knob swept.

A sweep ``KEY=V1,V2`` changes a topology preset parameter when the preset has ``KEY`` (``nics_per_node``,
``nvls``, ``sharp``, ``nodes``...) and otherwise a workload parameter (``bucket_mb``, ``shard_group``,
``tp``, ``mfu``...). Several sweeps multiply; ``--vs`` specs add clusters.

>>> from sim.planning.training_workload import from_dict
>>> w = from_dict({"model": {"params": "1B"}, "compute": {"layer_forward_ms": 1}})
>>> [label for label, _, _ in variants(w, "switch:n=8", sweeps=["bucket_mb=25,100", "n=4"])]
['switch:n=4 bucket_mb=25', 'switch:n=4 bucket_mb=100']
"""
from __future__ import annotations

import itertools

from ..errors import CollsimError
from ..presets import parse_spec, presets
from ..topology import Topology
from .training_workload import Workload, sweepable

# Configurations one `plan` compares (each plans the whole workload, ~0.1-1 s): a table of more is unread.
MAX_CONFIGS = 1000


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """``"bucket_mb=25,100"`` -> ``("bucket_mb", ["25", "100"])``."""
    key, eq, values = str(text).partition("=")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not eq or not key.strip() or not vals:
        raise CollsimError(f"cannot read sweep {text!r}: write KEY=V1,V2,... e.g. bucket_mb=25,100 or nics_per_node=4,8")
    return key.strip(), vals


def with_topology_param(spec: str, key: str, value: str) -> str:
    """A preset spec with ``key`` set to ``value`` (added or replaced)."""
    name, params = parse_spec(spec)
    params[key] = value
    return name + ":" + ",".join(f"{k}={v}" for k, v in params.items())


def _preset_params(spec) -> set:
    if isinstance(spec, Topology) or str(spec).lower().endswith((".yaml", ".yml", ".json")):
        return set()
    name, _ = parse_spec(str(spec))
    table = presets()
    return set(table[name].params) if name in table else set()


def variants(workload: Workload, topology, vs=(), sweeps=()) -> list[tuple[str, Workload, object]]:
    """``(label, workload, topology spec)`` for every configuration to compare: the base topology and
    each ``vs`` spec, crossed with every combination of the sweeps."""
    bases = [topology] + list(vs)
    parsed = [parse_sweep(s) for s in sweeps]
    seen: set = set()
    for key, vals in parsed:
        if key in seen:   # the later one would run under the first one's label
            raise CollsimError(f"--sweep {key}=... is given twice: give one --sweep {key}=V1,V2,... with every value")
        seen.add(key)
        if len(set(vals)) != len(vals):
            raise CollsimError(f"--sweep {key}={','.join(vals)} repeats a value: give each value once")
    # counted before any is planned: every base crossed with every combination
    count = len(bases)
    for _, vals in parsed:
        count *= len(vals)
    if count > MAX_CONFIGS:
        shape = " x ".join([str(len(bases))] + [str(len(v)) for _, v in parsed])
        raise CollsimError(f"the sweeps make {count:,} configurations ({shape}), over the limit of {MAX_CONFIGS:,}: "
                           "sweep fewer values or fewer keys at once")
    out = []
    for base in bases:
        topo_keys = _preset_params(base)
        for key, _ in parsed:
            if key not in topo_keys and key not in sweepable():
                raise CollsimError(f"cannot sweep {key!r}: it is neither a parameter of topology {base} "
                                   f"({', '.join(sorted(topo_keys)) or 'a file, no parameters'}) nor of the workload "
                                   f"({', '.join(sweepable())})")
        for combo in itertools.product(*[[(k, v) for v in vals] for k, vals in parsed]):
            spec, w, wlabel = base, workload, []
            for key, value in combo:
                if key in topo_keys:
                    spec = with_topology_param(spec, key, value)
                else:
                    w = w.with_value(key, value)
                    wlabel.append(f"{key}={value}")
            name = spec.name if isinstance(spec, Topology) else str(spec)
            out.append((" ".join([name] + wlabel), w, spec))
    return out
