"""Helpers for the compare/calibrate tests: synthetic measurements from a known model, fixture paths."""
from __future__ import annotations

import json
import os

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
SIZES = tuple(4096 * 4 ** i for i in range(7))          # 4 KiB .. 16 MiB, the demo's sweep


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, name)


def gloo_time_us(collective: str, nbytes: int, bandwidth_GBps: float, launch_us: float, latency_us: float = 0.0,
                 host: bool = True) -> float:
    """Closed form of the calibrated model on 2 ranks (ring), written out by hand:

    all_gather: 1 step of S/2 on the wire; host (3 + 2/2) S bytes at 4 B  -> t0 + a + S/2/B + S/B
    all_reduce: 2 steps of S/2;            host 3 (1/2) S bytes at 4 B    -> t0 + 2a + S/B + 0.375 S/B
    """
    b = bandwidth_GBps * 1e3   # bytes per microsecond
    if collective == "all_gather":
        return launch_us + latency_us + nbytes / 2 / b + (nbytes / b if host else 0.0)
    return launch_us + 2 * latency_us + nbytes / b + (0.375 * nbytes / b if host else 0.0)


def bench_doc(collective: str, times: dict, inplace: dict | None = None, nranks: int = 2) -> dict:
    """A document in ``collsim bench --format json``'s shape."""
    rows = []
    for s, t in times.items():
        rows.append({"nbytes": s, "count": s // 4, "dtype": "float", "redop": "sum", "root": -1, "time_us": t,
                     "algbw_GBps": s / t / 1e3, "busbw_GBps": 0.0, "wrong": 0,
                     "inplace_time_us": (inplace or times)[s], "inplace_algbw_GBps": 0.0,
                     "inplace_busbw_GBps": 0.0, "inplace_wrong": 0, "algorithm": "measured:gloo",
                     "protocol": None, "steps": None})
    return {"topology": f"local:gloo:{nranks}", "collective": collective, "nranks": nranks, "backend": "gloo",
            "env": {}, "results": rows}


def write_doc(directory, name: str, doc: dict) -> str:
    """Write a bench-shaped JSON document under ``directory``; returns its path."""
    path = os.path.join(str(directory), name)
    with open(path, "w") as f:
        json.dump(doc, f)
    return path
