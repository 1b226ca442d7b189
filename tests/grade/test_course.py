"""Course workflow: one source per assignment (release), the sandbox that keeps student code away from
the checker, batch grading, and the formats courses read (CSV, Gradescope, feedback files).

Expected values come from the files themselves (what the instructor marked as solution must not be in
the release; what a cheat patches must not change its score), Gradescope's documented results.json keys,
and processes counted with pgrep, never from the grader's own output alone.
"""
import csv
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from sim.errors import CollsimError
from sim.grade import grade
from sim.grade.release import BEGIN, END, notebook_json, release_notebook, release_source
from sim.grade.source import read_notebook

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLUTIONS = os.path.join(ROOT, "notebooks", "solutions")
ASSIGN_DIR = os.path.join(ROOT, "notebooks", "assignments")
A1 = "a1_ring_reduce_scatter.ipynb"


def collsim(*args, timeout=300, env=None):
    p = subprocess.run([sys.executable, "-m", "sim", *map(str, args)], capture_output=True, text=True, timeout=timeout,
                       cwd=ROOT, env=env)
    return p.returncode, p.stdout, p.stderr


# ---- release: the repository's assignments are the release of the solutions --------------------------------
def test_released_assignments_match_the_instructor_notebooks(tmp_path):
    # what the instructor runs, `collsim course release`, must reproduce the committed student notebooks byte for byte
    code, out, err = collsim("course", "release", SOLUTIONS, "--out", tmp_path)
    assert code == 0, err
    names = sorted(f for f in os.listdir(tmp_path) if f.endswith(".ipynb"))
    assert f"{len(names)} notebook(s) released" in out
    assert names == sorted(f for f in os.listdir(ASSIGN_DIR) if f.endswith(".ipynb")), "an assignment has no source"
    for name in names:
        with open(os.path.join(ASSIGN_DIR, name), encoding="utf-8") as f:
            shipped = f.read()
        with open(tmp_path / name, encoding="utf-8") as f:
            fresh = f.read()
        assert shipped == fresh, (f"notebooks/assignments/{name} drifted from notebooks/solutions/{name}: run "
                                  "`collsim course release notebooks/solutions --out notebooks/assignments`")


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(SOLUTIONS) if f.endswith(".ipynb")))
def test_release_strips_every_marked_line_and_clears_outputs(name):
    sol = read_notebook(os.path.join(SOLUTIONS, name))
    marked, inside = [], False
    for cell in sol["cells"]:
        for line in cell["source"].split("\n"):
            if BEGIN in line or END in line:
                inside = BEGIN in line
            elif inside and len(line.strip()) > 12:
                marked.append(line.strip())
    assert marked, f"{name} marks no solution"
    student = read_notebook(os.path.join(ASSIGN_DIR, name))
    code = "\n".join(c["source"] for c in student["cells"] if c["cell_type"] == "code")   # hints in Markdown may quote a line
    text = "\n".join(c["source"] for c in student["cells"])
    assert [m for m in marked if m in code] == [] and BEGIN not in text and END not in text
    assert all(not c.get("outputs") and c.get("execution_count") is None for c in student["cells"] if c["cell_type"] == "code")
    assert student["metadata"]["collsim"] == sol["metadata"]["collsim"]


def test_release_source_replaces_regions_keeps_indentation_and_refuses_broken_markers():
    code = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
    assert release_source(code) == "def f(x):\n    y = 1\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    stub = "def g():\n    ### BEGIN SOLUTION\n    return 42\n    ### STUB: return None  # fill in\n    ### END SOLUTION\n"
    assert release_source(stub) == "def g():\n    return None  # fill in\n"
    assert release_source("Intro\n### BEGIN SOLUTION\nanswer\n### END SOLUTION\nend", markdown=True) == "Intro\nend"
    with pytest.raises(CollsimError, match="never closed"):
        release_source("### BEGIN SOLUTION\nx = 1\n")
    with pytest.raises(CollsimError, match="without a BEGIN"):
        release_source("x = 1\n### END SOLUTION\n")
    nb = {"cells": [{"cell_type": "markdown", "metadata": {}, "source": "### BEGIN SOLUTION\nfor teachers\n### END SOLUTION"},
                    {"cell_type": "code", "metadata": {"tags": ["solution-only"]}, "source": "secret = 1"},
                    {"cell_type": "code", "metadata": {}, "source": "x = 1", "outputs": [{"text": "1"}], "execution_count": 3}],
          "metadata": {"collsim": {"assignment": "a1"}}}
    out = release_notebook(nb)
    assert [c["source"] for c in out["cells"]] == ["x = 1"] and out["cells"][0]["outputs"] == []
    assert json.loads(notebook_json(out))["cells"][0]["source"] == ["x = 1"]


def test_release_cli_refuses_to_write_over_the_sources_and_needs_markers(tmp_path):
    code, _, err = collsim("course", "release", SOLUTIONS, "--out", SOLUTIONS)
    assert code == 2 and "release into another folder" in err and "Traceback" not in err
    plain = tmp_path / "plain.ipynb"
    plain.write_text(json.dumps({"cells": [{"cell_type": "code", "metadata": {}, "source": "x = 1"}], "metadata": {}}))
    code, _, err = collsim("course", "release", plain, "--out", tmp_path / "out")
    assert code == 2 and "no '### BEGIN SOLUTION' markers" in err


# ---- the sandbox: the checker never trusts the student's process ---------------------------------------------
CHEAT = ('import sim.grade.a1_ring_reduce_scatter as m, sim.grade.checks as c, sim\n'
         'm.check = lambda ns: [c.Check("all", True, "ok")]\n'
         'sim.verify = lambda *a, **k: None\n'
         'def ring_reduce_scatter(n):\n'
         '    return sim.build_program("ring", "all_gather", n)\n')


@pytest.mark.slow
def test_a_checker_replacing_cheat_scores_nothing(tmp_path):
    f = tmp_path / "a1_cheat.py"
    f.write_text(CHEAT)
    r = grade(str(f), "a1", timeout_s=60)
    got, total = r.score
    assert total == 6 and got == 0, r.text()
    # its Program would be the library's ring (refused while the student's function runs), of the wrong collective
    assert "write the algorithm yourself" in next(c.message for c in r.checks if c.name == "returns a reduce_scatter Program")


@pytest.mark.slow
def test_a_lying_program_subclass_is_rebuilt_from_its_arrays(tmp_path):
    # A Program subclass whose verify-relevant properties lie: the checker rebuilds a plain Program from the
    # op columns, so the lie does not cross.
    f = tmp_path / "a1_liar.py"
    f.write_text("import sim, numpy as np\n"
                 "class Liar(sim.Program):\n"
                 "    @property\n"
                 "    def nrounds(self):\n"
                 "        return self.nranks - 1\n"
                 "def ring_reduce_scatter(n):\n"
                 "    src, dst = zip(*[(r, k) for r in range(n) for k in range(n) if r != k])\n"
                 "    return Liar.from_ops('reduce_scatter', n, n, src, dst, chunk=dst, step=[0] * len(src),\n"
                 "                         reduce=[True] * len(src), algorithm='direct', steps=n - 1)\n")
    r = grade(str(f), "a1", timeout_s=60)
    by = {c.name: c for c in r.checks}
    assert by["correct (sim.verify)"].ok                      # a direct reduce-scatter is correct ...
    assert not by["n-1 steps"].ok and "1 rounds" in by["n-1 steps"].message   # ... but has 1 round, whatever it says


@pytest.mark.slow
def test_output_flood_is_capped_and_children_do_not_survive(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    f = tmp_path / "a1_flood.py"
    f.write_text("import subprocess, os, sys, time\n"
                 "subprocess.Popen(['sleep', '61.7'])\n"
                 "subprocess.Popen(['sleep', '61.8'], start_new_session=True)\n"
                 "if os.fork() == 0:\n    os.setsid()\n    time.sleep(61.9)\n    os._exit(0)\n"
                 "while True:\n    sys.stdout.write('x' * 1000000)\n")
    env = dict(os.environ, TMPDIR=str(tmpdir))
    t0 = time.monotonic()
    code, out, err = collsim("grade", f, "--timeout", "20", env=env, timeout=120)
    assert code == 1 and "Traceback" not in out + err
    assert "File too large" in out and "output limit" in out
    assert time.monotonic() - t0 < 60
    size = sum(os.path.getsize(os.path.join(d, x)) for d, _, xs in os.walk(tmpdir) for x in xs)
    assert size < 50e6
    time.sleep(0.5)
    left = subprocess.run(["pgrep", "-f", "^sleep 61[.][789]$"], capture_output=True, text=True).stdout.split()
    for pid in left:
        os.kill(int(pid), 9)
    assert left == [], "the student's processes outlived grading"


@pytest.mark.slow
def test_memory_limit_turns_a_huge_allocation_into_a_note(tmp_path):
    f = tmp_path / "a1_hog.py"
    f.write_text("x = bytearray(8 << 30)\n")
    code, out, _ = collsim("grade", f, "--memory-mb", "1024")
    assert code == 1 and "MemoryError" in out


# ---- batch grading and the formats courses read ----------------------------------------------------------------
@pytest.mark.slow
def test_batch_grades_a_folder_to_csv_feedback_and_one_bad_file_does_not_stop_it(tmp_path):
    subs = tmp_path / "subs"
    subs.mkdir()
    shutil.copy(os.path.join(SOLUTIONS, A1), subs / f"alice_{A1}")
    shutil.copy(os.path.join(ASSIGN_DIR, A1), subs / f"bob_{A1}")
    (subs / f"carol_{A1}").write_text("{not a notebook")
    (subs / "mallory_a1.py").write_text(CHEAT)
    sheet, fb = tmp_path / "grades.csv", tmp_path / "feedback"
    code, out, err = collsim("grade", subs, "--assignment", "a1", "--csv", sheet, "--feedback", fb)
    assert code == 1 and "Traceback" not in out + err   # carol's file could not be graded: rc 1, the others were
    rows = {r["file"].split("_")[0]: r for r in csv.DictReader(open(sheet))}
    assert sorted(rows) == ["alice", "bob", "carol", "mallory"]
    assert (rows["alice"]["score"], rows["alice"]["max_score"]) == ("6", "6")
    assert rows["bob"]["score"] == "0" and rows["mallory"]["score"] == "0"
    assert "not a readable notebook" in rows["carol"]["error"]
    assert rows["alice"]["correct (sim.verify)"] == "1" and rows["bob"]["correct (sim.verify)"] == "0"
    assert "graded 4/4" in err                                   # the progress, one line per file off a terminal
    alice = (fb / f"alice_{A1[:-6]}.md").read_text()
    assert "**Score: 6 / 6**" in alice
    bob = (fb / f"bob_{A1[:-6]}.md").read_text()
    assert "NotImplementedError" in bob and "expected:" in bob


@pytest.mark.slow
def test_gradescope_results_json_has_the_keys_gradescope_reads(tmp_path):
    out_file = tmp_path / "results.json"
    code, _, _ = collsim("grade", os.path.join(ASSIGN_DIR, A1), "--format", "gradescope", "--output", out_file)
    assert code == 1
    d = json.loads(out_file.read_text())
    assert d["score"] == 0 and isinstance(d["tests"], list) and len(d["tests"]) == 7
    for t in d["tests"]:
        assert {"name", "score", "max_score", "output"} <= set(t) and t["score"] <= t["max_score"]
    assert sum(t["max_score"] for t in d["tests"]) == 6
    code, _, err = collsim("grade", os.path.join(ASSIGN_DIR, A1), os.path.join(SOLUTIONS, A1), "--format", "gradescope")
    assert code == 2 and "grades one submission" in err


def test_output_is_never_written_over_a_submission(tmp_path):
    f = tmp_path / "a1_x.py"
    f.write_text("x = 1\n")
    code, _, err = collsim("grade", f, "--csv", f)
    assert code == 2 and "one of the submissions" in err
    assert f.read_text() == "x = 1\n"


@pytest.mark.parametrize("text", ['[1, 2]', '{"cells": [1]}', '{"cells": [{"cell_type": "code", "source": 5}]}',
                                  '{"cells": [{"cell_type": "code", "source": "x = 1"}], "metadata": {"collsim": {"assignment": {"a": 1}}}}',
                                  '{"cells": [], "metadata": "odd"}', '{"cells": [{"cell_type": "code", "sou'])
def test_odd_notebooks_get_a_one_line_error(tmp_path, text):
    f = tmp_path / "odd.ipynb"
    f.write_text(text)
    code, out, err = collsim("grade", f)
    assert code == 2 and err.startswith("collsim: error: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in out + err


@pytest.mark.slow
def test_a_function_that_never_returns_fails_its_check_and_stops_the_rest(tmp_path):
    f = tmp_path / "a1_spin.py"
    f.write_text("def ring_reduce_scatter(n):\n    while True:\n        pass\n")
    t0 = time.monotonic()
    r = grade(str(f), "a1", timeout_s=4)
    assert time.monotonic() - t0 < 30
    by = {c.name: c for c in r.checks}
    assert by["defines ring_reduce_scatter"].ok
    assert "ran for more than 4 s" in by["returns a reduce_scatter Program"].message
    assert all(c.message.startswith("not run:") for c in r.checks[2:]) and r.score[0] == 0
    assert "ran for more than 4 s" in r.error
