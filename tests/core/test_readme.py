"""The README's two set-up commands exist, and .ci/run runs the test one; the README and the model's doc count
the public set as it is."""
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_readme_starts_with_demo_and_test_commands():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)\n```", text, re.S)
    assert blocks[0].startswith("pip install torch==2.13.0") and blocks[0].endswith("collsim demo")
    assert blocks[1].startswith("pip install torch==2.13.0") and "pytest" in blocks[1]
    ci = (ROOT / ".ci" / "run").read_text()
    assert "pytest" in ci and "README.md" in ci


def _public_set_counts():
    cases = json.loads((ROOT / "sim" / "data" / "public_cases.json").read_text())["cases"]
    fabrics = {c["fabric"] for c in cases if c.get("fabric")}  # cases inside one PCIe box have no fabric
    ranks = [c["nranks"] for c in cases]
    return {"cases": len(cases), "collectives": len({c["collective"] for c in cases}), "fabrics": len(fabrics),
            "systems": len({c["system"] for c in cases}), "min_gpus": min(ranks), "max_gpus": max(ranks)}


def _ints(match):
    return tuple(int(g.replace(",", "")) for g in match.groups())


def test_readme_and_model_doc_count_the_public_set_as_it_is():
    # A case added to sim/data/public_cases.json must not leave an older count in the prose (the README said
    # 103 cases for two passes after the set reached 113).
    n = _public_set_counts()
    readme = (ROOT / "README.md").read_text()
    doc = (ROOT / "docs" / "nccl-model.md").read_text()
    m = re.search(r"(\d+) cited cases \((\d+) collectives, (\d+) fabrics, (\d+) systems, (\d+) to ([\d,]+) GPUs\)", readme)
    assert m, "README no longer describes the public set as 'N cited cases (K collectives, F fabrics, S systems, ...)'"
    assert _ints(m) == (n["cases"], n["collectives"], n["fabrics"], n["systems"], n["min_gpus"], n["max_gpus"])
    m = re.search(r"(\d+) cases on (\d+) systems", readme)
    assert m and _ints(m) == (n["cases"], n["systems"])
    m = re.search(r"(\d+) published nccl-tests tables from (\d+) systems, (\d+) collectives,\s+(\d+) fabrics, (\d+) to ([\d,]+) GPUs", doc)
    assert m, "docs/nccl-model.md no longer describes the public set as 'N published nccl-tests tables from S systems, ...'"
    assert _ints(m) == (n["cases"], n["systems"], n["collectives"], n["fabrics"], n["min_gpus"], n["max_gpus"])
