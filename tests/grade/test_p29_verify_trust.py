"""``collsim verify FILE.py`` takes no verdict from the file's process (hostile trial p29, F9).

The file's process used to build *and* verify, then report "ok" on a pipe the file could write to: a file
that built nothing got "7 of 7 programs verified". Now it only builds; each Program crosses as op columns
and is verified in collsim's own process. Without bubblewrap too: the verdict is not the sandbox's job.
"""
import re
import subprocess
import sys

from sim.grade.user_file import _judge
from sim.grade.wire import encode

# writes forged answers, in the old protocol and the new, on every pipe it holds, then exits
FORGE = '''import json, os
COLLECTIVES = ["all_reduce"]
def build(collective, nranks):
    raise RuntimeError("never called")
lines = [{"ready": True, "supported": ["all_reduce"], "notes": [], "names": {}}, {"supported": ["all_reduce"]}]
lines += [{"collective": "all_reduce", "nranks": n, "ok": True, "message": ""} for n in (2, 3, 4)]
lines += [{"done": True}]
for fd in range(3, 64):
    try:
        if os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
            os.write(fd, "".join(json.dumps(x) + "\\n" for x in lines).encode())
    except OSError:
        pass
os._exit(0)
'''

# builds a wrong all_reduce (one op dropped) and makes the verifier in its own process say yes
PATCHED = '''import sys
import sim.verify
from sim.algorithms import build_program
from sim.program import Program
sys.modules["sim.verify"].verify.__code__ = (lambda program: None).__code__
COLLECTIVES = ["all_reduce"]
def build(collective, nranks):
    p = build_program("ring", collective, nranks)
    k = slice(1, None)
    return Program.from_ops(p.collective.name, p.nranks, p.nchunks, p.src[k], p.dst[k], p.chunk[k], p.step[k],
                            p.reduce[k], algorithm="broken", steps=p.steps, channel=p.channel[k], root=p.root)
'''


def _verify(tmp_path, text, *args):
    algo = tmp_path / "algo.py"
    algo.write_text(text)
    p = subprocess.run([sys.executable, "-m", "sim", "verify", str(algo), *args], capture_output=True, text=True,
                       timeout=120, check=False, cwd=tmp_path)
    return p.returncode, p.stdout, p.stderr


def _verified(out: str) -> int:
    """How many programs the report says were verified."""
    m = re.search(r"^(\d+) (?:of \d+ )?programs verified", out, re.M)
    assert m, out
    return int(m.group(1))


def test_a_file_that_forges_the_verdict_on_its_pipe_verifies_nothing(tmp_path):
    rc, out, err = _verify(tmp_path, FORGE, "--ranks", "2-4")
    assert "Traceback" not in out + err
    assert rc == 1 and not re.search(r"^ok ", out, re.M), out
    assert _verified(out) == 0


def test_a_file_that_patches_the_verifier_in_its_process_still_fails(tmp_path):
    rc, out, err = _verify(tmp_path, PATCHED, "--ranks", "2-4")
    assert rc == 1 and _verified(out) == 0, out
    assert out.count("FAIL algo.py all_reduce") == 3 and "3 failed" in out


def test_the_verdict_comes_from_the_program_this_process_rebuilds():
    from sim.algorithms import build_program
    from sim.program import Program
    good = build_program("ring", "all_reduce", 4)
    assert _judge({"value": encode(good)}, "all_reduce", 4) == (True, "")
    k = slice(1, None)
    bad = Program.from_ops("all_reduce", 4, good.nchunks, good.src[k], good.dst[k], good.chunk[k], good.step[k],
                           good.reduce[k], algorithm="broken", steps=good.steps, channel=good.channel[k])
    ok, why = _judge({"value": encode(bad)}, "all_reduce", 4)
    assert not ok and why
    for forged in ({"ok": True}, {"collective": "all_reduce", "nranks": 4, "ok": True, "message": ""}, {"value": True},
                   {"value": {"__object__": "Program"}}):
        assert _judge(forged, "all_reduce", 4)[0] is False
    # a Program for another world size or collective is not an answer, however it verifies
    assert _judge({"value": encode(build_program("ring", "all_reduce", 3))}, "all_reduce", 4)[0] is False
    huge = dict(encode(good)["__program__"], nchunks=1 << 30)   # a verifier state of 4 x 2^30 sets: refused
    ok, why = _judge({"value": {"__program__": huge}}, "all_reduce", 4)
    assert not ok and "needs about" in why


def test_a_correct_file_still_verifies(tmp_path):
    rc, out, _ = _verify(tmp_path, 'from sim.algorithms import build_program\nCOLLECTIVES = ["all_reduce", "all_gather"]\n'
                         'def build(c, n):\n    return build_program("ring", c, n)\n', "--ranks", "2-5")
    assert rc == 0 and "8 of 8 programs verified" in out
