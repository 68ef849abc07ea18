"""CLIPScore (Hessel et al. 2021): 2.5 · max(cos(image, text), 0), with CLIP or Chinese-CLIP.

It reads the poem's text (its lines joined by spaces), truncated to the text encoder's length: CLIP's 77
tokens, Chinese-CLIP's 52 (its own code's context length; the configuration allows 512). Most Tang poems are
longer than 77 CLIP tokens, so each result records how much of the poem the encoder saw, in
`evidence["text_seen"]`: the poem's tokens, the limit, its characters, the characters seen, and `truncated`.
The default is the paper's CLIP ViT-B/32, which tokenizes Chinese poorly; pass
`model="OFA-Sys/chinese-clip-vit-base-patch16"` for Chinese-CLIP. Any CLIP-like checkpoint whose
`AutoModel` has `get_image_features` / `get_text_features` works.
"""

from __future__ import annotations

from typing import Sequence

import torch

from .base import EvalResult, Evaluator, ScalarResult, ScoringItem
from ...models import has_random_weights, load_with_processor

DEFAULT_CLIP = "openai/clip-vit-base-patch32"
CLIPSCORE_WEIGHT = 2.5
# The text length the model's own code uses, where its configuration allows more (512) than it was trained on:
# Chinese-CLIP's context_length and BLIP's max_length for image-text matching. Others: max_position_embeddings.
TEXT_TOKENS = {"chinese_clip": 52, "blip": 35}


def poem_text(item: ScoringItem) -> str:
    return " ".join(item.poem.lines)


class ImageTextMetric(Evaluator):
    """A scalar metric over (image, poem text) pairs with a processor and a model loaded once."""

    record_type = ScalarResult

    def __init__(self, model_class, model: str, device: str | None = None):
        super().__init__()
        self.processor, self.model, self.device = load_with_processor(model_class, model, device)
        self.model_name = model
        self.random_weights = has_random_weights(self.model)
        config = getattr(self.model.config, "text_config", self.model.config)
        self.max_length = TEXT_TOKENS.get(self.model.config.model_type,
                                          int(getattr(config, "max_position_embeddings", 77)))  # the text encoder's

    def settings(self) -> dict:
        return {"max_text_tokens": self.max_length}

    def _prepare(self, items: Sequence[ScoringItem]):
        """Images and poem texts, the texts truncated to the text encoder's length."""
        return self.processor(images=[it.image.convert("RGB") for it in items], text=[poem_text(it) for it in items],
                              return_tensors="pt", padding=True, truncation=True, max_length=self.max_length)

    def text_seen(self, item: ScoringItem) -> dict:
        """How much of the poem the text encoder sees: the text's tokens (special ones included) beside the limit, its
        characters beside those the kept tokens cover, and whether it was cut."""
        text, tokenizer = poem_text(item), self.processor.tokenizer
        tokens = len(tokenizer(text, verbose=False)["input_ids"])
        kept = tokenizer(text, truncation=True, max_length=self.max_length, return_offsets_mapping=True)
        seen = max((end for _, end in kept["offset_mapping"]), default=0)
        truncated = tokens > self.max_length
        return {"tokens": tokens, "max_tokens": self.max_length, "characters": len(text),
                "characters_seen": seen if truncated else len(text), "truncated": truncated}

    def scored(self, items: Sequence[ScoringItem], scores: Sequence[float]) -> list[EvalResult]:
        """Each item's result, with how much of its poem the text encoder saw."""
        results = [self.result(it, {}, s, None, "ok", None) for it, s in zip(items, scores)]
        for it, r in zip(items, results):
            r.evidence = {"text_seen": self.text_seen(it)}
        return results


class CLIPScore(ImageTextMetric):
    name = "clipscore"

    def __init__(self, model: str = DEFAULT_CLIP, device: str | None = None):
        from transformers import AutoModel

        super().__init__(AutoModel, model, device)

    def _run(self, inputs, items: Sequence[ScoringItem]) -> list[EvalResult]:
        inputs = inputs.to(self.device, non_blocking=True)
        with torch.inference_mode():
            image = self.model.get_image_features(pixel_values=inputs["pixel_values"]).pooler_output
            text = self.model.get_text_features(
                **{k: v for k, v in inputs.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            ).pooler_output
        cos = torch.nn.functional.cosine_similarity(image.float(), text.float(), dim=-1)
        return self.scored(items, (CLIPSCORE_WEIGHT * cos.clamp(min=0)).tolist())
