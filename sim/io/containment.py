"""Kernel containment of code that is not ours (a student's submission, a user's algorithm file), through
bubblewrap (``bwrap``, Debian package ``bubblewrap``).

:func:`wrap` turns ``python -m MODULE ARGS`` into a ``bwrap`` command line that runs it with:

* a new PID namespace (``--unshare-pid``): the code sees only its own processes; ``os.getppid()`` is
  bwrap's init (PID 1 of the namespace), which the kernel protects from signals sent from inside; when
  the first process ends, or bwrap's parent dies (``--die-with-parent``), the kernel kills every process
  of the namespace, detached ones (``start_new_session``, double forks) included;
* no network (``--unshare-net``: a loopback device only), no IPC or hostname shared;
* a new user namespace in which the code runs as uid/gid 65534 (``nobody``) with no capabilities, so
  ``RLIMIT_NPROC`` applies to it even where the grader runs as root;
* a filesystem of read-only binds of just what Python needs (the interpreter's prefix, the directories
  on the grader's ``sys.path`` that hold neither the project nor the submissions, ``/usr`` and the
  dynamic loader's libraries), the project's ``sim`` package read-only at ``/opt/collsim/sim``, the one
  configuration file the child reads, a fresh ``/proc`` of its namespace, a minimal ``/dev``, and a
  private ``tmpfs`` scratch folder (``/tmp``, size-capped) that disappears with it. The instructor's
  solutions, the other submissions, the grade sheet and the rest of the grader's files are not mounted.

The pipes between the child and the checker are inherited file descriptors: nothing else in the
sandbox can name the checker's process (another PID namespace) or its ``/proc/<pid>/fd``.

Where bwrap is missing or the kernel refuses user or PID namespaces (:func:`available` runs the exact
command once), code runs as before (rlimits, a process-group and subreaper clean-up) and
:func:`not_contained_notice` is printed, once per run, on stderr.
"""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys

SANDBOX_UID = 65534
SIM_MOUNT = "/opt/collsim"          # the project's sim package is mounted at /opt/collsim/sim
CONFIG_MOUNT = "/run/collsim/config.json"
SHARE_MOUNT = "/run/collsim/share"              # read-only: what the checker hands the student to read
SCRATCH = "/tmp"
WORKDIR = "/tmp/work"
SCRATCH_BYTES = 256 << 20           # the tmpfs holds at most this much (it is memory)
NOT_CONTAINED = ("not contained: bubblewrap (bwrap) or user/PID namespaces are unavailable here, so {what} runs "
                 "as you, with rlimits only: it can read your files, use the network and signal your processes "
                 "(install the 'bubblewrap' package; docs/teaching.md)")


def project_root() -> str:
    """The folder holding the ``sim`` package this process imports."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _system_binds() -> list[str]:
    """/usr, and the loader's folders (/lib, /lib64, /bin as links into /usr or as folders), /etc/ld.so.cache."""
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for f in ("/etc/ld.so.cache", "/etc/localtime"):
        if os.path.exists(f):
            args += ["--ro-bind", f, f]
    return args


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _environment(path: str) -> bool:
    """Whether ``path`` is part of a Python installation: under an interpreter prefix, or site-packages."""
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    parts = path.split(os.sep)
    return any(_inside(path, p) for p in prefixes) or "site-packages" in parts or "dist-packages" in parts


def python_paths(hidden: list[str], root: str | None = None) -> list[str]:
    """Folders Python needs: its prefixes and the grader's ``sys.path`` folders, except any that is or holds
    the project ``root`` or one of ``hidden`` (the submissions' folders), or lies inside one of ``hidden``,
    which are never mounted. (A virtual environment inside the project, ``.venv``, holds neither: mounted.)"""
    real_hidden = [os.path.realpath(h) for h in hidden]
    real_root = [os.path.realpath(root)] if root else []
    out: list[str] = []
    for p in [sys.prefix, sys.base_prefix, sys.exec_prefix, *sys.path]:
        if not p or not os.path.isdir(p):
            continue
        rp = os.path.realpath(p)
        if rp in ("/", "/usr") or _inside(rp, "/usr") or any(_inside(h, rp) for h in real_hidden + real_root) \
                or any(_inside(rp, h) for h in real_hidden):
            continue
        if any(_inside(rp, r) for r in real_root) and not _environment(rp):
            continue   # inside the project, only a Python environment (.venv) is mounted, not tests/ or notebooks/
        if not any(_inside(rp, o) for o in out):
            out = [o for o in out if not _inside(o, rp)] + [rp]
    return out


def wrap(python_args: list[str], config_file: str, hidden: list[str], mount: str = CONFIG_MOUNT,
         share: str | None = None) -> list[str]:
    """The bwrap command that runs ``python <python_args>`` contained; ``config_file`` is mounted read-only
    at ``mount`` (default :data:`CONFIG_MOUNT`); ``share``, a folder of the checker's, read-only at
    :data:`SHARE_MOUNT` (files the checker gives the code to read, e.g. assignment a5's dumps).
    ``hidden``: folders never mounted besides the project's root (the submissions' folders)."""
    root = project_root()
    args = ["bwrap", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID), "--unshare-pid",
            "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", *_system_binds()]
    paths = python_paths(list(hidden), root)
    for p in paths:
        args += ["--ro-bind", p, p]
    python = os.path.realpath(sys.executable)
    if not any(_inside(python, p) for p in ["/usr", *paths]):
        args += ["--ro-bind", python, python]
    args += ["--ro-bind", os.path.join(root, "sim"), os.path.join(SIM_MOUNT, "sim"),
             "--proc", "/proc", "--dev", "/dev", "--size", str(SCRATCH_BYTES), "--tmpfs", SCRATCH,
             "--dir", WORKDIR, "--ro-bind", config_file, mount,
             *(["--ro-bind", share, SHARE_MOUNT] if share else []), "--chdir", WORKDIR,
             "--setenv", "HOME", WORKDIR, "--setenv", "TMPDIR", WORKDIR,
             "--setenv", "PYTHONPATH", SIM_MOUNT, "--", python, *python_args]
    return args


@functools.lru_cache(maxsize=1)
def available() -> bool:
    """Whether bwrap runs here with the namespaces :func:`wrap` asks for (run once, then remembered)."""
    if os.environ.get("COLLSIM_NO_BWRAP") == "1" or not sys.platform.startswith("linux") or shutil.which("bwrap") is None:
        return False
    probe = wrap(["-c", "import sim.grade.student"], os.devnull, [])
    try:
        return subprocess.run(probe, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=30, check=False).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


_told: set[str] = set()


def not_contained_notice(what: str) -> None:
    """Say on stderr, once per run and kind of code, what is not contained where bwrap cannot be used."""
    if what not in _told:
        _told.add(what)
        print(NOT_CONTAINED.format(what=what), file=sys.stderr)


__all__ = ["available", "wrap", "not_contained_notice", "python_paths", "project_root", "CONFIG_MOUNT", "WORKDIR",
           "SANDBOX_UID", "SIM_MOUNT", "SHARE_MOUNT"]
