"""PAE with `--quantize 8bit|4bit` against the unquantised model (bf16 on a GPU, fp32 on the CPU) on the same
images, with bitsandbytes: the weights' memory, peak GPU memory, images/s of the readout, and how far the quantised
scores move from the unquantised ones (mean absolute difference of the expected scores, Pearson correlation of
quality). The Qwen3-VL-8B architecture with random bf16 weights is saved once to a temporary folder and loaded
from there as a checkpoint would be (random weights: the drift is a property of the arithmetic, not of PAE's
quality); `--smoke` the tiny test model on the CPU (the plumbing only).

    python benchmarks/quantize_check.py --out quantize_check.json [--images 32] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np
import torch
from PIL import Image

from _models import build_model, tiny_processor
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import ScoringItem
from tangpoetrybench.poems import sample_poems

SETTINGS = (None, "8bit", "4bit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--pixels", type=int, default=1024)
    parser.add_argument("--smoke", action="store_true", help="the tiny test model (on the CPU where no GPU is)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    processor, tiny = tiny_processor()
    poems = sample_poems()
    items = [ScoringItem(f"bench/{i}", Image.new("RGB", (args.pixels, args.pixels), (i * 37 % 256, 120, i * 11 % 256)),
                         poems[i % len(poems)]) for i in range(args.images)]
    figures = {"images": args.images, "batch_size": args.batch_size, "settings": {}}
    with tempfile.TemporaryDirectory() as folder:
        if args.smoke:
            folder = str(tiny)
        else:
            model = build_model(False, processor, tiny, device)
            model.save_pretrained(folder)
            processor.save_pretrained(folder)
            del model
            torch.cuda.empty_cache()
        reference = None
        for quantize in SETTINGS:
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            pae = load_evaluator("pae", model=folder, readout="expected", quantize=quantize, device=str(device))
            start = time.perf_counter()
            results = [r for s in range(0, len(items), args.batch_size) for r in pae.score(items[s:s + args.batch_size])]
            seconds = time.perf_counter() - start
            scores = np.array([[np.nan if v is None else v for v in r.scores.values()] for r in results], dtype=float)
            quality = np.array([np.nan if r.quality is None else r.quality for r in results], dtype=float)
            model = pae.backend.model
            row = {"images_per_s": len(items) / seconds, "weights_gib": model.get_memory_footprint() / 2**30,
                   "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None}
            if reference is None:
                reference = (scores, quality)
            else:
                both = ~np.isnan(quality) & ~np.isnan(reference[1])
                row["mean_abs_score_change"] = float(np.nanmean(np.abs(scores - reference[0])))
                row["quality_pearson_vs_unquantised"] = float(np.corrcoef(quality[both], reference[1][both])[0, 1])
            name = quantize or str(next(model.parameters()).dtype).removeprefix("torch.")
            figures["settings"][name] = row
            print(name, json.dumps(row), flush=True)
            del pae, model
            if device.type == "cuda":
                torch.cuda.empty_cache()
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
