"""`tpb compare`: which of two illustrations of a poem is better: a pairwise judge asked every pair in both orders,
records resumable."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import (POEMS_FILE, add_dataset_arguments, add_judge_options, add_margin, add_max_image_pixels,
                   judge_options, judge_rubric, what_to_try)
from ..numeric import counted

SUMMARY = ('which of two illustrations of a poem is better: a pairwise judge asked every pair in both orders, records '
           'resumable')
EXAMPLE = ('tpb compare --dataset sample/dataset --evaluator pae --model MODEL --out pairs.jsonl\n'
           'tpb compare --images new/images --poems new/poems.jsonl --evaluator pae --model MODEL --out new-pairs.jsonl')


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..judging.registry import evaluator_names, evaluator_spec, specs

    names = evaluator_names("pairwise")
    add_dataset_arguments(p, " (its human pairs, or with --all-pairs every pair)")
    p.add_argument("--images", type=Path, help="instead of --dataset: a folder of <generator>/<poem_id>.png (every "
                                               "pair of two generators' images of one poem)")
    p.add_argument("--poems", type=Path, help="with --images: " + POEMS_FILE)
    p.add_argument("--evaluator", required=True, choices=names, metavar="NAME",
                   help="a pairwise judge: " + "; ".join(f"{n}: {specs()[n].summary}" for n in names))
    p.add_argument("--out", type=Path, required=True, help="the pair records (JSON Lines), resumed if they exist")
    add_margin(p)
    p.add_argument("--all-pairs", action="store_true", help="every pair of images of one poem, not only human pairs")
    add_max_image_pixels(p)
    p.add_argument("--batch-size", type=int, default=8, help="pairs per batch (two questions each)")
    p.add_argument("--limit", type=int, help="only the first N pairs")
    add_judge_options(p, sorted({o for n in names for o in evaluator_spec(n).options}))


def run(args: argparse.Namespace) -> None:
    import sys

    from ..judging.evaluators import load_evaluator
    from ..judging.failures import every_answer_failed
    from ..judging.pairwise import compare_to_jsonl, dataset_pairs, folder_pairs
    from ..judging.registry import evaluator_spec
    from ..numeric import fmt
    from ..stats.pairs import pair_table

    if (args.dataset is None) == (args.images is None) or (args.images is not None) != (args.poems is not None):
        raise ValueError("give --dataset DIR, or --images DIR with --poems FILE")
    if args.images is not None:
        pairs, load = folder_pairs(args.images, args.poems, args.max_image_pixels)
    else:
        selected = None if args.all_pairs else pair_table(args.dataset, args.split, args.config, args.margin).id_pairs()
        pairs, load = dataset_pairs(args.dataset, args.config, args.split, selected, args.max_image_pixels)
    options = judge_options(args)
    if "rubric" in evaluator_spec(args.evaluator).options:  # the rubric judges: the dataset's rubric where not bundled
        options["rubric"] = judge_rubric(args.rubric, args.dataset, args.config, args.poems)
    judge = load_evaluator(args.evaluator, task="pairwise", **options)
    summary = compare_to_jsonl(judge, pairs[:args.limit], load, args.out, batch_size=args.batch_size)
    bias = summary.bias
    print(f"{summary.out}: {counted(summary.judged, 'pair')} judged now in both orders ({summary.failed} "
          f"without a verdict), "
          f"{summary.skipped} already there, {summary.total} asked for")
    if bias["answers"]:
        print(f"position bias: {bias['first_position']} of {counted(bias['answers'], 'answer')} chose the first "
              f"image (share "
              f"{fmt(bias['first_position_share'])}; 0.5 is none); {fmt(bias['consistent_share'])} of "
              f"{counted(bias['pairs'], 'pair')} answered alike in both orders")
    else:
        print("position bias: not measured (no answer in the file could be read)")
    if judge.random_weights:
        from ..stats.agree import RANDOM_WEIGHTS_NOTE

        print(RANDOM_WEIGHTS_NOTE)
    if summary.answers and summary.unread == summary.answers:
        print(every_answer_failed(summary.unread, summary.failed_answers, str(args.out), what_to_try(args),
                                  judge.random_weights), file=sys.stderr)
