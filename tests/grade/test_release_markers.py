"""`course release` strips every solution-marker form nbgrader accepts and refuses a release that would leak."""
import json
import os
import subprocess
import sys

import pytest

from sim.errors import CollsimError
from sim.grade.release import leaks, release_notebook, release_source

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("begin,end", [("### BEGIN SOLUTION", "### END SOLUTION"), ("# BEGIN SOLUTION", "# END SOLUTION"),
                                       ("## BEGIN SOLUTION", "## END SOLUTION"), ("#BEGIN SOLUTION", "#END SOLUTION"),
                                       ("# begin solution", "# end solution")])
def test_every_marker_spelling_in_code(begin, end):
    out = release_source(f"def f():\n    {begin}\n    return 'ZEBRA'\n    {end}\n")
    assert "ZEBRA" not in out and "raise NotImplementedError()" in out


def test_markdown_regions_and_nbgrader_metadata():
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "Answer:\n## BEGIN SOLUTION\nZEBRA prose\n## END SOLUTION\n"},
                    {"cell_type": "code", "metadata": {"nbgrader": {"solution": True}}, "source": "x = 'ZEBRA'\n"},
                    {"cell_type": "markdown", "metadata": {"nbgrader": {"solution": True}}, "source": "ZEBRA essay"}],
          "metadata": {}}
    out = release_notebook(nb)
    assert "ZEBRA" not in json.dumps(out) and leaks(out) == []


def test_leftover_marker_is_a_leak():
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "source": "y = 1  # see END SOLUTION above"}], "metadata": {}}
    assert leaks(nb)


def test_unclosed_region_is_refused():
    with pytest.raises(CollsimError, match="never closed"):
        release_source("# BEGIN SOLUTION\nsecret\n")


def test_cli_strips_hash_forms_and_refuses_fifo(tmp_path):
    with open(os.path.join(ROOT, "notebooks", "solutions", "a1_ring_reduce_scatter.ipynb")) as f:
        nb = json.load(f)
    nb["cells"].append({"cell_type": "code", "metadata": {}, "execution_count": None, "outputs": [],
                        "source": ["def helper():\n", "    # BEGIN SOLUTION\n", "    return 'ZEBRA_7'\n", "    # END SOLUTION\n"]})
    (tmp_path / "sol").mkdir()
    (tmp_path / "sol" / "a1_ring_reduce_scatter.ipynb").write_text(json.dumps(nb))
    env = {**os.environ, "PYTHONPATH": ROOT}
    p = subprocess.run([sys.executable, "-m", "sim", "course", "release", "sol", "--out", "rel"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    assert "ZEBRA" not in (tmp_path / "rel" / "a1_ring_reduce_scatter.ipynb").read_text()
    os.mkfifo(tmp_path / "sol" / "b.ipynb")
    p = subprocess.run([sys.executable, "-m", "sim", "course", "release", "sol", "--out", "rel2"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=30, check=False)
    assert p.returncode == 2 and "not a regular file" in p.stderr and len(p.stderr.strip().splitlines()) == 1
