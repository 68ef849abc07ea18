"""VQAScore (Lin et al. 2024) with the Qwen3-VL backend: the probability that the model answers "Yes" when
asked whether the image illustrates the poem (title, author and full text), read from the next-token
distribution after the question, so no text is generated."""

from __future__ import annotations

from typing import Sequence

import torch

from ..poems import Poem
from .base import EvalResult, Evaluator, ScoringItem
from .loading import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels, has_random_weights, load_qwen_vl, model_label
from .pae import DEFAULT_MODEL


def question(poem: Poem) -> str:
    return (f"Does this image illustrate the following poem?\n《{poem.title}》 {poem.author}\n{poem.text}\n"
            "Answer Yes or No.")


class VQAScore(Evaluator):
    name = "vqascore"

    def __init__(self, model: str = DEFAULT_MODEL, device: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS):
        super().__init__()
        self.processor, self.model, self.device = load_qwen_vl(model, None, device)
        self.model_name = model_label(model)
        self.random_weights = has_random_weights(self.model)
        self.max_pixels = max_pixels
        # "Yes" is one token for Qwen's tokenizer; for others, its first token stands for it.
        self.yes_id = self.processor.tokenizer.encode("Yes", add_special_tokens=False)[0]

    def settings(self) -> dict:
        return {"max_pixels": self.max_pixels}

    def _prepare(self, items: Sequence[ScoringItem]):
        return chat_inputs(self.processor, [[{"role": "user", "content": [
            {"type": "image", "image": fit_pixels(it.image, self.max_pixels)},
            {"type": "text", "text": question(it.poem)},
        ]}] for it in items])

    def _run(self, inputs, items: Sequence[ScoringItem]) -> list[EvalResult]:
        with torch.inference_mode():
            logits = self.model(**inputs.to(self.device, non_blocking=True), logits_to_keep=1).logits[:, -1, :]
        p_yes = logits.float().softmax(-1)[:, self.yes_id].tolist()
        return [self.result(it, {}, p, None, "ok", None) for it, p in zip(items, p_yes)]
