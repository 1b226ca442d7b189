"""Event traces of a simulated collective, exportable as Chrome/Perfetto trace JSON.

Open the file at https://ui.perfetto.dev or chrome://tracing: one process per rank (and per reducing
switch), one thread per destination, one slice per transfer from start to arrival.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ..program import Program

MAX_EVENTS = 200_000  # a browser struggles past this; bigger runs are truncated, and say so


@dataclass(frozen=True, eq=False)
class Trace:
    """Per-transfer times of one run (microseconds). For symmetric runs, every op gets its orbit's time."""

    program: Program
    start_us: np.ndarray
    end_us: np.ndarray
    chunk_nbytes: float

    def events(self, limit: int = MAX_EVENTS) -> list[dict]:
        p = self.program
        order = np.argsort(self.start_us, kind="stable")[:limit]
        out = []
        for i in order.tolist():
            s, d = int(p.src[i]), int(p.dst[i])
            out.append({"name": f"{'reduce' if p.reduce[i] else 'copy'} chunk {int(p.chunk[i])}", "ph": "X",
                        "ts": float(self.start_us[i]), "dur": float(self.end_us[i] - self.start_us[i]),
                        "pid": p.agent_name(s), "tid": f"to {p.agent_name(d)}",
                        "args": {"step": int(p.step[i]), "channel": int(p.channel[i]), "bytes": self.chunk_nbytes}})
        return out

    def to_chrome(self) -> dict:
        events = self.events()
        meta = {"collsim": {"algorithm": self.program.algorithm, "collective": self.program.collective.name,
                            "nops": self.program.nops, "truncated": self.program.nops > len(events)}}
        return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": meta}

    def save(self, path: str) -> None:
        """Write the trace atomically; never over an input of the command or through a link (sim.io.safe_io)."""
        from ..io.safe_io import write_output
        write_output(path, json.dumps(self.to_chrome()), "--trace")


def expand_times(run, program) -> tuple[np.ndarray, np.ndarray]:
    """Start/end time of every op of ``program`` from an EngineRun (orbit times for symmetric runs)."""
    if not run.symmetric:
        start = np.empty(program.nops)
        end = np.empty(program.nops)
        start[run.op_index] = run.op_start_us
        end[run.op_index] = run.op_end_us
        return start, end
    from .symmetry import Quotient
    q = run.quotient if getattr(run, "quotient", None) is not None else Quotient(program)
    rep = q.rep_of(np.arange(program.nops))
    return run.op_start_us[rep], run.op_end_us[rep]
