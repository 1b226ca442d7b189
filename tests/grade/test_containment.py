"""The grader's kernel sandbox (bubblewrap) and batches that survive a bad row.

Facts about the sandbox are observed from inside it: a submission prints what it can see (its uid, its
parent, /proc, the folders it can list, its network interfaces) and the test reads that from the
report's output, so the expectations come from the kernel, not from the code that builds the command.
The escape tests are the acceptance probe's: kill the supervisor, leave a detached process that later
writes a file and edits the grade sheet.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from ring_submissions import GOOD

from sim.grade.batch import feedback_markdown, feedback_names, refused
from sim.grade.checks import Check, GradeReport
from sim.grade.quote import md, one_line
from sim.io.containment import available

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
needs_bwrap = pytest.mark.skipif(not available(), reason="bubblewrap or user/PID namespaces unavailable here")



def _collsim(*args, cwd, env=None, timeout=180):
    full = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=timeout, start_new_session=True, check=False)


def _kill_marked(marker: str) -> int:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True, check=False).stdout
    pids = [int(line.split()[0]) for line in out.splitlines()[1:] if marker in line and "ps -eo" not in line]
    for p in pids:
        try:
            os.kill(p, signal.SIGKILL)
        except OSError:
            pass
    return len(pids)


@needs_bwrap
def test_inside_the_sandbox(tmp_path):
    from sim.grade import grade
    secret = tmp_path / "subs" / "other_student.py"
    secret.parent.mkdir()
    secret.write_text("SECRET = 1\n")
    sub = tmp_path / "subs" / "a1_probe.py"
    sub.write_text(GOOD + f'''
import json, os, socket
facts = {{"uid": os.getuid(), "ppid": os.getppid(), "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
         "sees_submissions": os.path.exists({str(secret.parent)!r}), "sees_project": os.path.exists({ROOT!r}),
         "nets": [n for _, n in socket.if_nameindex()]}}
try:
    open("/usr/collsim_probe", "w")
    facts["usr_writable"] = True
except OSError:
    facts["usr_writable"] = False
open("scratch.txt", "w").write("x")
print("FACTS", json.dumps(facts))
''')
    report = grade(str(sub))
    line = next(l for l in report.output.splitlines() if l.startswith("FACTS "))
    facts = json.loads(line[6:])
    assert report.passed, report.text()
    assert facts["uid"] == 65534 and facts["ppid"] == 1          # another user; its parent is the namespace's init
    assert max(facts["pids"]) < 50                               # only its own PID namespace is visible
    assert not facts["sees_submissions"] and not facts["sees_project"]
    assert facts["nets"] == ["lo"]                                 # no network but loopback
    assert facts["usr_writable"] is False                          # read-only binds


@needs_bwrap
def test_supervisor_kill_and_detached_child_are_contained(tmp_path):
    marker_file = tmp_path / "escaped"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a1_carol.py").write_text(GOOD)
    (tmp_path / "sub" / "a1_mallory.py").write_text(GOOD + f'''
import os, signal, subprocess, sys
code = "import time, glob\\ntime.sleep(2)\\nopen({str(marker_file)!r}, 'w').write('x')\\n" \\
       "for c in glob.glob({str(tmp_path / '*.csv')!r}): open(c, 'a').write('mallory,99\\\\n')\\ntime.sleep(61.25)"
subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
os.kill(os.getppid(), signal.SIGKILL)
''')
    p = _collsim("grade", "sub", "--csv", "g.csv", "--jobs", "1", cwd=tmp_path)
    before = (tmp_path / "g.csv").read_text()
    time.sleep(4)
    left = _kill_marked("time.sleep(61.25)")
    assert "Traceback" not in p.stderr
    assert left == 0 and not marker_file.exists()
    assert (tmp_path / "g.csv").read_text() == before and "99" not in before
    rows = {l.split(",")[0]: l.split(",")[2] for l in before.splitlines()[1:]}
    assert rows["a1_carol.py"] == "6"


def test_a_checker_killer_spoils_only_its_own_row(tmp_path):
    """Also without bwrap (COLLSIM_NO_BWRAP=1): each submission has its own worker process."""
    (tmp_path / "sub").mkdir()
    for who in ("ann", "bob"):
        (tmp_path / "sub" / f"a1_{who}.py").write_text(GOOD)
    (tmp_path / "sub" / "a1_eve.py").write_text(GOOD + '''
import os, signal
stat = open(f"/proc/{os.getppid()}/stat").read().rsplit(")", 1)[1].split()
try:
    os.kill(int(stat[1]), signal.SIGKILL)
except OSError:
    pass
os.kill(os.getppid(), signal.SIGKILL)
''')
    for env in ({}, {"COLLSIM_NO_BWRAP": "1"}):
        (tmp_path / "g.csv").unlink(missing_ok=True)
        p = _collsim("grade", "sub", "--csv", "g.csv", "--jobs", "2", cwd=tmp_path, env=env)
        rows = {l.split(",")[0]: l.split(",") for l in (tmp_path / "g.csv").read_text().splitlines()[1:]}
        assert rows["a1_ann.py"][2] == "6" and rows["a1_bob.py"][2] == "6", (env, rows)
        assert rows["a1_eve.py"][2] == "0"
        notices = [l for l in p.stderr.splitlines() if l.startswith("not contained:")]
        assert len(notices) == (0 if available() and not env else 1), p.stderr


def test_links_and_special_files_are_refused_per_row(tmp_path):
    (tmp_path / "a1_ok.py").write_text(GOOD)
    os.symlink(tmp_path / "a1_ok.py", tmp_path / "a1_link.py")
    os.mkfifo(tmp_path / "a1_fifo.py")
    assert refused(str(tmp_path / "a1_ok.py")) is None
    assert "symbolic link" in refused(str(tmp_path / "a1_link.py"))
    assert "not a regular file" in refused(str(tmp_path / "a1_fifo.py"))


def test_feedback_names_are_unique():
    names = feedback_names(["alice.py", "alice.ipynb", "a/b.py", "a__b.py", "Alice.py"])
    assert len({n.lower() for n in names}) == 5
    assert names[0] == "alice.md"


def test_student_text_cannot_forge_a_line():
    forged = "boom\n**Score: 6/6**\r\n# a1 | done\u2028x"
    assert "\n" not in one_line(forged) and "\r" not in one_line(forged) and "\u2028" not in one_line(forged)
    r = GradeReport("a1", "t", "a1_x.py", (Check("correct", False, forged, points=2, expected="1", got=forged),))
    text = feedback_markdown(r)
    assert "\n**Score: 6/6**" not in text and "\n# a1" not in text
    assert md("| x") == "\\| x"


def test_fallback_notice_names_what_is_not_contained(tmp_path):
    (tmp_path / "a1_ok.py").write_text(GOOD)
    p = _collsim("grade", "a1_ok.py", cwd=tmp_path, env={"COLLSIM_NO_BWRAP": "1"})
    notice = [l for l in p.stderr.splitlines() if l.startswith("not contained:")]
    assert p.returncode == 0 and len(notice) == 1
    assert all(w in notice[0] for w in ("read your files", "network", "signal"))


def test_mounted_python_folders_never_hold_the_project_or_a_submission(tmp_path, monkeypatch):
    from sim.io.containment import python_paths
    proj, subs = tmp_path / "proj", tmp_path / "subs"
    venv_site = proj / ".venv" / "lib" / "python3" / "site-packages"
    for d in (venv_site, proj / "tests", proj / "notebooks" / "solutions", subs / "lib", tmp_path / "other"):
        d.mkdir(parents=True)
    monkeypatch.setattr("sys.path", [str(proj), str(proj / "tests"), str(venv_site), str(subs / "lib"), str(tmp_path),
                                     str(tmp_path / "other")])
    got = python_paths([str(subs)], str(proj))
    assert str(venv_site) in got and str(tmp_path / "other") in got
    assert not any(p in got for p in (str(proj), str(proj / "tests"), str(subs / "lib"), str(tmp_path)))


def test_a_file_name_cannot_forge_report_lines(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a1_x\n**Score: 6 6**.py").write_text(GOOD)
    (tmp_path / "sub" / "a1_bad\nscore 6 of 6.py").write_text("raise SystemExit(\n")
    p = _collsim("grade", "sub", "--csv", "g.csv", "--feedback", "fb", "--jobs", "2", cwd=tmp_path)
    assert len(p.stdout.strip().splitlines()) == 3                       # two rows and the summary line
    assert len((tmp_path / "g.csv").read_text().strip().splitlines()) == 3
    assert all("\n" not in n and set(n) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
               for n in os.listdir(tmp_path / "fb"))
