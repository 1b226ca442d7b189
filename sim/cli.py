"""The ``collsim`` command line (also ``python -m sim``).

Each subcommand lives in its own module that exposes ``register(subparsers)``; the module adds its
parser and sets ``func=handler`` where ``handler(args) -> int`` returns the exit status. Modules of the
real side (``real.measure_cli``...) are listed here by name and imported when the CLI starts; they import
torch only inside their handlers, so ``collsim simulate`` works without torch and ``sim`` itself never
imports it.

User errors (:class:`sim.errors.CollsimError`) print one line, ``collsim: error: ...``, and exit 2; so does a
``MemoryError`` that the budgets (:mod:`sim.prediction.budget`) did not foresee, instead of a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .errors import CollsimError
from .io.safe_io import command_inputs

# Order here is the order in `collsim --help`.
COMMAND_MODULES = (
    "sim.commands.simulate",
    "sim.commands.topo",
    "sim.commands.tune",
    "sim.commands.verify_command",
    "sim.commands.validate",
    "sim.commands.demo",
    "sim.commands.plan",
    "sim.commands.trace",
    "sim.commands.grade_command",
    "sim.commands.course",
    "sim.commands.flight_command",
    "real.measure_cli",
    "real.compare_cli",
)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's usage errors: one line, status 2
        if message.endswith("expected one argument"):
            # "-b -1M": argparse reads a value starting with '-' as the next option and names only the symptom
            message += " (if you gave one starting with '-', such as a negative size, it was read as an option: " \
                       "sizes and counts are 0 or more; give any other such value as --option=VALUE)"
        self.exit(2, f"collsim: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="collsim", description="Teach and predict GPU collective communication.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and (name == e.name or name.startswith(e.name + ".")):
                continue  # that part is not built (yet); its commands are simply absent
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with command_inputs():  # outputs of this command may not overwrite the files it reads
            return int(args.func(args) or 0)
    except CollsimError as e:
        print(f"collsim: error: {e}", file=sys.stderr)
        return 2
    except MemoryError:   # the budgets refuse what they can estimate; this is what they could not
        print("collsim: error: out of memory: simulate fewer GPUs or sizes, or give a smaller --max-memory "
              "so that the estimates refuse or switch models before building", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("collsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `collsim simulate ... | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
