"""`tpb demo-release`: write a synthetic raw release: real poems, painted images, simulated ratings."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import POEMS_FILE

SUMMARY = 'write a synthetic raw release: real poems, painted images, simulated ratings'
EXAMPLE = ('tpb demo-release sample/raw --poems 8 --seed 1\n'
           'tpb demo-release haiku/raw --rubric haiku.yaml --poems-file haiku.jsonl   # a tradition of your own')


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the folder to write (poems.jsonl, images/, ratings.csv, ...)")
    p.add_argument("--poems", type=int, default=None, help="use the first N poems (default: all)")
    p.add_argument("--poems-file", type=Path, default=None, help=POEMS_FILE + " (default: the bundled poems)")
    p.add_argument("--rubric", type=Path, action="extend", nargs="+", default=[], metavar="FILE",
                   help="the rubric of a tradition of the poems that is not bundled (docs/rubrics.md); the release "
                        "carries it in rubrics/")
    p.add_argument("--seed", type=int, default=0, help="the same seed gives the same bytes")
    p.add_argument("--size", type=int, default=512, help="image side in pixels")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> None:
    from ..dataset.synthetic import write_demo_release
    from ..poems import read_poems, sample_poems
    from ..rubric import load_rubric

    rubrics = {r.tradition: r for r in map(load_rubric, args.rubric)}
    poems = read_poems(args.poems_file) if args.poems_file else sample_poems()
    unused = sorted(set(rubrics) - {p.tradition for p in poems})
    if unused:
        raise ValueError(f"no poem of the tradition {unused[0]!r} of --rubric in "
                         f"{args.poems_file or 'the bundled poems'}: give its poems with --poems-file")
    out = write_demo_release(args.out, poems, n_poems=args.poems, seed=args.seed, size=args.size,
                             overwrite=args.overwrite, progress=not args.quiet, rubrics=rubrics)
    print(f"Wrote a synthetic raw release to {out} (seed {args.seed}). Next: tpb build {out} OUT")
