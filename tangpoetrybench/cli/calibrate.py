"""`tpb calibrate`: conformal intervals for a judge's scores, fitted on a split poem-disjoint from test, and the
images whose intervals are widest: the ones to send to people first."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..judging.abstention import SelectiveOptions
from ..numeric import counted
from .base import add_dataclass_options, add_dataset_arguments, dataclass_from

SUMMARY = ("conformal intervals for a judge's scores, fitted on a split poem-disjoint from test; the images to send "
           "to people first")
EXAMPLE = ('tpb calibrate --dataset sample/dataset --scores val.jsonl --alpha 0.1 --out calibration.json\n'
           'tpb calibrate --dataset D --scores val.jsonl --epsilon 0.1 --delta 0.1 --out calibration.json\n'
           'tpb calibrate --calibration calibration.json --select 50 --pool new.jsonl --select-out priority.txt')


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_dataset_arguments(p, ": its human scores of the calibration split", config="the config whose split is "
                          "calibrated on", split="the calibration split, poem-disjoint from the split the intervals "
                          "are tested on", default_split="validation")
    p.add_argument("--scores", type=Path, help="the judge's results on that split (tpb score --split validation)")
    p.add_argument("--alpha", type=float, default=0.1, help="miscoverage: the intervals aim at 1 − α coverage")
    p.add_argument("--out", type=Path, help="the calibration file to write (JSON)")
    p.add_argument("--calibration", type=Path, help="instead of fitting one: a calibration file (tpb calibrate --out)")
    p.add_argument("--select", type=int, metavar="K", help="list the K images of --pool with the widest quality "
                   "intervals (a failed answer first, then those the judge abstains on where the calibration holds a "
                   "threshold): the ones to send to people first")
    p.add_argument("--pool", type=Path, help="with --select: the judge's results on the images to choose from "
                                             "(tpb score --images RAW/images)")
    p.add_argument("--select-out", type=Path, metavar="FILE",
                   help="with --select: FILE.jsonl gets JSON Lines (image_id, poem_id, quality, interval, width); any "
                        "other name a plain list of image ids, one per line, widest first")
    add_dataclass_options(p, SelectiveOptions, "selective judging (docs/calibration.md)")


def run(args: argparse.Namespace) -> None:
    from ..judging.calibrated import load_calibration
    from ..judging.results import ResultsFile
    from ..stats.agree import calibrate
    from ..stats.calibration import format_fit, percent, widest, write_selection

    selective = dataclass_from(args, SelectiveOptions)
    selective.check()
    others = [f"--{k.replace('_', '-')}" for k in ("delta", "abstain_on")
              if getattr(selective, k) != getattr(SelectiveOptions, k)]
    if selective.epsilon is None and others:
        raise ValueError(f"{' and '.join(others)} appl{'y' if len(others) > 1 else 'ies'} with --epsilon only")
    fitting = [f"--{k}" for k in ("dataset", "scores", "out", "epsilon") if getattr(args, k) is not None]
    if args.calibration is not None:
        if fitting:
            raise ValueError(f"--calibration uses a calibration already made: give no {', '.join(fitting)}")
        calibration = load_calibration(args.calibration)
    elif len([f for f in fitting if f != "--epsilon"]) < 3:
        raise ValueError("give --dataset, --scores and --out to fit a calibration, or --calibration FILE to use one")
    else:
        calibration, warnings = calibrate(args.dataset, args.scores, args.alpha, args.split, args.config,
                                          selective=selective)
        print(format_fit(calibration, warnings))
        print(f"\nWrote {calibration.write(args.out)}")
    chosen = [f"--{k.replace('_', '-')}" for k in ("pool", "select_out") if getattr(args, k) is not None]
    if args.select is None:
        if chosen:
            raise ValueError(f"{' and '.join(chosen)} apply with --select K only")
        return
    if len(chosen) < 2:
        raise ValueError("--select K needs --pool (the results to choose from) and --select-out FILE")
    rows = widest(calibration, ResultsFile.read(args.pool).records, args.select, args.pool)
    path = write_selection(rows, args.select_out)
    first = sum(bool(r.get("abstained")) for r in rows)
    first = f" ({first} the judge abstains on first, under the threshold)" if first else ""
    print(f"Wrote the {counted(len(rows), 'image')} with the widest {percent(calibration.level)} intervals{first} to "
          f"{path}: widths {rows[0]['width']:.3f} to {rows[-1]['width']:.3f}")
