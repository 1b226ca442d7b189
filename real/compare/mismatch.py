"""Does a measurement match the topology it is compared with? One warning line when it does not.

A gloo sweep on CPU cores and a GPU preset that NCCL runs over NVLink are different systems: comparing
them gives -98% errors that say nothing about the simulator. ``collsim bench`` records what ran
(``backend``: gloo or nccl; ``env.cuda_available``, ``env.gpus``); nccl-tests output is NCCL on GPUs. The
topology says what it models: a hardware preset names its GPU (``meta.gpu_arch``), a topology written by
``collsim calibrate`` names the backend of the sweeps it was fitted to (``meta.calibration.sources``).

>>> from real.compare.measured import Measurement
>>> from sim.presets import load_topology
>>> m = Measurement("gloo.json", "collsim-json", "all_reduce", 2, (), "gloo", "local:gloo:2", {"cuda_available": False})
>>> print(mismatch(m, load_topology("dgx-h100")))
warning: gloo.json was measured with gloo on CPU, but dgx-h100 models H100-SXM GPUs that NCCL runs: the errors compare two different systems (compare a measurement of NCCL on those GPUs, or calibrate a topology from this one: collsim calibrate)
"""
from __future__ import annotations

import os


def measured_system(m) -> tuple[str | None, str | None]:
    """(backend, device) of a measurement: backend gloo/nccl (None if unknown), device cpu/gpu (None if unknown)."""
    backend = (m.backend or "").lower() or None
    env = m.env or {}
    if backend == "nccl":
        return backend, "gpu"
    if backend == "gloo":
        if env.get("cuda_available") is False or env.get("gpus") == []:
            return backend, "cpu"
        return backend, None
    return backend, None


def modelled_system(topo) -> tuple[str | None, str | None]:
    """(backend, device) a topology stands for: NCCL on GPUs for hardware presets; the backend its
    calibration sweeps ran for a calibrated topology; (None, None) for textbook topologies."""
    hw = topo.hardware
    if hw.gpu_arch:
        return "nccl", "gpu"
    cal = hw.calibration
    if isinstance(cal, dict):
        backends = {str(s.get("backend")).lower() for s in cal.get("sources") or [] if isinstance(s, dict) and s.get("backend")}
        if len(backends) == 1:
            b = backends.pop()
            return b, "gpu" if b == "nccl" else None
    return None, None


def mismatch(m, topo) -> str | None:
    """One warning line when ``m``'s backend or device does not match what ``topo`` models, else None."""
    backend, device = measured_system(m)
    t_backend, t_device = modelled_system(topo)
    if backend is None or t_backend is None:
        return None
    if backend == t_backend and not (device and t_device and device != t_device):
        return None
    ran = f"{backend}" + (f" on {device.upper()}" if device else "")
    name = os.path.basename(m.source) if m.source[:1] != "<" else m.source
    if topo.hardware.gpu_arch:
        what = f"{topo.name} models {topo.hardware.gpu or topo.hardware.gpu_arch} GPUs that NCCL runs"
    else:
        what = f"{topo.name} was calibrated on {t_backend} measurements"
    return (f"warning: {name} was measured with {ran}, but {what}: the errors compare two different systems "
            f"(compare a measurement of NCCL on those GPUs, or calibrate a topology from this one: collsim calibrate)")


def mixed(measurements) -> str | None:
    """One warning line when files fitted or held out together ran on different backends or devices."""
    systems = {measured_system(m) for m in measurements}
    known = {s for s in systems if s[0] is not None}
    if len(known) <= 1:
        return None
    parts = ", ".join(sorted(f"{b}" + (f" on {d.upper()}" if d else "") for b, d in known))
    return (f"warning: these measurements ran on different systems ({parts}): one calibrated topology cannot "
            f"stand for all of them; calibrate each system on its own")


__all__ = ["measured_system", "mismatch", "mixed", "modelled_system"]
