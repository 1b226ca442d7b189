"""Reading ``collsim bench --pairs``: which pairs, ranks, nodes and links fall below their prediction
(no torch here).

A pair is **slow** when ``measured / predicted`` is below ``--threshold`` (default 0.8). One slow pair
does not say which end is at fault; many do:

- a **rank** (its GPU, its NIC) is named when more than half of its pairs are slow: a bad rank spoils
  every pair it is in, a good rank only the pair with the bad one;
- a **node** likewise over node pairs, a node pair being slow when the median of its rank pairs is;
  a node more than half of whose own pairs (both ranks on it) are slow is named too (its internal
  fabric); one bad rank among four on a node spoils half of them, which names the rank, not the node;
- a **link** is a slow pair that no named rank or node explains (a cable, a switch port, a route).

With two ranks (or two nodes) both ends are named: one pair cannot tell them apart.

>>> rows = [{"ranks": [i, j], "measured_GBps": 1.0 if 3 in (i, j) else 10.0, "predicted_GBps": 10.0}
...         for i in range(4) for j in range(i + 1, 4)]
>>> verdict(rows, ["a", "b", "c", "d"], 0.8)["slow_ranks"]
[3]
>>> verdict(rows, ["a", "b", "c", "d"], 0.8)["slow_nodes"]
['d']
"""
from __future__ import annotations

import io
import statistics


def _named(counts: dict, slow: dict) -> list:
    return [k for k in counts if counts[k] and 2 * slow.get(k, 0) > counts[k]]


def verdict(rows: list[dict], hosts: list[str], threshold: float) -> dict:
    """The named pairs, ranks, nodes and links, and the node x node matrix of median ratios."""
    for r in rows:
        r["ratio"] = r["measured_GBps"] / r["predicted_GBps"]
        r["slow"] = r["ratio"] < threshold
    nodes = list(dict.fromkeys(hosts))
    per_rank: dict[int, int] = {}
    slow_rank: dict[int, int] = {}
    cell: dict[tuple[int, int], list[float]] = {}
    for r in rows:
        i, j = r["ranks"]
        for k in (i, j):
            per_rank[k] = per_rank.get(k, 0) + 1
            slow_rank[k] = slow_rank.get(k, 0) + r["slow"]
        a, b = sorted((nodes.index(hosts[i]), nodes.index(hosts[j])))
        cell.setdefault((a, b), []).append(r["ratio"])
    matrix: list[list[float | None]] = [[None] * len(nodes) for _ in nodes]
    for (a, b), ratios in cell.items():
        matrix[a][b] = matrix[b][a] = statistics.median(ratios)
    per_node: dict[str, int] = {}
    slow_node: dict[str, int] = {}
    for (a, b), ratios in cell.items():
        if a == b:
            continue
        bad = statistics.median(ratios) < threshold
        for k in (nodes[a], nodes[b]):
            per_node[k] = per_node.get(k, 0) + 1
            slow_node[k] = slow_node.get(k, 0) + bad
    slow_nodes = _named(per_node, slow_node) if len(nodes) > 1 else []
    # counted, not a median: with half the pairs slow an even median averages a slow and a healthy pair and
    # lands on either side of the threshold by the noise of the healthy one
    slow_nodes += [nodes[a] for (a, b), ratios in cell.items()
                   if a == b and 2 * sum(x < threshold for x in ratios) > len(ratios) and nodes[a] not in slow_nodes]
    slow_ranks = sorted(_named(per_rank, slow_rank))
    links = []
    for r in rows:
        i, j = r["ranks"]
        if r["slow"] and not ({i, j} & set(slow_ranks)) and not ({hosts[i], hosts[j]} & set(slow_nodes)):
            links.append({"ranks": [i, j], "hosts": [hosts[i], hosts[j]]})
    return {"threshold": threshold, "slow_pairs": [r["ranks"] for r in rows if r["slow"]], "slow_ranks": slow_ranks,
            "slow_nodes": [n for n in nodes if n in slow_nodes], "slow_links": links, "nodes": nodes,
            "node_matrix": matrix}


def summary_lines(v: dict, world: int) -> list[str]:
    """What the verdict says, in words (the table's footer)."""
    n = len(v["slow_pairs"])
    lines = [f"{n} of {world * (world - 1) // 2} pairs below {v['threshold']:.0%} of their prediction"]
    if v["slow_ranks"]:
        lines.append("slow ranks (more than half of their pairs slow): " + ", ".join(map(str, v["slow_ranks"]))
                     + (" (two ranks: one pair cannot tell which)" if world == 2 else ""))
    if v["slow_nodes"]:
        lines.append("slow nodes: " + ", ".join(v["slow_nodes"]))
    for link in v["slow_links"]:
        lines.append(f"slow link: ranks {link['ranks'][0]}-{link['ranks'][1]} ({link['hosts'][0]} - {link['hosts'][1]})")
    if not n:
        lines.append("every pair is within the threshold")
    return lines


def table(rows: list[dict], hosts: list[str], v: dict, header: list[str]) -> str:
    """One line per pair (nccl-tests-like: '#' lines are comments), then the verdict."""
    lines = [f"# {h}" for h in header]
    lines.append(f"# {'rank':>4} {'rank':>4}  {'host':>12} {'host':>12}  {'size':>10}  {'measured':>9}  "
                 f"{'predicted':>9}  {'ratio':>6}")
    lines.append(f"# {'':>4} {'':>4}  {'':>12} {'':>12}  {'(B)':>10}  {'(GB/s)':>9}  {'(GB/s)':>9}  {'':>6}")
    for r in rows:
        i, j = r["ranks"]
        lines.append(f"  {i:4d} {j:4d}  {hosts[i][:12]:>12} {hosts[j][:12]:>12}  {r['nbytes']:10d}  "
                     f"{r['measured_GBps']:9.3f}  {r['predicted_GBps']:9.3f}  {r['ratio']:6.2f}"
                     + ("  SLOW" if r["slow"] else ""))
    lines += [f"# {s}" for s in summary_lines(v, len(hosts))]
    return "\n".join(lines)


def heatmap_png(rows: list[dict], hosts: list[str], v: dict) -> bytes:
    """Node x node heat map of measured/predicted (rank x rank when all ranks share one host), PNG bytes."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    one_host = len(v["nodes"]) == 1
    labels = [f"rank {r}" for r in range(len(hosts))] if one_host else v["nodes"]
    if one_host:
        m: list[list[float | None]] = [[None] * len(hosts) for _ in hosts]
        for r in rows:
            i, j = r["ranks"]
            m[i][j] = m[j][i] = r["ratio"]
    else:
        m = v["node_matrix"]
    n = len(labels)
    fig = Figure(figsize=(1.2 + 0.6 * n, 1.0 + 0.5 * n) if n > 6 else (6.0, 5.0), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    data = [[float("nan") if x is None else x for x in row] for row in m]
    im = ax.imshow(data, cmap="RdYlGn", vmin=0.0, vmax=max(1.2, v["threshold"] + 0.2))
    fig.colorbar(im, ax=ax, label="measured / predicted")
    ax.set_xticks(range(n), labels, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(n), labels, fontsize=8)
    if n <= 24:
        for a in range(n):
            for b in range(n):
                if data[a][b] == data[a][b]:   # not NaN
                    ax.text(b, a, f"{data[a][b]:.2f}", ha="center", va="center", fontsize=7,
                            fontweight="bold" if data[a][b] < v["threshold"] else "normal")
    ax.set_title(f"pairs: measured / predicted ({'ranks on one host' if one_host else 'nodes, median of rank pairs'}); "
                 f"threshold {v['threshold']:.0%}", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()
