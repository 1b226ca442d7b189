"""The chunk-program language: what it does once for every algorithm (wrap-around, roots, channels and
pipelining, symmetry, switches), checked on programs small enough to write out by hand."""
import numpy as np
import pytest

import sim
from sim.chunk_program import ChunkProgram
from sim.presets import load_topology


def ops(prog):
    return [tuple(int(x) for x in o[:5]) + (bool(o[5]),) for o in
            zip(prog.src, prog.dst, prog.chunk, prog.step, prog.channel, prog.reduce)]


def test_rank_and_chunk_arithmetic_wraps_around():
    p = ChunkProgram("all_gather", 3, chunks=3)
    r = p.ranks
    p.send(r, r + 1, chunk=r - 1, step=0)
    assert ops(p.program("t", steps=1)) == [(0, 1, 2, 0, 0, False), (1, 2, 0, 0, 0, False), (2, 0, 1, 0, 0, False)]


def test_steps_loop_numbers_steps_consecutively_across_loops():
    p = ChunkProgram("all_reduce", 2, chunks=2)
    for _s in p.steps(1):
        p.send(0, 1, chunk=0, reduce=True)
    for s in p.steps(2):
        p.send(1, 0, chunk=s)
    assert [o[3] for o in ops(p.program("t", steps=3))] == [0, 1, 2]


def test_rooted_collectives_count_ranks_from_the_root():
    # a chain written for root 0 (0 -> 1 -> 2 -> 3) runs from root 2: 2 -> 3 -> 0 -> 1
    p = ChunkProgram("broadcast", 4, chunks=1, root=2)
    for s in p.steps(3):
        p.send(s, s + 1, chunk=0)
    prog = p.program("chain", steps=3)
    assert [(o[0], o[1]) for o in ops(prog)] == [(2, 3), (3, 0), (0, 1)] and prog.root == 2
    sim.verify(prog)
    # non-rooted collectives ignore the root
    q = ChunkProgram("all_gather", 4, chunks=4, root=2)
    assert q.root == 0


def test_channels_and_pipeline_repeat_the_schedule_one_step_apart():
    p = ChunkProgram("broadcast", 2, chunks=1)
    p.send(0, 1, chunk=0, step=0)
    prog = p.program("one", steps=1, nchannels=2, pipeline=3)
    # 6 pieces: chunk = piece, channel = piece // 3, step = piece % 3
    assert ops(prog) == [(0, 1, q, q % 3, q // 3, False) for q in range(6)]
    assert prog.nchunks == 6 and prog.params == {"nchannels": 2, "pipeline": 3}


def test_rotation_is_extended_to_every_piece_and_holds():
    n = 5
    p = ChunkProgram("all_gather", n, chunks=n)
    r = p.ranks
    for s in p.steps(n - 1):
        p.send(r, r + 1, chunk=r - s)
    prog = p.program("ring", steps=n - 1, nchannels=2, pipeline=2, rotation=lambda c: c + 1)
    slots = 4
    c = np.arange(n * slots)
    assert np.array_equal(prog.rotation, ((c // slots + 1) % n) * slots + c % slots)
    assert prog.rotation_holds()
    sim.verify(prog)


def test_where_keeps_some_ops_and_switches_are_agents_not_ranks():
    topo = load_topology("switch:n=4,sharp=1")
    p = ChunkProgram("all_reduce", 4, chunks=1, topology=topo)
    sw = p.switch(topo.node_index["switch"])
    r = p.ranks
    p.send(r, sw, chunk=0, step=0, reduce=True)
    p.send(sw, r, chunk=0, step=1, where=r >= 0)
    p.send(sw, r, chunk=0, step=9, where=r < 0)        # keeps nothing
    prog = p.program("sharp", steps=2)
    assert sw.agent == 4 and prog.switches == ("switch",)
    assert ops(prog)[:4] == [(i, 4, 0, 0, 0, True) for i in range(4)]
    assert ops(prog)[4:] == [(4, i, 0, 1, 0, False) for i in range(4)]
    sim.verify(prog)


def test_window_is_recorded_for_the_engine():
    p = ChunkProgram("broadcast", 2, chunks=1)
    p.send(0, 1, chunk=0)
    assert p.program("w", steps=1, window=8).params["window"] == 8
    assert "window" not in p.program("w", steps=1).params


def test_bad_ops_are_refused_by_the_program():
    p = ChunkProgram("all_gather", 2, chunks=2)
    p.send(0, 2, chunk=0)          # rank 2 wraps to rank 0: a send to itself
    with pytest.raises(sim.CollsimError, match="to itself"):
        p.program("bad", steps=1)


def test_a_fractional_chunk_is_an_error_not_a_truncation():
    p = ChunkProgram("all_gather", 4, chunks=4)
    with pytest.raises(sim.CollsimError, match="chunk must be whole numbers"):
        p.send(p.ranks, p.ranks + 1, chunk=p.ranks / 2)
