"""Per-link pictures of one simulated collective: a timeline (Gantt) and utilisation heatmaps.

Input: a :class:`sim.Result` simulated with ``trace=True`` (it carries every op's start and arrival
time) and its topology. :func:`link_windows` recovers when each link was *serialising* which op by
replaying the engine's link rule (FIFO, cut-through: see :mod:`sim.engine.fast`) over the traced start
times; every replayed arrival is checked against the engine's own, so the pictures show the engine's
run, not a second model. Where the replay does not reproduce the trace (the NCCL protocols run the
engine on an effective topology and add a latency term: :mod:`sim.nccl.execution`), the windows fall back to
each transfer from issue to arrival on every link of its route, ``exact`` is False and the pictures
say so; link utilisation figures always come from the engine's own ``Result.link_busy_us``.

>>> import sim
>>> r = sim.simulate("all_reduce", 1 << 20, "ring:n=4", algorithm="ring", protocol="ideal", trace=True)
>>> w = link_windows(r, "ring:n=4")
>>> len(w.links), round(float(w.busy_us()[0]), 3), w.max_error_us < 1e-6   # 4 ring links, each busy 6 x 2.62 us
(4, 15.729, True)
>>> fig = plot_link_timeline(r, "ring:n=4")
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import BoundaryNorm, ListedColormap, Normalize
from matplotlib.figure import Figure

from ..errors import CollsimError
from ..nccl.protocols import get_protocol
from ..presets import load_topology
from .style import size_label


@dataclass(frozen=True, eq=False)
class LinkWindows:
    """Serialisation windows per link. Times in microseconds from the collective's start.

    ``links``: topology link indices that carried traffic (in topology order); ``begin``/``end``/``op``:
    one array per entry of ``links``; ``labels``: ``"src->dst"`` names; ``time_us``: the collective's time;
    ``exact``: the windows reproduce every arrival time of the engine (ideal protocol: when False, only
    the order of simultaneous transfers on a shared link differs; NCCL protocols: issue-to-arrival spans).
    """

    links: tuple[int, ...]
    labels: tuple[str, ...]
    begin: tuple[np.ndarray, ...]
    end: tuple[np.ndarray, ...]
    op: tuple[np.ndarray, ...]
    time_us: float
    max_error_us: float
    exact: bool = True

    def busy_us(self) -> np.ndarray:
        """Time each link is occupied (us). Equals ``Result.link_busy_us`` (pure serialisation) except where
        a slower upstream hop feeds the link: cut-through, the transfer holds it until its tail arrives."""
        return np.array([float((e - b).sum()) for b, e in zip(self.begin, self.end)])

    def utilisation(self, bins: int) -> np.ndarray:
        """``(nlinks, bins)`` fraction of each time bin a link spends serialising (0..1)."""
        edges = np.linspace(0.0, self.time_us, bins + 1)
        out = np.zeros((len(self.links), bins))
        for k, (b, e) in enumerate(zip(self.begin, self.end)):
            # overlap of every window with every bin, summed: min(e, hi) - max(b, lo), clipped at 0
            lo, hi = edges[:-1][None, :], edges[1:][None, :]
            out[k] = np.clip(np.minimum(e[:, None], hi) - np.maximum(b[:, None], lo), 0, None).sum(axis=0)
        return out / np.diff(edges)[None, :]


def _need_trace(result):
    if result.trace is None:
        raise CollsimError("this picture needs the engine's trace: simulate with trace=True "
                           "(sim.simulate(..., model='engine', trace=True))")
    return result.trace


def link_windows(result, topology=None) -> LinkWindows:
    """When each link serialised which op, for a traced engine ``result`` on ``topology``.

    ``topology``: a Topology or spec; default: ``result.topology`` read as a spec.
    """
    tr = _need_trace(result)
    topo = load_topology(topology if topology is not None else result.topology)
    p = tr.program
    if p.nranks > topo.nranks:
        raise CollsimError(f"result has {p.nranks} ranks but topology {topo.name!r} has {topo.nranks} GPUs: pass the topology it ran on")
    proto = get_protocol(result.protocol)
    wire = proto.wire_bytes(tr.chunk_nbytes)
    agent = [topo.gpus[r] for r in range(p.nranks)] + [topo.node_index[s] for s in p.switches]
    bw = np.array([l.bandwidth_GBps for l in topo.links]) * 1e3   # bytes per microsecond
    lat = np.array([l.latency_us for l in topo.links])
    free = np.zeros(len(topo.links))
    routes = [topo.route_nodes(agent[p.src[i]], agent[p.dst[i]]) for i in range(p.nops)]
    rows: dict[int, list[tuple[float, float, int]]] = {}

    def serve(i: int) -> tuple[float, list]:
        """The engine's rule for op i launched at its traced start: (arrival time, [(link, begin, end)])."""
        head, prev_end, hops = float(tr.start_us[i]), None, []
        for li in routes[i]:
            begin = max(head, free[li])
            end = begin + wire / bw[li]
            if prev_end is not None and end < prev_end:
                end = prev_end
            hops.append((li, begin, end))
            head, prev_end = begin + lat[li], end + lat[li]
        return (prev_end if prev_end is not None else head) + proto.hop_latency_us, hops

    tol = 1e-9 * max(float(result.time_us), 1.0)
    budget = [20_000]   # search steps for the whole replay; past it, ties keep the (arrival, index) order

    def place(pending: list[int], done: list) -> bool:
        """Order ``pending`` (ops launched at one instant) so that every replayed arrival is the engine's;
        depth-first with undo. The trace does not record the order in which simultaneous launches were
        queued on a shared link, but it is pinned down by their arrival times."""
        if not pending:
            return True
        for k, i in enumerate(pending):
            budget[0] -= 1
            if budget[0] < 0:
                return False
            arrive, hops = serve(i)
            if abs(arrive - tr.end_us[i]) > tol:
                continue
            saved = [(li, free[li]) for li, _, _ in hops]
            for li, _, end in hops:
                free[li] = end
            done.append((i, hops))
            if place(pending[:k] + pending[k + 1:], done):
                return True
            done.pop()
            for li, f in reversed(saved):
                free[li] = f
        return False

    order = np.lexsort((np.arange(p.nops), tr.end_us, tr.start_us))
    cuts = np.flatnonzero(np.diff(tr.start_us[order])) + 1
    err = 0.0
    for group in np.split(order, cuts):
        done: list = []
        if len(group) > 1 and len(group) <= 64 and place(group.tolist(), done):
            placed = done
        else:   # no consistent order found (or too many): arrival order, then index
            placed = []
            for i in group.tolist():
                arrive, hops = serve(i)
                for li, _, end in hops:
                    free[li] = end
                placed.append((i, hops))
        for i, hops in placed:
            for li, begin, end in hops:
                rows.setdefault(li, []).append((begin, end, i))
            err = max(err, abs(hops[-1][2] + lat[hops[-1][0]] + proto.hop_latency_us - float(tr.end_us[i])) if hops else 0.0)
    exact = err <= 1e-6 * max(float(result.time_us), 1.0)
    # Ideal protocol: the replay is the engine's link rule; a residual error only means that simultaneous
    # transfers on a shared link may be drawn in another order (same busy time per link). NCCL protocols
    # run the engine on an effective topology: show each transfer in flight instead of a guessed queue.
    if not exact and proto.name != "ideal":
        rows = {}
        for i in range(p.nops):
            for li in topo.route_nodes(agent[p.src[i]], agent[p.dst[i]]):
                rows.setdefault(li, []).append((float(tr.start_us[i]), float(tr.end_us[i]), i))
    links = tuple(sorted(rows))
    arr = [np.array(rows[li]) for li in links]
    return LinkWindows(links, tuple(topo.link_label(li) for li in links), tuple(a[:, 0] for a in arr),
                       tuple(a[:, 1] for a in arr), tuple(a[:, 2].astype(int) for a in arr), float(result.time_us), err,
                       exact)


def _busy_fraction(result, w: LinkWindows) -> np.ndarray:
    """Busy time / collective time per link of ``w``, from the engine's own link table."""
    return np.array([result.link_busy_us.get(label, 0.0) for label in w.labels]) / w.time_us


def _pick_rows(w: LinkWindows, max_rows: int) -> list[int]:
    """The busiest ``max_rows`` links, kept in topology order."""
    if len(w.links) <= max_rows:
        return list(range(len(w.links)))
    busy = w.busy_us()
    return sorted(np.argsort(-busy, kind="stable")[:max_rows].tolist())


def plot_link_timeline(result, topology=None, *, color_by: str = "step", max_rows: int = 24, width: float = 9.0):
    """Gantt chart: one row per link, one bar per op while the link serialises it.

    ``color_by``: ``step`` (the program's round) or ``chunk``. Shows the busiest ``max_rows`` links.
    The right margin gives each link's utilisation (busy time / collective time).
    """
    if color_by not in ("step", "chunk"):
        raise CollsimError(f"color_by={color_by!r}: use step or chunk")
    w = link_windows(result, topology)
    p = result.trace.program
    rows = _pick_rows(w, max_rows)
    key = p.step if color_by == "step" else p.chunk
    nkeys = int(key.max()) + 1
    if nkeys <= 10:   # distinct colours, and a colour bar whose swatches match the bars
        cmap = ListedColormap(colormaps["tab10"].colors[:nkeys])
        norm = BoundaryNorm(np.arange(nkeys + 1) - 0.5, nkeys)
    else:
        cmap, norm = colormaps["viridis"], Normalize(0, nkeys - 1)
    fig = Figure(figsize=(width, 1.2 + 0.32 * len(rows)), layout="constrained")
    ax = fig.add_subplot()
    frac = _busy_fraction(result, w)
    for y, k in enumerate(rows):
        b, e, ops = w.begin[k], w.end[k], w.op[k]
        colors = cmap(norm(key[ops]))
        ax.barh(np.full(len(b), y), e - b, left=b, height=0.7, color=colors, edgecolor="white", linewidth=0.4,
                alpha=1.0 if w.exact or result.protocol == "ideal" else 0.45)
        ax.text(1.005, y, f"{frac[k]:4.0%}", transform=ax.get_yaxis_transform(), va="center", fontsize=7)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([w.labels[k] for k in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.4, -0.6)
    ax.set_xlim(0, w.time_us)
    ax.set_xlabel("time (µs)")
    ax.set_ylabel("link (src->dst)")
    shown = "" if len(rows) == len(w.links) else f", busiest {len(rows)} of {len(w.links)} links"
    if not w.exact and result.protocol != "ideal":
        shown += "\n(bars: transfers from issue to arrival; right: share of time each link serialises)"
    elif not w.exact:
        shown += f"\n(order of simultaneous transfers on a shared link approximate, within {w.max_error_us:.2g} µs)"
    ax.set_title(f"{result.algorithm}/{result.protocol} {result.collective}, {size_label(result.nbytes)} on "
                 f"{result.topology}: {result.time_us:.1f} µs{shown}", fontsize=9)
    sm = ScalarMappable(norm=norm, cmap=cmap)
    cb = fig.colorbar(sm, ax=ax, pad=0.05, fraction=0.04)
    cb.set_label(color_by, fontsize=8)
    if nkeys <= 10:
        cb.set_ticks(range(nkeys))
    cb.ax.tick_params(labelsize=7)
    return fig


def plot_link_heatmap(result, topology=None, *, kind: str = "time", bins: int = 60, max_rows: int = 32,
                      width: float = 9.0):
    """Link utilisation as a heatmap.

    ``kind="time"``: rows are links, columns are time bins, colour = fraction of the bin the link spends
    serialising (idle gaps and hot spots over time). ``kind="matrix"``: source node x destination node,
    colour = busy time / collective time (which links carry the load; blank = no link or no traffic).
    """
    w = link_windows(result, topology)
    topo = load_topology(topology if topology is not None else result.topology)
    cmap = colormaps["magma_r"]
    if kind == "time":
        rows = _pick_rows(w, max_rows)
        u = np.clip(w.utilisation(bins)[rows], 0, 1)
        fig = Figure(figsize=(width, 1.3 + 0.28 * len(rows)), layout="constrained")
        ax = fig.add_subplot()
        im = ax.imshow(u, aspect="auto", cmap=cmap, vmin=0, vmax=1, interpolation="nearest",
                       extent=(0, w.time_us, len(rows) - 0.5, -0.5))
        ax.set_yticks(range(len(rows)))
        ax.set_yticklabels([w.labels[k] for k in rows], fontsize=7)
        ax.set_xlabel("time (µs)")
        ax.set_ylabel("link (src->dst)")
    elif kind == "matrix":
        nodes = sorted({topo.node_index[topo.links[li].src] for li in w.links} |
                       {topo.node_index[topo.links[li].dst] for li in w.links})
        pos = {n: k for k, n in enumerate(nodes)}
        m = np.full((len(nodes), len(nodes)), np.nan)
        for k, li in enumerate(w.links):
            l = topo.links[li]
            m[pos[topo.node_index[l.src]], pos[topo.node_index[l.dst]]] = _busy_fraction(result, w)[k]
        side = min(8.0, 2.5 + 0.22 * len(nodes))
        fig = Figure(figsize=(side + 1.2, side), layout="constrained")
        ax = fig.add_subplot()
        im = ax.imshow(m, cmap=cmap, vmin=0, vmax=1, interpolation="nearest")
        names = [topo.nodes[n].name for n in nodes]
        fs = 7 if len(nodes) <= 24 else 5
        ax.set_xticks(range(len(nodes)))
        ax.set_xticklabels(names, rotation=90, fontsize=fs)
        ax.set_yticks(range(len(nodes)))
        ax.set_yticklabels(names, fontsize=fs)
        ax.set_xlabel("destination node")
        ax.set_ylabel("source node")
    else:
        raise CollsimError(f"kind={kind!r}: use time or matrix")
    cb = fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02)
    cb.set_label("utilisation (fraction of time serialising)" if w.exact or kind == "matrix" or result.protocol == "ideal"
                 else "fraction of time with a transfer in flight", fontsize=8)
    ax.set_title(f"link utilisation: {result.algorithm}/{result.protocol} {result.collective}, "
                 f"{size_label(result.nbytes)} on {result.topology}", fontsize=9)
    return fig


__all__ = ["LinkWindows", "link_windows", "plot_link_timeline", "plot_link_heatmap"]
