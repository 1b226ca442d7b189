"""Measured files: regular files only, one collective per file, the world size they say, outputs never
over an input."""
import hashlib
import json
import os

import pytest
from conftest import refused


def measurement(path, nranks=2, collective="all_reduce"):
    rows = [{"nbytes": n, "time_us": 20.0 + n / 1e3, "inplace_time_us": 21.0 + n / 1e3}
            for n in (1024, 4096, 16384, 65536)]
    path.write_text(json.dumps({"collective": collective, "nranks": nranks, "results": rows}))
    return path


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_calibrate_out_onto_its_input_is_refused_and_the_input_kept(user, tmp_path):
    m = measurement(tmp_path / "ar.json")
    before = digest(m)
    refused(user("calibrate", "ar.json", "--out", "ar.json"), "input")
    assert digest(m) == before


def test_calibrate_out_onto_a_hard_link_of_its_input_is_refused(user, tmp_path):
    m = measurement(tmp_path / "ar.json")
    os.link(m, tmp_path / "same.json")
    refused(user("calibrate", "ar.json", "--out", "same.json"), "input")
    assert json.loads(m.read_text())["nranks"] == 2


def test_calibrate_out_through_a_symlink_is_refused(user, tmp_path):
    measurement(tmp_path / "ar.json")
    victim = tmp_path / "victim.yaml"
    victim.write_text("precious\n")
    (tmp_path / "topo.yaml").symlink_to(victim)
    refused(user("calibrate", "ar.json", "--out", "topo.yaml"), "symbolic link")
    assert victim.read_text() == "precious\n"


def test_calibrate_out_a_folder_is_refused(user, tmp_path):
    measurement(tmp_path / "ar.json")
    (tmp_path / "d.yaml").mkdir()
    refused(user("calibrate", "ar.json", "--out", "d.yaml"), "folder")


@pytest.mark.parametrize("value", ["nan", "inf", "-1"])
def test_calibrate_latency_must_be_finite_and_not_negative(user, tmp_path, value):
    measurement(tmp_path / "ar.json")
    refused(user("calibrate", "ar.json", "--out", "c.yaml", f"--latency-us={value}"), "--latency-us")
    assert not (tmp_path / "c.yaml").exists()


@pytest.mark.parametrize("field,value,words", [
    ("nranks", 10 ** 300, ("nranks",)),
    ("nranks", "two", ("nranks",)),
    ("time_us", 0, ("no size has a positive time",)),
])
def test_calibrate_refuses_unusable_numbers(user, tmp_path, field, value, words):
    doc = json.loads(measurement(tmp_path / "ar.json").read_text())
    if field == "nranks":
        doc["nranks"] = value
    else:
        for r in doc["results"]:
            r["time_us"] = r["inplace_time_us"] = value
    (tmp_path / "ar.json").write_text(json.dumps(doc))
    refused(user("calibrate", "ar.json", "--out", "c.yaml", timeout=30), *words)


def test_validate_refuses_a_measurement_of_another_world_size(user, tmp_path):
    measurement(tmp_path / "ar.json", nranks=2)
    refused(user("validate", "ar.json", "--topology", "ring:n=8"), "2 ranks", "8 GPUs")


def test_validate_refuses_devices_and_fifos(user, tmp_path):
    refused(user("validate", "/dev/zero", "--topology", "ring:n=2", timeout=20), "not a regular file")
    os.mkfifo(tmp_path / "pipe.txt")
    refused(user("validate", "pipe.txt", "--topology", "ring:n=2", timeout=20), "not a regular file")
    refused(user("compare", "-m", "pipe.txt", "--topology", "ring:n=2", timeout=20), "not a regular file")


def test_concatenated_outputs_of_different_collectives_are_refused(user, tmp_path):
    head = "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n"
    row = "     1048576        262144     float     sum      -1    29.80   35.19   61.58      0    29.50   35.54   62.20      0\n"
    text = "".join(f"# Collective test starting: {c}_perf\n{head}{row}" for c in ("all_reduce", "all_gather"))
    (tmp_path / "both.txt").write_text(text)
    refused(user("validate", "both.txt", "--topology", "ring:n=2"), "all_gather", "all_reduce", "one collective per file")
