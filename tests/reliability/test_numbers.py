"""Every number a user gives is finite, in range and of the right type, or a one-line refusal."""
import pytest
from conftest import refused

RING4 = "".join(f"  - {{name: gpu{i}}}\n" for i in range(4))
CABLES4 = "".join(f"  - {{src: gpu{i}, dst: sw, bandwidth_GBps: 10, latency_us: 1, duplex: true}}\n" for i in range(4))


def sharp_switch(extra: str) -> str:
    return f"nodes:\n{RING4}  - {{name: sw, kind: switch, reduce: sharp{extra}}}\nlinks:\n{CABLES4}"


TOPOLOGY_FILES = {  # name: (text, words the refusal must name)
    "negative-reduce-latency.yaml": (sharp_switch(", reduce_latency_us: -1000000"), ("reduce_latency_us", "zero or more")),
    "inf-reduce-latency.yaml": (sharp_switch(", reduce_latency_us: .inf"), ("reduce_latency_us", "finite")),
    "nan-reduce-bandwidth.yaml": (sharp_switch(", reduce_bandwidth_GBps: .nan"), ("reduce_bandwidth_GBps", "finite")),
    "300-digit-bandwidth.yaml": ("gpus: 2\nlinks:\n  - {src: gpu0, dst: gpu1, bandwidth_GBps: 1" + "0" * 300
                                 + ", duplex: true}\n", ("bandwidth_GBps", "at most")),
    "string-meta.yaml": ('gpus: 2\nmeta: {nvlink_GBps: "fast"}\nlinks:\n  - {src: gpu0, dst: gpu1, bandwidth_GBps: 10, '
                         'duplex: true}\n', ("meta.nvlink_GBps", "must be a number")),
    "negative-nic.yaml": ("gpus: 2\nmeta: {nic_GBps: -50}\nlinks:\n  - {src: gpu0, dst: gpu1, bandwidth_GBps: 10, "
                          "duplex: true}\n", ("meta.nic_GBps", "positive")),
    "duplicate-key.yaml": ("gpus: 2\nlinks:\n  - {src: gpu0, dst: gpu1, bandwidth_GBps: 10, bandwidth_GBps: 1, "
                           "duplex: true}\n", ("bandwidth_GBps", "twice")),
    "deep.yaml": ("[" * 100_000 + "]" * 100_000 + "\n", ("nesting deeper than 64",)),
    "deep.json": ("[" * 100_000 + "]" * 100_000 + "\n", ("nested deeper than 64",)),
    "uncabled-sharp.yaml": (f"nodes:\n{RING4}  - {{name: sw, kind: switch, reduce: sharp}}\nlinks:\n"
                            + "".join(f"  - {{src: gpu{i}, dst: gpu{(i + 1) % 4}, bandwidth_GBps: 10, duplex: true}}\n"
                                      for i in range(4)), ("'sw' has no links",)),
}


@pytest.mark.parametrize("name", sorted(TOPOLOGY_FILES))
def test_hostile_topology_file_is_refused(user, tmp_path, name):
    text, words = TOPOLOGY_FILES[name]
    (tmp_path / name).write_text(text)
    refused(user("simulate", "-t", name, "-a", "all", "-b", "1M", "-e", "1M"), *words)


@pytest.mark.parametrize("spec,words", [
    ("ring:n=inf", ("n inf", "finite")),
    ("ring:n=1e400", ("finite",)),
    ("ring:n=4.5", ("whole number",)),
    ("ring:n=4,bandwidth_GBps=nan", ("bandwidth_GBps", "finite")),
    ("ring:n=4,latency_us=-inf", ("latency_us", "finite")),
])
def test_hostile_spec_is_refused(user, spec, words):
    refused(user("simulate", "-t", spec, "-b", "1M", "-e", "1M"), *words)


@pytest.mark.parametrize("flags,words", [
    (("-b", "1e308K", "-e", "1e308K"), ("1e308K", "limit")),
    (("-b", "8", "-e", "8T"), ("sizes", "over the limit")),           # default -i 1M: 8 million sizes
    (("-b", "8", "-e", "32M", "-f", "1.0000001"), ("sizes", "-f 2")),  # 150 million sizes
    (("-b", "1M", "-e", "1M", "-f", "nan"), ("not a number",)),
])
def test_sweep_too_large_is_refused_at_once(user, flags, words):
    refused(user("simulate", "-t", "ring:n=4", *flags, timeout=20), *words)


@pytest.mark.parametrize("model", ["engine", "tuner", "alpha-beta"])
def test_root_outside_the_job_is_refused_by_every_model(user, model):
    refused(user("simulate", "-t", "ring:n=8", "-c", "broadcast", "--root", "8", "--model", model,
                 "-b", "1M", "-e", "1M"), "root 8", "0..7")


def test_scenario_with_negative_watchdog_is_refused(user, tmp_path):
    (tmp_path / "sc.yaml").write_text("workload: {builtin: ddp_step, world_size: 4}\ntimeout_ms: -1\n")
    refused(user("flight", "simulate", "sc.yaml"), "timeout_ms", "above 0")


def test_plan_with_a_number_for_the_gpu_name_is_refused(user, tmp_path):
    (tmp_path / "w.yaml").write_text("model: {params: 1B, layers: 4}\ncompute: {tokens_per_step: 1M, gpu: 5}\n")
    refused(user("plan", "w.yaml", "--topology", "ring:n=8"), "compute.gpu")


@pytest.mark.parametrize("args,words", [
    (("flight", "analyze", ".", "--straggler-ms", "nan"), ("--straggler-ms", "finite")),
    (("flight", "analyze", ".", "--slow-factor", "0.5"), ("--slow-factor", "above 1")),
    (("verify", "ring", "--ranks", "2-1000000000"), ("1000000000", "limit")),
    (("bench", "--backend", "gloo", "-b", "1K", "-e", "1K", "--timeout", "inf"), ("--timeout", "finite")),
])
def test_hostile_flags_are_refused(user, args, words):
    if args[0] == "bench":
        pytest.importorskip("torch", reason="bench needs torch")
    refused(user(*args, timeout=30), *words)
