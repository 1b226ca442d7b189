"""Where the published traces are: ``../shared/traces`` beside the repository root, or ``$COLLSIM_TRACES``."""
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRACES = Path(os.environ.get("COLLSIM_TRACES") or ROOT.parent / "shared" / "traces")


def published(*parts) -> Path:
    """A file or folder of the published test data; the test is skipped (with the reason) where it is absent."""
    p = TRACES.joinpath(*parts)
    if not p.exists():
        pytest.skip(f"published traces not found at {p} (they live in ../shared/traces beside the repository; "
                    "set COLLSIM_TRACES to their folder)")
    return p
