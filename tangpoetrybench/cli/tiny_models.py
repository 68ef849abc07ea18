"""`tpb tiny-models`: build tiny random-weight models, for offline runs of the pipeline (never for figures)."""

from __future__ import annotations

import argparse
from pathlib import Path


SUMMARY = 'build tiny random-weight models, for offline runs of the pipeline (never for figures)'
EXAMPLE = 'tpb tiny-models sample/models'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("out", type=Path, help="the folder to write: OUT/qwen3-vl, OUT/clip, ..., OUT/text-to-image")
    p.add_argument("--overwrite", action="store_true", help="rebuild even if OUT holds this version's models")


def run(args: argparse.Namespace) -> None:
    from ..judging.tiny_models import build_tiny_models

    built = build_tiny_models(args.out, overwrite=args.overwrite)
    for name, path in built.items():
        print(f"{name:<13} {path}")
    if "text-to-image" not in built:
        print("text-to-image not built: diffusers is not installed (pip install -e \".[generate]\")")
    print("Random weights: use these to run the pipeline offline, never to measure anything.")
