"""Models the benchmarks share: the full-size Qwen3-VL-8B architecture with random bf16 weights made on the GPU
(no download), or the tiny test model for `--smoke` runs on the CPU."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from tangpoetrybench import __version__
from tangpoetrybench.judging.tiny_models import build_tiny_models

QWEN3_VL_8B = dict(
    text_config=dict(hidden_size=4096, intermediate_size=12288, num_hidden_layers=36, num_attention_heads=32,
                     num_key_value_heads=8, head_dim=128, vocab_size=151936, rope_theta=5_000_000,
                     max_position_embeddings=262144, tie_word_embeddings=False,
                     rope_scaling={"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": True}),
    vision_config=dict(depth=27, hidden_size=1152, intermediate_size=4304, num_heads=16, patch_size=16,
                       spatial_merge_size=2, temporal_patch_size=2, out_hidden_size=4096, num_position_embeddings=2304,
                       deepstack_visual_indexes=[8, 16, 24], hidden_act="gelu_pytorch_tanh"),
    tie_word_embeddings=False,
)


def tiny_processor(tokenizer: str | None = None):
    """(processor, tiny model folder): the tiny test model's processor, or a local Qwen3-VL processor's."""
    from transformers import AutoProcessor

    tiny = build_tiny_models(Path(tempfile.gettempdir()) / f"tpb-tiny-models-{__version__}")["qwen3-vl"]
    processor = AutoProcessor.from_pretrained(tokenizer or tiny)
    processor.tokenizer.padding_side = "left"
    return processor, tiny


def language_model_parameters() -> int:
    """Parameters of the 8B architecture's language model (embeddings excluded), for FLOP counts."""
    t = QWEN3_VL_8B["text_config"]
    h, i, layers = t["hidden_size"], t["intermediate_size"], t["num_hidden_layers"]
    kv = t["num_key_value_heads"] * t["head_dim"]
    attention = h * t["num_attention_heads"] * t["head_dim"] * 2 + h * kv * 2
    return layers * (attention + 3 * h * i) + h * t["vocab_size"]  # + the untied output head


def build_model(smoke: bool, processor, tiny_path: Path, device: torch.device):
    from transformers import AutoModelForImageTextToText, Qwen3VLConfig, Qwen3VLForConditionalGeneration

    if smoke:
        return AutoModelForImageTextToText.from_pretrained(tiny_path).to(device).eval()
    tok = processor.tokenizer
    ids = tok.convert_tokens_to_ids(["<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>"])
    config = Qwen3VLConfig(**QWEN3_VL_8B, image_token_id=ids[0], video_token_id=ids[1], vision_start_token_id=ids[2],
                           vision_end_token_id=ids[3])
    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3VLForConditionalGeneration._from_config(config, dtype=torch.bfloat16)
    return model.eval()
