"""The grading child process (see :mod:`sim.grade.runner`); students run ``collsim grade FILE`` instead."""
import sys

from .runner import child_main

sys.exit(child_main(sys.argv[1:]))
