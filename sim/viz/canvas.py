"""A matplotlib figure for a report, without pyplot state, and its PNG bytes.

Reports embed their plots as PNG (Markdown beside the file, HTML inline as base64); these two helpers are
what every report's figures start and end with.

>>> fig, ax = report_figure(4.0, 3.0)
>>> png_bytes(fig)[:4]
b'\\x89PNG'
"""
from __future__ import annotations

import io

DPI = 110


def report_figure(width: float = 7.0, height: float = 4.0, dpi: int = DPI):
    """A (Figure, Axes) pair on an Agg canvas (no display, no global pyplot figure)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot(1, 1, 1)


def png_bytes(fig, dpi: int = DPI) -> bytes:
    """The figure, tightly laid out, as PNG bytes."""
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()
