"""tpb (tangpoetrybench): build the benchmark's dataset, score illustrations of poems with PAE or a baseline,
measure agreement with people, report the human-data findings, and publish to the Hub.

Each command is one module of this package, its parser (`add_arguments`) beside its handler (`run`), with its
one-line `SUMMARY` and an `EXAMPLE`; `COMMANDS` lists them in the order the pipeline runs them. A new command is
one module and one entry there.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
import warnings

from ..errors import DataError, RunStopped, SystematicFailure
from .base import Help, Parser

# The commands in pipeline order: data, images, judging, statistics, reporting, the Hub.
COMMANDS = ("demo-release", "convert-poems", "distractors", "build", "annotate", "generate", "tiny-models", "score",
            "agree", "calibrate", "compare", "explain", "report", "leaderboard", "model-card", "publish")
FIRST = "bash scripts/quickstart.sh   (or: tpb demo-release sample/raw && tpb build sample/raw sample/dataset)"


def command_module(name: str):
    return importlib.import_module(f"{__name__}.{name.replace('-', '_')}")


def overview() -> str:
    """Every command with its purpose, in pipeline order, and the one to try first."""
    width = max(map(len, COMMANDS))
    rows = [f"  {name:<{width}}  {command_module(name).SUMMARY}" for name in COMMANDS]
    return "\n".join(["commands, in the order the pipeline runs them:", *rows, "", f"try first: {FIRST}",
                      "each command: tpb COMMAND --help"])


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
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command in (None, "help"):
        parser.print_help()
        return 0 if args.command == "help" else 2
    # said on every run (and by every data-loader worker) by a library's import, about that library's own code
    warnings.filterwarnings("ignore", message=r"`torch\.jit\.script` is deprecated", category=FutureWarning)
    if getattr(args, "quiet", False):
        from ..models import quiet_progress

        quiet_progress()
    try:
        args.func(args)
    except (DataError, FileExistsError, ValueError, ImportError, OSError, SystematicFailure, RunStopped) as exc:
        print(f"error: {exc}", file=sys.stderr)  # OSError: a model that cannot be loaded, a file that cannot be read
        return 2
    return 0
