"""VQAScore (Lin et al. 2024) with the Qwen3-VL backend: the probability that the model answers "Yes" to a question
about the image and the poem, read from the next-token distribution after the question, so no text is generated.

The question is t2v_metrics' by default (`question="t2v_metrics"`: `Does this figure show "{text}"? Please answer
yes or no.`, the text being the poem's lines joined by spaces), so the numbers compare with published VQAScore;
`question="poem"` asks this project's own question (title, author and full text: "Does this image illustrate the
following poem? … Answer Yes or No."). The results' settings name the question."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Sequence

import torch

from ...poems import Poem
from ...rubric import format_title
from .base import EvalResult, Evaluator, ScalarResult, ScoringItem
from ...models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels, has_random_weights, load_qwen_vl, model_label
from ..backends.transformers import DEFAULT_MODEL


QUESTIONS = ("t2v_metrics", "poem")
DEFAULT_QUESTION = "t2v_metrics"


def question(poem: Poem, kind: str = DEFAULT_QUESTION) -> str:
    """The question asked about the image: t2v_metrics' (the reference VQAScore's) or this project's own."""
    if kind == "t2v_metrics":
        return f'Does this figure show "{" ".join(poem.lines)}"? Please answer yes or no.'
    if kind == "poem":
        return (f"Does this image illustrate the following poem?\n{format_title(poem.title)} {poem.author}\n"
                f"{poem.text}\n"
                "Answer Yes or No.")
    raise ValueError(f"unknown VQAScore question {kind!r} (known: {', '.join(QUESTIONS)})")


class VQAScore(Evaluator):
    name = "vqascore"
    record_type = ScalarResult

    def __init__(self, model: str = DEFAULT_MODEL, device: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
                 question: str = DEFAULT_QUESTION):
        super().__init__()
        self._attach(*load_qwen_vl(model, None, device), model_label(model), max_pixels, question)

    @classmethod
    def from_loaded(cls, model, processor, model_name: str, max_pixels: int = DEFAULT_MAX_PIXELS,
                    question: str = DEFAULT_QUESTION) -> "VQAScore":
        """VQAScore on a Qwen3-VL already in memory (PAE's): with a LoRA adapter kept apart, it asks the base model."""
        self = cls.__new__(cls)
        Evaluator.__init__(self)
        self._attach(processor, model, next(model.parameters()).device, model_name, max_pixels, question)
        return self

    def _attach(self, processor, model, device, model_name: str, max_pixels: int, kind: str) -> None:
        if kind not in QUESTIONS:
            raise ValueError(f"unknown VQAScore question {kind!r} (known: {', '.join(QUESTIONS)})")
        self.processor, self.model, self.device = processor, model, device
        self.model_name, self.random_weights, self.max_pixels = model_name, has_random_weights(model), max_pixels
        self.question = kind
        # "Yes" is one token for Qwen's tokenizer; for others, its first token stands for it.
        self.yes_id = self.processor.tokenizer.encode("Yes", add_special_tokens=False)[0]

    def settings(self) -> dict:
        return {"max_pixels": self.max_pixels, "question": self.question}

    def _prepare(self, items: Sequence[ScoringItem]):
        return chat_inputs(self.processor, [[{"role": "user", "content": [
            {"type": "image", "image": fit_pixels(it.image, self.max_pixels)},
            {"type": "text", "text": question(it.poem, self.question)},
        ]}] for it in items])

    def _run(self, inputs, items: Sequence[ScoringItem]) -> list[EvalResult]:
        base = getattr(self.model, "disable_adapter", nullcontext)  # a PeftModel shared with PAE: ask the base model
        with torch.inference_mode(), base():
            logits = self.model(**inputs.to(self.device, non_blocking=True), logits_to_keep=1).logits[:, -1, :]
        p_yes = logits.float().softmax(-1)[:, self.yes_id].tolist()
        return [self.result(it, {}, p, None, "ok", None) for it, p in zip(items, p_yes)]
