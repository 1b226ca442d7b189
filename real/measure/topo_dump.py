"""``collsim env --topology-out``: the machine this runs on as a topology, from ``nvidia-smi topo -m`` and
NCCL's own view of it (``NCCL_TOPO_DUMP_FILE``).

NCCL writes the topology it detected (``<system><cpu><pci><gpu sm= ><nvlink .../></gpu>...<nic><net
speed= /></nic>``, :mod:`sim.topology.nccl_xml`) to ``NCCL_TOPO_DUMP_FILE`` while it initialises a
communicator. :func:`nccl_topology_dump` does that in a child process (so a driver hang or crash cannot
take the CLI with it, and the variable does not leak into this process): one communicator of one rank
per visible GPU, in one process (``ncclCommInitAll`` through :mod:`real.measure.nccl_ctypes`'s ctypes binding), or, without
``libnccl.so.2``, torch's NCCL backend with one rank on GPU 0. Without a GPU it is skipped, and the reason
is what the CLI prints and the file records.

:func:`merge_nodes` then joins the two views: ``nvidia-smi`` sees every GPU and NIC and how PCIe connects
them, but not the GPU architecture or NIC speed; NCCL's dump has the architecture (``sm``), NVLink counts
with NVSwitch (``tclass``), NIC speeds and PCIe switches, but only for the GPUs of its communicator.

>>> from sim.topology.nccl_xml import XmlNode
>>> smi = XmlNode(gpus=[{"busid": f"GPU{i}", "sm": None, "links": 18, "nvswitch": True, "mesh": False,
...                      "switch": f"pix:GPU{i}", "gts": None, "collapsed": False} for i in range(8)],
...               nics=[{"busid": f"NIC{i}", "name": f"NIC{i}", "mbps": None, "switch": f"pix:GPU{i}"} for i in range(8)])
>>> dump = XmlNode(gpus=[dict(smi.gpus[0], busid="0000:18:00.0", sm=90, switch="0000:16:00.0")],
...                nics=[{"busid": "0000:19:00.0", "name": "mlx5_0", "mbps": 400000.0, "switch": "0000:16:00.0"}])
>>> node, said = merge_nodes(smi, dump)
>>> len(node.gpus), {g["sm"] for g in node.gpus}, {n["mbps"] for n in node.nics}
(8, {90}, {400000.0})
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections import Counter

from sim.topology.nccl_xml import XmlNode

DUMP_TIMEOUT_S = 120.0
CHILD = "real.measure.topo_dump"


def nccl_topology_dump(ngpus: int, timeout_s: float = DUMP_TIMEOUT_S) -> tuple[str | None, str]:
    """``(xml_text, how)``: NCCL's topology dump of this machine, written by a child process that
    initialises a communicator on ``ngpus`` GPUs, and how it was made; ``(None, why)`` when skipped or failed."""
    if ngpus < 1:
        return None, ("skipped: no GPU on this machine (torch sees no CUDA device and nvidia-smi lists none); NCCL "
                      "writes NCCL_TOPO_DUMP_FILE only while it initialises a communicator on a GPU")
    with tempfile.TemporaryDirectory(prefix="collsim-nccl-topo-") as d:
        path = os.path.join(d, "nccl_topo.xml")
        env = dict(os.environ, NCCL_TOPO_DUMP_FILE=path, NCCL_TOPO_DUMP_FILE_RANK="0")
        env.pop("NCCL_TOPO_FILE", None)   # the machine as NCCL detects it, not a file someone supplied
        try:
            p = subprocess.run([sys.executable, "-m", CHILD, str(ngpus)], env=env, capture_output=True, text=True,
                               timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None, f"failed: initialising NCCL took more than {timeout_s:g} s (the GPU or driver is busy or hung)"
        how = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
        if p.returncode != 0 or not os.path.isfile(path):
            err = (p.stderr.strip().splitlines() or ["no message"])[-1][:300]
            return None, f"failed: {how or 'the NCCL child'} exited {p.returncode} without a dump ({err})"
        with open(path, "rb") as f:
            text = f.read(8 << 20).decode("utf-8", errors="replace")
        return text, how


def _child(ngpus: int) -> int:
    """In the child: initialise NCCL (NCCL_TOPO_DUMP_FILE is set) and say how, on the last line; one
    line on stderr when it cannot."""
    from . import nccl_ctypes as nccl
    path = nccl.find_library()
    failed = ""
    if path:
        try:
            lib = nccl.Nccl(path)
            lib.comm_init_all(ngpus)   # the dump is written during init; the process exit frees the communicators
            # (finalising several communicators of one process one by one can wait on each other)
            print(f"NCCL {nccl.version_string(lib.version())} (real.measure.nccl_ctypes ctypes), ncclCommInitAll on {ngpus} GPU(s)")
            return 0
        except Exception as e:   # NcclError, OSError from a library that does not load: try torch's NCCL
            failed = f"real.measure.nccl_ctypes: {e}; "
    try:
        return _torch_child()
    except Exception as e:
        print(f"{failed}torch's NCCL backend: {type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}",
              file=sys.stderr)
        return 1


def _torch_child() -> int:
    import datetime

    import torch
    import torch.distributed as dist
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", store=dist.HashStore(), rank=0, world_size=1, device_id=dev,
                            timeout=datetime.timedelta(seconds=60))
    try:
        x = torch.ones(1, device=dev)
        dist.all_reduce(x)          # the communicator (and the dump) exists once a collective ran
        torch.cuda.synchronize()
    finally:
        dist.destroy_process_group()
    print(f"NCCL {'.'.join(map(str, torch.cuda.nccl.version()))} (torch's NCCL backend), 1 rank on GPU 0")
    return 0


def merge_nodes(smi: XmlNode | None, dump: XmlNode | None, nic_names: dict[str, str] | None = None
                ) -> tuple[XmlNode, list[str]]:
    """One node from the two views, and a line per thing taken from where. ``nic_names``: the
    ``nvidia-smi`` NIC legend (``NIC0 -> mlx5_0``), to match its NICs with NCCL's ``<net name=>``."""
    if smi is None and dump is None:
        raise ValueError("merge_nodes needs at least one view")
    if dump is None:
        return smi, ["everything from nvidia-smi topo -m (no NCCL dump)"]
    if smi is None:
        return dump, ["everything from NCCL's topology dump (no nvidia-smi topo -m)"]
    said = []
    if len(dump.gpus) >= len(smi.gpus):
        node = XmlNode(gpus=[dict(g) for g in dump.gpus], nics=[dict(n) for n in dump.nics], cpus=max(smi.cpus, dump.cpus))
        said.append(f"GPUs, NVLink, NICs and PCIe placement from NCCL's dump (it covers all {len(dump.gpus)} GPUs); "
                    f"nvidia-smi agrees on {len(smi.gpus)} GPUs" if len(dump.gpus) == len(smi.gpus)
                    else f"NCCL's dump lists {len(dump.gpus)} GPUs, nvidia-smi {len(smi.gpus)}: NCCL's used")
        return node, said
    sm = Counter(g["sm"] for g in dump.gpus if g["sm"] is not None).most_common(1)
    links = Counter((g["links"], g["nvswitch"], g["mesh"], g["collapsed"]) for g in dump.gpus).most_common(1)
    gpus = []
    for g in smi.gpus:
        g = dict(g, sm=sm[0][0] if sm else g["sm"])
        if links and links[0][0][0]:
            g.update(links=links[0][0][0], nvswitch=links[0][0][1], mesh=links[0][0][2], collapsed=links[0][0][3])
        gpus.append(g)
    said.append(f"{len(smi.gpus)} GPUs and their PCIe placement from nvidia-smi; architecture"
                + (f" (sm={sm[0][0]})" if sm else "") + f" and NVLink from NCCL's dump of {len(dump.gpus)} of them")
    nics = [dict(n) for n in smi.nics]
    speeds = {n["name"]: n["mbps"] for n in dump.nics if n["mbps"]}
    names = nic_names or {}
    matched = [n for n in nics if names.get(n["name"], n["name"]) in speeds]
    distinct = set(speeds.values())
    if nics and len(matched) == len(nics):
        for n in nics:
            n["mbps"] = speeds[names.get(n["name"], n["name"])]
        said.append(f"NIC speeds from NCCL's dump, matched by name ({len(nics)} NICs)")
    elif nics and len(dump.nics) == len(nics):
        for n, d in zip(nics, dump.nics):
            n["mbps"] = d["mbps"]
        said.append(f"NIC speeds from NCCL's dump, in order ({len(nics)} NICs on both)")
    elif nics and len(distinct) == 1:
        for n in nics:
            n["mbps"] = next(iter(distinct))
        said.append(f"NIC speeds: NCCL's dump lists {len(dump.nics)} of nvidia-smi's {len(nics)} NICs ({len(matched)} matched "
                    f"by name), all at {next(iter(distinct)) / 1000:g} Gb/s: that speed is taken for all {len(nics)}")
    elif dump.nics:
        nics = [dict(n, switch=None) for n in dump.nics]
        said.append(f"NICs from NCCL's dump ({len(dump.nics)}; nvidia-smi lists {len(smi.nics)}), without placement")
    return XmlNode(gpus=gpus, nics=nics, cpus=max(smi.cpus, dump.cpus), notes=list(smi.notes)), said


def nic_legend(text: str) -> dict[str, str]:
    """``NIC0: mlx5_0`` lines of ``nvidia-smi topo -m``'s NIC legend, as ``{"NIC0": "mlx5_0"}``."""
    import re
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", text, re.M)}


if __name__ == "__main__":
    sys.exit(_child(int(sys.argv[1])))
