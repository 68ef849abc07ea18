"""PAE scoring throughput (images/s) by batch size, with prefill and decode timed apart.

    python benchmarks/score_throughput.py                  # GPU: full-size Qwen3-VL-8B, random bf16 weights
    python benchmarks/score_throughput.py --end-to-end     # GPU: what `tpb score` gives, PNG files to JSONL
    python benchmarks/score_throughput.py --smoke          # CPU: the tiny test model, so CI keeps this working

The full-size model is the Qwen3-VL-8B-Instruct architecture (config below, public values) with random bf16
weights created on the GPU: no download. It is timed on exactly what `tpb score` runs: the real rubric
prompt from the prompt builder, one image per request (1024×1024 by default), left-padded batches and greedy
decoding, here forced to a fixed answer length so every batch size decodes the same number of tokens.
Text is tokenized with the tiny test tokenizer unless `--tokenizer` points at a local Qwen3-VL processor;
the script prints the prompt length it used. Random weights time the computation; they measure no quality.
Target (issue 3) on one H200: ≥ 8 images/s and ≥ 5× the images/s of batch size 1.

`--end-to-end` times `score_to_jsonl` itself: PNG files decoded from disk by the data-loader workers
(`--num-workers`), resized, run through the processor while the model generates, answers parsed and appended
to a JSONL file. Its images are noise, which compresses worst, so their decoding is a worst case.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from tangpoetrybench.models import chat_inputs
from tangpoetrybench.judging.backends.transformers import TransformersBackend
from tangpoetrybench.judging.registry import pae_on
from tangpoetrybench.poems import sample_poems, write_poems
from tangpoetrybench.judging.prompt import build_messages
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.judging.scoring import FolderSource, score_to_jsonl
from _models import build_model, tiny_processor

@dataclass
class Row:
    batch_size: int
    prompt_tokens: int  # per request, padded
    process_s: float  # chat template + image processor (CPU)
    prefill_s: float
    decode_s: float
    total_s: float
    images_per_s: float
    speedup: float = 1.0


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny model on the CPU (plumbing only)")
    p.add_argument("--batch-sizes", default=None, help="comma-separated (default 1,2,4,8,16,32,64; smoke 1,2,4)")
    p.add_argument("--answer-tokens", type=int, default=None, help="fixed answer length (default 120; smoke 8)")
    p.add_argument("--image-size", type=int, default=None, help="square image side (default 1024; smoke 256)")
    p.add_argument("--tokenizer", help="a local Qwen3-VL processor folder for realistic text lengths")
    p.add_argument("--repeats", type=int, default=2, help="timed runs per batch size (after one warm-up)")
    p.add_argument("--end-to-end", action="store_true", help="time tpb score's pipeline from PNG files on disk")
    p.add_argument("--images", type=int, default=None, help="end to end: images per batch size (default 4 × batch)")
    p.add_argument("--num-workers", type=int, default=None, help="end to end: preparing workers (default as tpb score)")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    return p.parse_args()


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def images(n: int, size: int) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)) for _ in range(n)]


def time_batch(model, processor, conversations, device, answer_tokens: int) -> tuple[float, float, float, int]:
    start = time.perf_counter()
    inputs = chat_inputs(processor, conversations).to(device)
    sync(device)
    t_process = time.perf_counter() - start
    with torch.inference_mode():
        start = time.perf_counter()
        model(**inputs, logits_to_keep=1)
        sync(device)
        t_prefill = time.perf_counter() - start
        start = time.perf_counter()
        model.generate(**inputs, max_new_tokens=answer_tokens, min_new_tokens=answer_tokens, do_sample=False,
                       pad_token_id=processor.tokenizer.pad_token_id)
        sync(device)
        t_generate = time.perf_counter() - start
    return t_process, t_prefill, t_generate, int(inputs["input_ids"].shape[1])


def main() -> None:
    args = parse_args()
    device = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    if not args.smoke and device.type != "cuda":
        raise SystemExit("the full-size benchmark needs a GPU; use --smoke on a CPU")
    batch_sizes = [int(b) for b in (args.batch_sizes or ("1,2,4" if args.smoke else "1,2,4,8,16,32,64")).split(",")]
    answer_tokens = args.answer_tokens or (8 if args.smoke else 120)
    size = args.image_size or (256 if args.smoke else 1024)

    processor, tiny = tiny_processor(args.tokenizer)
    model = build_model(args.smoke, processor, tiny, device)
    rubric, poems = load_rubric("tang"), [p for p in sample_poems() if p.tradition == "tang"]
    pictures = images(max(batch_sizes), size)
    conversations = [build_messages(poems[i % len(poems)], rubric, pictures[i]) for i in range(max(batch_sizes))]

    if args.end_to_end:
        return end_to_end(args, model, processor, device, batch_sizes, answer_tokens, size)
    rows: list[Row] = []
    for b in batch_sizes:
        time_batch(model, processor, conversations[:b], device, answer_tokens)  # warm-up
        runs = [time_batch(model, processor, conversations[:b], device, answer_tokens) for _ in range(args.repeats)]
        process, prefill, generate = (min(r[i] for r in runs) for i in range(3))
        total = process + generate
        rows.append(Row(b, runs[0][3], round(process, 3), round(prefill, 3), round(generate - prefill, 3),
                        round(total, 3), round(b / total, 2)))
        print(f"batch {b:>3}: {rows[-1].images_per_s:8.2f} images/s", flush=True)
    for row in rows:
        row.speedup = round(row.images_per_s / rows[0].images_per_s, 2)

    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"\nQwen3-VL {'tiny (random)' if args.smoke else '8B architecture, random bf16 weights'} on {name}, "
          f"{size}×{size} images, {answer_tokens} answer tokens, {time.strftime('%Y-%m-%d')}")
    print("| batch | prompt tokens | process s | prefill s | decode s | total s | images/s | × batch 1 |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r.batch_size} | {r.prompt_tokens} | {r.process_s} | {r.prefill_s} | {r.decode_s} | {r.total_s} "
              f"| {r.images_per_s} | {r.speedup} |")
    if args.out:
        args.out.write_text(json.dumps({"device": name, "smoke": args.smoke, "image_size": size,
                                        "answer_tokens": answer_tokens, "rows": [asdict(r) for r in rows]}, indent=1))


def end_to_end(args, model, processor, device, batch_sizes, answer_tokens: int, size: int) -> None:
    """images/s of `score_to_jsonl` over PNG files, per batch size: decode, resize, processor, generate, parse, write."""
    model.generation_config.min_new_tokens = answer_tokens  # every answer as long, whatever random weights say
    pae = pae_on(TransformersBackend.from_loaded(model, processor, model_name="random weights"),
                 max_new_tokens=answer_tokens)
    poems = [p for p in sample_poems() if p.tradition == "tang"]
    n = max(args.images or 4 * max(batch_sizes), max(batch_sizes))
    rows = []
    with tempfile.TemporaryDirectory(prefix="tpb-e2e-") as tmp:
        folder = Path(tmp) / "images"
        for i, picture in enumerate(images(n, size)):
            path = folder / f"g{i // len(poems)}" / f"{poems[i % len(poems)].poem_id}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            picture.save(path)
        write_poems(poems, Path(tmp) / "poems.jsonl")
        source = FolderSource(folder, Path(tmp) / "poems.jsonl")
        score_to_jsonl(pae, source, Path(tmp) / "warm-up.jsonl", batch_size=batch_sizes[0], limit=batch_sizes[0],
                       num_workers=args.num_workers, progress=False)
        for b in batch_sizes:
            start = time.perf_counter()
            summary = score_to_jsonl(pae, source, Path(tmp) / f"batch{b}.jsonl", batch_size=b,
                                     num_workers=args.num_workers, progress=False)
            sync(device)
            seconds = time.perf_counter() - start
            rows.append({"batch_size": b, "images": summary.scored, "seconds": round(seconds, 2),
                         "images_per_s": round(summary.scored / seconds, 2)})
            print(f"batch {b:>3}: {rows[-1]['images_per_s']:8.2f} images/s end to end", flush=True)
    workers = args.num_workers if args.num_workers is not None else "default"
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"\nEnd to end (PNG files → JSONL), {size}×{size} noise images, {answer_tokens} answer tokens, "
          f"{workers} workers, on {name}, {time.strftime('%Y-%m-%d')}")
    print("| batch | images | seconds | images/s |\n|---|---|---|---|")
    for r in rows:
        print(f"| {r['batch_size']} | {r['images']} | {r['seconds']} | {r['images_per_s']} |")
    if args.out:
        args.out.write_text(json.dumps({"device": name, "smoke": args.smoke, "end_to_end": True, "image_size": size,
                                        "answer_tokens": answer_tokens, "num_workers": args.num_workers,
                                        "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
