"""Collects the frozen builders by name (the same decorator signature as sim.algorithms.algorithm)."""
LEGACY = {}


def algorithm(name, collectives, summary, requirement=None, pipelined=()):
    def deco(fn):
        LEGACY[name] = fn
        return fn
    return deco
