"""``python -m sim`` is the ``collsim`` command."""
import sys

from .cli import main

sys.exit(main())
