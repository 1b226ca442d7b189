"""The README's two set-up commands exist, and .ci/run runs the test one."""
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
