"""The environment a measurement was taken in, and ``collsim env``.

Every bench result carries :func:`collect`'s record: torch, CUDA, NCCL and gloo versions (gloo has no
version API: the record says so), GPU names, ``nvidia-smi topo -m`` where present, the NCCL_* variables
in force, host names and the world size. Numbers without this are hard to compare later.

>>> rec = collect(world_size=1)
>>> sorted(k for k in rec if k.startswith("n"))
['nccl', 'nccl_env', 'nccl_library', 'nvidia_smi_topo']
"""
from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess


def nccl_env() -> dict[str, str]:
    """The NCCL_* variables set in this process (NCCL reads them when a communicator is created)."""
    return {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}


def nvidia_smi_topo() -> str | None:
    """``nvidia-smi topo -m`` (the GPU/NIC connection matrix), or None without nvidia-smi."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "topo", "-m"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi topo -m failed: {e}"
    return out.stdout.strip() or out.stderr.strip()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _torch_nccl_version(torch) -> str | None:
    try:
        v = torch.cuda.nccl.version()
    except Exception:  # CPU builds have no NCCL: torch raises AttributeError/RuntimeError depending on version
        return None
    return ".".join(str(x) for x in v) if isinstance(v, tuple) else str(v)


def collect(world_size: int, hosts: list[str] | None = None, gpus: list[str] | None = None) -> dict:
    """The environment record (JSON-ready). ``hosts``/``gpus``: gathered from all ranks when known."""
    import torch
    import torch.distributed as dist

    from . import nccl_ctypes as libnccl
    from .cpucache import cache_record
    cuda = torch.cuda.is_available()
    if gpus is None:
        gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())] if cuda else []
    torch_nccl = _torch_nccl_version(torch)
    lib = libnccl.find_library()
    lib_version = None
    if lib:
        try:
            lib_version = libnccl.version_string(libnccl.Nccl(lib).version())
        except OSError as e:
            lib_version = f"unloadable: {e}"
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": cuda,
        "nccl": torch_nccl,  # the NCCL torch runs; None on CPU builds (see nccl_library)
        "nccl_library": {"path": lib, "version": lib_version, "used_by_torch": bool(torch_nccl)},
        "gloo": ("bundled with torch " + torch.__version__ + " (gloo has no version API)")
        if dist.is_available() and dist.is_gloo_available() else None,
        "gpus": gpus,
        "nvidia_smi_topo": nvidia_smi_topo() if cuda or shutil.which("nvidia-smi") else None,
        "nccl_env": nccl_env(),
        "hostname": socket.gethostname(),
        "hosts": sorted(set(hosts)) if hosts else [socket.gethostname()],
        "world_size": world_size,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpu_cache": cache_record(),   # the host model's cache knee (real.measure.cpucache): private cache, copy speedup
    }


def advice(rec: dict) -> list[str]:
    """What the record means for ``collsim bench``, in plain words."""
    out = []
    if rec["cuda_available"] and rec["gpus"]:
        n = len(rec["gpus"])
        out.append(f"{n} GPU(s): collsim bench uses NCCL, one rank per GPU "
                   f"(e.g. collsim bench --nprocs {n} --collective all_reduce -b 8 -e 1G -f 2)")
        if not rec["nccl_library"]["used_by_torch"]:
            out.append("torch reports no NCCL: reinstall a CUDA build of torch to use --backend nccl")
    else:
        out.append("no GPU: collsim bench will use gloo on CPU (e.g. collsim bench --nprocs 2 -b 1K -e 1M -f 4); "
                   "its numbers measure the CPU and TCP, not a GPU interconnect")
    if rec["nccl_library"]["path"] and not rec["nccl_library"]["used_by_torch"]:
        out.append("libnccl.so.2 loads through ctypes (real.measure.nccl_ctypes): version and unique id work, collectives need a GPU")
    if not rec["nccl_library"]["path"]:
        out.append("no libnccl.so.2 found: pip install nvidia-nccl-cu12 (or set NCCL_LIBRARY) for real.measure.nccl_ctypes")
    if rec["gloo"] is None:
        out.append("this torch has no gloo: CPU runs are not possible")
    if rec["nccl_env"]:
        out.append("NCCL_* variables are set and will steer NCCL: " + ", ".join(f"{k}={v}" for k, v in rec["nccl_env"].items()))
    return out


def render(rec: dict) -> str:
    """``collsim env`` as text."""
    lib = rec["nccl_library"]
    if rec["nccl_library"]["used_by_torch"]:
        nccl = f"{rec['nccl']} (torch's)"
    elif lib["path"]:
        nccl = f"not in this torch build; libnccl.so.2 {lib['version']} at {lib['path']}"
    else:
        nccl = "none (torch has none, and no libnccl.so.2 was found)"
    lines = [
        f"python       {rec['python']} on {rec['platform']}",
        f"torch        {rec['torch']} (CUDA {rec['cuda'] or 'none: CPU build'})",
        f"GPUs         {', '.join(rec['gpus']) if rec['gpus'] else 'none visible'}",
        f"NCCL         {nccl}",
        f"gloo         {rec['gloo'] or 'not available'}",
        f"NCCL_* env   {', '.join(f'{k}={v}' for k, v in rec['nccl_env'].items()) or 'none set'}",
        f"host         {rec['hostname']}: {rec['cpu']}, {rec['cpu_count']} cores",
    ]
    cache = rec.get("cpu_cache")
    if cache:
        lines.append(f"CPU cache    L{cache['level']} {cache['private_bytes'] >> 10} KiB per core"
                     + (f"; a copy inside it runs {cache['copy_speedup']:.1f}x as fast as beyond it"
                        if cache.get("copy_speedup") else ""))
    if rec["nvidia_smi_topo"]:
        lines += ["nvidia-smi topo -m:"] + ["  " + t for t in rec["nvidia_smi_topo"].splitlines()]
    lines += ["", "what this means:"] + [f"  - {a}" for a in advice(rec)]
    return "\n".join(lines)
