"""What a planner's trial at 64-16,384 GPUs found (thirtieth pass), each now right or said in one line.

Expected values come from NCCL's own rules, worked by hand below (its tuner counts the channels its search
found, ``tuning.cc``; ``enqueue.cc`` drops channels while a message is smaller than channels x threads x
bytes per thread), and from the inputs: never from the code's output."""
from __future__ import annotations

import json

import pytest

import sim


def _time(spec: str, nbytes: int, env: dict | None = None, **kw) -> float:
    return sim.simulate("all_reduce", nbytes, spec, nccl_env=env, **kw).time_us


@pytest.mark.parametrize("forced", [{"NCCL_MIN_NCHANNELS": "24", "NCCL_MAX_NCHANNELS": "24"}, {"NCCL_MIN_NCHANNELS": "64"}])
def test_forcing_more_channels_does_not_slow_ll(forced):
    # one DGX H100: NCCL runs 24 channels already (the search's 12, duplicated). NCCL_MIN_NCHANNELS adds
    # runtime channels only: its tuner still counts the search's (tuning.cc: graphs[a]->nChannels), and the
    # links carry no more. LL's 256 MiB ring was 2x slower at 24 forced channels and 5x at 64
    base = _time("dgx-h100", 256 << 20, algorithm="ring", protocol="LL")
    assert _time("dgx-h100", 256 << 20, forced, algorithm="ring", protocol="LL") == pytest.approx(base, rel=1e-9)


@pytest.mark.parametrize("channels", ["16", "32", "64"])
def test_a_small_message_uses_the_same_channels_whatever_the_minimum(channels):
    # 1 MiB ring/LL on 2 nodes x 8 GPUs: NCCL's loop starts at its channel count (24, or the forced one)
    # and drops channels while 1 MiB < channels x 512 threads x 8 B x 16 ranks (64 KiB a channel): 16
    # channels whatever it started from, so the same time. It was 1.5x slower at 32 forced, 2.6x at 64
    env = {"NCCL_MIN_NCHANNELS": channels}
    base = _time("dgx-h100:nodes=2", 1 << 20, algorithm="ring", protocol="LL")
    assert _time("dgx-h100:nodes=2", 1 << 20, env, algorithm="ring", protocol="LL") == pytest.approx(base, rel=1e-9)


def test_fewer_channels_still_slow_ll():
    # the other way is real: NCCL_MAX_NCHANNELS=1 leaves one channel, LL at half a Simple channel's rate
    base = _time("dgx-h100", 256 << 20, algorithm="ring", protocol="LL")
    assert _time("dgx-h100", 256 << 20, {"NCCL_MAX_NCHANNELS": "1"}, algorithm="ring", protocol="LL") > 5 * base


def test_a_larger_size_predicted_faster_is_marked_and_explained(cli):
    # all_gather on 2 GB200 racks (144 ranks) runs ring/LL at 1-4 MiB. enqueue.cc: a channel per
    # 512 threads x 8 B x 144 ranks = 589,824 B, so 1 MiB runs on 1 channel and 2 MiB on 3: the larger
    # size may finish sooner, and the table must say why rather than print it bare
    code, out, err = cli("simulate", "-t", "gb200-nvl72:nodes=2", "-c", "all_gather", "-b", "1M", "-e", "2M", "-f", "2",
                         "-a", "ring", "-p", "LL")
    assert code == 0, err
    # nccl-tests runs whole elements per rank: 1 MiB over 144 ranks of float is 1,048,320 B (count / nranks)
    s1, s2 = ((1 << k) - (1 << k) % (144 * 4) for k in (20, 21))
    rows = [line for line in out.splitlines() if line.strip().startswith((str(s1), str(s2)))]
    t1, t2 = (float(r.split()[6]) for r in rows)
    code, js, err = cli("simulate", "-t", "gb200-nvl72:nodes=2", "-c", "all_gather", "-b", "1M", "-e", "2M", "-f", "2",
                        "-a", "ring", "-p", "LL", "--format", "json")
    marked = [r.get("faster_than_smaller_size") for r in json.loads(js)["results"]]
    if t2 < t1 * 0.99:
        assert rows[1].rstrip().endswith("v") and "1 of 32 -> 3 of 32 channels" in out
        assert marked == [None, s1]   # the JSON says it too, naming the size before
    else:
        assert "# v " not in out and marked == [None, None]


def test_zero_bytes_is_refused_in_one_line(cli):
    for fmt in ("table", "json", "csv"):
        code, out, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "0", "-e", "0", "--format", fmt)
        assert code == 2 and "holds no float element" in err and "Traceback" not in err and not out


def test_sizes_under_one_element_are_said_to_be_skipped(cli):
    code, out, err = cli("simulate", "-t", "dgx-h100:nodes=2", "-b", "0", "-e", "8", "-f", "2", "--format", "json")
    assert code == 0 and "starting at 4 B" in err
    assert [r["nbytes"] for r in json.loads(out)["results"]] == [4, 8]


def test_an_empty_nccl_version_is_refused(cli):
    code, _, err = cli("simulate", "-t", "dgx-h100", "-b", "1K", "-e", "1K", "--nccl-version", "")
    assert code == 2 and "--nccl-version is empty" in err


def test_all_leaves_out_a_textbook_algorithm_the_engine_would_take_long_on(cli):
    # 4 GB200 racks (288 GPUs): the direct all_gather has 288 x 287 = 82,656 sender-receiver pairs, more
    # than the flow model routes, and the engine took 42 s of -a all's 86; it is left out, with how to
    # time it alone
    code, out, err = cli("simulate", "-t", "gb200-nvl72:nodes=4", "-c", "all_gather", "-a", "all", "-b", "1M", "-e", "1M",
                         "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    left = {x["algorithm"]: x["reason"] for x in d.get("left_out", [])}
    assert "direct" in left and "-a direct" in left["direct"] and "82,656" in left["direct"]
    assert {r["algorithm"] for r in d["results"]} >= {"ring"}


def test_the_hint_for_a_refused_textbook_algorithm_fits_a_preset(cli):
    # the cluster is already a hardware preset: "describe it with a hardware preset" was the input that failed
    code, _, err = cli("simulate", "-t", "dgx-h100:nodes=256", "-c", "all_to_all", "-a", "direct", "-p", "Simple",
                       "-b", "64K", "-e", "64K")
    assert code == 2 and "-a auto" in err and "describe the cluster with a hardware preset" not in err


def test_a_broadcast_table_gives_one_call_alone(cli):
    # nccl-tests overlaps back-to-back broadcasts down the chain; a planner timing one (weights at start-up)
    # must see the single call's time too
    code, out, err = cli("simulate", "-t", "dgx-h100:nodes=32", "-c", "broadcast", "-b", "1M", "-e", "1M")
    assert code == 0, err
    note = [line for line in out.splitlines() if "one call alone takes longer" in line]
    assert note
    alone = float(note[0].split("ring/LL ")[1].split(" us")[0].replace(",", ""))
    loop = float([line for line in out.splitlines() if line.strip().startswith("1048576")][0].split()[6])
    assert alone > loop
