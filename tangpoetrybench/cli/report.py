"""`tpb report`: the paper's human-data analysis of a built dataset, as Markdown, HTML and JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import add_bootstrap, add_dataset_arguments

SUMMARY = "the paper's human-data analysis of a built dataset, as Markdown, HTML and JSON"
EXAMPLE = 'tpb report --dataset sample/dataset --out report/ --scores scores.jsonl --ocr ocr.jsonl'


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset_arguments(p, required=True, config=None, split="the split the scores cover")
    p.add_argument("--out", type=Path, required=True, help="the report folder (report.md, report.html, numbers.json)")
    p.add_argument("--scores", type=Path, nargs="*", action="extend",
                   help="evaluators' results (tpb score), one file each: Table 4 (repeat the option, or list the files)")
    p.add_argument("--pairs", type=Path, nargs="*", action="extend", help="pairwise judges' results (tpb compare), one "
                   "file each: Tables 4P, 4L and 6 beside the --scores evaluators")
    p.add_argument("--ocr", type=Path, metavar="OCR.jsonl",
                   help="text-ocr results (tpb score --evaluator text-ocr): Table 3 from the OCR beside the "
                        "adjudicated one, with precision and recall per issue type")
    add_bootstrap(p)
    p.add_argument("--calibration", type=Path, metavar="FILE",
                   help="a judge's calibration (tpb calibrate --out): Table 4C, its intervals' coverage and width, ECE "
                        "and reliability on that judge's --scores, beside ranking and absolute agreement")
    p.add_argument("--unseen-scores", type=Path, metavar="FILE",
                   help="with --calibration: the same judge's results on the unseen_generator config, Table 4C's "
                        "shifted row")
    p.add_argument("--graphs", type=Path, metavar="GRAPHS.jsonl",
                   help="SemJudge graphs (tpb explain --out): one image's graph per generator in the report")


def run(args: argparse.Namespace) -> None:
    from ..judging.calibrated import load_calibration
    from ..reporting.report import build_report, write_report

    calibration = load_calibration(args.calibration) if args.calibration else None
    out = write_report(build_report(args.dataset, args.scores or [], split=args.split, n_bootstrap=args.bootstrap,
                                    seed=args.seed, ocr=args.ocr, graphs=args.graphs, pairs=args.pairs or [],
                                    calibration=calibration, unseen=args.unseen_scores), args.out)
    print(f"Wrote {out / 'report.md'}, {out / 'report.html'}, {out / 'numbers.json'} and {out / 'figures'}/")
