"""``collsim topo``: describe (and draw) a topology."""
from __future__ import annotations

from ..errors import CollsimError
from ..presets import load_topology, presets
from .common import check_output_path, json_text


def register(sub) -> None:
    p = sub.add_parser("topo", help="describe a topology (and draw it with --plot)",
                       description="Summarise a topology: GPUs, hosts, link classes, reducing switches.")
    p.add_argument("spec", nargs="?", help="preset spec NAME[:k=v,...], .yaml/.json file, or NCCL topology FILE.xml[:nodes=N,...]; "
                        "omit to list presets")
    p.add_argument("--from-nvidia-smi", metavar="FILE[:k=v,...]", default=None,
                   help="build the node from saved `nvidia-smi topo -m` output (GPU model from the text or gpu=NAME; "
                        "other keys such as nodes=2 go to the preset the node builds as; a PCIe server without NVLink builds as "
                        "the one-server pcie preset, which takes no nodes=)")
    p.add_argument("--plot", metavar="FILE.png", help="draw the topology to an image file")
    p.add_argument("--format", default="text", choices=("text", "json"), help="json: the file format (loadable)")
    p.set_defaults(func=run)


def run(args) -> int:
    check_output_path(args.plot, "--plot", (".png", ".pdf", ".svg"))
    if args.from_nvidia_smi:
        if args.spec:
            raise CollsimError("give either a topology spec or --from-nvidia-smi FILE, not both")
        from ..topology.nvidia_smi import load_topology_nvsmi
        args.spec = args.from_nvidia_smi
        topo = load_topology_nvsmi(args.from_nvidia_smi)
        return _show(topo, args)
    if not args.spec:
        for name, pr in sorted(presets().items()):
            params = ", ".join(f"{k}={d}" for k, d in _defaults(name, pr).items())
            print(f"{name:16s} {pr.summary}\n{'':16s} ({params})")
        return 0
    return _show(load_topology(args.spec), args)


def _defaults(name: str, preset) -> dict:
    """A preset's parameters with what it actually uses by default: a parameter whose default is "the
    platform's own" (None in the signature) is read off the default topology (dgx-h100: gpus_per_node=8,
    nics_per_node=8, nic_gbps=400...), or shown as ``auto`` where the default depends on other
    parameters (nodes_per_leaf: all nodes under one leaf up to the platform's scalable unit)."""
    out = {k: d for k, (_, d) in preset.params.items()}
    if any(v is None for v in out.values()):
        meta = load_topology(name).meta
        for k, v in out.items():
            if v is None:
                out[k] = meta.get(k) if meta.get(k) is not None else "auto"
    return out


def _show(topo, args) -> int:
    if args.format == "text" and topo.hardware.xml_read:   # an NCCL topology XML: what was read from it
        print("\n".join(f"# read: {line}" for line in topo.hardware.xml_read))
    print(json_text(topo.to_dict(), indent=1) if args.format == "json" else topo.summary())
    if args.plot:
        from ..viz.topology_plot import plot_topology
        plot_topology(topo, args.plot)
        print(f"wrote {args.plot}")
    return 0
