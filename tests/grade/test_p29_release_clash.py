"""``collsim course release`` refuses two notebooks that would be written to one file (hostile trial p29, F19):
the second used to overwrite the first while the summary said "2 notebook(s) released"."""
import json
import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SOLUTIONS = os.path.join(ROOT, "notebooks", "solutions")


def test_two_notebooks_with_one_name_are_refused_up_front(cli, tmp_path):
    (tmp_path / "s1").mkdir()
    (tmp_path / "s2").mkdir()
    shutil.copy(os.path.join(SOLUTIONS, "a1_ring_reduce_scatter.ipynb"), tmp_path / "s1" / "a1.ipynb")
    shutil.copy(os.path.join(SOLUTIONS, "a2_torus_all_reduce.ipynb"), tmp_path / "s2" / "a1.ipynb")
    out_dir = tmp_path / "out"
    rc, out, err = cli("course", "release", tmp_path / "s1" / "a1.ipynb", tmp_path / "s2" / "a1.ipynb", "--out", out_dir)
    assert rc == 2 and "Traceback" not in out + err and "released" not in out
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("collsim: error: ") and "same name" in lines[0], err
    assert not out_dir.exists()                                 # nothing written


def test_names_that_differ_only_in_case_are_one_file_on_macos_and_windows(cli, tmp_path):
    (tmp_path / "s1").mkdir()
    shutil.copy(os.path.join(SOLUTIONS, "a1_ring_reduce_scatter.ipynb"), tmp_path / "s1" / "a1.ipynb")
    shutil.copy(os.path.join(SOLUTIONS, "a2_torus_all_reduce.ipynb"), tmp_path / "s1" / "A1.ipynb")
    rc, _, err = cli("course", "release", tmp_path / "s1", "--out", tmp_path / "out")
    assert rc == 2 and "same name" in err


def test_the_same_notebook_named_twice_is_released_once_and_counted_once(cli, tmp_path):
    (tmp_path / "s1").mkdir()
    nb = tmp_path / "s1" / "a1.ipynb"
    shutil.copy(os.path.join(SOLUTIONS, "a1_ring_reduce_scatter.ipynb"), nb)
    rc, out, err = cli("course", "release", tmp_path / "s1", nb, "--out", tmp_path / "out")
    assert rc == 0, err
    assert out.count("released ") == 2 and "1 notebook(s) released" in out     # one "released PATH" line, one summary
    assert json.loads((tmp_path / "out" / "a1.ipynb").read_text())["metadata"]["collsim"]["assignment"] == "a1"
