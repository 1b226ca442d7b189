"""``python -m sim.grade FILE``: the same as ``collsim grade FILE``."""
import sys

from ..cli import main

sys.exit(main(["grade", *sys.argv[1:]]))
