"""VQAScore (Lin et al. 2024) with the Qwen3-VL backend: the probability that the model answers "Yes" when
asked whether the image illustrates the poem (title, author and full text), read from the next-token
distribution after the question, so no text is generated."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Sequence

import torch

from ...poems import Poem
from .base import EvalResult, Evaluator, ScoringItem
from ...models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels, has_random_weights, load_qwen_vl, model_label
from .pae import DEFAULT_MODEL


def question(poem: Poem) -> str:
    return (f"Does this image illustrate the following poem?\n《{poem.title}》 {poem.author}\n{poem.text}\n"
            "Answer Yes or No.")


class VQAScore(Evaluator):
    name = "vqascore"

    def __init__(self, model: str = DEFAULT_MODEL, device: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS):
        super().__init__()
        self._attach(*load_qwen_vl(model, None, device), model_label(model), max_pixels)

    @classmethod
    def from_loaded(cls, model, processor, model_name: str, max_pixels: int = DEFAULT_MAX_PIXELS) -> "VQAScore":
        """VQAScore on a Qwen3-VL already in memory (PAE's): with a LoRA adapter kept apart, it asks the base model."""
        self = cls.__new__(cls)
        Evaluator.__init__(self)
        self._attach(processor, model, next(model.parameters()).device, model_name, max_pixels)
        return self

    def _attach(self, processor, model, device, model_name: str, max_pixels: int) -> None:
        self.processor, self.model, self.device = processor, model, device
        self.model_name, self.random_weights, self.max_pixels = model_name, has_random_weights(model), max_pixels
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
        base = getattr(self.model, "disable_adapter", nullcontext)  # a PeftModel shared with PAE: ask the base model
        with torch.inference_mode(), base():
            logits = self.model(**inputs.to(self.device, non_blocking=True), logits_to_keep=1).logits[:, -1, :]
        p_yes = logits.float().softmax(-1)[:, self.yes_id].tolist()
        return [self.result(it, {}, p, None, "ok", None) for it, p in zip(items, p_yes)]
