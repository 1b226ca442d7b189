"""Measurements on real hardware: launch ranks, run collectives with torch.distributed, report them."""
