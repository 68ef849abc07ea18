"""BLIPScore: the image-text-matching probability of BLIP (Li et al. 2022), softmax(itm_logits)[:, 1].

It reads the poem's text (its lines joined by spaces), truncated to the text encoder's length. Default
checkpoint `Salesforce/blip-itm-base-coco` (English).
"""

from __future__ import annotations

from typing import Sequence

import torch

from .base import EvalResult, Evaluator, ScoringItem
from .clipscore import poem_text, text_length
from .loading import has_random_weights, pick_device

DEFAULT_BLIP = "Salesforce/blip-itm-base-coco"


class BLIPScore(Evaluator):
    name = "blipscore"

    def __init__(self, model: str = DEFAULT_BLIP, device: str | None = None):
        from transformers import AutoProcessor, BlipForImageTextRetrieval

        super().__init__()
        self.device = pick_device(device)
        self.processor = AutoProcessor.from_pretrained(model)
        self.model = BlipForImageTextRetrieval.from_pretrained(model).to(self.device).eval()
        self.model_name = model
        self.random_weights = has_random_weights(self.model)

    def _score(self, items: Sequence[ScoringItem]) -> list[EvalResult]:
        inputs = self.processor(images=[it.image.convert("RGB") for it in items], text=[poem_text(it) for it in items],
                                return_tensors="pt", padding=True, truncation=True,
                                max_length=text_length(self.model)).to(self.device)
        with torch.inference_mode():
            itm = self.model(**inputs, use_itm_head=True).itm_score
        scores = itm.float().softmax(dim=-1)[:, 1].tolist()
        return [self.result(it, {}, s, None, "ok", None) for it, s in zip(items, scores)]
