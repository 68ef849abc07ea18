"""PAE on Ray Data's vLLM engine stage, on a GPU: `tpb score --engine ray --backend vllm`'s path end to end (Ray Data's
multimodal, chat-template, tokenizer, vLLM engine and detokenizer stages between PAE's requests and its records), on
synthetic images (flat colours), one worker of one GPU.

    python benchmarks/ray_vllm_check.py [--images 64] [--out ray_vllm_check.json]          # the tiny model, a LoRA
    python benchmarks/ray_vllm_check.py --full [--images 256] [--out ray_vllm_full.json]     # the 8B architecture

Default: the tiny random-weight Qwen3-VL with a fresh random LoRA adapter on its language model's attention (peft,
safetensors), asked for the readout: the plumbing — every image one record, every answer held to the rubric's JSON
schema (so every answer reads), the LoRA request taken, the readout from the stage's log-probabilities. `--full`: the
Qwen3-VL-8B architecture with vLLM's dummy (random) weights — nothing downloaded — decoding: images/s on one GPU, the
figure docs/scale.md plans a million images with. Random weights measure throughput, never a judge.

It needs vLLM and Ray Data (`pip install "ray[data]" vllm`), which the CPU machines lack; without them it says so and
exits 0, so `benchmarks/gpu_checks.sh` goes on.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import tempfile
import time
from pathlib import Path

from PIL import Image

from _models import QWEN3_VL_8B, tiny_processor
from tangpoetrybench.judging.ray_scoring import RayEngine
from tangpoetrybench.judging.scoring import FolderSource
from tangpoetrybench.poems import sample_poems, write_poems


def synthetic(root: Path, n: int, size: int) -> FolderSource:
    poems = sample_poems()
    for i in range(n):
        folder = root / f"synthetic-{i // len(poems)}"
        folder.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (size, size), (i * 37 % 256, 90, 200)).save(folder / f"{poems[i % len(poems)].poem_id}.png")
    poems_file = root / "poems.jsonl"
    write_poems(poems, poems_file)
    return FolderSource(root, poems_file)


def random_adapter(model: Path, folder: Path) -> Path:
    """A LoRA adapter of random weights (B too, so it changes the answers) on the language model's q and v."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    torch.manual_seed(0)
    peft_model = get_peft_model(AutoModelForImageTextToText.from_pretrained(model),
                                LoraConfig(r=8, target_modules=["q_proj", "v_proj"], exclude_modules=r".*\.visual\..*",
                                           init_lora_weights=False))
    peft_model.save_pretrained(folder)
    return folder


def full_size(folder: Path) -> Path:
    """The Qwen3-VL-8B architecture's config with the tiny model's processor: vLLM makes dummy weights for it."""
    from transformers import Qwen3VLConfig

    processor, _ = tiny_processor()
    ids = processor.tokenizer.convert_tokens_to_ids(["<|image_pad|>", "<|video_pad|>", "<|vision_start|>",
                                                      "<|vision_end|>"])
    Qwen3VLConfig(**QWEN3_VL_8B, image_token_id=ids[0], video_token_id=ids[1], vision_start_token_id=ids[2],
                  vision_end_token_id=ids[3]).save_pretrained(folder)
    processor.save_pretrained(folder)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="the 8B architecture (dummy weights), decoding")
    parser.add_argument("--images", type=int, default=64)
    parser.add_argument("--pixels", type=int, default=512, help="the synthetic images' side")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    missing = [m for m in ("vllm", "ray.data") if importlib.util.find_spec(m.split(".")[0]) is None]
    if missing:
        print(f"skipped: {', '.join(missing)} not installed (pip install 'ray[data]' vllm)")
        return

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = synthetic(tmp / "images", args.images, args.pixels)
        engine = RayEngine(workers=1, worker_gpus=1)
        if args.full:
            options = dict(model=str(full_size(tmp / "qwen3-vl-8b")))
        else:
            _, tiny = tiny_processor()
            options = dict(model=str(tiny), adapter=str(random_adapter(tiny, tmp / "adapter")), readout="expected")
        pae = engine.load_evaluator("pae", backend="vllm", **options)
        if args.full:  # vLLM's random weights: the config alone, nothing to download or write
            pae = dataclasses.replace(pae, engine_options={"load_format": "dummy"})
        start = time.perf_counter()
        summary = engine.score_to_jsonl(pae, source, tmp / "scores.jsonl", progress=False)
        wall = time.perf_counter() - start
        rows = [json.loads(line) for line in (tmp / "scores.jsonl").read_text().splitlines()]
    statuses = {s: sum(r["parse_status"] == s for r in rows) for s in ("ok", "repaired", "failed")}
    result = {"model": "Qwen3-VL-8B architecture, dummy weights" if args.full else "tiny Qwen3-VL + random LoRA",
              "images": len(rows), "pixels": args.pixels, "wall_s": round(wall, 1),
              "images_per_s": round(len(rows) / wall, 2), "statuses": statuses, "scored": summary.scored,
              "readout_from_logprobs": sum(bool(r.get("readout")) for r in rows),
              "errors": sorted({r["error"] for r in rows if r.get("error")})[:5]}
    print(json.dumps(result, indent=2))
    assert len(rows) == args.images == len({r["image_id"] for r in rows}), "every image once"
    assert statuses["ok"] == len(rows), "structured output holds every answer to the schema"
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
