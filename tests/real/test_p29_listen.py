"""``collsim bench --listen`` never binds every interface, as its help says (hostile trial p29, F16):
``--listen 0.0.0.0`` used to listen on all of them without a word."""
import importlib.util
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from real.measure import rendezvous
from sim.errors import CollsimError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("addr", ["0.0.0.0", "::", "0"])
def test_the_store_never_listens_on_every_interface(addr):
    with pytest.raises(CollsimError, match="every interface"):
        rendezvous.listener(addr, 0, spans_hosts=False)


def test_one_address_is_still_fine():
    s = rendezvous.listener("127.0.0.1", 0, spans_hosts=False)
    try:
        assert s.getsockname()[0] == "127.0.0.1"
    finally:
        s.close()


def test_listen_every_interface_is_refused_before_any_rank_starts():
    from real.measure_cli import check_multinode
    opts = SimpleNamespace(token_file=None, listen="0.0.0.0", allow_no_token=False, pairs=False, plot=None, topology=None)
    with pytest.raises(CollsimError, match="--listen 0.0.0.0 means every interface"):
        check_multinode(opts, None)


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="bench needs torch (pip install torch==2.13.0)")
def test_bench_listen_all_interfaces_is_one_line():
    p = subprocess.run([sys.executable, "-m", "sim", "bench", "--backend", "gloo", "--nprocs", "2", "-b", "1K", "-e", "1K",
                        "--timeout", "20", "--listen", "0.0.0.0"], capture_output=True, text=True, timeout=90, check=False,
                       env={**os.environ, "PYTHONPATH": ROOT}, start_new_session=True)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and "Traceback" not in p.stdout + p.stderr and not p.stdout.strip()
    assert len(lines) == 1 and lines[0].startswith("collsim: error: --listen 0.0.0.0 means every interface"), p.stderr
