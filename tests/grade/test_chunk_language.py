"""The assignments are written in the chunk-program language, and their reference solutions build the same
Programs as independent implementations: collsim's built-in ring and NVLS builders (sim/algorithms), and
the assignments' earlier hand-built op lists, kept here as plain Python loops."""
import os

import pytest

import sim
from sim.chunk_program import ChunkProgram
from sim.grade import execute_cells
from sim.grade.source import read_submission
from sim.presets import load_topology

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLUTIONS = os.path.join(ROOT, "notebooks", "solutions")


def solution(name: str, function: str):
    cells, _ = read_submission(os.path.join(SOLUTIONS, name))
    ns, _ = execute_cells([(f"cell {k}", c.code) for k, c in enumerate(cells, start=1)])
    return ns[function]


def ops(prog):
    return sorted(zip(prog.src.tolist(), prog.dst.tolist(), prog.chunk.tolist(), prog.step.tolist(), prog.reduce.tolist()))


@pytest.mark.parametrize("n", [2, 3, 5, 8, 16])
def test_a1_solution_is_the_built_in_ring_reduce_scatter(n):
    mine = solution("a1_ring_reduce_scatter.ipynb", "ring_reduce_scatter")(n)
    builtin = sim.build_program("ring", "reduce_scatter", n)
    assert ops(mine) == ops(builtin) and mine.steps == builtin.steps == n - 1


@pytest.mark.parametrize("n", [2, 4, 8])
def test_a4_solution_is_the_built_in_nvls_all_reduce_on_one_switch(n):
    mine = solution("a4_nvls_all_reduce.ipynb", "nvls_all_reduce")(n)
    builtin = sim.build_program("nvls", "all_reduce", n, topology=load_topology(f"switch:n={n},nvls=1"))
    assert ops(mine) == ops(builtin) and mine.switches == builtin.switches == ("switch",) and mine.steps == 4


def torus_ops_by_hand(rows, cols):
    """The a2 reference as it was first written: every op listed by nested loops, no chunk language."""
    n = rows * cols
    rank = lambda i, j: (i % rows) * cols + (j % cols)
    out = []
    for part, (first, d) in enumerate([("row", 1), ("row", -1), ("col", 1), ("col", -1)]):
        second = "col" if first == "row" else "row"
        t = 0
        for phase, (dim, red) in enumerate([(first, True), (second, True), (second, False), (first, False)]):
            length = cols if dim == "row" else rows
            for s in range(length - 1):
                for i in range(rows):
                    for j in range(cols):
                        pos = j if dim == "row" else i
                        dst = rank(i, j + d) if dim == "row" else rank(i + d, j)
                        k = (pos - d * (s + 1)) % length if red else (pos - d * s) % length
                        if dim == "row":
                            cells = [(a, k) for a in (range(rows) if phase in (0, 3) else [i])]
                        else:
                            cells = [(k, b) for b in (range(cols) if phase in (0, 3) else [j])]
                        out += [(rank(i, j), dst, part * n + a * cols + b, t + s, red) for a, b in cells]
            t += length - 1
    return sorted(out), t


@pytest.mark.parametrize("shape", [(2, 2), (2, 3), (3, 4), (4, 4)])
def test_a2_solution_is_the_hand_listed_torus_all_reduce(shape):
    mine = solution("a2_torus_all_reduce.ipynb", "torus_all_reduce")(*shape)
    listed, steps = torus_ops_by_hand(*shape)
    assert ops(mine) == listed and mine.steps == steps == 2 * (shape[0] - 1) + 2 * (shape[1] - 1)


def test_a_switch_named_without_a_topology_is_the_topologys_switch():
    topo = load_topology("switch:n=4,nvls=1")
    by_node = ChunkProgram("all_reduce", 4, chunks=4, topology=topo).switch(topo.node_index["switch"])
    by_name = ChunkProgram("all_reduce", 4, chunks=4).switch("switch")
    assert (by_name.agent, by_name.name) == (by_node.agent, by_node.name) == (4, "switch")
    with pytest.raises(sim.CollsimError, match="needs ChunkProgram"):
        ChunkProgram("all_reduce", 4, chunks=4).switch(4)
