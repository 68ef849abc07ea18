"""What every command's parser shares: options stored once, help that shows defaults, and small value types."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable, Sequence

POEMS_FILE = "a poems file (JSON Lines: poem_id, title, author, text, tradition; see the README)"


def number_or_off(cast: Callable[[str], float | int]) -> Callable[[str], float | int | None]:
    """An option's type: a number, or `off` / `none` for None (a rule turned off)."""
    def parse(text: str):
        if text.lower() in ("off", "none"):
            return None
        try:
            return cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'off', got {text!r}") from None
    return parse


class StoreOnce(argparse._StoreAction):
    """An option that takes one value (or one list) refuses to be given twice, instead of silently keeping the last;
    options that gather several values say `action="extend"`."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = namespace.__dict__.setdefault("_given_once", set())
        if option_string is not None and self.dest in given:
            parser.error(f"{'/'.join(self.option_strings)} was given twice: give it once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class Parser(argparse.ArgumentParser):
    """tpb's parser and each command's: every plain option is stored once (`StoreOnce`)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, StoreOnce)
        self.register("action", "store", StoreOnce)


class Help(argparse.RawDescriptionHelpFormatter):
    """Each option's default where it has one; descriptions and examples kept as written."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "%(default)" not in text and action.option_strings and not any(
                action.default is none for none in (None, False, argparse.SUPPRESS)):
            text += " (default: %(default)s)"
        return text


def add_judge_options(parser: argparse.ArgumentParser, names: Sequence[str] | None = None) -> None:
    """The evaluators' options (`judging.registry.JudgeOptions`, declared there once), in their groups; `names`
    chooses some (default: all)."""
    from ..judging.registry import JudgeOptions

    groups: dict[str, argparse._ArgumentGroup] = {}
    for f in dataclasses.fields(JudgeOptions):
        if names is not None and f.name not in names:
            continue
        meta = dict(f.metadata)
        group = groups.get(meta["group"]) or groups.setdefault(meta["group"],
                                                                parser.add_argument_group(f"{meta['group']} options"))
        flags = meta.pop("flags", (f"--{f.name.replace('_', '-')}",))
        kwargs = {k: meta[k] for k in ("type", "choices", "nargs", "const", "metavar", "action") if k in meta}
        if meta.get("flag"):
            kwargs["action"] = "store_true"
        group.add_argument(*flags, dest=f.name, help=meta["help"], **kwargs)


def judge_options(args: argparse.Namespace) -> dict:
    """The evaluator options a command was given (None or False where not)."""
    from ..judging.registry import OPTION_NAMES

    return {name: getattr(args, name) for name in OPTION_NAMES if hasattr(args, name)}


def what_to_try(args: argparse.Namespace) -> list[str]:
    """What may make a judge answer in the form asked, from the options a command was given (`tpb score` and
    `tpb compare`, when no answer of a run could be read)."""
    served = getattr(args, "backend", None) == "api" or bool(getattr(args, "base_url", None)) or args.evaluator == "api"
    if served:
        return ["a model that follows the prompt's instructions (for PAE's question, PAE itself served with its "
                "adapter: docs/scoring.md)"]
    tries = []
    if args.evaluator == "pae" and not getattr(args, "constrained", False):
        tries.append("--constrained (decoding held to the answer's JSON form)")
    if args.evaluator == "pae" and not getattr(args, "adapter", None):
        tries.append("a PAE adapter (--adapter)")
    return tries
