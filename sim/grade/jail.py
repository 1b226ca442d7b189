"""The bubblewrap command that code which is not ours runs under, with every writable place bounded.

:func:`sim.io.containment.wrap` gives the namespaces and the read-only binds; :func:`command` adds what keeps
the code's memory inside its limits (a submission graded with ``--memory-mb 512`` took 3 GB of the host's
RAM by writing files into the writable, unsized tmpfs that bwrap makes for ``/`` and ``/dev``):

* ``/`` (bwrap's own tmpfs, which holds the mount points) and ``/dev`` are remounted **read-only**; a
  fresh ``tmpfs`` of :data:`SHM_BYTES` is mounted at ``/dev/shm`` (POSIX shared memory and semaphores,
  e.g. ``multiprocessing.Lock``). With bwrap's 256 MB ``/tmp`` these are the only writable places;
* ``--disable-userns`` (bubblewrap 0.8 or later): no nested user namespace, so the code cannot mount a
  tmpfs of its own (``unshare -Urm``; a mount made there is unsized);
* a seccomp filter (:func:`seccomp_filter`, x86-64 and arm64) that answers ``EPERM`` to ``shmget``,
  ``semget``, ``msgget`` (System V IPC: a segment outlives its mapping, so ``--memory-mb`` never counts
  it) and ``memfd_create`` (a file in memory outside any tmpfs), and to every system call of another
  ABI (i386, x32), through which those could be reached under another number.

:func:`available` probes once per run with the exact command the code runs under, strongest first; where
this bubblewrap or kernel lacks ``--disable-userns`` or seccomp, the next weaker one is used and
:func:`weaker_notice` says on stderr, once, what is not in force.
"""
from __future__ import annotations

import errno
import functools
import os
import platform
import shutil
import struct
import subprocess
import sys

SHM_BYTES = 16 << 20                 # /dev/shm: the tmpfs holds at most this much (it is memory)
SHM = "/dev/shm"

# seccomp_data: nr at offset 0, arch at 4; classic BPF opcodes
_LD_ABS, _JEQ, _JGE, _RET = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_ARCHES = {   # machine -> (AUDIT_ARCH, {denied syscall: number}, lowest number of a foreign ABI on this arch or None)
    "x86_64": (0xC000003E, {"shmget": 29, "semget": 64, "msgget": 68, "memfd_create": 319}, 0x40000000),
    "aarch64": (0xC00000B7, {"shmget": 194, "semget": 190, "msgget": 186, "memfd_create": 279}, None),
}
_ARCHES["amd64"], _ARCHES["arm64"] = _ARCHES["x86_64"], _ARCHES["aarch64"]
DENIED_CALLS = ("shmget", "semget", "msgget", "memfd_create")


def seccomp_filter(machine: str | None = None) -> bytes | None:
    """The classic-BPF program (``struct sock_filter[]``) bwrap loads with ``--seccomp``, or None where this
    machine's system call numbers are not known here (then no filter: :func:`weaker_notice` says so).

    >>> len(seccomp_filter("x86_64")) // 8, seccomp_filter("sparc") is None
    (10, True)
    """
    arch = _ARCHES.get((machine or platform.machine()).lower())
    if arch is None:
        return None
    audit, calls, foreign = arch
    deny = _ERRNO | errno.EPERM
    nums = list(calls.values())
    # 0: A = arch; 1: another ABI -> deny; 2: A = nr; then one test per call (x86-64: first x32's numbers);
    # allow; deny. A jump counts the instructions it skips.
    tests = ([(_JGE, foreign)] if foreign is not None else []) + [(_JEQ, n) for n in nums]
    body = [(_LD_ABS, 0, 0, 4), (_JEQ, 0, len(tests) + 2, audit), (_LD_ABS, 0, 0, 0)]
    body += [(code, len(tests) - k, 0, value) for k, (code, value) in enumerate(tests)]
    body += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, deny)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in body)


def seccomp_fd() -> int | None:
    """A readable file descriptor holding :func:`seccomp_filter` (the read end of a pipe, already written and
    closed on the other side), for ``bwrap --seccomp FD``; None without a filter. The caller closes it."""
    prog = seccomp_filter()
    if prog is None:
        return None
    r, w = os.pipe()
    try:
        os.write(w, prog)   # far below a pipe's buffer: never blocks
    finally:
        os.close(w)
    return r


@functools.lru_cache(maxsize=1)
def _variant() -> tuple[bool, bool] | None:
    """(``--disable-userns`` in force, seccomp in force) of the strongest command that runs here, or None
    where none does (no bwrap, no namespaces: the code is not contained at all)."""
    if os.environ.get("COLLSIM_NO_BWRAP") == "1" or not sys.platform.startswith("linux") or shutil.which("bwrap") is None:
        return None
    for userns, seccomp in ((True, True), (False, True), (True, False), (False, False)):
        if seccomp and seccomp_filter() is None:
            continue
        fd = seccomp_fd() if seccomp else None
        try:
            cmd = _command(["-c", "import sim.grade.student"], os.devnull, [], None, None, userns, fd)
            ok = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                timeout=30, check=False, pass_fds=() if fd is None else (fd,)).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
        finally:
            if fd is not None:
                os.close(fd)
        if ok:
            return userns, seccomp
    return None


def available() -> bool:
    """Whether the bounded sandbox runs here (probed once per run with the exact command)."""
    return _variant() is not None


def in_force() -> dict[str, bool]:
    """What of the hardening the probe found working: ``{"disable_userns": .., "seccomp": ..}``."""
    v = _variant() or (False, False)
    return {"disable_userns": v[0], "seccomp": v[1]}


_told: set[str] = set()


def weaker_notice() -> None:
    """One line on stderr, once per run, when the sandbox runs without part of its hardening."""
    v = _variant()
    if v is None or all(v) or "weaker" in _told:
        return
    _told.add("weaker")
    missing = ([] if v[0] else ["nested user namespaces are not disabled (bubblewrap older than 0.8), so the code "
                                "can mount an unsized tmpfs of its own"]) + \
              ([] if v[1] else ["no seccomp filter (this kernel or machine), so System V shared memory and memfd "
                                "are not refused and are not counted by --memory-mb"])
    print("partly contained: " + "; ".join(missing) + " (docs/teaching.md)", file=sys.stderr)


def _command(python_args: list[str], config_file: str, hidden: list[str], mount: str | None, share: str | None,
             disable_userns: bool, seccomp: int | None) -> list[str]:
    from ..io.containment import CONFIG_MOUNT, wrap
    cmd = wrap(python_args, config_file, hidden, mount=mount or CONFIG_MOUNT, share=share)
    cut = cmd.index("--")   # after every mount bwrap makes: the remounts must come last
    extra = ["--size", str(SHM_BYTES), "--tmpfs", SHM, "--remount-ro", "/dev", "--remount-ro", "/"]
    if disable_userns:
        extra.append("--disable-userns")
    if seccomp is not None:
        extra += ["--seccomp", str(seccomp)]
    return cmd[:cut] + extra + cmd[cut:]


def command(python_args: list[str], config_file: str, hidden: list[str], share: str | None = None,
            seccomp: int | None = None, mount: str | None = None, force: dict[str, bool] | None = None) -> list[str]:
    """The bwrap command for ``python <python_args>`` (see :func:`sim.io.containment.wrap` for the arguments),
    with the writable places bounded and the hardening :func:`available` found working (``force``: what
    :func:`in_force` said in the process that probed, so a supervisor does not probe again); ``seccomp``: a
    file descriptor from :func:`seccomp_fd` (passed to bwrap; ignored where seccomp is not in force)."""
    force = in_force() if force is None else force
    return _command(python_args, config_file, hidden, mount, share, bool(force.get("disable_userns")),
                    seccomp if force.get("seccomp") else None)


__all__ = ["available", "command", "seccomp_fd", "seccomp_filter", "in_force", "weaker_notice", "SHM_BYTES",
           "DENIED_CALLS"]
