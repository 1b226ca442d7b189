"""Draw a topology in layers: GPUs at the bottom, then NVSwitches/PCIe, NICs, leaf and spine switches.

>>> from sim.presets import load_topology
>>> fig = plot_topology(load_topology("switch:n=4"))   # returns the matplotlib Figure
"""
from __future__ import annotations

# A plain Figure (not pyplot): no global figure registry, no backend switch, so it works the same in
# scripts, the CLI and notebooks (where `%matplotlib inline` displays a returned Figure once).
import weakref

import numpy as np
from matplotlib.figure import Figure

_COLORS = {"gpu": "#76b900", "nic": "#1f77b4", "switch": "#9467bd", "cpu": "#7f7f7f"}
_LINK_COLORS = {"nvlink": "#76b900", "pcie": "#ff7f0e", "net": "#1f77b4", "local": "#7f7f7f"}


_LAYERS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()   # per topology: its layers, computed once


def _layers(topo):
    """Row of every node: 0 GPUs, 1 host-local switches/CPUs, 2 NICs, 3+ network switches by distance."""
    if topo in _LAYERS:
        return _LAYERS[topo]
    cache = _LAYERS[topo] = {}
    nodes = topo.nodes
    for i, n in enumerate(nodes):
        if n.kind == "gpu":
            cache[i] = 0
        elif n.kind == "nic":
            cache[i] = 2
        elif n.host is not None:
            cache[i] = 1.5 if n.kind == "cpu" else 1  # CPUs on a row of their own: their PCIe links stay visible
    # network switches: one level above the highest neighbour already placed
    pending = [i for i in range(len(nodes)) if i not in cache]
    for _ in range(len(pending) + 1):
        changed = False
        for i in pending:
            if i in cache:
                continue
            below = [cache[v] for _, v in topo._in[i] if v in cache] + [cache[v] for _, v in topo._out[i] if v in cache]
            if below:
                cache[i] = max(max(below) + 1, 3 if any(nodes[v].kind == "nic" for _, v in topo._in[i]) else 1)
                changed = True
        if not changed:
            break
    for i in pending:
        cache.setdefault(i, 3)
    return cache


def plot_topology(topo, path: str | None = None, max_nodes: int = 600):
    """Draw ``topo``; save to ``path`` if given; return the Figure."""
    layers = _layers(topo)
    shown = [i for i in range(len(topo.nodes))][:max_nodes]
    by_layer: dict[int, list[int]] = {}
    for i in shown:
        by_layer.setdefault(layers[i], []).append(i)
    width = max(len(v) for v in by_layer.values())
    pos = {}
    for lay, members in by_layer.items():
        members.sort(key=lambda i: (topo.nodes[i].host if topo.nodes[i].host is not None else -1, i))
        for k, i in enumerate(members):
            pos[i] = ((k + 0.5) / len(members) * width, lay)
    fig = Figure(figsize=(min(4 + width * 0.35, 18), 2 + 1.4 * len(by_layer)))
    ax = fig.add_subplot()
    drawn = set()
    for l in topo.links:
        a, b = topo.node_index[l.src], topo.node_index[l.dst]
        if a in pos and b in pos and (b, a) not in drawn:
            drawn.add((a, b))
            (x0, y0), (x1, y1) = pos[a], pos[b]
            xs, ys = [x0, x1], [y0, y1]
            if y0 == y1:  # same row (a GPU mesh, a ring): an arc, so links between row neighbours don't hide the rest
                t = np.linspace(0, 1, 24)
                xs, ys = x0 + (x1 - x0) * t, y0 - 0.12 * min(abs(x1 - x0), 4) * np.sin(np.pi * t)
            ax.plot(xs, ys, color=_LINK_COLORS.get(l.kind, "k"),
                    lw=0.6 + min(l.bandwidth_GBps, 1000) / 250, alpha=0.5, zorder=1)
    for i in shown:
        n = topo.nodes[i]
        marker = "s" if n.kind == "switch" else ("o" if n.kind == "gpu" else "D")
        ax.scatter(*pos[i], s=180 if n.kind == "switch" else 90, c=_COLORS[n.kind], marker=marker, zorder=2,
                   edgecolors="red" if n.reduce else "black", linewidths=2 if n.reduce else 0.5)
        if len(shown) <= 80:
            ax.annotate(n.label or n.name, pos[i], textcoords="offset points", xytext=(0, -12 if n.kind == "gpu" else 9),
                        ha="center", fontsize=6)
    names = {0: "GPUs", 1: "NVSwitch / PCIe", 1.5: "CPU", 2: "NICs"}
    ax.set_yticks(sorted(by_layer))
    ax.set_yticklabels([names.get(l, "leaf" if l == 3 else "spine" if l == 4 else f"tier {l}") for l in sorted(by_layer)])
    ax.set_xticks([])
    for kind, color in _LINK_COLORS.items():
        if any(l.kind == kind for l in topo.links):
            ax.plot([], [], color=color, label=f"{kind} link")
    if any(n.reduce for n in topo.nodes):
        ax.scatter([], [], c="white", edgecolors="red", marker="s", label="reducing switch (SHARP/NVLS)")
    ax.legend(loc="upper right", fontsize=7, framealpha=0.9)
    ax.set_title(f"{topo.name}\n{topo.nranks} GPUs, {topo.nhosts} host(s)" + (f" (first {max_nodes} nodes)" if len(topo.nodes) > max_nodes else ""),
                 fontsize=10)
    ax.margins(0.08, 0.2)
    fig.tight_layout()
    if path:
        from ..io.safe_io import output_path
        with output_path(path, "--plot") as tmp:  # atomic; never over an input, never through a link
            fig.savefig(tmp, dpi=130)
    return fig
