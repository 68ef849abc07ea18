"""BLIPScore: the image-text-matching probability of BLIP (Li et al. 2022), softmax(itm_logits)[:, 1].

It reads the poem's text (its lines joined by spaces), truncated to 35 tokens as BLIP's own image-text matching
code does (the configuration allows 512, which the ITM head never saw); each result records how much of the poem
that is (`evidence["text_seen"]`, as for CLIPScore). Default checkpoint `Salesforce/blip-itm-base-coco` (English).
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
        return self.scored(items, itm.float().softmax(dim=-1)[:, 1].tolist())
