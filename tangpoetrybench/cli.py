"""The `tangpoetrybench` / `tpb` command line (SPEC §8)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable

from .errors import DataError, SystematicFailure
from .qc import QCConfig
from .release import DEFAULT_MAX_IMAGE_PIXELS


def _number_or_off(cast: Callable[[str], float | int]) -> Callable[[str], float | int | None]:
    def parse(text: str):
        if text.lower() in ("off", "none"):
            return None
        try:
            return cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'off', got {text!r}") from None
    return parse


def _demo_release(args: argparse.Namespace) -> None:
    from .demo import write_demo_release
    from .poems import read_poems, sample_poems

    poems = read_poems(args.poems_file) if args.poems_file else sample_poems()
    out = write_demo_release(args.out, poems, n_poems=args.poems, seed=args.seed, size=args.size,
                             overwrite=args.overwrite, progress=not args.quiet)
    print(f"Wrote a synthetic raw release to {out} (seed {args.seed}). Next: tpb build {out} OUT")


def _build(args: argparse.Namespace) -> None:
    from .builder import build_dataset, push_dataset

    qc = None if args.no_qc else QCConfig(
        min_seconds=args.qc_min_seconds, straightline_min_ratings=args.qc_straightline_min,
        phase1_min_answers=args.qc_phase1_min_answers, phase1_min_accuracy=args.qc_phase1_min_accuracy,
        consistency=not args.qc_no_consistency,
    )
    summary = build_dataset(args.raw, args.out, qc=qc, overwrite=args.overwrite,
                            max_image_pixels=args.max_image_pixels, progress=not args.quiet)
    print(f"Built {summary.out} (fingerprint {summary.fingerprint})")
    for cfg, by_split in summary.rows.items():
        print(f"  {cfg:<17} " + "  ".join(f"{split} {n}" for split, n in by_split.items()))
    qc_line = ", ".join(f"{k} {v}" for k, v in summary.qc["by_rule"].items())
    print(f"  QC: kept {summary.qc['n_kept']} of {summary.qc['n_ratings']} ratings ({qc_line})")
    if args.push:
        print(f"Pushed to {push_dataset(summary.out, args.push, private=args.private or None)}")


def _convert_poems(args: argparse.Namespace) -> None:
    from .poems import convert_chinese_poetry, write_poems

    poems = [p for src in args.sources for p in convert_chinese_poetry(src)]
    write_poems(poems, args.out)
    print(f"Wrote {len(poems)} poems to {args.out}")


def _score(args: argparse.Namespace) -> None:
    from .evaluators import load_evaluator
    from .evaluators.loading import process_state
    from .scoring import DatasetSource, FolderSource, score_to_jsonl

    if bool(args.dataset) == bool(args.images):
        raise ValueError("give --dataset DIR, or --images DIR with --poems FILE")
    if args.images and not args.poems:
        raise ValueError("--images needs --poems FILE")
    state = process_state()  # under a launcher: the process group, before any model is loaded
    if args.backend == "vllm" and state.num_processes > 1:
        raise ValueError("the vLLM backend runs as one process that uses its GPUs itself: start tpb score without "
                         "accelerate launch or torchrun")
    source = DatasetSource(args.dataset, args.config, args.split) if args.dataset else FolderSource(args.images, args.poems)
    extra = {k: v for k, v in (("device", args.device), ("max_pixels", args.max_pixels),
                               ("max_new_tokens", args.max_new_tokens)) if v is not None}
    evaluator = load_evaluator(args.evaluator, model=args.model, adapter=args.adapter, backend=args.backend, **extra)
    if evaluator.random_weights and state.is_main_process:
        print(RANDOM_WEIGHTS_BANNER, file=sys.stderr)
    summary = score_to_jsonl(evaluator, source, args.out, batch_size=args.batch_size, limit=args.limit,
                             num_workers=args.num_workers, progress=not args.quiet)
    if summary.num_processes > 1:
        print(f"process {summary.process_index} of {summary.num_processes} on {evaluator.device}: "
              f"scored {summary.process_scored}", file=sys.stderr)
    if not summary.main_process:
        return
    retry = (f", {summary.retryable} of them in the model: run again to retry them" if summary.retryable else "")
    print(f"{summary.out}: {summary.scored} scored now ({summary.failed} failed{retry}), "
          f"{summary.skipped} already there, {summary.total} in the source")
    if evaluator.random_weights:
        print("These results come from random weights: they test the pipeline and measure nothing.")


def _agree(args: argparse.Namespace) -> None:
    import json

    from .evaluation import agree, format_table

    result = agree(args.dataset, args.scores, split=args.split, n_bootstrap=args.bootstrap, seed=args.seed,
                   config=args.config)
    print(format_table(result))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"\nWrote {args.out}")


def _report(args: argparse.Namespace) -> None:
    from .report import build_report, write_report

    out = write_report(build_report(args.dataset, args.scores or [], split=args.split, n_bootstrap=args.bootstrap,
                                    seed=args.seed), args.out)
    print(f"Wrote {out / 'report.md'}, {out / 'report.html'}, {out / 'numbers.json'} and {out / 'figures'}/")


def _model_card(args: argparse.Namespace) -> None:
    import json

    from .model_card import render_model_card

    agree = json.loads(args.agree.read_text(encoding="utf-8"))
    card = render_model_card(agree, base_model=args.base_model, adapter_ref=args.adapter, model_name=args.name,
                             dataset=args.dataset, license=args.license, recipe=args.recipe)
    out = args.out or Path(args.adapter) / "README.md"
    out.write_text(card, encoding="utf-8")
    print(f"Wrote {out}")


def _publish(args: argparse.Namespace) -> None:
    from .publish import PLACEHOLDER_ORG, publish, push

    org = args.push or args.org
    written = publish(args.out, org=org, dataset=args.dataset, adapter=args.adapter, agree=args.agree,
                      base_model=args.base_model)
    for name, path in written.items():
        print(f"{name:<8} {path}")
    if args.push:
        for name, url in push(written, org, private=args.private or None).items():
            print(f"Pushed {name}: {url}")
    elif org == PLACEHOLDER_ORG:
        print(f"The cards name the repos {PLACEHOLDER_ORG}/…: give --org ORG (or --push ORG) for the real ids.")


def _tiny_models(args: argparse.Namespace) -> None:
    from .tiny import build_tiny_models

    for name, path in build_tiny_models(args.out, overwrite=args.overwrite).items():
        print(f"{name:<13} {path}")
    print("Random weights: use these to run the pipeline offline, never to measure anything.")


RANDOM_WEIGHTS_BANNER = ("NOTE: this model has random weights (a tiny test model). The scores test the "
                         "pipeline and mean nothing.")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tpb", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__import__('tangpoetrybench').__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("demo-release", help="write a synthetic raw release (labelled synthetic)")
    p.add_argument("out", type=Path)
    p.add_argument("--poems", type=int, default=None, help="use the first N poems (default: all)")
    p.add_argument("--poems-file", type=Path, default=None,
                   help="a SPEC poems file (default: the poems bundled with the package)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--size", type=int, default=512, help="image side in pixels")
    p.add_argument("--overwrite", action="store_true")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_demo_release)

    p = sub.add_parser("build", help="validate, QC and aggregate a raw release into a dataset folder")
    p.add_argument("raw", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--no-qc", action="store_true", help="keep every rating")
    defaults = QCConfig()
    p.add_argument("--qc-min-seconds", type=_number_or_off(float), default=defaults.min_seconds,
                   help="drop ratings faster than this (default %(default)s; 'off' disables)")
    p.add_argument("--qc-straightline-min", type=_number_or_off(int), default=defaults.straightline_min_ratings,
                   help="straight-lining: minimum ratings of a rater (default %(default)s; 'off')")
    p.add_argument("--qc-phase1-min-answers", type=_number_or_off(int), default=defaults.phase1_min_answers,
                   help="Phase-1 floor: minimum answers of a rater (default %(default)s; 'off')")
    p.add_argument("--qc-phase1-min-accuracy", type=_number_or_off(float), default=defaults.phase1_min_accuracy,
                   help="Phase-1 floor: minimum accuracy (default %(default)s; 'off')")
    p.add_argument("--qc-no-consistency", action="store_true", help="turn off the consistency rule")
    p.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_IMAGE_PIXELS)
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")
    p.add_argument("--push", metavar="ORG/NAME", help="upload the built folder to the Hub as a dataset repo")
    p.add_argument("--private", action="store_true",
                   help="with --push: create a private repo (default: the owner's default visibility)")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=_build)

    p = sub.add_parser("score", help="score images with PAE or a baseline, to resumable JSON Lines")
    p.add_argument("--dataset", help="a built dataset folder or Hub id")
    p.add_argument("--config", default="images", help="with --dataset (default %(default)s)")
    p.add_argument("--split", default="test", help="with --dataset (default %(default)s)")
    p.add_argument("--images", type=Path, help="a folder of <poem_id>.png or <generator>/<poem_id>.png")
    p.add_argument("--poems", type=Path, help="with --images: a SPEC poems file")
    p.add_argument("--evaluator", required=True, choices=["pae", "clipscore", "blipscore", "vqascore"])
    p.add_argument("--model", help="Hub id or local folder (default: the evaluator's checkpoint)")
    p.add_argument("--adapter", help="PAE's LoRA adapter: Hub id or local folder")
    p.add_argument("--backend", default="transformers", choices=["transformers", "vllm"])
    p.add_argument("--batch-size", type=int, help="images per batch (default 8; vLLM takes chunks of at least 256)")
    p.add_argument("--num-workers", type=int,
                   help="processes that decode and prepare batches while the model scores (default: up to 4 beside "
                        "a GPU, 0 on the CPU)")
    p.add_argument("--limit", type=int, help="score only the first N items of the source")
    p.add_argument("--device", help="e.g. cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--max-pixels", type=int, help="shrink larger images to this many pixels (default 1024×1024)")
    p.add_argument("--max-new-tokens", type=int, help="PAE's answer length limit (default 256)")
    p.add_argument("--out", type=Path, required=True, help="results, JSON Lines; an existing file is resumed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=_score)

    p = sub.add_parser("agree", help="agreement of scores with the human ratings, with intervals and noise floor")
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id")
    p.add_argument("--scores", type=Path, required=True, help="results of one evaluator (tpb score)")
    p.add_argument("--config", default="images", choices=["images", "unseen_generator", "song_ci"],
                   help="the held-out poems (images, default), or a generalization test (unseen_generator, song_ci); "
                        "the rubric follows the poems' tradition")
    p.add_argument("--split", default="test")
    p.add_argument("--bootstrap", type=int, default=10_000, help="resamples over poems (0: no intervals)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, help="write every figure as JSON here")
    p.set_defaults(func=_agree)

    p = sub.add_parser("report", help="the paper's human-data analysis of a built dataset, as Markdown, HTML and JSON")
    p.add_argument("--dataset", required=True, help="a built dataset folder or Hub id")
    p.add_argument("--out", type=Path, required=True, help="the report folder")
    p.add_argument("--scores", type=Path, nargs="*", help="results of evaluators (tpb score), one file each: Table 4")
    p.add_argument("--split", default="test", help="the split the scores cover (default %(default)s)")
    p.add_argument("--bootstrap", type=int, default=10_000)
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(func=_report)

    p = sub.add_parser("model-card", help="write a trained adapter's model card from tpb agree results")
    p.add_argument("--agree", type=Path, required=True, help="the JSON of tpb agree --out on the test split")
    p.add_argument("--adapter", required=True, help="the adapter folder (the card goes to its README.md) or Hub id")
    p.add_argument("--base-model", default="Qwen/Qwen3-VL-8B-Instruct")
    p.add_argument("--name", default="PAE")
    p.add_argument("--dataset", help="the dataset's Hub id (default: as in the agree results)")
    p.add_argument("--license", default="apache-2.0")
    p.add_argument("--recipe", help="a line on this run's settings")
    p.add_argument("--out", type=Path, help="default: ADAPTER/README.md")
    p.set_defaults(func=_model_card)

    p = sub.add_parser("publish", help="write the Hub repos (dataset, model, metric, Space), each self-contained")
    p.add_argument("out", type=Path, help="a folder: OUT/dataset, OUT/model, OUT/metric, OUT/space")
    p.add_argument("--dataset", type=Path, help="a dataset folder made by tpb build")
    p.add_argument("--adapter", type=Path, help="a trained PAE adapter folder")
    p.add_argument("--agree", type=Path, help="with --adapter: tpb agree --out results for its model card")
    p.add_argument("--base-model", default="Qwen/Qwen3-VL-8B-Instruct")
    p.add_argument("--org", default="ORG", help="the Hub owner the cards name (default: a placeholder)")
    p.add_argument("--push", metavar="ORG", help="upload each folder to its repo under ORG (needs `hf auth login`)")
    p.add_argument("--private", action="store_true",
                   help="with --push: private repos (default: the owner's default visibility)")
    p.set_defaults(func=_publish)

    p = sub.add_parser("tiny-models", help="build tiny random-weight models for offline smoke runs")
    p.add_argument("out", type=Path)
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=_tiny_models)

    p = sub.add_parser("convert-poems", help="convert chinese-poetry JSONL (tang300, songci) to a SPEC poems file")
    p.add_argument("sources", type=Path, nargs="+")
    p.add_argument("out", type=Path)
    p.set_defaults(func=_convert_poems)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        args.func(args)
    except (DataError, FileExistsError, ValueError, ImportError, OSError, SystematicFailure) as exc:  # OSError: a model that cannot be loaded
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
