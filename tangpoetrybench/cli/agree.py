"""`tpb agree`: how well an evaluator's scores agree with the human ones, with intervals and the human noise floor."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import add_bootstrap, add_dataset_arguments, add_margin

SUMMARY = "how well an evaluator's scores agree with the human ones, with intervals and the human noise floor"
EXAMPLE = 'tpb agree --dataset sample/dataset --scores scores.jsonl --out agree.json'


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset_arguments(p, required=True, config="the config the scores cover (its rubric: the one the dataset "
                          "carries for its tradition)", split="the split the scores cover")
    p.add_argument("--scores", type=Path, required=True, help="one evaluator's results (tpb score --out)")
    add_bootstrap(p)
    p.add_argument("--out", type=Path, help="also write every figure as JSON here")
    add_margin(p)
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="a calibration of this judge (tpb calibrate --out): the coverage of its intervals here, their "
                        "width, ECE and reliability before and after temperature scaling, and selective judging")
    p.add_argument("--literal-bias", action="store_true",
                   help="also the literal-bias test: accuracy when the more recognizable image wins minus when the "
                        "less recognizable one does, with a bootstrap bound, Cohen's d and a permutation p")


def run(args: argparse.Namespace) -> None:
    import json

    from ..judging.calibrated import load_calibration
    from ..judging.results import ResultsFile
    from ..stats.agree import RANDOM_WEIGHTS_NOTE, agree, format_table
    from ..stats.pairs import format_pairs, pair_agreement
    from ..stats.recognition import agree_recognition, format_recognition

    results = ResultsFile.read(args.scores)  # read once; its record type says which statistics apply
    compared_with = results.record_type.compared_with
    if args.calibration is not None and compared_with != "rubric":
        raise ValueError(f"--calibration applies to a rubric judge's scores, not to {results.task} records "
                         f"({args.scores})")
    if compared_with == "recognizability":  # a letter judge against the human Phase-1 track
        result = agree_recognition(args.dataset, results, split=args.split, n_bootstrap=args.bootstrap,
                                   seed=args.seed, config=args.config)
        print(format_recognition(result, [RANDOM_WEIGHTS_NOTE] if result["random_weights"] else []))
    else:
        pairwise = not results.pointwise  # tpb compare's pair records: only the pairwise statistics apply
        calibration = load_calibration(args.calibration) if args.calibration else None
        result = {} if pairwise else agree(args.dataset, results, split=args.split, n_bootstrap=args.bootstrap,
                                           seed=args.seed, config=args.config, margin=args.margin,
                                           calibration=calibration)
        result["pairs"] = pair_agreement(args.dataset, results, args.split, args.config, args.margin,
                                         args.bootstrap, args.seed, with_literal_bias=args.literal_bias)
        print(("" if pairwise else format_table(result) + "\n\n") + format_pairs(result["pairs"]))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"\nWrote {args.out}")
