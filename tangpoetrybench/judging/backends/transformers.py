"""The transformers backend: a local Qwen3-VL base model (default `Qwen/Qwen3-VL-8B-Instruct`) with an optional LoRA
adapter (PAE), loaded once, on the GPU when there is one.

A batch is left-padded and decoded greedily, so the same checkpoint, question and input give the same answer.
Questions are grouped by what they ask: decoding (with the task's logits processor where the question carries a
constraint, one processor per group), the probability of a few one-token choices (one forward pass, no decoding),
or the probability readout of a rubric's anchors (`readout.read_batch`). An adapter kept apart
(`merge_adapter=False`) lets the same weights answer as the base model too (`without_adapter()`): the Space's
VQAScore and SemJudge ask the base model beside PAE.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, Sequence

import torch

from ...models import chat_inputs, has_random_weights, load_qwen_vl, model_label, trained_rubric
from ..readout import read_batch
from . import Answer, Backend, Question, choice_token_ids

DEFAULT_MODEL = "Qwen/Qwen3-VL-8B-Instruct"
QUESTIONS_PER_FORWARD = 32  # one-token choice questions per forward pass


def group_key(question: Question) -> tuple:
    """Questions with the same key are answered together."""
    if question.anchors is not None:
        return ("anchors", question.anchors.fingerprint)
    if question.choices is not None:
        return ("choices", question.choices)
    group = None if question.constraint is None else (type(question.constraint).__name__, question.constraint.group)
    return ("generate", question.max_new_tokens, group)


class TransformersBackend(Backend):
    name = "transformers"
    constrains = True  # the task's logits processor
    reads_choices = "logits"  # one forward pass: the choices' probabilities at the first answer token

    def __init__(self, model: str = DEFAULT_MODEL, adapter: str | None = None, device: str | None = None,
                 quantize: str | None = None, merge_adapter: bool = True):
        """`merge_adapter=False` keeps the LoRA apart, so the same weights can answer as the base model too;
        `quantize` ("8bit", "4bit") loads the language model quantised by bitsandbytes."""
        self.processor, self.model, self.device = load_qwen_vl(model, adapter, device, merge=merge_adapter,
                                                               quantize=quantize)
        self.model_name = model_label(model, adapter)
        self.random_weights = has_random_weights(self.model)
        self.quantize = quantize
        self.use_adapter = True
        self.adapter_rubric = trained_rubric(adapter)  # the rubric the adapter was trained on, where it says

    @classmethod
    def from_loaded(cls, model, processor, model_name: str = "in-memory") -> "TransformersBackend":
        """A backend around a model already in memory (e.g. the one being trained), loading nothing."""
        self = cls.__new__(cls)
        self.processor, self.model, self.device = processor, model, next(model.parameters()).device
        self.model_name, self.random_weights, self.quantize, self.use_adapter, self.adapter_rubric = (
            model_name, has_random_weights(model), None, True, None)
        return self

    def without_adapter(self) -> "TransformersBackend":
        """The same loaded weights answering as the base model: a kept-apart adapter is disabled while it answers."""
        view = object.__new__(type(self))
        view.__dict__.update(self.__dict__)  # not copy.copy: it goes through __getstate__, which leaves the model
        view.use_adapter = False
        return view

    def __getstate__(self) -> dict:
        """A pickled backend (a data-loader worker's) keeps what `prepare` needs and leaves the model behind."""
        return {k: v for k, v in self.__dict__.items() if k != "model"}

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    def check_choices(self, choices) -> None:
        choice_token_ids(self.tokenizer, choices)  # a choice split into tokens cannot be read at the first one

    def settings(self) -> dict[str, Any]:
        return {**({"quantize": self.quantize} if self.quantize else {}),
                **({"adapter_rubric": self.adapter_rubric} if self.adapter_rubric and self.use_adapter else {})}

    def prepare(self, questions: Sequence[Question]) -> list[tuple[list[int], list]]:
        """(indices, model inputs) per group of questions asked together; a choices group is cut into forward
        passes of QUESTIONS_PER_FORWARD."""
        groups: dict[tuple, list[int]] = {}
        for i, question in enumerate(questions):
            groups.setdefault(group_key(question), []).append(i)
        prepared = []
        for key, rows in groups.items():
            step = QUESTIONS_PER_FORWARD if key[0] == "choices" else len(rows)
            for start in range(0, len(rows), step):
                chunk = rows[start:start + step]
                prepared.append((chunk, chat_inputs(self.processor, [questions[i].messages for i in chunk])))
        return prepared

    def answer(self, prepared: list[tuple[list[int], Any]], questions: Sequence[Question]) -> list[Answer]:
        answers: dict[int, Answer] = {}
        with self._adapter():
            for rows, inputs in prepared:
                first = questions[rows[0]]
                if first.anchors is not None:
                    found = [Answer(r.answer, readout=r) for r in self._read(inputs, first.anchors)]
                elif first.choices is not None:
                    found = self._choose(inputs, first.choices)
                else:
                    found = [Answer(t) for t in self._generate(inputs, [questions[i] for i in rows])]
                answers.update(zip(rows, found))
        return [answers[i] for i in range(len(questions))]

    def _adapter(self):
        disable = None if self.use_adapter else getattr(self.model, "disable_adapter", None)
        return disable() if disable else nullcontext()

    def eos_ids(self) -> list[int]:
        eos = self.model.generation_config.eos_token_id
        return [eos] if isinstance(eos, int) else list(eos or [self.processor.tokenizer.eos_token_id])

    def _generate(self, inputs, questions: Sequence[Question]) -> list[str]:
        """Greedy answers; where the questions carry a constraint, each kept in its form."""
        inputs = inputs.to(self.device, non_blocking=True)
        budget = questions[0].max_new_tokens
        processors = []
        if questions[0].constraint is not None:
            constraints = [q.constraint for q in questions]
            processors = [constraints[0].processor(constraints, self.processor.tokenizer, inputs["input_ids"].shape[1],
                                                   self.eos_ids(), budget)]
        with torch.inference_mode():
            out = self.model.generate(**inputs, max_new_tokens=budget, do_sample=False,
                                      pad_token_id=self.processor.tokenizer.pad_token_id, logits_processor=processors)
        return self.processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)

    def _choose(self, inputs, choices: tuple[str, ...]) -> list[Answer]:
        """The likeliest choice at the first answer token, with the choices' probabilities (so every answer is a
        choice) and how much of the next-token probability they held."""
        ids = choice_token_ids(self.processor.tokenizer, choices)
        inputs = inputs.to(self.device, non_blocking=True)
        with torch.inference_mode():
            # Left padding: the last position is every row's last prompt token; its logits give the answer's first.
            logits = self.model(**inputs, logits_to_keep=1).logits[:, -1, :].float()
        held = logits.softmax(-1)[:, ids]
        mass, probs = held.sum(-1).tolist(), (held / held.sum(-1, keepdim=True)).tolist()
        return [Answer(choices[max(range(len(choices)), key=p.__getitem__)], probs=[round(x, 6) for x in p],
                       mass=round(m, 6)) for p, m in zip(probs, mass)]

    def _read(self, inputs, rubric) -> list:
        return read_batch(self.model, self.processor.tokenizer, inputs, rubric)

