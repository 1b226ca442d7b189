"""Progress bars: on stderr, only on a terminal, only for long work."""
import io

from sim.engine import progress
from sim.prediction import sweep


class Terminal(io.StringIO):
    def isatty(self):
        return True


def test_phase_bar_shows_the_engines_phases_on_a_terminal(monkeypatch):
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    from sim.algorithms import build_program
    from sim.engine import simulate_program
    from sim.presets import load_topology
    with progress.phases("engine ring", 3):
        simulate_program(build_program("ring", "all_reduce", 8), load_topology("ring:n=8"), 1 << 20)
    out = term.getvalue()
    assert "engine ring" in out and "event loop" in out


def test_no_bar_off_a_terminal(monkeypatch):
    pipe = io.StringIO()
    monkeypatch.setattr("sys.stderr", pipe)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    with progress.phases("engine ring", 3):
        progress.phase("routes")
    bar = sweep._bar(3, None, "simulate")
    bar.update()
    bar.close()
    assert pipe.getvalue() == ""


def test_phase_outside_a_bar_does_nothing():
    progress.phase("routes")   # no bar open: no error, no output


def test_engine_bar_carries_the_estimate(monkeypatch):
    # a run estimated past the delay gets a bar whose description is the budget's estimate
    term = Terminal()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr(progress, "DELAY_S", 0.0)
    import sim
    import sim.api
    monkeypatch.setattr(sim.api, "PROGRESS_DELAY_S", 0.0)
    sim.simulate("all_reduce", 1 << 20, "ring:n=8", "ring", "ideal", model="engine")
    out = term.getvalue()
    assert "engine ring/ideal, 8 GPUs (estimate" in out
