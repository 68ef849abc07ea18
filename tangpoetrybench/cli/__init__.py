"""tpb (tangpoetrybench): build the benchmark's dataset, score illustrations of poems with PAE or a baseline,
measure agreement with people, report the human-data findings, and publish to the Hub.

Each command is one module of this package, its parser (`add_arguments`) beside its handler (`run`), with its
one-line `SUMMARY` and an `EXAMPLE`; `COMMANDS` lists them in the order the pipeline runs them. A new command is
one module and one entry there. The option groups several commands share are declared once, in `base`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap

from ..errors import DataError, RunStopped, SystematicFailure
from .base import Help, Parser

# The commands in pipeline order: data, images, judging, statistics, reporting, the Hub.
COMMANDS = ("demo-release", "convert-poems", "distractors", "build", "annotate", "generate", "tiny-models", "score",
            "agree", "calibrate", "compare", "explain", "report", "leaderboard", "model-card", "publish")
FIRST = "bash scripts/quickstart.sh   (or: tpb demo-release sample/raw && tpb build sample/raw sample/dataset)"


def command_module(name: str):
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")


def overview(columns: int = 110) -> str:
    """Every command with its purpose, in pipeline order (each purpose wrapped under itself), and the one to try
    first."""
    width = max(map(len, COMMANDS))
    rows = [textwrap.fill(command_module(name).SUMMARY, columns, initial_indent=f"  {name:<{width}}  ",
                          subsequent_indent=" " * (width + 4)) for name in COMMANDS]
    return "\n".join(["commands, in the order the pipeline runs them:", *rows, "", f"try first: {FIRST}",
                      "each command: tpb COMMAND --help (this overview: tpb help)"])


def make_parser() -> Parser:
    parser = Parser(prog="tpb", usage="tpb [-h] [--version] COMMAND ...",
                    description=__doc__.split("\n\n")[0] + "\n\n" + overview(), formatter_class=Help)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__import__('tangpoetrybench').__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=argparse.SUPPRESS, prog="tpb")  # the overview lists them
    for name in COMMANDS:
        module = command_module(name)
        summary = module.SUMMARY
        p = sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                           epilog="example:\n" + textwrap.indent(module.EXAMPLE, "  "), formatter_class=Help)
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    sub.add_parser("help", help="this overview of the commands")
    return parser


def main(argv: list[str] | None = None) -> int:
    from ..models import quiet_expected_noise, quiet_progress

    quiet_expected_noise()  # what libraries say on every run about their own code (models.EXPECTED_WARNINGS)
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command in (None, "help"):
        parser.print_help()
        return 0 if args.command == "help" else 2
    if getattr(args, "quiet", False):
        quiet_progress()
    try:
        args.func(args)
    except (DataError, FileExistsError, ValueError, ImportError, OSError, SystematicFailure, RunStopped) as exc:
        print(f"error: {exc}", file=sys.stderr)  # OSError: a model that cannot be loaded, a file that cannot be read
        return 2
    return 0
