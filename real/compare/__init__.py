"""Prediction versus measurement: read measured sweeps, predict them, score, calibrate and report.

- :mod:`real.compare.measured`  - collsim bench JSON or raw nccl-tests text -> :class:`Measurement`.
- :mod:`real.compare.predict`   - :class:`Predictor`: ``sim.simulate`` split into latency and bandwidth
  terms, plus the host-side work of a calibrated CPU model.
- :mod:`real.compare.hostmodel` - bytes of host memory traffic torch's gloo adds (staging, reductions).
- :mod:`real.compare.score`     - rows, error metrics (median/mean |error|, geometric-mean error, worst
  size) and the reading (which regime, which term the miss comes from).
- :mod:`real.compare.calibrate` - fit link bandwidth/latency, per-call overhead and host rate (robust
  least squares) and write a topology file ``sim`` loads.
- :mod:`real.compare.figures`   - matplotlib figures (busbw, time with its terms, error vs size) as PNG.
- :mod:`real.compare.markdown_report`    - the terminal table; Markdown and self-contained HTML reports.
- :mod:`real.compare_cli`  - ``collsim compare`` and ``collsim calibrate``.

Nothing here imports torch: comparing and calibrating work on any machine with the measured files.

>>> from real.compare import Predictor
>>> round(Predictor("ring:n=2,bandwidth_GBps=1,latency_us=0", algorithm="ring", protocol="ideal")
...       .predict("all_gather", 2000).time_us, 3)
1.0
"""
from .measured import MeasuredRow, Measurement, read_measurement
from .predict import Prediction, Predictor

__all__ = ["MeasuredRow", "Measurement", "read_measurement", "Prediction", "Predictor"]
