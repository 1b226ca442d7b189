"""``collsim grade``'s output places are checked before any grading, and graded results are never lost
(hostile trial p29, F10 and F11): ``--feedback /proc/fb`` was a traceback after the whole batch was graded,
``--csv`` into a missing folder was refused only after grading, and both dropped the report."""
import os

import pytest
from ring_submissions import GOOD

import sim.grade.batch as batch
from sim.errors import CollsimError


@pytest.fixture
def subs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a1_ann.py").write_text(GOOD)
    (tmp_path / "plainfile").write_text("")
    (tmp_path / "fb").mkdir()
    os.symlink(tmp_path / "elsewhere.md", tmp_path / "fb" / "a1_ann.md")   # a link named like ann's feedback file
    os.symlink(tmp_path / "elsewhere.csv", tmp_path / "link.csv")
    return tmp_path


def _never_grade(*a, **k):
    raise AssertionError("graded before the output places were checked")


@pytest.mark.parametrize("args,words", [
    (["--feedback", "/proc/fb"], "/proc/fb"),
    (["--feedback", "plainfile/sub"], "is a file, not a folder"),
    (["--feedback", "plainfile"], "is a file"),
    (["--feedback", "fb"], "symbolic link"),
    (["--csv", "nowhere/dir/x.csv"], "does not exist"),
    (["--csv", "/proc/version"], "/proc"),
    (["--csv", "link.csv"], "symbolic link"),
    (["--csv", "sub/a1_ann.py"], "one of the submissions"),
    (["--output", "/proc/out.txt"], "/proc"),
    (["--output", "plainfile/x.txt"], "is a file, not a folder"),
    (["--csv", "same.csv", "--output", "same.csv"], "same file"),
])
def test_a_bad_output_place_is_one_line_before_any_grading(cli, subs, monkeypatch, args, words):
    monkeypatch.setattr(batch, "grade_many", _never_grade)
    monkeypatch.setattr("sim.grade.runner.grade", _never_grade)
    rc, out, err = cli("grade", "sub", *args)
    assert rc == 2 and "Traceback" not in out + err
    lines = [l for l in err.strip().splitlines() if not l.startswith("not contained: ")]
    assert len(lines) == 1 and lines[0].startswith("collsim: error: ") and words in lines[0], err
    assert not os.path.exists("nowhere")


def test_the_feedback_folder_is_made_up_front_and_filled(cli, subs):
    rc, out, err = cli("grade", "sub", "--feedback", "new/fb", "--csv", "g.csv")
    assert rc == 0, err
    assert (subs / "new" / "fb" / "a1_ann.md").read_text().count("Score: 6 / 6") == 1
    assert "a1_ann.py: 6/6" in out and "grade sheet g.csv" in out


def _fill_disk_for(flag_hit: str, monkeypatch) -> None:
    """Make batch.write_atomic fail as a full disk would, for the output named ``flag_hit`` only."""
    real = batch.write_atomic

    def full_disk(path, text, inputs, flag="output"):
        if flag == flag_hit:
            raise CollsimError(f"cannot write {flag} {path}: No space left on device: free space or write elsewhere")
        return real(path, text, inputs, flag)
    monkeypatch.setattr(batch, "write_atomic", full_disk)


def test_a_write_that_fails_after_grading_loses_no_grade(cli, subs, monkeypatch):
    """The disk fills up while grading: the report still comes out, the failure is one line, exit 2."""
    _fill_disk_for("--csv", monkeypatch)
    rc, out, err = cli("grade", "sub", "--csv", "g.csv", "--feedback", "fb2")
    assert rc == 2 and "Traceback" not in out + err
    assert "a1_ann.py: 6/6" in out and "grade sheet" not in out          # the grades, and no claim of a sheet
    assert [l for l in err.splitlines() if l.startswith("collsim: error:")] == [
        "collsim: error: cannot write --csv g.csv: No space left on device: free space or write elsewhere "
        "(the grade sheet was not written; the grades are in the report)"]
    assert (subs / "fb2" / "a1_ann.md").exists() and not (subs / "g.csv").exists()


def test_an_output_file_that_fails_after_grading_prints_the_report_instead(cli, subs, monkeypatch):
    _fill_disk_for("--output", monkeypatch)
    rc, out, err = cli("grade", "sub/a1_ann.py", "--output", "r.txt")
    assert rc == 2 and "score 6/6" in out and "printed on stdout instead" in err
