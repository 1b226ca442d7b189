"""NCCL_MIN/MAX_NCHANNELS are bounded by the release's MAXCHANNELS: 32 up to NCCL 2.24, 64 from 2.25 (``device.h``).

NCCL clamps a larger request and warns ("limiting to"): under 2.18, 64 channels asked run as 32, so the two
requests are the same run. collsim had taken 64 under every release (198.4 us against 203.0 us under 2.18).
"""
import sim
from sim.nccl.config import make_config

H100 = "dgx-h100:nodes=128"


def test_a_request_past_maxchannels_runs_as_maxchannels():
    assert make_config("2.18", "NCCL_MIN_NCHANNELS=64").min_channels == 32
    assert make_config("2.25", "NCCL_MIN_NCHANNELS=64").min_channels == 64
    t = [sim.simulate("all_reduce", 1 << 20, H100, nccl_version="2.18", nccl_env=f"NCCL_MIN_NCHANNELS={n}").time_us
         for n in (32, 64)]
    assert t[0] == t[1]
