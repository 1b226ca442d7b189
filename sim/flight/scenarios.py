"""Scenarios: a workload, its faults, a cost model; run, compared with the fault-free run, diagnosed.

A scenario is a YAML file (read with ``yaml.safe_load``) or a built-in name (:data:`BUILTIN`)::

    name: my-ddp-skip
    workload: {builtin: ddp_step, world_size: 4, buckets: 3, bucket_nbytes: 4M, steps: 2}
    faults: [{kind: skip, rank: 2, call: 1}]
    cost: {model: alpha_beta, alpha_us: 5, bandwidth_GBps: 100}   # or {model: collsim, topology: ...}
    topology: ring:n=4          # optional: routes for link faults (rerouting, shared links)
    timeout_ms: 600000          # the watchdog
    recovery: {ranks: [64, 512, 4096], failed: 1, params: {detect_s: 60}}   # optional

>>> out = run_scenario(load_scenario("ddp-skip"))
>>> out["diagnosis"]["error_type"], out["diagnosis"]["culprits"], out["outcome"]
('missing_rank', [2], 'hang')
"""
from __future__ import annotations

import os

from ..errors import CollsimError
from ..io.printable import printable_lines
from ..io.safe_io import load_yaml, read_input
from ..io.validation import MAX_US, number, whole
from ..units import format_size
from . import recovery as rec
from .analyze import analyze, ranks_short
from .cost import make_cost
from .faults import LinkFault, apply_rank_faults, parse_faults
from .loader import normalise, shown_items
from .rank_workload import from_dict
from .records import check_dump_dir, stale_dumps, write_dumps
from .replay import DEFAULT_TIMEOUT_MS, no_cyclic_gc, run

_DDP = {"builtin": "ddp_step", "world_size": 4, "buckets": 3, "bucket_nbytes": "4M", "steps": 2}
_TPDP = {"builtin": "tp_dp_step", "world_size": 8, "tp": 2, "layers": 3, "steps": 2}
BUILTIN = {
    "healthy": {"workload": _DDP, "faults": []},
    "ddp-skip": {"workload": _DDP, "faults": [{"kind": "skip", "rank": 2, "call": 1}]},
    "ddp-wrong-collective": {"workload": _DDP, "faults": [
        {"kind": "wrong_collective", "rank": 1, "call": 2, "collective": "broadcast"}]},
    "ddp-size": {"workload": _DDP, "faults": [{"kind": "size", "rank": 3, "call": 4, "factor": 0.5}]},
    "ddp-dtype": {"workload": _DDP, "faults": [{"kind": "dtype", "rank": 0, "call": 1, "dtype": "bfloat16"}]},
    "ddp-straggler": {"workload": _DDP, "faults": [{"kind": "straggler", "rank": 2, "call": 3, "delay_us": 50_000}]},
    "ddp-crash": {"workload": _DDP, "faults": [{"kind": "crash", "rank": 1, "at_us": 45_000}]},
    "fsdp-skip": {"workload": {"builtin": "fsdp_step", "world_size": 4, "layers": 3},
                  "faults": [{"kind": "skip", "rank": 3, "call": 2}]},
    "tpdp-degraded-link": {"workload": _TPDP, "faults": [
        {"kind": "degraded_link", "ranks": [2, 3], "bandwidth_fraction": 0.25}]},
    "tpdp-link-down": {"workload": _TPDP, "faults": [{"kind": "link_down", "ranks": [2, 3], "at_us": 3000}]},
    "tpdp-link-down-rerouted": {"workload": _TPDP, "faults": [
        {"kind": "link_down", "ranks": [2, 3], "at_us": 3000, "reroute": True, "reroute_bandwidth_fraction": 0.5}]},
    "tpdp-link-down-ring-topology": {"workload": _TPDP, "topology": "ring:n=8", "faults": [
        {"kind": "link_down", "ranks": [2, 3], "at_us": 3000}]},
    "tpdp-nic-down-switch-topology": {"workload": _TPDP, "topology": "switch:n=8", "faults": [
        {"kind": "link_down", "links": ["gpu2->switch"], "at_us": 3000}]},
    "shrink-vs-reinit": {"recovery": {"ranks": [64, 512, 4096], "failed": 1}},
}

MAX_SCENARIO_BYTES = 1 << 20  # a scenario is a few dozen lines


def load_scenario(spec: str) -> dict:
    """A scenario dict from a built-in name or a ``.yaml``/``.yml``/``.json`` file."""
    if spec in BUILTIN:
        return dict(BUILTIN[spec], name=spec)
    if os.path.exists(spec):
        data = load_yaml(read_input(spec, "scenario file", MAX_SCENARIO_BYTES), spec)
        if not isinstance(data, dict):
            raise CollsimError(f"scenario {spec!r} is not a mapping: write workload:, faults:, ... keys")
        data.setdefault("name", os.path.basename(spec))
        return data
    raise CollsimError(f"unknown scenario {spec!r}: give a .yaml file or one of {', '.join(BUILTIN)}")


def _topology(spec):
    if not spec:
        return None
    from ..presets import load_topology  # the core's topologies; only needed when a scenario names one
    return load_topology(str(spec))


def run_scenario(sc: dict, dump_dir: str | None = None) -> dict:
    """Run a scenario; returns a JSON-ready dict (see ``collsim flight simulate --format json``). The dumps go
    to ``dump_dir`` if given: not a folder holding dumps collsim did not simulate
    (:func:`~sim.flight.records.check_dump_dir`), refused before the run rather than after."""
    with no_cyclic_gc():   # the dumps, their normalised copies and the analysis are large too (see replay)
        return _run_scenario(sc, dump_dir)


def _run_scenario(sc: dict, dump_dir: str | None) -> dict:
    out = {"scenario": sc.get("name", "scenario")}
    if dump_dir:
        check_dump_dir(dump_dir)
    if "workload" in sc:
        w = from_dict(sc["workload"])
        faults = parse_faults(sc.get("faults"), w.world_size)
        topo = _topology(sc.get("topology"))
        if topo is not None and topo.nranks != w.world_size:
            raise CollsimError(f"topology has {topo.nranks} GPUs but the workload {w.world_size} ranks: make them equal")
        cost = make_cost(sc.get("cost"))
        # a watchdog of 0 or less would call every healthy job stuck at once
        timeout_ms = number(sc.get("timeout_ms", DEFAULT_TIMEOUT_MS), "scenario timeout_ms", low=0, low_open=True,
                            high=MAX_US, example="600000")
        base = run(w, cost, timeout_ms=timeout_ms, topology=topo)
        r = run(apply_rank_faults(w, faults), cost, [f for f in faults if isinstance(f, LinkFault)], faults,
                topology=topo, timeout_ms=timeout_ms)
        dumps = r.dumps()
        ranks_cache: dict = {}
        if dump_dir:
            out["dump_files"] = write_dumps(dump_dir, dumps, world=w.world_size)
            # an earlier, larger simulation's dumps of ranks past this job's: left as they are, and said
            out["dumps_left"] = stale_dumps(dump_dir, dumps)
        # With every rank dead the engine's "every live rank finished" is vacuously true: say what happened.
        all_crashed = len(r.crashed) == w.world_size
        outcome = ("crashed: all ranks" if all_crashed else "finished" if r.finished
                   else "hang" if r.hang_at_us is not None else "timeout")
        out.update(world_size=w.world_size, faults=sc.get("faults") or [], outcome=outcome,
                   baseline_end_us=base.end_us, end_us=r.end_us, hang_at_us=r.hang_at_us, timeout=r.timeout,
                   crashed=r.crashed, events=[{"time_us": t, "text": x} for t, x in r.events],
                   collectives=[{"pg": i.pg, "seq": i.seq, "op": sorted({c.op for _, c in i.joined.values()}),
                                 "nbytes": sorted({c.nbytes for _, c in i.joined.values()}),
                                 "joined_us": {str(k): t for k, (t, _) in sorted(i.joined.items())},
                                 "waiting_for": [m for m in i.members if m not in i.joined],
                                 "start_us": i.start_us, "end_us": i.end_us, "stuck": i.stuck}
                                for i in r.instances],
                   # one parsed member list per group, shared by its members' dumps (not one per rank)
                   diagnosis=analyze({k: normalise(v, ranks_cache) for k, v in dumps.items()}))
        if all_crashed:
            out["diagnosis"] = _all_crashed(out["diagnosis"], r.crashed)
    if "recovery" in sc:
        spec = sc["recovery"] or {}
        p = rec.RecoveryParams.from_dict(spec.get("params"))
        raw_ranks = spec.get("ranks", (64, 512, 4096))
        if not isinstance(raw_ranks, (list, tuple)) or not 1 <= len(raw_ranks) <= 64:
            raise CollsimError("recovery ranks must be a list of 1 to 64 world sizes, e.g. [64, 512, 4096]")
        # every rank is a simpy process: the world sizes are whole numbers with a limit, checked before any runs
        ranks = tuple(whole(n, "recovery ranks", low=2, high=rec.MAX_RANKS) for n in raw_ranks)
        failed = whole(spec.get("failed", 1), "recovery failed", low=1, high=max(ranks) - 1)
        rows = rec.compare(ranks, failed, p)
        biggest = max(ranks)
        out["recovery"] = {"params": p.__dict__, "rows": rows, "timelines": {
            m: rec.simulate(m, biggest, failed, p)["timeline"] for m in rec.METHODS}}
    if len(out) == 1:
        raise CollsimError("scenario has neither workload: nor recovery: (see `collsim flight simulate --help`)")
    return out


def _all_crashed(diagnosis: dict, crashed: dict) -> dict:
    """The diagnosis when every rank crashed: no rank left a dump, so the analyzer saw nothing to compare."""
    ranks = sorted(crashed)
    when = ", ".join(f"rank {r} at {_ms(crashed[r])} ms" for r in ranks)
    return dict(diagnosis, error_type="all_ranks_crashed", culprits=ranks, collective_seq_id=None,
                process_group=None, details=f"every rank crashed ({when}) before the workload finished, so no "
                f"rank wrote a flight-recorder dump; find why each process died (its log, exit code, OOM killer)")


def _ms(t_us):
    return "-" if t_us is None else f"{t_us / 1e3:.3f}"


def format_text(out: dict, max_rows: int = 40) -> str:
    """The timeline and diagnosis as text a person reads."""
    lines = [f"scenario {out['scenario']}"]
    if "outcome" in out:
        lines.append(f"{out['world_size']} ranks; faults: {out['faults'] or 'none'}")
        lines.append("collectives (simulated ms):")
        lines.append(f"  {'pg':>3} {'seq':>4} {'op':<26} {'bytes':>8} {'joined':>18} {'start':>10} {'end':>10}  note")
        rows = out["collectives"]
        shown = rows if len(rows) <= max_rows else rows[:10] + [None] + rows[-(max_rows - 10):]
        for c in shown:
            if c is None:
                lines.append(f"  ... {len(rows) - max_rows} more ...")
                continue
            joined = list(c["joined_us"].values())
            span = f"{_ms(min(joined))}..{_ms(max(joined))}"
            note = c["stuck"] or (f"waiting for rank(s) {ranks_short(c['waiting_for'])}" if c["waiting_for"] else "")
            lines.append(f"  {c['pg']:>3} {c['seq']:>4} {'/'.join(c['op']):<26} "
                         f"{'/'.join(format_size(b) for b in c['nbytes']):>8} {span:>18} {_ms(c['start_us']):>10} "
                         f"{_ms(c['end_us']):>10}  {note}")
        lines.append("events:")
        lines += [f"  {_ms(e['time_us']):>14} ms  {e['text']}" for e in out["events"]] or ["  none"]
        if out["outcome"] == "crashed: all ranks":
            lines.append(f"outcome: crashed: all ranks ({', '.join(str(r) for r in sorted(out['crashed']))}) by "
                         f"{_ms(out['end_us'])} ms; no rank finished (fault-free run takes "
                         f"{_ms(out['baseline_end_us'])} ms)")
        elif out["outcome"] == "finished":
            extra = out["end_us"] / out["baseline_end_us"] - 1 if out["baseline_end_us"] else 0.0
            lines.append(f"outcome: finished in {_ms(out['end_us'])} ms (fault-free: {_ms(out['baseline_end_us'])} ms, "
                         f"{extra:+.1%})")
        else:
            t = out["timeout"] or {}
            fired = (f"watchdog timeout at {_ms(t.get('at_us'))} ms (rank {t.get('rank')}, pg {t.get('pg')}, "
                     f"seq {t.get('seq')})")
            if out["hang_at_us"] is not None:
                lines.append(f"outcome: {out['outcome']} at {_ms(out['hang_at_us'])} ms; {fired}; "
                             f"fault-free run takes {_ms(out['baseline_end_us'])} ms")
            else:   # no hang time to print: the watchdog fired while the job could still progress
                lines.append(f"outcome: {out['outcome']} at {_ms(t.get('at_us'))} ms (the watchdog: rank {t.get('rank')}, "
                             f"pg {t.get('pg')}, seq {t.get('seq')}), with no hang: a collective waited longer than "
                             f"timeout_ms while the job could still progress; fault-free run takes "
                             f"{_ms(out['baseline_end_us'])} ms")
        if out.get("dump_files"):
            files = out["dump_files"]
            lines.append(f"dumps: {len(files)} file(s) in {os.path.dirname(files[0]) or '.'}: "
                         f"{shown_items(os.path.basename(f) for f in files)}")
            if out.get("dumps_left"):
                lines.append(f"  left there: {shown_items(out['dumps_left'])}, an earlier simulation's dumps of ranks this "
                             "job does not have: flight analyze leaves them out as another job's; delete them to keep "
                             "the folder to this run")
        d = out["diagnosis"]
        lines.append(f"diagnosis: {d['error_type']}; culprit rank(s) {ranks_short(d['culprits'])}; "
                     f"pg {d['process_group']} seq {d['collective_seq_id']}")
        lines.append(f"  {d['details']}")
    if "recovery" in out:
        r = out["recovery"]
        lines.append("recovery after a failure, shrink vs full re-initialisation (seconds):")
        lines += rec.table(r["rows"]).split("\n")
        lines.append("parameters: " + ", ".join(f"{k}={v:g}" for k, v in r["params"].items()))
        for m, tl in r["timelines"].items():
            lines.append(f"{m} timeline at {max(x['ranks'] for x in r['rows'])} ranks:")
            lines += [f"  {a:9.3f} -> {b:9.3f}  {name}" for name, a, b in tl]
    return printable_lines(lines)   # a scenario's name (a file's text) must not reach the terminal raw
