"""`tpb demo-release`: write a synthetic raw release: real poems, painted images, simulated ratings."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import POEMS_FILE

SUMMARY = 'write a synthetic raw release: real poems, painted images, simulated ratings'
EXAMPLE = 'tpb demo-release sample/raw --poems 8 --seed 1'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the folder to write (poems.jsonl, images/, ratings.csv, ...)")
    p.add_argument("--poems", type=int, default=None, help="use the first N poems (default: all)")
    p.add_argument("--poems-file", type=Path, default=None, help=POEMS_FILE + " (default: the bundled poems)")
    p.add_argument("--seed", type=int, default=0, help="the same seed gives the same bytes")
    p.add_argument("--size", type=int, default=512, help="image side in pixels")
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> None:
    from ..dataset.synthetic import write_demo_release
    from ..poems import read_poems, sample_poems

    poems = read_poems(args.poems_file) if args.poems_file else sample_poems()
    out = write_demo_release(args.out, poems, n_poems=args.poems, seed=args.seed, size=args.size,
                             overwrite=args.overwrite, progress=not args.quiet)
    print(f"Wrote a synthetic raw release to {out} (seed {args.seed}). Next: tpb build {out} OUT")
