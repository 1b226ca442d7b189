"""Every built-in algorithm builds exactly the Program its pre-rewrite builder did.

The oracle is tests/algorithms/legacy_builders (the numpy builders frozen before the rewrite into the
chunk-program language). Same op columns in the same order (the engine breaks ties by op order),
same chunk count, steps, root, switches, rotation and params: so verify, both engines and the real
executor give the same results as before. Every algorithm, collective and world size up to 64.
"""
import numpy as np
import pytest
from legacy_builders import LEGACY

from sim.algorithms import algorithms, build_program, why_not
from sim.collectives import get_collective
from sim.presets import load_topology

COLUMNS = ("src", "dst", "chunk", "step", "channel", "reduce")
SIZES = list(range(2, 17)) + [24, 31, 32, 33, 48, 63, 64]
# topologies for the algorithms that read one (hosts, SHARP switches, NVLink domains)
TOPOLOGIES = ["dgx-h100:nodes=2", "dgx-h100:nodes=4,gpus_per_node=2,sharp=1", "dgx-a100:nodes=3,sharp=1",
              "switch:n=8,sharp=1", "gb200-nvl72:gpus_per_node=8,nodes=2", "dgx-h100:nodes=8,sharp=1",
              "dgx-h100:gpus_per_node=4", "dgx-h100:nodes=3,gpus_per_node=4"]


def same(new, old):
    for col in COLUMNS:
        a, b = getattr(new, col), getattr(old, col)
        assert a.dtype == b.dtype and np.array_equal(a, b), f"column {col} differs"
    for attr in ("nranks", "nchunks", "algorithm", "steps", "root", "switches", "params"):
        assert getattr(new, attr) == getattr(old, attr), f"{attr}: {getattr(new, attr)} != {getattr(old, attr)}"
    assert new.collective.name == old.collective.name
    assert (new.rotation is None) == (old.rotation is None)
    if old.rotation is not None:
        assert np.array_equal(new.rotation, old.rotation)


def test_every_algorithm_of_the_rewrite_has_its_oracle():
    # algorithms added after the rewrite were written in the language from the start: no oracle
    assert set(LEGACY) <= set(algorithms())
    assert {"ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "recursive_hd", "direct",
            "binomial", "hierarchical_ring"} <= set(LEGACY)


def _topology_free():
    for name, algo in algorithms().items():
        if name not in LEGACY:
            continue
        for coll in algo.collectives:
            if why_not(name, coll, 4, None) is None:
                yield pytest.param(name, coll, id=f"{name}-{coll}")


@pytest.mark.parametrize("name,coll", list(_topology_free()))
def test_same_program_without_topology(name, coll):
    c = get_collective(coll)
    for n in SIZES:
        shapes = [(1, 1, 0), (2, 3, n - 1)] if n <= 16 or n in (33, 64) else [(1, 2, n // 2)]
        for nch, pipe, root in shapes:
            root = root if c.rooted else 0
            same(build_program(name, coll, n, nchannels=nch, pipeline=pipe, root=root),
                 LEGACY[name](c, n, topology=None, nchannels=nch, pipeline=pipe, root=root))


@pytest.mark.parametrize("spec", TOPOLOGIES)
def test_same_program_on_topologies(spec):
    topo = load_topology(spec)
    n = topo.nranks
    checked = 0
    for name, algo in algorithms().items():
        for coll in algo.collectives:
            if name not in LEGACY or why_not(name, coll, n, topo) is not None:
                continue
            c = get_collective(coll)
            for nch, pipe, root in [(1, 1, 0), (2, 3, n - 1)]:
                root = root if c.rooted else 0
                same(build_program(name, coll, n, topology=topo, nchannels=nch, pipeline=pipe, root=root),
                     LEGACY[name](c, n, topology=topo, nchannels=nch, pipeline=pipe, root=root))
                checked += 1
    assert checked
