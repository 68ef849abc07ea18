"""PAE's readout (`--readout expected`) against decoding the JSON answer, in one run: seconds per batch and images/s
at batch 1 and 16, and the ratio. Random weights (no download): by default a mid-size Qwen3-VL built from a config
for the CPU (model time, not Python, dominates), `--full` the Qwen3-VL-8B architecture in bf16 on the GPU, `--smoke`
the tiny test model. Decoding is measured two ways: constrained to the rubric's form (`--constrained`, what ships),
and free for exactly the answer's number of tokens (the model's time alone, no logits processor).

    python benchmarks/readout_speed.py --out readout_speed.json            # CPU, mid-size
    python benchmarks/readout_speed.py --full --out readout_speed.json     # GPU, 8B architecture
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import torch
from PIL import Image

from _models import build_model, tiny_processor
from tangpoetrybench.judging.evaluators.base import ScoringItem
from tangpoetrybench.judging.backends.transformers import TransformersBackend
from tangpoetrybench.judging.registry import pae_on
from tangpoetrybench.judging.prompt import format_answer
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric

MID = dict(  # about 13 M parameters in the language model: a CPU prefill of the ~1,400-token prompt takes seconds
    text_config=dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=6,
                     num_key_value_heads=2, head_dim=64, max_position_embeddings=16384,
                     rope_scaling={"rope_type": "default", "mrope_section": [8, 12, 12], "mrope_interleaved": True}),
    vision_config=dict(depth=2, hidden_size=128, intermediate_size=256, num_heads=2, patch_size=16,
                       spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=384, num_position_embeddings=64,
                       deepstack_visual_indexes=[0, 1]),
)


def mid_model(processor):
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    tok = processor.tokenizer
    ids = tok.convert_tokens_to_ids(["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"])
    config = Qwen3VLConfig(text_config=dict(MID["text_config"], vocab_size=len(tok), eos_token_id=tok.eos_token_id,
                                            pad_token_id=tok.pad_token_id),
                           vision_config=MID["vision_config"], image_token_id=ids[0], video_token_id=ids[1],
                           vision_start_token_id=ids[2], vision_end_token_id=ids[3], eos_token_id=tok.eos_token_id,
                           pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = Qwen3VLForConditionalGeneration(config).eval()
    head = model.lm_head.weight
    torch.nn.init.normal_(head, std=head.shape[1] ** -0.5)
    return model


def timed(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="the tiny test model, batch sizes 1 and 2")
    parser.add_argument("--full", action="store_true", help="the Qwen3-VL-8B architecture in bf16 (a GPU)")
    parser.add_argument("--batch-sizes", default=None, help="default: 1,16 (smoke: 1,2)")
    parser.add_argument("--pixels", type=int, default=None, help="image side in pixels (default: 1024 full, 256 else)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    processor, tiny = tiny_processor()
    if args.full or args.smoke:
        model = build_model(args.smoke, processor, tiny, device)
    else:
        model = mid_model(processor).to(device)
    kind = "smoke" if args.smoke else "Qwen3-VL-8B architecture" if args.full else "mid-size Qwen3-VL"
    backend = TransformersBackend.from_loaded(model, processor, model_name=kind)
    read = pae_on(backend, readout="expected", rubric="tang")
    constrained = pae_on(backend, constrained=True, max_new_tokens=256, rubric="tang")
    rubric = load_rubric("tang")
    answer_tokens = len(processor.tokenizer.encode(format_answer({k: 0.67 for k in rubric.keys}, rubric))) + 1
    side = args.pixels or (1024 if args.full else 256)
    sizes = [int(b) for b in (args.batch_sizes or ("1,2" if args.smoke else "1,16")).split(",")]
    poems = sample_poems()
    figures = {"model": kind, "smoke": args.smoke, "device": str(device),
               "gpu": torch.cuda.get_device_name() if device.type == "cuda" else None,
               "cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
               "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
               "parameters": sum(p.numel() for p in model.parameters()), "image_pixels": side * side,
               "answer_tokens": answer_tokens, "forward_passes": {"readout": 1 + len(rubric.keys),
                                                                  "decode": answer_tokens}, "batches": []}
    for size in sizes:
        items = [ScoringItem(f"bench/{i}", Image.new("RGB", (side, side), (i * 37 % 256, 120, 90)),
                             poems[i % len(poems)]) for i in range(size)]
        read_inputs, decode_inputs = read._prepare(items), constrained._prepare(items)
        [(_, tokens)] = decode_inputs[1]
        prompt_tokens = int(tokens["input_ids"].shape[1])

        def decode(constrain: bool):
            if constrain:
                return constrained._run(decode_inputs, items)
            with torch.inference_mode():
                model.generate(**tokens.to(device), do_sample=False, max_new_tokens=answer_tokens,
                               min_new_tokens=answer_tokens, pad_token_id=processor.tokenizer.pad_token_id)

        def readout():
            return read._run(read_inputs, items)

        readout()  # warm-up
        row = {"batch_size": size, "prompt_tokens": prompt_tokens,
               "readout_s": timed(readout), "decode_constrained_s": timed(lambda: decode(True)),
               "decode_free_s": timed(lambda: decode(False))}
        row["ratio_constrained"] = row["decode_constrained_s"] / row["readout_s"]
        row["ratio_free"] = row["decode_free_s"] / row["readout_s"]
        row["readout_images_per_s"] = size / row["readout_s"]
        figures["batches"].append(row)
        print(json.dumps(row), flush=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(figures, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
