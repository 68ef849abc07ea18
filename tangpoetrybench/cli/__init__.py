"""tpb (tangpoetrybench): build the benchmark's dataset, score illustrations of poems with PAE or a baseline,
measure agreement with people, report the human-data findings, and publish to the Hub.

Each command is one module of this package, its parser (`add_arguments`) beside its handler (`run`), with its
one-line `SUMMARY` and an `EXAMPLE`; `COMMANDS` lists them in the order the pipeline runs them. A new command is
one module and one entry there. The option groups several commands share are declared once, in `base`.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import sys
import textwrap
import warnings

from ..errors import DataError, Notice, RunStopped, SystematicFailure
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
                      "each command: tpb help COMMAND, or tpb COMMAND --help (this overview: tpb help)"])


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
    sub.add_parser("help", help="this overview of the commands").add_argument(
        "topic", nargs="*", metavar="COMMAND", help="a command: its help, as COMMAND --help shows it")
    return parser


def command_help(parser: Parser, topic: list[str]) -> int:
    """`tpb help COMMAND ...`: what `tpb COMMAND ... --help` prints."""
    if topic[0] not in COMMANDS:
        print(f"error: no command {topic[0]!r}; the commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    try:
        parser.parse_args([*topic, "--help"])
    except SystemExit as exc:  # argparse prints the help, then exits
        return exc.code or 0
    return 0


def say_notices() -> None:
    """Show the package's own warnings (`errors.Notice`) as one line, "warning: ...", not in Python's form with the
    source file, line and code; any other warning (a library's) as Python shows it."""
    shown = warnings.showwarning
    if getattr(shown, "says_notices", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, Notice):
            print(f"warning: {message}", file=file or sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)

    show.says_notices = True
    warnings.showwarning = show


def main(argv: list[str] | None = None) -> int:
    with warnings.catch_warnings():  # the command's own way of showing warnings, undone when it returns
        say_notices()
        try:
            return _main(argv)
        finally:
            # What the command left in reference cycles (a streamed split's Arrow readers among them) is freed now,
            # while Arrow is alive: freed at interpreter teardown instead, a reader's threads can abort the process
            # after its work is done (https://github.com/huggingface/datasets/issues/7566; seen once here, `tpb agree`
            # exiting 134 on a loaded machine after printing its table).
            gc.collect()


def _main(argv: list[str] | None) -> int:
    from ..models import quiet_expected_noise, quiet_progress

    quiet_expected_noise()  # what libraries say on every run about their own code (models.EXPECTED_WARNINGS)
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.command == "help" and args.topic:
        return command_help(parser, args.topic)
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
