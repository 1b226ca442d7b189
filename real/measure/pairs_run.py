"""One rank's part of ``collsim bench --pairs`` (inside an initialised process group): measure every pair
(:mod:`real.measure.pairs`), and on rank 0 predict, judge (:mod:`real.measure.pairs_report`) and print.

The JSON document::

    {"mode": "pairs", "backend", "launcher", "world_size", "ranks": [{"rank", "host", "local_rank", "device", ...}],
     "nbytes", "method", "prediction", "topology", "threshold",
     "pairs": [{"ranks": [i, j], "measured_GBps", "predicted_GBps", "ratio", "slow", "median_time_us", ...}],
     "slow_pairs", "slow_ranks", "slow_nodes", "slow_links", "nodes", "node_matrix", "options", "env", "notes"}
"""
from __future__ import annotations

import json
import sys

from . import pairs as P
from . import pairs_report as R
from .launch import WRONG

METHOD = ("send/recv exchange: the two ranks send each other nbytes at once (isend + irecv), one pair at a time "
          "while the others wait; measured_GBps = nbytes / median round, one direction")


def run_pairs(opts, job, device, ranks: list[dict], out=None) -> int:
    """Measure, and on rank 0 print the pairs' table or JSON (and write ``--plot``). Returns 0, or WRONG on
    rank 0 when some pair is below the threshold (``collsim bench`` then exits 1, so a script can stop on it)."""
    import torch.distributed as dist

    from . import envinfo, harness, rendezvous
    out = out or sys.stdout
    rank, world = job.rank, job.world
    nbytes = max(opts.sizes)
    hosts = [r["host"] for r in ranks]
    copy = P.host_copy_GBps(nbytes) if rank == 0 and not opts.topology and opts.backend == "gloo" else None
    p2p = harness.p2p_latency(rank, world, device)
    mine = P.measure_pairs(rank, world, device, nbytes, opts.iters, opts.warmup)
    gathered: list = [None] * world
    dist.all_gather_object(gathered, mine)
    if rank != 0:
        return 0
    times = {k: v for part in gathered for k, v in part.items()}
    spec = opts.topology or P.default_topology_spec(opts.backend, [r["device_name"] for r in ranks], len(set(hosts)))
    nic = P.nic_GBps(rendezvous.interface_for(opts.listen or job.master_addr)) if len(set(hosts)) > 1 else None
    predict, how = P.predictor(spec, hosts, [r["local_rank"] for r in ranks], nbytes, copy,
                               p2p["latency_us"] if p2p else None, nic)
    rows = P.pair_rows(times, nbytes, predict)
    v = R.verdict(rows, hosts, opts.threshold)
    notes = []
    if len(opts.sizes) > 1:
        notes.append(f"--pairs measures one size: -e {nbytes} B (the other sizes of -b..-e are not used)")
    if opts.backend == "gloo":
        notes.append("gloo runs on the CPU over TCP: pairs on one host measure its memory and TCP stack, not a GPU path")
    if opts.plot:
        from sim.io.safe_io import write_output
        write_output(opts.plot, R.heatmap_png(rows, hosts, v), "--plot")
    if opts.fmt == "json":
        env = envinfo.collect(world, hosts=hosts, gpus=sorted({r["device_name"] for r in ranks} - {"cpu"}) or [])
        doc = {"mode": "pairs", "backend": opts.backend, "launcher": job.launcher, "world_size": world, "ranks": ranks,
               "nbytes": nbytes, "method": METHOD, "prediction": how, "topology": spec, "threshold": opts.threshold,
               "pairs": rows, **v, "options": opts.to_json(), "env": env, "notes": notes,
               "plot": opts.plot}
        print(json.dumps(doc, indent=2), file=out, flush=True)
    else:
        head = [f"collsim bench --pairs: {world} ranks on {len(set(hosts))} host(s), {opts.backend}, {job.launcher}",
                f"method: {METHOD}", f"prediction: {how}"] + [f"note: {n}" for n in notes]
        head += [f"Rank {r['rank']:3d} on {r['host']:>12} local rank {r['local_rank']} device {r['device']}" for r in ranks]
        print(R.table(rows, hosts, v, head), file=out, flush=True)
        if opts.plot:
            print(f"# wrote {opts.plot}", file=out, flush=True)
    if v["slow_pairs"]:
        print(f"collsim bench --pairs: {'; '.join(R.summary_lines(v, world))}", file=sys.stderr)
        return WRONG
    return 0
