"""BLIPScore: the image-text-matching probability of BLIP (Li et al. 2022), softmax(itm_logits)[:, 1].

It reads the poem's text (its lines joined by spaces), truncated to the text encoder's length. Default
checkpoint `Salesforce/blip-itm-base-coco` (English).
"""

from __future__ import annotations

from typing import Sequence

import torch

from .base import EvalResult, ScoringItem
from .clipscore import ImageTextMetric

DEFAULT_BLIP = "Salesforce/blip-itm-base-coco"


class BLIPScore(ImageTextMetric):
    name = "blipscore"

    def __init__(self, model: str = DEFAULT_BLIP, device: str | None = None):
        from transformers import BlipForImageTextRetrieval

        super().__init__(BlipForImageTextRetrieval, model, device)

    def _run(self, inputs, items: Sequence[ScoringItem]) -> list[EvalResult]:
        with torch.inference_mode():
            itm = self.model(**inputs.to(self.device, non_blocking=True), use_itm_head=True).itm_score
        scores = itm.float().softmax(dim=-1)[:, 1].tolist()
        return [self.result(it, {}, s, None, "ok", None) for it, s in zip(items, scores)]
