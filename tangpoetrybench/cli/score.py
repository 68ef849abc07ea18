"""`tpb score`: score images with PAE, a served or hosted judge, a baseline or the OCR, to JSON Lines that a rerun
resumes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .base import (POEMS_FILE, add_dataset_arguments, add_judge_options, add_max_image_pixels, judge_options,
                   judge_rubric, what_to_try)
from ..numeric import counted

SUMMARY = 'score images with PAE, a served or hosted judge, a baseline or the OCR, to JSON Lines that a rerun resumes'
EXAMPLE = ('tpb score --dataset sample/dataset --evaluator pae --adapter ORG/PAE --out scores.jsonl\n'
           'tpb score --dataset sample/dataset --evaluator api --model pae --base-url http://127.0.0.1:8000/v1 '
           '--concurrency 16 --out served.jsonl\n'
           'tpb score --images sample/raw/images --poems sample/raw/poems.jsonl --evaluator text-ocr --out ocr.jsonl\n'
           'tpb score --images haiku/images --poems haiku/poems.jsonl --rubric haiku.yaml --evaluator pae --out h.jsonl\n'
           'tpb score --engine ray --address auto --workers 8 --worker-gpus 1 --dataset ORG/DATASET --evaluator pae '
           '--adapter ORG/PAE --out scores.jsonl')


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..judging.registry import evaluator_names, specs

    add_dataset_arguments(p, config="with --dataset", split="with --dataset")
    p.add_argument("--images", type=Path,
                   help="instead of --dataset: a folder of <poem_id>.png or <generator>/<poem_id>.png")
    p.add_argument("--poems", type=Path, help="with --images: " + POEMS_FILE)
    p.add_argument("--generator", help="with a flat --images folder (<poem_id>.png): the generator that made them, so "
                                       "that each image_id is GENERATOR/POEM_ID, as the leaderboard needs")
    names = evaluator_names("pointwise")
    p.add_argument("--evaluator", required=True, choices=names, metavar="NAME",
                   help="; ".join(f"{n}: {specs()[n].summary}" for n in names))
    p.add_argument("--out", type=Path, required=True, help="the results file (JSON Lines); an existing one is resumed")
    p.add_argument("--batch-size", type=int, help="images per batch (default: 8; vLLM takes chunks of at least 256, "
                                                "a served judge batches of at least 4 × --concurrency)")
    p.add_argument("--num-workers", type=int,
                   help="processes that decode and prepare batches while the model scores (default: up to 4 beside "
                        "a GPU, 0 on the CPU)")
    p.add_argument("--limit", type=int, help="score only the first N images (default: all)")
    add_max_image_pixels(p)
    p.add_argument("--price-in", type=float, metavar="USD",
                   help="a served judge: USD per million prompt tokens, for a cost estimate at the end (default: none)")
    p.add_argument("--price-out", type=float, metavar="USD",
                   help="a served judge: USD per million completion tokens, for the cost estimate (default: none)")
    p.add_argument("--calibration", type=Path, metavar="FILE", help="a calibration of this judge as set up here (tpb "
                   "calibrate --out): each record gets its intervals, prediction sets and calibrated confidences")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    ray = p.add_argument_group("engine options (docs/scale.md)")
    ray.add_argument("--engine", choices=("local", "ray"), default="local", help="local: this machine (or each "
                     "process of accelerate launch); ray: a Ray cluster, one worker per model copy")
    ray.add_argument("--address", help="ray: a running cluster to join (auto, HOST:PORT, ray://HOST:10001; default: "
                     "start Ray on this machine)")
    ray.add_argument("--workers", type=int, default=1, help="ray: workers, each with its own copy of the evaluator; "
                     "PAE on --backend vllm: vLLM replicas")
    ray.add_argument("--worker-gpus", type=float, default=0.0, help="ray: GPUs per worker (0: the CPU)")
    ray.add_argument("--worker-cpus", type=float, default=1.0, help="ray: CPUs per worker")
    add_judge_options(p)


def run(args: argparse.Namespace) -> None:
    from ..judging.calibrated import Calibrated, load_calibration
    from ..judging.evaluators import load_evaluator
    from ..judging.registry import asks_server, chosen_backend, evaluator_spec
    from ..judging.scoring import score_to_jsonl, source_of
    from ..models import process_state

    served = asks_server(args.evaluator, judge_options(args))
    if not served and (args.price_in is not None or args.price_out is not None):
        raise ValueError("--price-in and --price-out apply to a served judge only")
    source = source_of(args.dataset, args.images, args.poems, args.config, args.split, args.generator,
                       args.max_image_pixels)
    if getattr(source, "names_no_generator", False):
        print(f"note: {args.images} holds images directly (<poem_id>.png), so their ids name no generator and the "
              "leaderboard cannot rank them: give --generator NAME for that", file=sys.stderr)
    state = process_state()  # under a launcher: the process group, before any model is loaded
    backend = chosen_backend(args.evaluator, judge_options(args))
    if backend is not None and backend.one_process and state.num_processes > 1:
        raise ValueError(f"the {backend.name} backend runs as one process that uses its GPUs itself: start tpb score "
                         "without accelerate launch or torchrun")
    calibration = load_calibration(args.calibration) if args.calibration else None  # read before a model loads
    options = judge_options(args)
    if "rubric" in evaluator_spec(args.evaluator).options:  # the dataset's rubric where it is not a bundled one
        options["rubric"] = judge_rubric(args.rubric, args.dataset, args.config, None if args.dataset else args.poems)
    if args.engine == "ray":
        from ..judging.ray_scoring import RayEngine

        if state.num_processes > 1 or args.num_workers is not None:
            raise ValueError("--engine ray places its workers itself: give --workers, not accelerate launch, torchrun "
                             "or --num-workers")
        engine = RayEngine(args.address, args.workers, args.worker_gpus, args.worker_cpus)
        evaluator = engine.load_evaluator(args.evaluator, calibration, **options)
        summary = engine.score_to_jsonl(evaluator, source, args.out, batch_size=args.batch_size, limit=args.limit,
                                        progress=not args.quiet)
    else:
        if args.address or (args.workers, args.worker_gpus, args.worker_cpus) != (1, 0.0, 1.0):
            raise ValueError("--address, --workers, --worker-gpus and --worker-cpus apply to --engine ray")
        evaluator = load_evaluator(args.evaluator, **options)
        if calibration is not None:
            evaluator = Calibrated(evaluator, calibration)
        summary = score_to_jsonl(evaluator, source, args.out, batch_size=args.batch_size, limit=args.limit,
                                 num_workers=args.num_workers, progress=not args.quiet)
    if summary.num_processes > 1:
        print(f"process {summary.process_index} of {summary.num_processes} on {evaluator.device}: "
              f"scored {summary.process_scored}", file=sys.stderr)
    if not summary.main_process:
        return
    retry = (f", {summary.retryable} of them in the model: run again to retry them" if summary.retryable else "")
    weights = " (random weights, a tiny test model: the scores test the pipeline and measure nothing)" \
        if evaluator.random_weights else ""
    print(f"{summary.out}: {summary.scored} scored now ({summary.failed} failed{retry}), "
          f"{summary.skipped} already there, {summary.total} in the source{weights}")
    if served:
        from ..judging.backends.served import usage_line

        usage = usage_line(summary.prompt_tokens, summary.completion_tokens, args.price_in, args.price_out)
        print(f"{evaluator.model_name}: {usage} in this run")
    if getattr(evaluator, "repair", 0):
        print(f"repair round: {summary.repair_rounds} of the {counted(summary.scored, 'answer')} did not read "
              f"and were asked "
              f"again, {summary.repair_parsed} of them then read")
    elif served:
        print("repair round: off (--repair 0)")
    if summary.readout_fallbacks:
        print(f"warning: the readout fell back to decoding for {summary.readout_fallbacks} of the {summary.scored} "
              "answers (the server returned no usable logprobs): their scores are decoded, without confidences; "
              "each record's error says so")
    if summary.truncated:
        print(f"warning: the text encoder saw only the start of {summary.truncated} of the "
              f"{counted(summary.scored, 'poem')} "
              f"(its token limit): each record's evidence.text_seen says how much")
    if summary.scored and summary.failed == summary.scored and not summary.retryable:
        from ..judging.failures import every_answer_failed

        print(every_answer_failed(summary.failed, summary.failed_answers, str(args.out), what_to_try(args),
                                  evaluator.random_weights), file=sys.stderr)
