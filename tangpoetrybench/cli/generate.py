"""`tpb generate`: illustrate every poem with a diffusers text-to-image pipeline and the paper's prompt, into a raw
release that a rerun resumes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .base import POEMS_FILE
from ..numeric import counted

SUMMARY = ("illustrate every poem with a diffusers text-to-image pipeline and the paper's prompt, into a raw release "
           'that a rerun resumes')
EXAMPLE = ('tpb generate --pipeline Kwai-Kolors/Kolors-diffusers --poems poems.jsonl --out raw --generator kolors '
           '--split test')


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pipeline", required=True, help="a diffusers text-to-image pipeline: Hub id or local folder")
    p.add_argument("--poems", type=Path, required=True, help=POEMS_FILE)
    p.add_argument("--out", type=Path, required=True,
                   help="the raw release folder: images/GENERATOR/<poem_id>.png, poems.jsonl, generation.json")
    p.add_argument("--generator", required=True, help="the generator's key: its folder under images/")
    p.add_argument("--split", choices=("train", "validation", "test"),
                   help="only this split's poems (the leaderboard compares generators on one split, test by default): "
                        "each poem's split in the poems file, else the default split by poem that tpb build makes "
                        "(default: every poem)")
    p.add_argument("--limit", type=int, help="only the first N poems (of the split) (default: all)")
    p.add_argument("--prompt-file", type=Path,
                   help="a variant prompt with {title}, {author} and {content} (default: the paper's Appendix B prompt)")
    p.add_argument("--seed", type=int, default=0, help="each image's seed is derived from this and its poem_id")
    p.add_argument("--steps", type=int, default=30, help="denoising steps")
    p.add_argument("--guidance-scale", type=float, default=5.0, help="classifier-free guidance scale")
    p.add_argument("--height", type=int, default=1024, help="image height in pixels")
    p.add_argument("--width", type=int, default=1024, help="image width in pixels")
    p.add_argument("--negative-prompt", help="a negative prompt, for pipelines that take one (default: none)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the GPU when there is one; bf16 there)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--prompt", metavar="VARIANT|FILE",
                   help="the prompt: appendix-b (the paper's, the default), terse, rich, or a template file with "
                        "{title}, {author}, {content}, {lines}, {form}, {imagery}, {paraphrase}")


def run(args: argparse.Namespace) -> None:
    from ..generation.diffusers_generate import generate_images

    summary = generate_images(args.pipeline, args.poems, args.out, args.generator, seed=args.seed, steps=args.steps,
                              guidance_scale=args.guidance_scale, height=args.height, width=args.width,
                              negative_prompt=args.negative_prompt, prompt_file=args.prompt_file, device=args.device,
                              progress=not args.quiet, prompt=args.prompt, split=args.split, limit=args.limit)
    if summary.num_processes > 1:
        print(f"process {summary.process_index} of {summary.num_processes}: generated {summary.process_generated}",
              file=sys.stderr)
    if summary.main_process:
        chosen = " and ".join(([f"the {args.split} split"] if args.split else []) +
                              ([f"the first {args.limit}"] if args.limit else []))
        left = f", {summary.left_out} left out (not {chosen})" if summary.left_out else ""
        print(f"{summary.out}/images/{summary.generator}: {summary.generated} generated now, {summary.skipped} already "
              f"there, {counted(summary.total, 'poem')}{left}.")
        print(next_steps(summary.out))


def next_steps(out) -> str:
    """What to run next: the scores the leaderboard will accept beside the rated generators' (theirs must be made
    with the same evaluator, model, adapter and options: it refuses a mix), then the board."""
    return (f"Next: score them exactly as the rated images were scored (the leaderboard refuses other settings), "
            f"then rank them:\n"
            f"  tpb score --images {out}/images --poems {out}/poems.jsonl --evaluator pae --model MODEL "
            f"--adapter ADAPTER --constrained --out {out}/scores.jsonl\n"
            f"  tpb leaderboard --dataset DATASET --scores RATED.jsonl {out}/scores.jsonl --out board")
