"""Step-by-step chunk diagrams: which chunk goes where at every step of a Program, and what each rank holds.

Works for any Program (ring, tree, in-network, a student's): the state comes from the same symbolic
rules as :mod:`sim.verify` (every (agent, chunk) slot holds the set of ranks summed into it), but wrong
programs are drawn rather than rejected, so a picture can show where one goes astray.

Two layouts:

* ``grid``: one row per agent (ranks, then reducing switches), one column per chunk. Each cell is
  coloured by how many ranks' inputs it holds and labelled with them; arrows join the source and
  destination cells of every op of that step (red: reduce into, blue: copy over).
* ``circle``: ranks around a circle (switches in the middle), each with its buffer drawn as a row of
  small squares; arrows between ranks carry the chunk number (``+`` marks a reduce). This is the
  classic ring all-reduce picture.

>>> from sim.algorithms import build_program
>>> p = build_program("ring", "all_reduce", 4)
>>> states = program_states(p)
>>> states.shape, int(states[-1, 0, 0])   # rounds + 1 snapshots; rank 0 ends with {0,1,2,3} = 0b1111
((7, 4, 4), 15)
>>> fig = plot_chunk_steps(p, rounds=[0, 1, 5])   # a matplotlib Figure with three panels
"""
from __future__ import annotations

import math

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch, Rectangle

from ..errors import CollsimError

MAX_AGENTS = 32   # pictures of more agents than this are unreadable; say so instead of drawing mush
MAX_CHUNKS = 64
_CMAP = colormaps["Blues"]
_DONE = "#4caf50"   # a slot that holds what the collective's postcondition asks for
_REDUCE, _COPY = "#d62728", "#1f77b4"


def program_states(program) -> np.ndarray:
    """Contribution bitmasks of every (agent, chunk) slot before step 0 and after each round.

    Returns an int64 array of shape ``(nrounds + 1, nagents, nchunks)``; bit r set means rank r's input
    has been summed into that slot. Same reading rule as the verifier: an op of step s reads its source
    as it stood after step s-1. No checks: a wrong program is drawn as it is.
    """
    p = program
    if p.nranks > 62:
        raise CollsimError(f"program_states: {p.nranks} ranks do not fit a 64-bit mask; draw n <= 62 (16 reads best)")
    init = p.collective.precondition(p.nranks, p.nchunks, p.root)
    state = np.zeros((p.nagents, p.nchunks), np.int64)
    state[:p.nranks] = np.asarray(init, dtype=np.int64)
    out = [state.copy()]
    order = p.order()
    steps = p.step[order]
    for rnd in range(p.nrounds):
        idx = order[steps == rnd]
        values = state[p.src[idx], p.chunk[idx]].copy()   # read before writing
        for i, v in zip(idx.tolist(), values.tolist()):
            d, c = int(p.dst[i]), int(p.chunk[i])
            state[d, c] = (state[d, c] | v) if p.reduce[i] else v
        out.append(state.copy())
    return np.stack(out)


def rank_set_label(mask: int, nranks: int) -> str:
    """Short cell label: ``""`` (nothing), ``"2"``, ``"0,1"``, ``"0-3"`` (a run), ``"Σ"`` (all ranks)."""
    if mask == 0:
        return ""
    if mask == (1 << nranks) - 1 and nranks > 1:
        return "Σ"
    ranks = [r for r in range(nranks) if mask >> r & 1]
    if len(ranks) > 2 and ranks == list(range(ranks[0], ranks[-1] + 1)):
        return f"{ranks[0]}-{ranks[-1]}"
    return ",".join(map(str, ranks)) if len(ranks) <= 3 else f"{len(ranks)} ranks"


def _targets(p) -> np.ndarray:
    """Postcondition as an array (-1 where anything goes)."""
    want = p.collective.postcondition(p.nranks, p.nchunks, p.root)
    t = np.full((p.nagents, p.nchunks), -1, np.int64)
    for r, row in enumerate(want):
        t[r] = [-1 if w is None else w for w in row]
    return t


def _check_size(p) -> None:
    if p.nagents > MAX_AGENTS or p.nchunks > MAX_CHUNKS:
        raise CollsimError(f"chunk diagram of {p.nagents} agents x {p.nchunks} chunks would be unreadable: "
                           f"draw at most {MAX_AGENTS} agents and {MAX_CHUNKS} chunks (e.g. n=4..8, pipeline=1)")


def _cell_color(mask: int, target: int, nranks: int):
    if mask == 0:
        return "white"
    if target >= 0 and mask == target:
        return _DONE
    return _CMAP(0.25 + 0.6 * bin(mask).count("1") / nranks)


def _draw_grid(ax, p, before, after, rnd, targets, label_cells: bool, hide_free: bool = False) -> None:
    n, na, nc = p.nranks, p.nagents, p.nchunks
    fs = max(5, min(9, 60 / max(nc, na)))
    for a in range(na):
        for c in range(nc):
            m = int(after[a, c])
            if hide_free and targets[a, c] < 0:   # the collective does not care what ends up here
                ax.add_patch(Rectangle((c, a), 1, 1, facecolor="0.93", edgecolor="0.6", lw=0.5, hatch="//"))
                continue
            ax.add_patch(Rectangle((c, a), 1, 1, facecolor=_cell_color(m, targets[a, c], n), edgecolor="0.6", lw=0.5))
            if label_cells and m:
                ax.text(c + 0.5, a + 0.5, rank_set_label(m, n), ha="center", va="center", fontsize=fs,
                        color="white" if bin(m).count("1") > n * 0.6 else "black")
    if rnd is not None:
        for i in np.flatnonzero(p.step == rnd).tolist():
            s, d, c = int(p.src[i]), int(p.dst[i]), int(p.chunk[i])
            bend = 0.35 if abs(d - s) > 1 else 0.0   # wrap-around / long hops bend so they do not hide cells
            ax.add_patch(FancyArrowPatch((c + 0.5, s + 0.5), (c + 0.5, d + 0.5), connectionstyle=f"arc3,rad={bend}",
                                         arrowstyle="-|>", mutation_scale=9, lw=1.3, shrinkA=6, shrinkB=6,
                                         color=_REDUCE if p.reduce[i] else _COPY, zorder=3))
    ax.set_xlim(0, nc)
    ax.set_ylim(na, 0)
    ax.set_xticks(np.arange(nc) + 0.5)
    ax.set_xticklabels([str(c) for c in range(nc)], fontsize=7)
    ax.set_yticks(np.arange(na) + 0.5)
    ax.set_yticklabels([f"r{a}" if a < n else p.switches[a - n][:8] for a in range(na)], fontsize=7)
    ax.set_xlabel("chunk", fontsize=8)
    ax.tick_params(length=0)
    ax.set_aspect("equal")


def _circle_positions(p):
    n = p.nranks
    pos = {r: (math.sin(2 * math.pi * r / n), math.cos(2 * math.pi * r / n)) for r in range(n)}
    k = len(p.switches)
    for j in range(k):   # switches in a small row at the centre
        pos[n + j] = ((j - (k - 1) / 2) * 0.35, 0.0)
    return pos


def _draw_circle(ax, p, before, after, rnd, targets, positions) -> None:
    n, nc = p.nranks, p.nchunks
    pos = positions or _circle_positions(p)
    w = min(0.2, 1.2 / nc)     # width of one chunk square
    for a, (x, y) in pos.items():
        x0 = x - nc * w / 2
        for c in range(nc):
            m = int(after[a, c])
            ax.add_patch(Rectangle((x0 + c * w, y - w / 2), w, w, facecolor=_cell_color(m, targets[a, c], n),
                                   edgecolor="0.4", lw=0.5, zorder=2))
        name = f"rank {a}" if a < n else p.switches[a - n]
        ax.text(x, y + w / 2 + 0.05, name, ha="center", va="bottom", fontsize=8, zorder=4)
    if rnd is not None:
        labels: dict[tuple[int, int], list[str]] = {}
        for i in np.flatnonzero(p.step == rnd).tolist():
            s, d = int(p.src[i]), int(p.dst[i])
            labels.setdefault((s, d), []).append(f"{int(p.chunk[i])}{'+' if p.reduce[i] else ''}")
        for (s, d), chunks in labels.items():
            red = any(ch.endswith("+") for ch in chunks)
            (x1, y1), (x2, y2) = pos[s], pos[d]
            ax.add_patch(FancyArrowPatch((x1, y1), (x2, y2), connectionstyle="arc3,rad=0.2", arrowstyle="-|>",
                                         mutation_scale=12, lw=1.6, shrinkA=18, shrinkB=18,
                                         color=_REDUCE if red else _COPY, zorder=3))
            # label at the arc's midpoint, nudged outwards (the arc bends to the right of s->d)
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            nx, ny = (y2 - y1) * -0.12, (x2 - x1) * 0.12
            text = "c" + ",".join(chunks[:4]) + ("…" if len(chunks) > 4 else "")
            ax.text(mx - nx, my - ny, text, ha="center", va="center", fontsize=7, zorder=5,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.8})
    ax.set_xlim(-1.45, 1.45)
    ax.set_ylim(-1.35, 1.4)
    ax.set_aspect("equal")
    ax.axis("off")


def plot_chunk_steps(program, rounds=None, *, layout: str = "grid", ncols: int = 4, label_cells: bool = True,
                     positions: dict | None = None, panel_size: float = 2.6):
    """One panel per round: what every agent holds after it, and arrows for the ops of that round.

    ``rounds``: which rounds to draw (default all; ``-1`` is the initial state). ``layout``: ``grid`` or
    ``circle`` (see the module doc). ``positions``: agent -> (x, y) for ``circle`` (e.g. a tree layout).
    Returns a matplotlib Figure (``fig.savefig("steps.png")``; a notebook shows it when it is the last value).
    """
    p = program
    _check_size(p)
    if layout not in ("grid", "circle"):
        raise CollsimError(f"unknown layout {layout!r}: use grid or circle")
    states = program_states(p)
    targets = _targets(p)
    rounds = list(range(-1, p.nrounds)) if rounds is None else list(rounds)
    for r in rounds:
        if not -1 <= r < p.nrounds:
            raise CollsimError(f"round {r} does not exist: this program has rounds 0..{p.nrounds - 1} (-1 = before the first)")
    ncols = max(1, min(ncols, len(rounds)))
    nrows = math.ceil(len(rounds) / ncols)
    aspect = (p.nagents / max(p.nchunks, 1)) if layout == "grid" else 1.0
    fig = Figure(figsize=(panel_size * ncols, panel_size * min(max(aspect, 0.5), 1.6) * nrows + 0.6), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= len(rounds):
            ax.axis("off")
            continue
        r = rounds[k]
        before, after = states[r], states[r + 1]
        args = (ax, p, before, after, None if r < 0 else r, targets)
        if layout == "grid":
            _draw_grid(*args, label_cells=label_cells)
        else:
            _draw_circle(*args, positions=positions)
        if r < 0:
            ax.set_title("start", fontsize=9)
        else:
            nops = int((p.step == r).sum())
            ax.set_title(f"step {r}: {nops} transfer{'s' if nops != 1 else ''}", fontsize=9)
    fig.suptitle(f"{p.algorithm} {p.collective.name}, {p.nranks} ranks, {p.nchunks} chunks "
                 f"(red: reduce into, blue: copy; green: final value)", fontsize=9)
    return fig


def plot_collectives(names=None, nranks: int = 4, *, algorithm: str = "ring", root: int = 0, panel_size: float = 1.9):
    """What each collective does: one row per collective, its buffers before and after (grid layout).

    ``names``: collectives to show (default all six). Uses ``algorithm``'s Program only for the start and
    end states, which every correct algorithm shares.
    """
    from ..algorithms import build_program
    from ..collectives import COLLECTIVES
    names = list(COLLECTIVES) if names is None else list(names)
    progs = [build_program(algorithm, c, nranks, root=root) for c in names]
    for p in progs:
        _check_size(p)
    fig = Figure(figsize=(panel_size * 2 * 1.6 + 2.6, panel_size * 0.75 * len(progs) + 0.4), layout="constrained")
    axes = fig.subplots(len(progs), 2, squeeze=False)
    for (ax0, ax1), p in zip(axes, progs):
        states, targets = program_states(p), _targets(p)
        _draw_grid(ax0, p, states[0], states[0], None, targets, True)
        _draw_grid(ax1, p, states[-1], states[-1], None, targets, True, hide_free=True)
        for ax in (ax0, ax1):
            ax.set_aspect("auto")
            ax.set_xlabel("")
            if p.nchunks > 8:
                ax.set_xticks([])
        rooted = f" (root {p.root})" if p.collective.rooted else ""
        ax0.set_ylabel(f"{p.collective.name}{rooted}", fontsize=9, rotation=0, ha="right", va="center", labelpad=14)
    axes[0, 0].set_title("before", fontsize=9)
    axes[0, 1].set_title("after", fontsize=9)
    fig.suptitle(f"the six collectives on {nranks} ranks: rows are ranks, columns are chunks of the buffer;\n"
                 "a cell lists the ranks whose input it holds (Σ = the sum of all; hatched: left undefined)", fontsize=9)
    return fig


def animate_chunks(program, *, layout: str = "circle", interval_ms: int = 900, positions: dict | None = None,
                   size: float = 3.6, dpi: int = 72):
    """A matplotlib FuncAnimation, one frame per round (frame 0: the start).

    In a notebook: ``HTML(animate_chunks(p).to_jshtml())``. Keep it small (n <= 8, pipeline 1): every
    frame is an image in the HTML.
    """
    from matplotlib.animation import FuncAnimation
    p = program
    _check_size(p)
    states = program_states(p)
    targets = _targets(p)
    fig = Figure(figsize=(size * (1.4 if layout == "grid" else 1.0), size), dpi=dpi)
    ax = fig.add_subplot()

    def frame(k):
        ax.clear()
        r = k - 1
        if layout == "grid":
            _draw_grid(ax, p, states[k - 1] if k else states[0], states[k], None if r < 0 else r, targets, True)
        else:
            _draw_circle(ax, p, states[k - 1] if k else states[0], states[k], None if r < 0 else r, targets, positions)
        ax.set_title("start" if r < 0 else f"{p.algorithm} {p.collective.name}: step {r}", fontsize=9)
        return []

    return FuncAnimation(fig, frame, frames=p.nrounds + 1, interval=interval_ms, blit=False)


__all__ = ["program_states", "plot_chunk_steps", "plot_collectives", "animate_chunks", "rank_set_label"]
