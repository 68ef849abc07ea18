"""PAE, the rubric-conditioned evaluator, on the transformers backend.

A Qwen3-VL base model (default `Qwen/Qwen3-VL-8B-Instruct`, the paper's zero-shot "open baseline") plus
an optional LoRA adapter (PAE), loaded once. Each batch is left-padded and decoded greedily, so the same
checkpoint, rubric and input give the same answer; the answer goes through `parse_answer`. With `constrained`,
decoding keeps every answer in the rubric's JSON form (`constrained.AnswerConstraint`), so every answer parses.
With `explain` ("poem" or "en"), the same question asks for a one-sentence reason per dimension too; the results
keep them (`EvalResult.reasons`) and the settings record the mode, so a resume never mixes the two.
With `readout="expected"` nothing is decoded: the scores are read from the anchors' probabilities (`readout`).
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

from ..constrained import AnswerConstraint
from ..prompt import build_messages
from ..reading import VERSIONS, parse_answer
from ..readout import check_readout, read_prepared, readout_settings
from ...rubric import Rubric
from .base import EvalResult, Evaluator, ScoringItem
from ...models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels, has_random_weights, load_qwen_vl, model_label

DEFAULT_MODEL = "Qwen/Qwen3-VL-8B-Instruct"
DEFAULT_MAX_NEW_TOKENS = 256  # the ten-key answer is about 120 Qwen tokens
EXPLAIN_MAX_NEW_TOKENS = 1536  # room for ten reasons at their longest (MAX_REASON_CHARS each) after the scores


def answer_length(max_new_tokens: int | None, explain: str | None) -> int:
    """The answer length limit: the one given, else the default of the mode."""
    return max_new_tokens or (EXPLAIN_MAX_NEW_TOKENS if explain else DEFAULT_MAX_NEW_TOKENS)


class PAE(Evaluator):
    name = "pae"
    uses_rubric = True
    backend = "transformers"
    constrained = False
    explain: str | None = None  # explain mode's reason language ("poem" or "en"), None for scores only
    readout = "decode"
    quantize: str | None = None

    def __init__(self, model: str = DEFAULT_MODEL, adapter: str | None = None, device: str | None = None,
                 max_pixels: int = DEFAULT_MAX_PIXELS, max_new_tokens: int | None = None,
                 rubric: Rubric | str | None = None, merge_adapter: bool = True, constrained: bool = False,
                 explain: str | None = None, readout: str = "decode", quantize: str | None = None):
        """`merge_adapter=False` keeps the LoRA apart, so the same model can serve the base (VQAScore) too."""
        super().__init__(rubric)
        self.readout, self.quantize = check_readout(readout, constrained), quantize
        self.processor, self.model, self.device = load_qwen_vl(model, adapter, device, merge=merge_adapter,
                                                               quantize=quantize)
        self.model_name = model_label(model, adapter)
        self.random_weights = has_random_weights(self.model)
        self.max_pixels = max_pixels
        self.max_new_tokens = answer_length(max_new_tokens, explain)
        self.constrained = constrained
        self.explain = explain

    @classmethod
    def from_loaded(cls, model, processor, model_name: str = "in-memory", max_pixels: int = DEFAULT_MAX_PIXELS,
                    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, rubric: Rubric | str | None = None) -> "PAE":
        """PAE around a model already in memory (e.g. the one being trained), without loading anything."""
        self = cls.__new__(cls)
        Evaluator.__init__(self, rubric)
        self.processor, self.model, self.device = processor, model, next(model.parameters()).device
        self.model_name, self.random_weights = model_name, has_random_weights(model)
        self.max_pixels, self.max_new_tokens = max_pixels, max_new_tokens
        return self

    def settings(self) -> dict[str, Any]:
        return {"backend": self.backend, "max_pixels": self.max_pixels, "max_new_tokens": self.max_new_tokens,
                "parser": VERSIONS["scores"], **({"constrained": True} if self.constrained else {}),
                **({"explain": self.explain} if self.explain else {}), **readout_settings(self.readout, self.quantize)}

    def messages(self, item: ScoringItem) -> list[dict]:
        return build_messages(item.poem, self.rubric_for(item), fit_pixels(item.image, self.max_pixels),
                              self.explain)

    def _prepare(self, items: Sequence[ScoringItem]):
        return chat_inputs(self.processor, [self.messages(it) for it in items])

    def generate(self, inputs, rubrics: Sequence[Rubric] = ()) -> list[str]:
        """Greedy answers for prepared inputs; with `constrained`, each in the form of its row's rubric."""
        inputs = inputs.to(self.device, non_blocking=True)
        processors = []
        if self.constrained:
            eos = self.model.generation_config.eos_token_id
            eos = [eos] if isinstance(eos, int) else list(eos or [self.processor.tokenizer.eos_token_id])
            processors = [self.constraint(rubrics, inputs["input_ids"].shape[1], eos)]
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=self.max_new_tokens, do_sample=False,
                                      pad_token_id=self.processor.tokenizer.pad_token_id, logits_processor=processors)
        return self.processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    def constraint(self, rubrics: Sequence[Rubric], prompt_length: int, eos: list[int]):
        """The logits processor that keeps answers in form (a judging mode's own form where it has one)."""
        return AnswerConstraint(self.processor.tokenizer, rubrics, prompt_length, eos, explain=bool(self.explain))

    def _run(self, inputs, items: Sequence[ScoringItem]) -> list[EvalResult]:
        if self.readout == "expected":
            return read_prepared(self, inputs, items)
        answers = self.generate(inputs, [self.rubric_for(it) for it in items])
        return [self.answer_result(it, answer) for it, answer in zip(items, answers)]

    def answer_result(self, item: ScoringItem, answer: str) -> EvalResult:
        parsed = parse_answer(answer, self.rubric_for(item), explain=bool(self.explain))
        result = self.result(item, parsed.scores, parsed.quality, answer, parsed.status, parsed.error)
        result.reasons = parsed.reasons or None
        return result
