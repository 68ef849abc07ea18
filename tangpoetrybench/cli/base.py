"""What every command's parser shares: options stored once, help that shows defaults, the option groups several
commands take, each declared once (the dataset's, the judge's, the QC thresholds, the bootstrap), and small value
types."""

from __future__ import annotations

import argparse
import dataclasses
from typing import Callable, Sequence

from ..dataset.qc import QCConfig
from ..dataset.raw_release import IMAGES_CONFIG, MAIN_IMAGE_CONFIGS
from ..rubric import BUILTIN, DEFAULT_TRADITION

POEMS_FILE = "a poems file (JSON Lines: poem_id, title, author, text, tradition; see the README)"
DATASET = "a built dataset folder or Hub id"
# A config is the dataset's: its name is checked when the dataset is read, and the error lists the configs it has.
CONFIGS = (f"{', '.join(MAIN_IMAGE_CONFIGS)} or a tradition's test-only config "
           f"({', '.join(t for t in BUILTIN if t != DEFAULT_TRADITION)}, or another the dataset has)")
SPLITS = "train, validation or test"


def add_max_image_pixels(p: argparse.ArgumentParser) -> None:
    """--max-image-pixels: the bound every command that reads images checks from each image's header."""
    from ..files import DEFAULT_MAX_IMAGE_PIXELS

    p.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_IMAGE_PIXELS,
                   help="refuse larger images (width × height) before decoding them")


def add_dataset_arguments(p: argparse.ArgumentParser, dataset: str = "", required: bool = False,
                          config: str | None = "", split: str = "", default_split: str = "test") -> None:
    """--dataset, --config and --split, the options of every command that reads a built dataset: the common help,
    after the command's own words for each (`dataset` follows "a built dataset folder or Hub id"; `config` and `split`
    lead). `config=None`: no --config (the command reads the configs it needs itself)."""
    def lead(words: str, common: str) -> str:
        return f"{words}: {common}" if words else common

    p.add_argument("--dataset", required=required, help=DATASET + dataset)
    if config is not None:
        p.add_argument("--config", default=IMAGES_CONFIG, help=lead(config, CONFIGS))
    p.add_argument("--split", default=default_split, help=lead(split, SPLITS))


def add_bootstrap(p: argparse.ArgumentParser) -> None:
    """The options of every command whose figures have bootstrap intervals over poems."""
    from ..numeric import DEFAULT_BOOTSTRAP

    p.add_argument("--bootstrap", type=int, default=DEFAULT_BOOTSTRAP,
                   help="resamples of poems for the 95%% intervals (0: none)")
    p.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")


def add_dataclass_options(p: argparse.ArgumentParser, cls: type, title: str) -> None:
    """An options dataclass's fields as a group of options, `--field-name` each, with the field's default and the
    `help`, `choices`, `metavar` and `type` of its metadata (`type`: the default's own where it has one): options
    declared once, for the command line and Python alike (`dataclass_from`)."""
    group = p.add_argument_group(title)
    for f in dataclasses.fields(cls):
        meta = dict(f.metadata)
        kwargs = {k: meta[k] for k in ("choices", "metavar") if k in meta}
        group.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, default=f.default, help=meta["help"],
                           type=meta.get("type", type(f.default) if f.default is not None else str), **kwargs)


def dataclass_from(args: argparse.Namespace, cls: type):
    """The options dataclass of the values a command was given (`add_dataclass_options`)."""
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def add_margin(p: argparse.ArgumentParser) -> None:
    """The human pairs' margin (`stats.agreement.DEFAULT_MARGIN`), for the commands that compare with them."""
    from ..numeric import DEFAULT_MARGIN

    p.add_argument("--margin", type=float, default=DEFAULT_MARGIN,
                   help="the human pairs: two images of a poem whose human quality differs by at least this")


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


def add_qc_arguments(p: argparse.ArgumentParser) -> None:
    """The quality-control rules' thresholds (defaults: `QCConfig`'s, the ones `tpb build` applies), for `tpb build`
    and the live QC of `tpb annotate serve`."""
    defaults = QCConfig()
    p.add_argument("--qc-min-seconds", type=number_or_off(float), default=defaults.min_seconds,
                   help="drop ratings faster than this many seconds ('off' disables)")
    p.add_argument("--qc-straightline-min", type=number_or_off(int), default=defaults.straightline_min_ratings,
                   help="straight-lining: the fewest ratings of a rater for the rule to apply ('off')")
    p.add_argument("--qc-phase1-min-answers", type=number_or_off(int), default=defaults.phase1_min_answers,
                   help="Phase-1 floor: the fewest answers of a rater for the rule to apply ('off')")
    p.add_argument("--qc-phase1-min-accuracy", type=number_or_off(float), default=defaults.phase1_min_accuracy,
                   help="Phase-1 floor: drop raters below this accuracy ('off')")
    p.add_argument("--qc-no-consistency", action="store_true", help="turn off the consistency rule")


def qc_config(args: argparse.Namespace) -> QCConfig:
    return QCConfig(min_seconds=args.qc_min_seconds, straightline_min_ratings=args.qc_straightline_min,
                    phase1_min_answers=args.qc_phase1_min_answers, phase1_min_accuracy=args.qc_phase1_min_accuracy,
                    consistency=not args.qc_no_consistency)


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


def judge_rubric(rubric_file, dataset=None, config: str = "images", poems=None):
    """The rubric a rubric judge reads: `rubric_file`, else the one a dataset carries for `config` where it is not a
    bundled one; None where each poem's bundled rubric applies. Poems of a tradition without a rubric are refused."""
    from ..dataset.reading import config_rubric
    from ..poems import read_poems
    from ..rubric import BUILTIN, is_bundled, load_rubric

    rubric = load_rubric(rubric_file) if rubric_file else None
    if poems is not None:
        traditions = sorted({p.tradition for p in read_poems(poems)})
        others = [t for t in traditions if t != (rubric.tradition if rubric else None)]
        if rubric is not None and others:
            raise ValueError(f"--rubric {rubric_file} is the rubric of {rubric.tradition}, and {poems} also has "
                             f"{', '.join(others)} poems: score each tradition apart")
        unknown = [t for t in others if t not in BUILTIN]
        if unknown:
            raise ValueError(f"{poems} has {', '.join(unknown)} poems, a tradition with no bundled rubric: give its "
                             f"rubric with --rubric {unknown[0]}.yaml")
    if rubric is None and dataset is not None:
        rubric = config_rubric(dataset, config)
        rubric = None if is_bundled(rubric) else rubric
    return rubric


def what_to_try(args: argparse.Namespace) -> list[str]:
    """What may make a judge answer in the form asked, from the options a command was given and what its evaluator
    and backend can do (`tpb score` and `tpb compare`, when no answer of a run could be read)."""
    from ..judging.registry import chosen_backend, evaluator_spec

    options = judge_options(args)
    backend, spec = chosen_backend(args.evaluator, options), evaluator_spec(args.evaluator)
    if backend is not None and backend.served:
        return ["a model that follows the prompt's instructions (for PAE's question, PAE itself served with its "
                "adapter: docs/scoring.md)"]
    tries = []
    if "constrained" in spec.options and backend is not None and backend.constrains and not options.get("constrained"):
        tries.append("--constrained (decoding held to the answer's JSON form)")
    if "adapter" in spec.options and "scores" in spec.tasks and not options.get("adapter"):
        tries.append("a PAE adapter (--adapter)")
    return tries
