"""SFT training-step throughput of PAE: tokens/s, peak memory and model FLOPs utilisation (MFU).

    python benchmarks/train_step.py                 # GPU: full-size Qwen3-VL-8B architecture, random bf16 weights
    python benchmarks/train_step.py --smoke         # CPU: the tiny test model, so CI keeps this working

One step is what `training/sft.py` does per batch: the paper's LoRA (r 16 on the language model's linear
layers, vision frozen), gradient checkpointing on a GPU, a forward and backward pass over real SFT rows
(rubric prompt, one image, the JSON answer) and an AdamW update.

FLOPs per token, with N the language model's frozen matmul weights and A the adapter's parameters: a frozen
weight costs 2 in the forward pass and 2 for the activation gradient, and gets no weight gradient, so the model
FLOPs are 4N + 6A (not the 6N of full fine-tuning, which would overstate MFU by half). Activation checkpointing
recomputes the forward pass: the hardware FLOPs are 6N + 8A. MFU and HFU divide these by the step time and the
GPU's dense bf16 peak (`--peak-tflops`, default from the device name); the frozen vision encoder's forward
pass is not counted in either. Target (issue 5) on one GPU: ≥ 35 % MFU (4N count). Random weights time the
computation; they measure no quality.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from peft import LoraConfig, get_peft_model
from PIL import Image

from tangpoetrybench.poems import sample_poems
from tangpoetrybench.judging.prompt import build_messages, format_answer
from tangpoetrybench.rubric import load_rubric

from _models import build_model, language_model_parameters, tiny_processor

LORA = dict(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear", exclude_modules=r".*\.visual\..*",
            task_type="CAUSAL_LM")

PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="tiny model on the CPU (plumbing only)")
    p.add_argument("--batch-size", type=int, default=None, help="per step (default 2, as per device in the recipe)")
    p.add_argument("--image-size", type=int, default=None, help="square image side (default 1024; smoke 128)")
    p.add_argument("--steps", type=int, default=None, help="timed steps after two warm-up steps (default 5; smoke 2)")
    p.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak")
    p.add_argument("--tokenizer", help="a local Qwen3-VL processor folder for realistic text lengths")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    return p.parse_args()


def batch(processor, size: int, n: int, device):
    rubric, poems = load_rubric("tang"), [p for p in sample_poems() if p.tradition == "tang"]
    rng = np.random.default_rng(0)
    answer = format_answer(dict.fromkeys(rubric.keys, 0.67), rubric)
    conversations = [
        build_messages(poems[i % len(poems)], rubric,
                       Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)))
        + [{"role": "assistant", "content": [{"type": "text", "text": answer}]}]
        for i in range(n)
    ]
    processor.tokenizer.padding_side = "right"
    inputs = processor.apply_chat_template(conversations, tokenize=True, return_dict=True, return_tensors="pt",
                                           processor_kwargs={"padding": True}).to(device)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    return inputs, labels


def flops_per_token(frozen: int, adapter: int, recompute: bool) -> tuple[int, int]:
    """(model, hardware) FLOPs per token of a LoRA step: 4 per frozen weight (forward and activation gradient, no
    weight gradient) and 6 per adapter parameter; recomputing the forward pass adds 2 per weight of either kind."""
    model = 4 * frozen + 6 * adapter
    return model, model + (2 * (frozen + adapter) if recompute else 0)


def main() -> None:
    args = parse_args()
    device = torch.device("cpu" if args.smoke or not torch.cuda.is_available() else "cuda")
    if not args.smoke and device.type != "cuda":
        raise SystemExit("the full-size benchmark needs a GPU; use --smoke on a CPU")
    size = args.image_size or (128 if args.smoke else 1024)
    steps = args.steps or (2 if args.smoke else 5)
    batch_size = args.batch_size or 2

    processor, tiny = tiny_processor(args.tokenizer)
    model = build_model(args.smoke, processor, tiny, device)
    model = get_peft_model(model, LoraConfig(**LORA))
    checkpointing = device.type == "cuda"
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=5e-6, weight_decay=0.05)
    inputs, labels = batch(processor, size, batch_size, device)
    tokens = int(inputs["attention_mask"].sum())

    def step() -> float:
        start = time.perf_counter()
        loss = model(**inputs, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    step(), step()  # warm-up
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    seconds = min(step() for _ in range(steps))
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    peak = args.peak_tflops or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in name), None)
    frozen = language_model_parameters() if not args.smoke else sum(
        m.weight.numel() for n, m in model.named_modules()
        if isinstance(m, torch.nn.Linear) and ".visual." not in f".{n}." and "lora_" not in n)
    adapter = sum(p.numel() for p in model.parameters() if p.requires_grad)
    model_flops, hardware_flops = flops_per_token(frozen, adapter, checkpointing)
    achieved, hardware = model_flops * tokens / seconds / 1e12, hardware_flops * tokens / seconds / 1e12
    figures = {
        "device": name, "smoke": args.smoke, "batch_size": batch_size, "image_size": size,
        "tokens_per_step": tokens, "step_s": round(seconds, 4), "tokens_per_s": round(tokens / seconds, 1),
        "peak_memory_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if device.type == "cuda" else None,
        "frozen_parameters": frozen, "adapter_parameters": adapter, "activation_checkpointing": checkpointing,
        "flops_per_token": {"model (4N + 6A)": model_flops, "hardware (+ recomputation)": hardware_flops},
        "model_tflops_per_s": round(achieved, 3), "hardware_tflops_per_s": round(hardware, 3),
        "mfu": round(achieved / peak, 4) if peak and not args.smoke else None,
        "hfu": round(hardware / peak, 4) if peak and not args.smoke else None,
        "date": time.strftime("%Y-%m-%d"),
    }
    print("\n".join(f"{k:>20}: {v}" for k, v in figures.items()))
    if args.out:
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
