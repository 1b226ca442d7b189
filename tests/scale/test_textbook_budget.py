"""The textbook algorithms at scale and the budget's estimates.

recursive_hd's program grows as n^2 (16,384 GPUs: 537 M ops): its builder must allocate only the sends it
makes, a run that cannot fit is refused (or left out of ``-a all``) in one line before anything is built,
and the budget's closed forms count what the builders and the engine really make."""
import json
import math
import resource
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import sim
from sim.algorithms import build_program, candidates, classic
from sim.chunk_program import ChunkProgram
from sim.collectives import get_collective
from sim.prediction import budget
from sim.presets import load_topology


def _rhd_ops(coll: str, n: int) -> int:
    """recursive_hd's ops, counted from its definition (Thakur, Rabenseifner & Gropp 2005): p the largest
    power of two <= n, e = n - p ranks folded. all_reduce: p chunks; halving step i (of log2 p) sends
    p / 2^(i+1) chunks from each of p ranks, doubling the same; folding sends p chunks from each of e
    ranks in and back. reduce_scatter / all_gather: n shards, shard s owned by rank s mod p; halving step
    i sends from each rank the shards of the p / 2^(i+1) owners across its bit, n / 2^(i+1) shards
    (doubling mirrors it), n (p - 1) in all; folding moves n shards from each of e ranks (all_gather: the
    n - 1 it lacks, after its own one in) and e shards back (reduce_scatter)."""
    p = 1 << (n.bit_length() - 1)
    e = n - p
    k = int(math.log2(p))
    if coll == "all_reduce":
        return 2 * sum(p * (p >> (i + 1)) for i in range(k)) + 2 * e * p
    return sum(n * (p >> (i + 1)) for i in range(k)) + e * n + (e if coll == "reduce_scatter" else 0)


@pytest.mark.parametrize("coll", ["all_reduce", "reduce_scatter", "all_gather"])
def test_recursive_hd_ops_closed_form_is_what_the_builder_makes(coll):
    for n in (2, 3, 5, 6, 8, 12, 13, 31, 32, 33, 100, 256):
        built = build_program("recursive_hd", coll, n).nops
        assert built == _rhd_ops(coll, n) == budget.ops_per_piece("recursive_hd", coll, n), (coll, n)


@pytest.mark.parametrize("phase", ["halving", "doubling"])
def test_recursive_hd_allocates_only_the_sends_it_makes(phase):
    # the old builder held every (rank, chunk) pair of the p x p grid at every step (16,384 ranks:
    # 2^28 entries, 2 GiB an array) and filtered it; now a step allocates its own sends only, so the
    # peak while building is the ops kept, not twice them
    p2 = 1024
    p = ChunkProgram(get_collective("all_reduce"), p2, p2)
    tracemalloc.start()
    getattr(classic, phase)(p, p2, np.arange(p2), 0)
    kept, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert kept > 30 * p2 * (p2 - 1)          # the sends themselves: ~33 B per op
    assert peak < 1.3 * kept, (peak, kept)


def _limited(*args, address_space=3 << 30):
    """``collsim ARGS`` in a child whose address space is capped: an n^2 allocation fails there."""
    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, timeout=300,
                          preexec_fn=cap, check=False)


def test_recursive_hd_on_16384_gpus_is_refused_up_front_in_one_line():
    p = _limited("simulate", "-t", "dgx-h100:nodes=2048", "-a", "recursive_hd", "-b", "1M", "-e", "1M",
                 "--max-memory", "2G")
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert "recursive_hd" in p.stderr and "fewer GPUs" in p.stderr and "--max-memory" in p.stderr
    # the largest world that fits is named: its program fits the budget, twice it would not
    fit = int(p.stderr.split("at most about ")[1].split(" GPUs")[0].replace(",", ""))
    per_op, base = budget.FULL_PROGRAM_BYTES_PER_OP, budget.BASE_BYTES
    assert base + _rhd_ops("all_reduce", fit) * per_op <= 2e9 < base + _rhd_ops("all_reduce", 2 * fit) * per_op


def test_all_on_16384_gpus_leaves_out_what_cannot_fit_and_times_the_rest():
    p = _limited("simulate", "-t", "dgx-h100:nodes=2048", "-a", "all", "-b", "1M", "-e", "1M", "--max-memory", "2G",
                 "--format", "json")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    rows = json.loads(p.stdout)["results"]
    assert {r["algorithm"] for r in rows} >= {"ring", "tree", "nvls_tree"}
    for algo in ("recursive_hd", "hierarchical_ring"):   # n^2 programs: one line each, with the way out
        note = [l for l in p.stderr.splitlines() if f"leaves out {algo}:" in l]
        assert len(note) == 1 and "fewer GPUs" in note[0], p.stderr
        assert algo not in {r["algorithm"] for r in rows}


@pytest.mark.parametrize("spec", ["dgx-h100", "dgx-h100:nodes=3", "dgx-h100:nodes=16", "gb200-nvl72:nodes=2",
                                  "hgx-a100-4:nodes=3", "ring:n=13", "switch:n=6"])
def test_one_piece_counts_what_the_builders_make(spec):
    # collnet and NVLS across domains (IB SHARP) have no closed form: priced at the probe's most steps
    topo = load_topology(spec)
    for coll in ("all_reduce", "broadcast", "reduce", "all_gather", "reduce_scatter", "all_to_all"):
        for algo in candidates(coll, topo.nranks, topo):
            prog = build_program(algo, coll, topo.nranks, topology=topo)
            assert budget.one_piece(algo, coll, topo) == (prog.nops, prog.steps), (spec, coll, algo)


def test_engine_estimate_simulates_the_pieces_the_engine_does():
    # NVLSTree on 16 nodes at 1 GiB: 128 pieces a channel, a piece of 5,088 ops; the engine simulates at
    # least steps + 2 = 14 of them (a full pipeline), not the 11 its op budget alone would allow (the
    # estimate said 2 pieces, and 5 s for a 28 s run on 256 nodes, 39 s for minutes on 2,048)
    topo = load_topology("dgx-h100:nodes=16")
    r = sim.simulate("all_reduce", 1 << 30, topo, "nvls_tree", "Simple", model="engine")
    est = budget.run_estimate("all_reduce", 1 << 30, topo, "nvls_tree", "Simple")
    assert r.explain["simulated_pieces"] == 14
    assert est.program_ops == r.explain["simulated_ops"]     # the run of 14 pieces (the half run besides)
    assert est.simulated_ops == est.program_ops * 3 // 2


def test_forcing_the_engine_beyond_the_time_budget_warns_once_and_runs(cli):
    code, out, err = cli("simulate", "-t", "dgx-h100:nodes=16", "-b", "1G", "-e", "1G", "--model", "engine",
                         "--format", "json")
    est = budget.run_estimate("all_reduce", 1 << 30, load_topology("dgx-h100:nodes=16"), "nvls_tree", "Simple")
    assert est.seconds > budget.AUTO_ENGINE_SECONDS
    assert code == 0 and err.count("\n") == 1 and err.startswith("collsim: warning: --model engine")
    assert f"{est.seconds:.0f} s" in err and "nvls_tree/Simple" in err
    code, out, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "1M", "-e", "1M", "--model", "engine")
    assert code == 0 and "warning" not in err


def test_the_python_api_refuses_a_textbook_program_that_cannot_fit_before_building_it():
    # sim.simulate() is what notebooks call: the same refusal as the CLI, with the same budget, and a run
    # that fits is unaffected (recursive_hd over 512 GPUs is 2 x 512 x 511 ops: ~0.5 M, a few tens of MB)
    with pytest.raises(sim.errors.CollsimError, match="program of"):
        sim.simulate("all_reduce", 1 << 20, "dgx-h100:nodes=64", algorithm="recursive_hd", max_memory="20M")
    assert sim.simulate("all_reduce", 1 << 20, "dgx-h100:nodes=4", algorithm="recursive_hd").time_us > 0
