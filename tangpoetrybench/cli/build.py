"""`tpb build`: validate, quality-control and aggregate a raw release into a dataset folder (Parquet)."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import add_max_image_pixels, add_qc_arguments, qc_config
from ..numeric import counted

SUMMARY = 'validate, quality-control and aggregate a raw release into a dataset folder (Parquet)'
EXAMPLE = ('tpb build sample/raw sample/dataset --qc-min-seconds 30\n'
           'tpb build sample/raw --text-labels-from ocr.jsonl   # a text_labels.csv draft from the OCR')


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("raw", type=Path, help="the raw release folder (layout in the README)")
    p.add_argument("out", type=Path, nargs="?",
                   help="the dataset folder to write; load it with datasets.load_dataset(OUT) (optional with "
                        "--text-labels-from)")
    p.add_argument("--text-labels-from", type=Path, metavar="OCR.jsonl",
                   help="text-ocr results of RAW's images (tpb score --evaluator text-ocr): write a draft "
                        "RAW/text_labels.draft.csv with its evidence beside it, for people to adjudicate")
    p.add_argument("--no-qc", action="store_true", help="keep every rating")
    add_qc_arguments(p)
    add_max_image_pixels(p)
    p.add_argument("--overwrite", action="store_true", help="replace OUT (and a label draft) if it exists")
    p.add_argument("--push", metavar="ORG/NAME", help="then upload OUT to the Hub as this dataset repo")
    p.add_argument("--private", action="store_true",
                   help="with --push: a private repo (without it: the owner's default visibility)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> None:
    from ..dataset.builder import build_dataset
    from ..hub.publish import push_dataset

    if args.out is None and args.text_labels_from is None:
        raise ValueError("give OUT, the dataset folder to build (or --text-labels-from OCR.jsonl for a label draft)")
    if args.text_labels_from is not None:
        text_labels_draft(args)
        if args.out is None:
            return
    qc = None if args.no_qc else qc_config(args)
    summary = build_dataset(args.raw, args.out, qc=qc, overwrite=args.overwrite,
                            max_image_pixels=args.max_image_pixels, progress=not args.quiet)
    print(f"Built {summary.out} (fingerprint {summary.fingerprint})")
    for cfg, by_split in summary.rows.items():
        print(f"  {cfg:<17} " + "  ".join(f"{split} {n}" for split, n in by_split.items()))
    qc_line = ", ".join(f"{k} {v}" for k, v in summary.qc["by_rule"].items())
    print(f"  QC: kept {summary.qc['n_kept']} of {counted(summary.qc['n_ratings'], 'rating')} ({qc_line})")
    if args.push:
        print(f"Pushed to {push_dataset(summary.out, args.push, private=args.private or None)}")


def text_labels_draft(args: argparse.Namespace) -> None:
    from ..judging.ocr.labels import draft_text_labels

    d = draft_text_labels(args.raw, args.text_labels_from, overwrite=args.overwrite)
    issues = ", ".join(f"{k} {v}" for k, v in d.issues.items())
    print(f"Wrote {d.draft} ({counted(d.rows, 'image')}: {issues}) and its evidence {d.evidence}: adjudicate "
          f"it, then save it "
          f"as {args.raw / 'text_labels.csv'}")
    if d.failed or d.missing:
        print(f"  not in the draft: {counted(len(d.failed), 'image')} whose OCR failed, {d.missing} without an "
              f"OCR result")
