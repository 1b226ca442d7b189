"""Every file a command writes: atomically, never over an input, never through a symbolic link."""
import os

import pytest
from conftest import refused

from sim.errors import CollsimError
from sim.io import safe_io

TOPO = "gpus: 2\nlinks: [{src: gpu0, dst: gpu1, bandwidth_GBps: 10, duplex: true}]\n"


def test_trace_through_a_symlink_is_refused_and_the_target_kept(user, tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("{}")
    (tmp_path / "t.json").symlink_to(victim)
    refused(user("simulate", "-t", "ring:n=4", "-b", "1M", "-e", "1M", "--trace", "t.json"), "symbolic link")
    assert victim.read_text() == "{}"


def test_trace_onto_the_topology_it_reads_is_refused(user, tmp_path):
    (tmp_path / "t.json").write_text('{"gpus": 2, "links": [{"src": "gpu0", "dst": "gpu1", "bandwidth_GBps": 10, "duplex": true}]}')
    before = (tmp_path / "t.json").read_text()
    refused(user("simulate", "-t", "t.json", "-b", "1M", "-e", "1M", "--trace", "t.json"), "input")
    assert (tmp_path / "t.json").read_text() == before


def test_plot_onto_a_symlink_is_refused(user, tmp_path):
    (tmp_path / "t.yaml").write_text(TOPO)
    (tmp_path / "victim.png").write_bytes(b"old")
    (tmp_path / "p.png").symlink_to(tmp_path / "victim.png")
    refused(user("topo", "t.yaml", "--plot", "p.png"), "symbolic link")
    assert (tmp_path / "victim.png").read_bytes() == b"old"


def test_demo_report_onto_an_existing_file_is_refused(user, tmp_path):
    (tmp_path / "rep").write_text("mine")
    refused(user("demo", "--no-real", "--report", "rep"), "existing file")
    assert (tmp_path / "rep").read_text() == "mine"


def test_flight_dump_dir_files_are_written_atomically(user, tmp_path):
    rc, out, err = user("flight", "simulate", "ddp-skip", "--dump", "d")
    assert rc == 0, err
    names = sorted(os.listdir(tmp_path / "d"))
    assert names == [f"rank_{r}.json" for r in range(4)]  # no temporary files left behind


def test_write_output_keeps_the_old_file_when_writing_fails(tmp_path):
    target = tmp_path / "out.yaml"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with safe_io.output_path(str(target)) as tmp:
            with open(tmp, "w") as f:
                f.write("half of the new")
            raise RuntimeError("disk full")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.yaml"]


def test_write_output_replaces_atomically_with_normal_permissions(tmp_path):
    target = tmp_path / "out.yaml"
    safe_io.write_output(str(target), "new")
    umask = os.umask(0)
    os.umask(umask)
    assert target.read_text() == "new" and (target.stat().st_mode & 0o777) == 0o666 & ~umask


def test_an_input_read_by_the_command_is_never_an_output(tmp_path):
    src = tmp_path / "in.yaml"
    src.write_text(TOPO)
    with safe_io.command_inputs():
        safe_io.read_input(str(src), "topology file", 1 << 20)
        with pytest.raises(CollsimError, match="input of this command"):
            safe_io.write_output(str(src), "x")
    assert src.read_text() == TOPO
    safe_io.read_input(str(src), "topology file", 1 << 20)  # outside a command (Python API, notebooks) ...
    safe_io.write_output(str(src), "rewritten")              # ... rewriting a file read earlier is allowed
    assert src.read_text() == "rewritten"
