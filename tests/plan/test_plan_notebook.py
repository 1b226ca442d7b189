"""Notebook 10 runs top to bottom on a CPU (nbclient, as the notebook suite runs it)."""
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NB = os.path.join(ROOT, "notebooks", "10_planning_a_training_step.ipynb")


@pytest.mark.slow
def test_notebook_10_executes():
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NB, as_version=4)
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": os.path.dirname(NB)}}).execute()
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "ratio FSDP / DDP = 1.5000" in text and "cheapest run:" in text
