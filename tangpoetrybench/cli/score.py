"""`tpb score`: score images with PAE, a served or hosted judge, a baseline or the OCR, to JSON Lines that a rerun
resumes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .base import POEMS_FILE, add_max_image_pixels

SUMMARY = 'score images with PAE, a served or hosted judge, a baseline or the OCR, to JSON Lines that a rerun resumes'
EXAMPLE = ('tpb score --dataset sample/dataset --evaluator pae --adapter ORG/PAE --out scores.jsonl\n'
           'tpb score --dataset sample/dataset --evaluator api --model pae --base-url http://127.0.0.1:8000/v1 '
           '--concurrency 16 --out served.jsonl\n'
           'tpb score --images sample/raw/images --poems sample/raw/poems.jsonl --evaluator text-ocr --out ocr.jsonl')


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", help="a built dataset folder or Hub id")
    p.add_argument("--config", default="images", help="with --dataset: images, unseen_generator or song_ci")
    p.add_argument("--split", default="test", help="with --dataset: train, validation or test")
    p.add_argument("--images", type=Path, help="instead of --dataset: a folder of <poem_id>.png or <generator>/<poem_id>.png")
    p.add_argument("--poems", type=Path, help="with --images: " + POEMS_FILE)
    p.add_argument("--evaluator", required=True,
                   choices=["pae", "api", "clipscore", "blipscore", "vqascore", "text-ocr", "recognize"],
                   help="pae (the ten rubric scores), api (PAE's question to a served or hosted model), a scalar "
                        "baseline, text-ocr (text integrity with the OCR's evidence; CPU, offline), or recognize "
                        "(which of four candidate poems the image shows; served with --base-url)")
    p.add_argument("--model", help="Hub id or local folder (default: the evaluator's checkpoint); for api, required: "
                                   "the model name the server knows")
    p.add_argument("--adapter", help="PAE's LoRA adapter, Hub id or local folder (without it: zero-shot)")
    p.add_argument("--backend", default="transformers", choices=["transformers", "vllm"],
                   help="vllm: its own environment and a GPU")
    p.add_argument("--batch-size", type=int, help="images per batch (default: 8; vLLM takes chunks of at least 256, "
                                                "api batches of at least 4 × --concurrency)")
    p.add_argument("--num-workers", type=int,
                   help="processes that decode and prepare batches while the model scores (default: up to 4 beside "
                        "a GPU, 0 on the CPU)")
    p.add_argument("--limit", type=int, help="score only the first N images (default: all)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 ... (default: the GPU when there is one)")
    p.add_argument("--max-pixels", type=int, help="shrink larger images to this many pixels (default: 1024×1024)")
    add_max_image_pixels(p)
    p.add_argument("--max-new-tokens", type=int, help="PAE's answer length limit (default: 256)")
    p.add_argument("--constrained", action="store_true",
                   help="PAE on transformers: decode only answers in the rubric's JSON form, so every answer parses "
                        "(the vllm backend always does)")
    p.add_argument("--question", choices=["t2v_metrics", "poem"],
                   help="vqascore: t2v_metrics' question, comparable with published VQAScore, or this project's own "
                        "(title, author and full text) (default: t2v_metrics)")
    p.add_argument("--explain", action="store_true",
                   help="pae, api: answer the rubric with a one-sentence reason per dimension too (kept in each "
                        "record's reasons; the default answer length grows to 1536 tokens)")
    p.add_argument("--reason-language", choices=["poem", "en"],
                   help="with --explain: reasons in the poem's language (Chinese; the default) or in English")
    p.add_argument("--readout", choices=["decode", "expected"],
                   help="pae, api: expected = read each dimension's score from the anchors' probabilities (expected "
                        "score, distribution, confidence) instead of decoding the answer (default: decode)")
    p.add_argument("--quantize", choices=["8bit", "4bit"],
                   help="pae on transformers: load the language model quantised by bitsandbytes (a CUDA GPU or the CPU)")
    p.add_argument("--base-url", help="api: an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (default: "
                                      "Hugging Face Inference Providers route --model)")
    p.add_argument("--api-key-env", metavar="NAME",
                   help="api: the environment variable that holds the API key; the key itself is never an argument "
                        "(default: HF_TOKEN)")
    p.add_argument("--concurrency", type=int, help="api: requests in flight at once (default: 8)")
    p.add_argument("--timeout", type=float, help="api: seconds a request may take before it is retried (default: 120)")
    p.add_argument("--retries", type=int,
                   help="api: retries of a request on 429, 5xx, timeouts and lost connections (default: 5)")
    p.add_argument("--repair", type=int, choices=[0, 1],
                   help="api: repair rounds for an answer that does not parse: asked again in the same conversation "
                        "for the JSON alone (default: 1; 0 turns it off)")
    p.add_argument("--price-in", type=float, metavar="USD",
                   help="api: USD per million prompt tokens, for a cost estimate at the end (default: none)")
    p.add_argument("--price-out", type=float, metavar="USD",
                   help="api: USD per million completion tokens, for the cost estimate (default: none)")
    p.add_argument("--out", type=Path, required=True, help="the results file (JSON Lines); an existing one is resumed")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--candidates", type=Path, metavar="FILE",
                   help="recognize: each poem's four candidates (tpb distractors POEMS --out FILE)")
    p.add_argument("--orders", default="rotations", choices=["rotations", "all"],
                   help="recognize: ask in the four cyclic rotations of the candidates, or in all 24 orders")


def run(args: argparse.Namespace) -> None:
    from ..judging.evaluators import load_evaluator
    from ..models import process_state
    from ..judging.scoring import score_to_jsonl, source_of

    if args.evaluator != "api" and (args.price_in is not None or args.price_out is not None):
        raise ValueError("--price-in and --price-out apply to the api evaluator only")
    if args.reason_language and not args.explain:
        raise ValueError("--reason-language applies with --explain only")
    source = source_of(args.dataset, args.images, args.poems, args.config, args.split, args.max_image_pixels)
    state = process_state()  # under a launcher: the process group, before any model is loaded
    if args.backend == "vllm" and state.num_processes > 1:
        raise ValueError("the vLLM backend runs as one process that uses its GPUs itself: start tpb score without "
                         "accelerate launch or torchrun")
    extra = {k: v for k, v in (("device", args.device), ("max_pixels", args.max_pixels),
                               ("max_new_tokens", args.max_new_tokens), ("base_url", args.base_url),
                               ("api_key_env", args.api_key_env), ("concurrency", args.concurrency),
                               ("timeout", args.timeout), ("retries", args.retries), ("repair", args.repair))
             if v is not None}
    if args.constrained:
        extra["constrained"] = True
    if args.question:
        extra["question"] = args.question
    if (args.candidates is not None or args.orders != "rotations") and args.evaluator != "recognize":
        raise ValueError("--candidates and --orders apply to the recognize evaluator only")
    if args.evaluator == "recognize":
        extra.update(candidates=args.candidates, orders=args.orders)
    if args.explain:
        extra["explain"] = args.reason_language or "poem"
    extra.update({k: v for k, v in (("readout", args.readout), ("quantize", args.quantize)) if v is not None})
    evaluator = load_evaluator(args.evaluator, model=args.model, adapter=args.adapter, backend=args.backend, **extra)
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
    if args.evaluator == "api" or args.base_url:
        from ..judging.evaluators.api import usage_line

        usage = usage_line(summary.prompt_tokens, summary.completion_tokens, args.price_in, args.price_out)
        print(f"{evaluator.model_name}: {usage} in this run")
        print(f"repair round: {summary.repair_rounds} of the {summary.scored} answers did not parse and were asked "
              f"again, {summary.repair_parsed} of them then parsed" if evaluator.repair else
              "repair round: off (--repair 0)")
    if summary.truncated:
        print(f"warning: the text encoder saw only the start of {summary.truncated} of the {summary.scored} poems "
              f"(its token limit): each record's evidence.text_seen says how much")
    if evaluator.random_weights:
        from ..stats.agree import RANDOM_WEIGHTS_NOTE

        print(RANDOM_WEIGHTS_NOTE)
    if summary.scored and summary.failed == summary.scored and not summary.retryable:
        print(every_answer_failed(summary.failed, args), file=sys.stderr)


def every_answer_failed(n: int, args: argparse.Namespace) -> str:
    """What to try when no answer of a run could be read (the records say why, in their `error` field)."""
    tries = ["--constrained (decoding in the rubric's JSON form)"] if args.evaluator == "pae" and not args.constrained else []
    tries += ["a PAE adapter (--adapter)"] if args.evaluator == "pae" and not args.adapter else []
    tries += ["a larger --max-new-tokens (an answer cut short does not parse)"]
    return (f"WARNING: all {n} answers of this run failed (see their `error` in {args.out}): the model did not "
            f"answer in the rubric's form. Try {', or '.join(tries)}.")
