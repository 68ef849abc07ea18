"""Every option of every tpb command, given twice: a list option gathers both values, any other one is refused with
a clear line; none silently keeps only the last (`tpb report --scores a --scores b` once dropped a's Table 4)."""

import argparse

import pytest

from tangpoetrybench.cli import make_parser


def commands(parser: argparse.ArgumentParser | None = None, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    """Every command's parser by its words ("build", "annotate serve"): a command with actions of its own lists
    each of them instead."""
    sub = next(a for a in (parser or make_parser())._actions if isinstance(a, argparse._SubParsersAction))
    found = {}
    for name, command in sub.choices.items():
        nested = any(isinstance(a, argparse._SubParsersAction) for a in command._actions)
        found.update(commands(command, f"{prefix}{name} ") if nested else {f"{prefix}{name}": command})
    return found


def value(action: argparse.Action, n: int) -> str:
    return str(action.choices[n % len(action.choices)]) if action.choices else str(n + 1)


def required(parser: argparse.ArgumentParser, skip: argparse.Action) -> list[str]:
    """The arguments a command needs, except `skip`."""
    argv = []
    for action in parser._actions:
        if action.dest == skip.dest or isinstance(action, argparse._HelpAction):
            continue
        if not action.option_strings and action.nargs != "?":
            argv.append(value(action, 0))
        elif action.option_strings and action.required:
            argv += [action.option_strings[0], value(action, 0)]
    return argv


CASES = [(name, action) for name, parser in commands().items() for action in parser._actions
         if action.option_strings and action.nargs != 0 and not isinstance(action, argparse._HelpAction)]


def test_every_command_has_options():
    assert {name for name, _ in CASES} >= {"score", "report", "leaderboard", "agree", "build", "generate", "publish",
                                           "annotate serve", "annotate invite"}


@pytest.mark.parametrize("name,action", CASES, ids=[f"{n} {a.option_strings[0]}" for n, a in CASES])
def test_an_option_given_twice_extends_or_is_refused(name, action, capsys):
    parser = commands()[name]
    flag = action.option_strings[0]
    argv = [*name.split(), *required(parser, action), flag, value(action, 0), flag, value(action, 1)]
    if isinstance(action, argparse._ExtendAction):
        got = getattr(make_parser().parse_args(argv), action.dest)
        assert [str(v) for v in got] == [value(action, 0), value(action, 1)]
        return
    with pytest.raises(SystemExit):
        make_parser().parse_args(argv)
    assert f"{'/'.join(action.option_strings)} was given twice: give it once" in capsys.readouterr().err


def test_report_and_leaderboard_gather_every_scores_file():
    for name in ("report", "leaderboard"):
        args = make_parser().parse_args([name, "--dataset", "d", "--out", "o", "--scores", "pae.jsonl", "--scores",
                                         "blip.jsonl", "clip.jsonl"])
        assert [str(p) for p in args.scores] == ["pae.jsonl", "blip.jsonl", "clip.jsonl"]
    assert make_parser().parse_args(["report", "--dataset", "d", "--out", "o"]).scores is None


@pytest.mark.parametrize("argv, code", [([], 2), (["help"], 0)])
def test_tpb_alone_and_tpb_help_list_the_commands_in_pipeline_order(argv, code, capsys):
    """A newcomer's first `tpb`: every command with its one-line purpose, in the order the pipeline runs them, and
    the one to try first; not argparse's "the following arguments are required: COMMAND"."""
    from tangpoetrybench.cli import COMMANDS, FIRST, command_module, main

    assert main(argv) == code
    printed = capsys.readouterr()
    assert "arguments are required" not in printed.out + printed.err
    listed = printed.out.split("commands, in the order the pipeline runs them:\n")[1].split("\n\n")[0]
    rows = [line for line in listed.splitlines() if not line.startswith("   ")]
    assert [row.split()[0] for row in rows] == list(COMMANDS)
    for name in COMMANDS:
        words = " ".join(printed.out.split())  # each purpose, wrapped under itself
        assert f"{name} {' '.join(command_module(name).SUMMARY.split())}" in words, name
    assert f"try first: {FIRST}" in printed.out and max(map(len, printed.out.splitlines())) <= 120


@pytest.mark.parametrize("topic", [["score"], ["annotate", "serve"], ["demo-release"]])
def test_tpb_help_command_shows_the_commands_help(topic, capsys):
    """`tpb help score` is `tpb score --help` (any command, nested ones too), not an error."""
    from tangpoetrybench.cli import main

    with pytest.raises(SystemExit) as done:
        main([*topic, "--help"])
    assert done.value.code == 0
    expected = capsys.readouterr().out
    assert main(["help", *topic]) == 0
    printed = capsys.readouterr()
    assert printed.out == expected and printed.err == ""
    assert printed.out.startswith(f"usage: tpb {' '.join(topic)} ")


def test_tpb_help_of_an_unknown_command_says_which_there_are(capsys):
    from tangpoetrybench.cli import COMMANDS, main

    assert main(["help", "scor"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no command 'scor'") and "score" in err and all(name in err for name in COMMANDS)


def test_the_dataset_options_are_declared_once():
    """--dataset, --config and --split of every command that reads a built dataset come from one declaration
    (`cli.base.add_dataset_arguments`): the common help, whatever a command adds, and --config takes any name (the
    dataset's configs are checked when it is read)."""
    from tangpoetrybench.cli.base import CONFIGS, DATASET, SPLITS

    found = {}
    for name, parser in commands().items():
        options = {a.dest: a for a in parser._actions if a.dest in ("dataset", "config", "split")}
        if {"dataset", "split"} <= set(options):  # a command that reads a built dataset's split
            found[name] = options
            assert options["dataset"].help.startswith(DATASET) and options["split"].help.endswith(SPLITS)
            assert "config" not in options or (options["config"].help.endswith(CONFIGS)
                                               and options["config"].choices is None)
    assert {"score", "compare", "agree", "report", "leaderboard", "calibrate"} <= set(found)
    assert found["calibrate"]["split"].default == "validation" and found["score"]["config"].default == "images"
