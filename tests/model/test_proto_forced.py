"""An NCCL_PROTO list that enables LL128 forces it past NCCL's hardware check, as NCCL does.

NCCL (``tuning.cc``, every release from 2.18 to 2.30) starts LL128 at "decide from the hardware" and checks the
GPU's paths and generation only then: ``if (pEnable == 2 && p == NCCL_PROTO_LL128)``. ``parseList`` sets a named
protocol, or every protocol a ``^`` list leaves, to 1, which skips the check. collsim refused ``NCCL_PROTO=LL128``
on a node whose NICs sit behind the CPU (PHB), and silently ran Simple only for ``NCCL_PROTO=^LL``.
"""
import pytest

import sim

POLARIS = "hgx-a100-4:nodes=8,nics_per_node=2,nic_gbps=200"


@pytest.mark.parametrize("env", ["NCCL_PROTO=LL128", "NCCL_PROTO=LL128,Simple", "NCCL_PROTO=^LL"])
def test_a_list_that_names_ll128_runs_it_where_the_default_would_not(env):
    # NCCL's choice among what it may run: LL128 is among it once a list enables it (its estimate beats Simple's
    # at 32 MiB on these rings, so NCCL takes it)
    r = sim.simulate("all_reduce", 32 << 20, POLARIS, nccl_env=env + ",NCCL_ALGO=Ring")
    assert r.protocol == "LL128"


@pytest.mark.parametrize("env", ["NCCL_ALGO=Ring", "NCCL_ALGO=Ring,NCCL_PROTO=Simple,LL"])
def test_the_default_still_gates_ll128_off_behind_the_cpu(env):
    assert sim.simulate("all_reduce", 32 << 20, POLARIS, nccl_env=env).protocol != "LL128"
