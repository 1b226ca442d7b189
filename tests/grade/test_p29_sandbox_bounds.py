"""Every place the sandboxed code can write is bounded (hostile trial p29, F8).

A submission graded with ``--memory-mb 512`` took 3 GB of the host's RAM by writing files into ``/dev/shm``
(bwrap's ``/dev`` and ``/`` were writable, unsized tmpfs). The facts are observed from inside: the
submission tries each place and prints what the kernel let it do; the test reads that from the report.
"""
import errno
import json

import pytest
from ring_submissions import GOOD

from sim.grade import jail

needs_bwrap = pytest.mark.skipif(not jail.available(), reason="bubblewrap or user/PID namespaces unavailable here")


PROBE = GOOD + '''
import ctypes, json, os
facts = {"writable": [], "sizes": {}}
for d in ["/", "/run", "/opt", "/root", "/dev", "/dev/shm", "/tmp", "/run/collsim"]:
    try:
        with open(os.path.join(d, "probe_p29"), "w") as f:
            f.write("x")
        facts["writable"].append(d)
    except OSError:
        pass
for d in ["/tmp", "/dev/shm"]:
    st = os.statvfs(d)
    facts["sizes"][d] = st.f_blocks * st.f_frsize
block, wrote = b"\\0" * (1 << 20), 0
try:
    for i in range(64):                          # 64 MB asked for, each file under the 16 MB file-size limit
        with open(f"/dev/shm/fill{i // 8}", "ab") as f:
            f.write(block)
        wrote += len(block)
except OSError as e:
    facts["shm_stop"] = e.errno
facts["shm_wrote"] = wrote
libc = ctypes.CDLL(None, use_errno=True)
facts["shmget"] = [libc.shmget(0, 1 << 20, 0o1000 | 0o600), ctypes.get_errno()]
try:
    os.close(os.memfd_create("p29"))
    facts["memfd"] = 0
except OSError as e:
    facts["memfd"] = e.errno
facts["unshare_user"] = [libc.unshare(0x10000000), ctypes.get_errno()]   # CLONE_NEWUSER
print("FACTS", json.dumps(facts))
'''


def _facts(report) -> dict:
    line = next(l for l in report.output.splitlines() if l.startswith("FACTS "))
    return json.loads(line[6:])


@needs_bwrap
def test_only_the_two_sized_tmpfs_are_writable(tmp_path):
    from sim.grade import grade
    sub = tmp_path / "a1_probe.py"
    sub.write_text(PROBE)
    report = grade(str(sub))
    facts = _facts(report)
    assert report.passed, report.text()                      # a correct submission still passes in full
    assert sorted(facts["writable"]) == ["/dev/shm", "/tmp"]  # "/", /run, /opt, /root, /dev: read-only now
    assert facts["sizes"] == {"/tmp": 256 << 20, "/dev/shm": jail.SHM_BYTES}
    assert facts["shm_wrote"] <= jail.SHM_BYTES and facts["shm_stop"] == errno.ENOSPC   # 16 MB, not 64


@needs_bwrap
def test_no_memory_outside_the_limits_through_ipc_memfd_or_a_nested_namespace(tmp_path):
    from sim.grade import grade
    force = jail.in_force()
    if not all(force.values()):
        pytest.skip(f"this bubblewrap/kernel lacks part of the hardening: {force}")
    sub = tmp_path / "a1_probe.py"
    sub.write_text(PROBE)
    facts = _facts(grade(str(sub)))
    assert facts["shmget"] == [-1, errno.EPERM]              # System V shared memory refused by the seccomp filter
    assert facts["memfd"] == errno.EPERM
    assert facts["unshare_user"][0] == -1                     # no nested user namespace (so no tmpfs of its own)


@needs_bwrap
def test_verify_file_runs_in_the_same_bounds(tmp_path):
    import subprocess
    import sys
    algo = tmp_path / "algo.py"
    algo.write_text('import json, os, sys\nwritable = []\nfor d in ["/", "/dev", "/opt", "/tmp"]:\n'
                    '    try:\n        open(os.path.join(d, "p"), "w").close()\n        writable.append(d)\n'
                    '    except OSError:\n        pass\nprint("WRITABLE " + json.dumps(writable), file=sys.stderr)\n'
                    'from sim.algorithms import build_program\nCOLLECTIVES = ["all_reduce"]\n'
                    'def build(c, n):\n    return build_program("ring", c, n)\n')
    p = subprocess.run([sys.executable, "-m", "sim", "verify", str(algo), "--ranks", "2-3"], capture_output=True,
                       text=True, timeout=120, check=False)
    line = next(l for l in p.stderr.splitlines() if l.startswith("WRITABLE "))
    assert p.returncode == 0 and "2 of 2 programs verified" in p.stdout
    assert json.loads(line[9:]) == ["/tmp"]


def test_the_seccomp_filter_is_well_formed():
    import struct
    prog = jail.seccomp_filter("x86_64")
    ins = [struct.unpack("=HBBI", prog[i:i + 8]) for i in range(0, len(prog), 8)]
    assert ins[0] == (0x20, 0, 0, 4) and ins[2] == (0x20, 0, 0, 0)        # load arch, then the call number
    assert ins[-2] == (0x06, 0, 0, 0x7FFF0000) and ins[-1] == (0x06, 0, 0, 0x00050000 | errno.EPERM)
    deny = len(ins) - 1
    for k, (code, jt, jf, _) in enumerate(ins[:-2]):                      # every jump lands on the deny
        if code in (0x15, 0x35):
            assert k + 1 + (jt or jf) == deny
    assert {k for (_, _, _, k) in ins[3:-2]} == {0x40000000, 29, 64, 68, 319}
    assert jail.seccomp_filter("sparc64") is None


def test_the_command_bounds_every_writable_place_after_every_mount():
    """Built without running it (no bubblewrap needed): the remounts come after every mount bwrap makes."""
    cmd = jail.command(["-c", "pass"], "/dev/null", [], seccomp=7, force={"disable_userns": True, "seccomp": True})
    opts = cmd[:cmd.index("--")]
    last_mount = max(i for i, a in enumerate(opts) if a in ("--ro-bind", "--bind", "--tmpfs", "--dev", "--proc", "--dir"))
    assert opts.index("--remount-ro") > last_mount and opts[-3:] == ["--disable-userns", "--seccomp", "7"]
    assert opts[opts.index("/dev/shm") - 3:opts.index("/dev/shm") + 5] == [
        "--size", str(jail.SHM_BYTES), "--tmpfs", "/dev/shm", "--remount-ro", "/dev", "--remount-ro", "/"]
    weak = jail.command(["-c", "pass"], "/dev/null", [], seccomp=7, force={"disable_userns": False, "seccomp": False})
    assert "--disable-userns" not in weak and "--seccomp" not in weak and "--remount-ro" in weak


def test_a_weaker_sandbox_says_what_is_not_in_force(monkeypatch, capsys):
    monkeypatch.setattr(jail, "_variant", lambda: (False, True))
    monkeypatch.setattr(jail, "_told", set())
    jail.weaker_notice()
    jail.weaker_notice()
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("partly contained: nested user namespaces are not disabled")
