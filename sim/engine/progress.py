"""Progress on long work: tqdm bars on stderr, shown only on a terminal and only after two seconds.

Sweeps get one bar per size (:mod:`sim.prediction.sweep`). A single large prediction gets a bar over its phases:
the predictor opens it with :func:`phases`, and the engine reports each phase it enters with
:func:`phase` (a no-op when no bar is open), so the code between them needs no extra argument.

>>> with phases("engine", 2, enabled=False):
...     phase("routes"); phase("event loop")
"""
from __future__ import annotations

import sys
import time
from contextlib import contextmanager

DELAY_S = 2.0  # bars appear for work that takes longer than this
_open: list = []


@contextmanager
def phases(desc: str, total: int, enabled: bool | None = None):
    """A phase bar for the work inside the ``with`` block; ``enabled`` None: only on a terminal."""
    if enabled is False:
        _open.append(None)
        try:
            yield
        finally:
            _open.pop()
        return
    from tqdm import tqdm
    bar = tqdm(total=total, desc=desc, unit="phase", file=sys.stderr, delay=DELAY_S, leave=False,
               disable=None if enabled is None else not enabled, bar_format="{desc}: {n}/{total} {postfix} [{elapsed}]")
    _open.append(bar)
    try:
        yield bar
    finally:
        _open.pop()
        bar.close()


def phase(name: str) -> None:
    """Report that the innermost open bar's work entered phase ``name``."""
    bar = _open[-1] if _open else None
    if bar is not None and not bar.disable:
        if bar.n < bar.total:
            bar.update()
        bar.set_postfix_str(name, refresh=False)
        if time.time() - bar.start_t >= bar.delay:   # past the delay: show the phase now, not at the next tick
            bar.refresh()
