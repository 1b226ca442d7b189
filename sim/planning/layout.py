"""Which ranks form which process groups: the tensor-, data-, shard-, replica- and pipeline-parallel
sub-communicators of a training job, in Megatron-LM's rank order (tensor-parallel fastest, then data,
then pipeline): ``rank = stage * (dp * tp) + dp_index * tp + tp_index``. So a TP group is consecutive
ranks (one NVLink island when ``tp <= gpus_per_node``) and a DP group strides across servers.

>>> lay = Layout.build(world=16, tp=8)
>>> lay.dp, lay.group("tp"), lay.group("dp")
(2, (0, 1, 2, 3, 4, 5, 6, 7), (0, 8))
>>> len(lay.groups("tp"))
2
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CollsimError

FAMILIES = ("tp", "dp", "shard", "replicate", "pp")


@dataclass(frozen=True)
class Layout:
    """World size and the parallel degrees: ``tp * pp * dp == world``; ``shard`` divides ``dp``
    (``shard == dp``: one shard group, the DP group itself)."""

    world: int
    tp: int = 1
    pp: int = 1
    dp: int = 1
    shard: int = 1

    @classmethod
    def build(cls, world: int, tp: int = 1, pp: int = 1, shard: int | None = None) -> "Layout":
        if world % (tp * pp):
            raise CollsimError(f"tp={tp} x pp={pp} does not divide the {world} ranks of the topology: "
                               f"choose degrees whose product divides {world}")
        dp = world // (tp * pp)
        shard = dp if shard is None else shard
        if shard < 1 or dp % shard:
            raise CollsimError(f"shard_group={shard} does not divide the data-parallel degree {dp}: pick a divisor of {dp}")
        return cls(world, tp, pp, dp, shard)

    @property
    def replicas(self) -> int:
        """Copies of the sharded state (HSDP's replicate degree)."""
        return self.dp // self.shard

    def rank(self, stage: int, dp_index: int, tp_index: int) -> int:
        return stage * self.dp * self.tp + dp_index * self.tp + tp_index

    def groups(self, family: str) -> list[tuple[int, ...]]:
        """Every group of ``family`` (tp, dp, shard, replicate, pp), each as sorted ranks; ``pp`` groups
        are the pairs of neighbouring stages that exchange activations."""
        out = []
        if family == "tp":
            for s in range(self.pp):
                for d in range(self.dp):
                    out.append(tuple(self.rank(s, d, t) for t in range(self.tp)))
        elif family in ("dp", "shard", "replicate"):
            for s in range(self.pp):
                for t in range(self.tp):
                    members = [self.rank(s, d, t) for d in range(self.dp)]
                    if family == "dp":
                        out.append(tuple(members))
                    elif family == "shard":  # consecutive DP members: inside a server when they fit
                        out += [tuple(members[i:i + self.shard]) for i in range(0, self.dp, self.shard)]
                    else:  # the same shard index in every replica
                        out += [tuple(members[j::self.shard]) for j in range(self.shard)]
        elif family == "pp":
            for s in range(self.pp - 1):
                for d in range(self.dp):
                    for t in range(self.tp):
                        out.append((self.rank(s, d, t), self.rank(s + 1, d, t)))
        else:
            raise CollsimError(f"unknown process-group family {family!r}: use one of {', '.join(FAMILIES)}")
        return out

    def group(self, family: str) -> tuple[int, ...]:
        """The group of ``family`` that rank 0 belongs to (the one the plan simulates)."""
        groups = self.groups(family)
        return groups[0] if groups else (0,)

    def size(self, family: str) -> int:
        return {"tp": self.tp, "dp": self.dp, "shard": self.shard, "replicate": self.replicas,
                "pp": 2 if self.pp > 1 else 1}[family]
