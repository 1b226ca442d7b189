"""p29 F6: a profiler trace that is a bomb of tiny events is refused before json.loads builds it, and running
out of memory while reading a trace names the file, not the simulator."""
import gzip
import json
import time

import pytest

from sim.cli import main
from sim.errors import CollsimError
from sim.evidence import kineto
from sim.io import safe_io


def _gz(path, text: str):
    path.write_bytes(gzip.compress(text.encode(), compresslevel=1))
    return path


@pytest.fixture
def no_parse(monkeypatch):
    """Make any JSON parse of the trace fail the test: the refusal must come before it."""
    def parsed(text, source):
        raise AssertionError(f"{source} was parsed ({len(text):,} characters) before being refused")
    monkeypatch.setattr(kineto, "load_json", parsed)


def test_sixteen_million_empty_events_are_refused_before_parsing(tmp_path, no_parse):
    # the hostile trial's trace/ev16m.json.gz: 16,000,001 empty events, ~50 KB gzipped; it took 55 s and 2.4 GB
    # before the event count refused it
    events = 16_000_001
    p = _gz(tmp_path / "ev16m.json.gz", '{"traceEvents": [' + "{}," * (events - 1) + "{}]}")
    assert p.stat().st_size < 300_000
    t0 = time.perf_counter()
    with pytest.raises(CollsimError) as e:
        kineto.read_trace(str(p))
    assert time.perf_counter() - t0 < 20
    msg = str(e.value)
    # the counts are those of the text made above: the outer object, the list and every event; one comma each
    # between the events
    assert f"{events + 2:,} JSON objects and lists" in msg and f"{events + 2 + events - 1:,} values" in msg
    assert str(p) in msg and "profile fewer steps" in msg


def test_a_bomb_outside_the_events_is_refused_too(tmp_path, no_parse):
    # few events, but 41 million values in another key: the count covers the whole text, not only traceEvents
    values = 41_000_000
    p = _gz(tmp_path / "junk.json.gz", '{"traceEvents": [], "junk": [' + "0," * (values - 1) + "0]}")
    with pytest.raises(CollsimError, match=r"over the limits"):
        kineto.read_trace(str(p))


def test_the_counts_stay_under_the_limits_for_a_real_trace(tmp_path):
    # a trace of real-looking events far below the caps is read as before (the pre-count refuses nothing real)
    ev = {"ph": "X", "cat": "user_annotation", "name": "gloo:all_reduce", "ts": 110.0, "dur": 40.0, "pid": 1,
          "tid": 2, "args": {"Input Dims": [[256]], "Input type": ["float"]}}
    launch = {"ph": "X", "cat": "cpu_op", "name": "c10d::allreduce_", "ts": 100.0, "dur": 5.0, "pid": 1, "tid": 1,
              "args": {"Input Dims": [[[256]]], "Input type": ["TensorList"]}}
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [launch, ev]}))
    job = kineto.read_trace(str(p))
    assert [(c.op, c.nbytes) for c in job.calls] == [("all_reduce", 256 * 4)]


def test_out_of_memory_names_the_trace_not_the_simulator(tmp_path, monkeypatch, capsys):
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps({"traceEvents": []}))

    def oom(text, source):
        raise MemoryError
    monkeypatch.setattr(kineto, "load_json", oom)
    assert main(["trace", str(p), "--topology", "switch:n=2"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(p) in err[0] and "out of memory" in err[0]
    assert "GPUs or sizes" not in err[0]


def test_depth_check_is_unchanged_by_the_faster_walk():
    # the nesting limit (MAX_DEPTH containers deep) holds exactly as before: 64 levels read, 65 refused
    def nested(levels):
        text = "0"
        for i in range(levels):
            text = f'{{"k": {text}}}' if i % 2 else f"[{text}]"
        return text
    assert safe_io.load_json(nested(safe_io.MAX_DEPTH), "x") is not None
    with pytest.raises(CollsimError, match="nested deeper than 64"):
        safe_io.load_json(nested(safe_io.MAX_DEPTH + 1), "x")
