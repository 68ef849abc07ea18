"""Image generation throughput (images/s) of `tpb generate` on one GPU, for one open architecture at full size.

    python benchmarks/generate_throughput.py             # GPU: the SDXL architecture, random bf16 weights, 1024×1024
    python benchmarks/generate_throughput.py --smoke     # CPU: the tiny test pipeline, so CI keeps this working

The full-size pipeline is Stable Diffusion XL's architecture (the public configs below: a 2.57B-parameter UNet,
the CLIP ViT-L and OpenCLIP bigG text encoders, the 4-block VAE) with random bf16 weights made on the GPU: no
download. Kolors, the paper's unseen generator and an open model that takes Chinese prompts, is this UNet (with
a projection from its ChatGLM3 encoder) at the same resolution, so its denoising costs about the same; its 6B text
encoder runs once per image. The paper does not state its generators' resolution; 1024×1024 is the native one
of SDXL, Kolors and HunyuanDiT. Each image is made as `tpb generate` makes it: the Appendix B prompt for a bundled
poem, its own seed, `--steps` denoising steps with classifier-free guidance, decoded by the VAE. Text is
tokenized with the tiny test tokenizer (77 tokens either way, so the cost is the same). Random weights time the
computation; the images mean nothing.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch

from tangpoetrybench import __version__
from tangpoetrybench.generation.diffusers_generate import fill_prompt, image_seed, paper_prompt
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.judging.tiny_models import build_tiny_models

SDXL_UNET = dict(
    sample_size=128, in_channels=4, out_channels=4, layers_per_block=2, block_out_channels=(320, 640, 1280),
    down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
    up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"), attention_head_dim=(5, 10, 20),
    transformer_layers_per_block=(1, 2, 10), cross_attention_dim=2048, use_linear_projection=True,
    addition_embed_type="text_time", addition_time_embed_dim=256, projection_class_embeddings_input_dim=2816,
)
SDXL_VAE = dict(in_channels=3, out_channels=3, latent_channels=4, layers_per_block=2, sample_size=1024,
                block_out_channels=(128, 256, 512, 512), down_block_types=("DownEncoderBlock2D",) * 4,
                up_block_types=("UpDecoderBlock2D",) * 4, scaling_factor=0.13025)
CLIP_L = dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12,
              max_position_embeddings=77, vocab_size=49408, hidden_act="quick_gelu", projection_dim=768)
OPENCLIP_BIGG = dict(hidden_size=1280, intermediate_size=5120, num_hidden_layers=32, num_attention_heads=20,
                     max_position_embeddings=77, vocab_size=49408, hidden_act="gelu", projection_dim=1280)
SDXL_SCHEDULER = dict(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", steps_offset=1,
                      timestep_spacing="leading")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--smoke", action="store_true", help="the tiny test pipeline on the CPU (plumbing only)")
    p.add_argument("--images", type=int, default=None, help="timed images (default 8; smoke 2)")
    p.add_argument("--steps", type=int, default=None, help="denoising steps per image (default 30; smoke 2)")
    p.add_argument("--size", type=int, default=None, help="image side in pixels (default 1024; smoke 64)")
    p.add_argument("--guidance-scale", type=float, default=5.0, help="classifier-free guidance (> 1: two passes a step)")
    p.add_argument("--out", type=Path, help="also write the figures as JSON here")
    return p.parse_args()


def sdxl_pipeline(device: torch.device, tokenizer):
    """SDXL's architecture with random bf16 weights, built on `device` (or "meta", to count parameters)."""
    from diffusers import AutoencoderKL, EulerDiscreteScheduler, StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    torch.manual_seed(0)
    with torch.device(device):
        unet = UNet2DConditionModel(**SDXL_UNET).to(torch.bfloat16)
        vae = AutoencoderKL(**SDXL_VAE).to(torch.bfloat16)
        text = CLIPTextModel(CLIPTextConfig(**CLIP_L)).to(torch.bfloat16)
        text_2 = CLIPTextModelWithProjection(CLIPTextConfig(**OPENCLIP_BIGG)).to(torch.bfloat16)
    return StableDiffusionXLPipeline(vae=vae, text_encoder=text, text_encoder_2=text_2, tokenizer=tokenizer,
                                     tokenizer_2=tokenizer, unet=unet,
                                     scheduler=EulerDiscreteScheduler(**SDXL_SCHEDULER))


def main() -> None:
    args = parse_args()
    tiny = build_tiny_models(Path(tempfile.gettempdir()) / f"tpb-tiny-models-{__version__}")["text-to-image"]
    images, steps, size = (args.images or (2 if args.smoke else 8), args.steps or (2 if args.smoke else 30),
                           args.size or (64 if args.smoke else 1024))
    if args.smoke:
        from diffusers import StableDiffusionPipeline

        device = torch.device("cpu")
        pipe = StableDiffusionPipeline.from_pretrained(tiny)
        name = "tiny test pipeline (StableDiffusionPipeline)"
    else:
        from transformers import AutoTokenizer

        device = torch.device("cuda")
        pipe = sdxl_pipeline(device, AutoTokenizer.from_pretrained(tiny / "tokenizer"))
        name = "SDXL architecture, random bf16 weights"
    pipe.set_progress_bar_config(disable=True)
    poems = sample_poems()
    template = paper_prompt()

    def one(i: int) -> None:
        poem = poems[i % len(poems)]
        pipe(prompt=fill_prompt(template, poem), num_inference_steps=steps, guidance_scale=args.guidance_scale,
             height=size, width=size, generator=torch.Generator("cpu").manual_seed(image_seed(0, poem.poem_id)))

    one(0)  # warm-up: kernels, allocator
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for i in range(images):
        one(i)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    figures = {
        "pipeline": name, "smoke": args.smoke, "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
        "images": images, "steps": steps, "size": size, "guidance_scale": args.guidance_scale,
        "seconds_per_image": seconds / images, "images_per_s": images / seconds,
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda" else None,
    }
    print(f"{name}: {images} images of {size}×{size}, {steps} steps, guidance {args.guidance_scale}: "
          f"{figures['seconds_per_image']:.2f} s/image, {figures['images_per_s']:.3f} images/s"
          + (f", peak {figures['peak_memory_gib']:.1f} GiB" if figures["peak_memory_gib"] else ""))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
