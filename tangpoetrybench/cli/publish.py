"""`tpb publish`: write the Hub repos (dataset, model, metric, Space), each self-contained, and push them."""

from __future__ import annotations

import argparse
from pathlib import Path


SUMMARY = 'write the Hub repos (dataset, model, metric, Space), each self-contained, and push them'
EXAMPLE = 'tpb publish hub --dataset sample/dataset --adapter pae-grpo --agree agree.json --push ORG'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, nargs="?",
                   help="a folder: OUT/dataset, OUT/model, OUT/metric, OUT/space (and OUT/annotation)")
    p.add_argument("--dataset", type=Path, help="a dataset folder made by tpb build")
    p.add_argument("--adapter", type=Path, help="a trained PAE adapter folder")
    p.add_argument("--agree", type=Path, help="with --adapter: tpb agree --out results for its model card")
    p.add_argument("--base-model", default="Qwen/Qwen3-VL-8B-Instruct", help="the model the adapter was trained on")
    p.add_argument("--annotation", type=Path, metavar="RAW",
                   help="also write OUT/annotation: the rating Space (tpb annotate) over this raw release")
    p.add_argument("--org", default="ORG", help="the Hub owner the cards name (ORG is a placeholder)")
    p.add_argument("--push", metavar="ORG", help="upload each folder to its repo under ORG (needs `hf auth login`)")
    p.add_argument("--private", action="store_true",
                   help="with --push: private repos (without it: the owner's default visibility)")
    p.add_argument("--eval-results", metavar="ORG/MODEL",
                   help="instead: open a pull request (never a push) adding --from's Eval Results to this model repo")
    p.add_argument("--from", dest="source", type=Path, metavar="DIR",
                   help="with --eval-results: a generator's folder of tpb leaderboard --eval-results DIR")
    p.add_argument("--dry-run", action="store_true", help="with --eval-results: show the pull request, send nothing")


def run(args: argparse.Namespace) -> None:
    from ..hub.publish import PLACEHOLDER_ORG, publish, push

    if args.eval_results:
        publish_eval_results(args)
        return
    if args.out is None:
        raise ValueError("give OUT, the folder to write the repos to (or --eval-results ORG/MODEL --from DIR)")
    org = args.push or args.org
    written = publish(args.out, org=org, dataset=args.dataset, adapter=args.adapter, agree=args.agree,
                      base_model=args.base_model, annotation=args.annotation)
    for name, path in written.items():
        print(f"{name:<8} {path}")
    if "dataset" in written and not (written["dataset"] / "eval.yaml").is_file():
        from ..hub.eval_results import dataset_eval_yaml

        print(f"No eval.yaml in {written['dataset']}: {dataset_eval_yaml()[1]}")
    if args.push:
        for name, url in push(written, org, private=args.private or None).items():
            print(f"Pushed {name}: {url}")
    elif org == PLACEHOLDER_ORG:
        print(f"The cards name the repos {PLACEHOLDER_ORG}/…: give --org ORG (or --push ORG) for the real ids.")


def publish_eval_results(args: argparse.Namespace) -> None:
    from ..hub.eval_results import eval_results_pr, open_pr

    if args.source is None:
        raise ValueError("--eval-results ORG/MODEL needs --from DIR/<generator>, a folder of tpb leaderboard "
                         "--eval-results DIR")
    pr = eval_results_pr(args.eval_results, args.source)
    print(pr.show())
    if args.dry_run:
        print("Dry run: nothing was sent.")
    else:
        print(f"Opened {open_pr(pr)}")
