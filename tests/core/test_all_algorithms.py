"""``collsim simulate -a all``: every algorithm that can run the collective, NCCL's pick marked, and the
others left out in one line each saying why, never the whole table refused for one of them."""
import json

import pytest

import sim

# What NCCL runs (NCCL 2.x, src/enqueue.cc and the tuner's tables): broadcast and reduce only as a ring
# (a pipelined chain), all_to_all only as grouped point-to-point sends; the textbook algorithms that serve
# the same collective (docs/algorithms.md): binomial for broadcast, direct for all_to_all.
CASES = {"broadcast": ({"ring"}, {"binomial"}, "tree", "NCCL has no tree broadcast"),
         "all_to_all": ({"p2p"}, {"direct"}, "ring", "all_to_all as grouped point-to-point")}


def _json(cli, *args):
    code, out, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-a", "all", *args, "--format", "json")
    assert code == 0, err
    return json.loads(out), err


@pytest.mark.parametrize("coll", sorted(CASES))
def test_all_lists_what_nccl_runs_and_the_textbook_ones(cli, coll):
    nccl, textbook, refused, why = CASES[coll]
    payload, err = _json(cli, "-c", coll, "-b", "1M", "-e", "4M", "-f", "4")
    rows = payload["results"]
    assert {r["algorithm"] for r in rows} == nccl | textbook
    assert {r["algorithm"] for r in rows if r["in_nccl"]} == nccl
    # the NCCL algorithm NCCL does not run for this collective is left out, in one line saying why
    notes = [l for l in err.splitlines() if "leaves out" in l]
    assert len(notes) == 1 and f"leaves out {refused}:" in notes[0] and why in notes[0]
    assert payload["left_out"][0]["algorithm"] == refused


@pytest.mark.parametrize("coll", ["broadcast", "all_to_all", "all_reduce"])
def test_all_marks_the_pair_nccl_picks_which_is_what_auto_times(cli, coll):
    payload, _ = _json(cli, "-c", coll, "-b", "64K", "-e", "64M", "-f", "32")
    for nbytes in (64 << 10, 2 << 20, 64 << 20):
        auto = sim.simulate(coll, nbytes, "dgx-h100:nodes=2")   # -a auto: NCCL's tuner picks the pair
        picked = [r for r in payload["results"] if r["nbytes"] == nbytes and r["nccl_pick"]]
        assert [(r["algorithm"], r["protocol"]) for r in picked] == [(auto.algorithm, auto.protocol)]
        assert picked[0]["time_us"] == pytest.approx(auto.time_us)


def test_table_marks_nccls_pick_and_says_what_the_mark_means(cli):
    code, out, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-c", "broadcast", "-a", "all", "-b", "1M", "-e", "1M")
    assert code == 0, err
    rows = [l for l in out.splitlines() if l and not l.startswith("#")]
    assert [l.split()[3] for l in rows if "<" in l.split()] == ["ring"]
    assert "# < NCCL's pick" in out


def test_nccl_variables_that_rule_algorithms_out_leave_them_out(cli):
    # NCCL_ALGO=Ring: NCCL would fail a call pinned to tree; -a all shows the others and says why
    payload, err = _json(cli, "-b", "1M", "-e", "1M", "--nccl-env", "NCCL_ALGO=Ring")
    algos = {r["algorithm"] for r in payload["results"]}
    assert "ring" in algos and "tree" not in algos and "recursive_hd" in algos
    assert "leaves out tree: NCCL_ALGO excludes tree" in err
    assert [r["algorithm"] for r in payload["results"] if r["nccl_pick"]] == ["ring"]


def test_a_single_algorithm_nccl_cannot_run_is_still_refused_in_one_line(cli):
    code, _, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-c", "broadcast", "-a", "tree", "-b", "1M", "-e", "1M")
    assert code == 2 and err.count("\n") == 1 and "NCCL has no tree broadcast" in err
