"""`tpb leaderboard`: rank generators by a rubric judge's estimated quality beside the human scores, as Markdown, HTML
and JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import add_bootstrap, add_dataset_arguments

SUMMARY = "rank generators by a rubric judge's estimated quality beside the human scores, as Markdown, HTML and JSON"
EXAMPLE = 'tpb leaderboard --dataset sample/dataset --scores rated.jsonl new.jsonl --out board/'


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset_arguments(p, " (its human scores)", required=True, config=None,
                          split="the split whose poems the generators are compared on")
    p.add_argument("--scores", type=Path, nargs="+", required=True, action="extend",
                   help="a rubric judge's results (tpb score --out: PAE's, a served judge's, a plugin's) covering "
                        "every generator, all made by one evaluator with the same settings (repeat the option, or list "
                        "the files)")
    p.add_argument("--out", type=Path, required=True,
                   help="the folder to write (leaderboard.md, leaderboard.html, leaderboard.json, figures/)")
    add_bootstrap(p)
    p.add_argument("--eval-results", type=Path, metavar="DIR",
                   help="also write DIR/<generator>/.eval_results/tangpoetrybench.yaml, the Hub's Eval Results file "
                        "each generator's model repo would carry")
    p.add_argument("--dataset-id", metavar="ORG/NAME",
                   help="with --eval-results: the dataset's Hub repo (default: --dataset when it is a Hub id, else "
                        "ORG/TangPoetryBench)")
    p.add_argument("--dataset-revision", metavar="SHA", help="with --eval-results: the dataset's revision hash")
    p.add_argument("--recognize", type=Path, nargs="+", metavar="FILE",
                   help="recognize results (tpb score --evaluator recognize) of the same generators: a "
                        "recognizability table with intervals")
    p.add_argument("--generation", type=Path, nargs="+", metavar="generation.json",
                   help="tpb generate's records of the generators: one pipeline's prompt variants side by side, and "
                        "whether the ranking changes with the prompt")


def run(args: argparse.Namespace) -> None:
    from ..reporting.leaderboard import compute_leaderboard, lay_out, write_leaderboard

    data = compute_leaderboard(args.dataset, args.scores, split=args.split, n_bootstrap=args.bootstrap,
                               seed=args.seed, recognize=args.recognize or [], generation=args.generation or [])
    rep = lay_out(data)
    out = write_leaderboard(rep, args.out)
    print(f"Wrote {out / 'leaderboard.md'}, {out / 'leaderboard.html'}, {out / 'leaderboard.json'} and {out / 'figures'}/")
    if args.eval_results:
        eval_results(args, rep.numbers, set(data.poems))


def eval_results(args: argparse.Namespace, numbers: dict, poems: set[str]) -> None:
    from ..hub.eval_results import write_eval_results
    from ..hub.publish import PLACEHOLDER_ORG, ids

    local = Path(args.dataset).exists()
    dataset_id = args.dataset_id or (ids(PLACEHOLDER_ORG)["dataset"] if local else args.dataset)
    for generator, path in write_eval_results(numbers, args.eval_results, dataset_id, args.dataset_revision,
                                               poems=poems).items():
        print(f"{generator:<16} {path}")
    if dataset_id.startswith(f"{PLACEHOLDER_ORG}/"):
        print(f"The results name the dataset {dataset_id}: give --dataset-id ORG/NAME for the real repo.")
