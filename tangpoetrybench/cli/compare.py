"""`tpb compare`: which of two illustrations of a poem is better: a pairwise judge asked every pair in both orders,
records resumable."""

from __future__ import annotations

import argparse
from pathlib import Path

from .base import add_max_image_pixels


SUMMARY = ('which of two illustrations of a poem is better: a pairwise judge asked every pair in both orders, records '
           'resumable')
EXAMPLE = 'tpb compare --dataset sample/dataset --evaluator pae --model MODEL --out pairs.jsonl'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id")
    p.add_argument("--evaluator", required=True, help="a registered pairwise judge: pae, api, semjudge (or one a plugin adds)")
    p.add_argument("--out", type=Path, required=True, help="the pair records (JSON Lines), resumed if they exist")
    p.add_argument("--task", default="pairwise", choices=["pairwise"], help="the judging task (compare: pairwise)")
    p.add_argument("--config", default="images", choices=["images", "unseen_generator", "song_ci"])
    p.add_argument("--split", default="test")
    p.add_argument("--margin", type=float, default=0.05, help="the human pairs: human quality apart by at least this")
    p.add_argument("--all-pairs", action="store_true", help="every pair of images of one poem, not only human pairs")
    p.add_argument("--model", help="the base model (pae: Hub id or folder) or the name the server knows (api)")
    p.add_argument("--adapter", help="pae: a LoRA adapter (Hub id or folder)")
    p.add_argument("--backend", default="transformers", choices=["transformers", "vllm"])
    p.add_argument("--device")
    p.add_argument("--constrained", action="store_true", help="pae: decode every answer in the pairwise JSON form")
    p.add_argument("--max-pixels", type=int)
    add_max_image_pixels(p)
    p.add_argument("--max-new-tokens", type=int)
    p.add_argument("--base-url", help="api: the OpenAI-compatible server's URL")
    p.add_argument("--api-key-env", help="api: the environment variable holding the key")
    p.add_argument("--concurrency", type=int)
    p.add_argument("--timeout", type=float)
    p.add_argument("--retries", type=int)
    p.add_argument("--batch-size", type=int, default=8, help="pairs per batch (two questions each)")
    p.add_argument("--limit", type=int, help="only the first N pairs")


def run(args: argparse.Namespace) -> None:
    from ..judging.pairwise import compare_to_jsonl, dataset_pairs, load_pairwise_judge
    from ..numeric import fmt
    from ..stats.pairs import pair_table

    selected = None if args.all_pairs else pair_table(args.dataset, args.split, args.config, args.margin).id_pairs()
    pairs, load = dataset_pairs(args.dataset, args.config, args.split, selected, args.max_image_pixels)
    options = {k: getattr(args, k) for k in ("model", "adapter", "device", "max_pixels", "max_new_tokens", "base_url",
                                             "api_key_env", "concurrency", "timeout", "retries")}
    if args.evaluator == "pae":
        options.update(backend=args.backend, constrained=args.constrained or None)
    elif args.adapter or args.constrained:
        raise ValueError("--adapter and --constrained apply to --evaluator pae only")
    judge = load_pairwise_judge(args.evaluator, **options)
    summary = compare_to_jsonl(judge, pairs[:args.limit], load, args.out, batch_size=args.batch_size)
    bias = summary.bias
    print(f"{summary.out}: {summary.judged} pairs judged now in both orders ({summary.failed} without a verdict), "
          f"{summary.skipped} already there, {summary.total} asked for")
    print(f"position bias: {bias['first_position']} of {bias['answers']} answers chose the first image (share "
          f"{fmt(bias['first_position_share'])}; 0.5 is none); {fmt(bias['consistent_share'])} of {bias['pairs']} "
          "pairs answered alike in both orders")
    if judge.random_weights:
        from ..stats.agree import RANDOM_WEIGHTS_NOTE

        print(RANDOM_WEIGHTS_NOTE)
