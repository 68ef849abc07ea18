"""The one evaluator: a task (what is asked, `judging.tasks`) joined to a backend (who answers, `judging.backends`).

    >>> judge = Judge("pae", RubricScores(constrained=True), TransformersBackend("Qwen/Qwen3-VL-8B-Instruct"))
    >>> [result] = judge(images=[image], poems=[poem])

Batching, per-item failure handling and the data-loader split (`prepare` on the CPU, `run` on the model) come from
`evaluators.base.Evaluator`. Here, once for every task and backend:

- **the repair round** (`ask`): an answer whose reader read nothing gets one more request in the same
  conversation (the answer, then the task's repair wording), where `repair` is on — by default on a served
  backend, for every task; a request that failed is not repaired (a rerun asks it again);
- **the records** (`Judge.outcome`): the first answer as `raw_output`, the second with its status and error under
  `repair`; `repaired` where the second answer was read; both requests' tokens summed; a failed request recorded
  with its kind (`model`, `transient`: asked again by a rerun), an answer that did not read as `parse` (final);
- **the settings** every record keeps and a resume checks: the backend, the pixel budget, the answer length, the
  reader's version, the task's modes, the backend's own settings, the repair round.

With the pairwise task its items are ordered pairs (`tasks.pairwise.PairItem`) and its records their answers
(`PairAnswer`): `judge(items)` is the pairwise contract's call, which the compare driver makes.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from ..errors import Notice
from ..models import DEFAULT_MAX_PIXELS
from ..rubric import Rubric
from .backends import Answer, Backend, Question
from .evaluators.base import EvalResult, Evaluator, ScoringItem
from .tasks import Reading, Task


@dataclass
class Attempt:
    """One question on its way to a reading: the first answer and its reading, and the repair round's where there
    was one. `reading` is None when the request itself failed."""

    question: Question
    answer: Answer
    reading: Reading | None
    repair: Answer | None = None
    repaired: Reading | None = None

    @property
    def value(self) -> Any:
        """What was read: from the repair round where the first answer read nothing."""
        if self.repaired is not None and not self.repaired.failed:
            return self.repaired.value
        return None if self.reading is None or self.reading.failed else self.reading.value

    @property
    def status(self) -> str:
        if self.reading is None:
            return "failed"
        if self.repaired is not None:
            return "failed" if self.repaired.failed else "repaired"
        return self.reading.status

    def error(self, noun: str) -> str | None:
        if self.reading is None:
            return self.answer.error
        if self.repair is None:
            return self.reading.error
        if self.repair.error is not None:
            return f"{self.reading.error}; the repair request failed: {self.repair.error}"
        if self.repaired.failed:
            return f"{self.reading.error}; asked again, the second answer did not parse either: {self.repaired.error}"
        return f"the first answer did not parse ({self.reading.error}); {noun} from the repair round" + (
            f": {self.repaired.error}" if self.repaired.error else "")

    @property
    def usage(self) -> dict[str, int] | None:
        found = [u for u in (self.answer.usage, self.repair.usage if self.repair else None) if u]
        return {k: sum(u.get(k, 0) for u in found) for k in ("prompt_tokens", "completion_tokens")} if found else None

    @property
    def repair_record(self) -> dict[str, Any] | None:
        if self.repair is None:
            return None
        if self.repair.error is not None:
            return {"raw_output": None, "parse_status": "failed", "error": self.repair.error}
        return {"raw_output": self.repair.text, "parse_status": self.repaired.status, "error": self.repaired.error}


def ask(backend: Backend, questions: Sequence[Question], read: Callable[[Question, Answer], Reading],
        repair_prompt: Callable[[Question, Reading], str] | None, prepared: Any = None) -> list[Attempt]:
    """Every question asked, each answer read, and those that read nothing asked once more in the same conversation
    (where `repair_prompt` is given). `prepared`: the questions' inputs, prepared already (by a data-loader
    worker)."""
    if not questions:
        return []
    answers = backend.answer(backend.prepare(questions) if prepared is None else prepared, questions)
    attempts = [Attempt(q, a, None if a.error is not None else read(q, a)) for q, a in zip(questions, answers)]
    again = [i for i, t in enumerate(attempts) if repair_prompt and t.reading is not None and t.reading.failed]
    if again:
        second = [replace(attempts[i].question, messages=[
            *attempts[i].question.messages,
            {"role": "assistant", "content": [{"type": "text", "text": attempts[i].answer.text}]},
            {"role": "user", "content": [{"type": "text", "text": repair_prompt(attempts[i].question,
                                                                               attempts[i].reading)}]}])
            for i in again]
        for i, question, answer in zip(again, second, backend.answer(backend.prepare(second), second)):
            attempts[i].repair = answer
            attempts[i].repaired = None if answer.error is not None else read(question, answer)
    return attempts


class Judge(Evaluator):
    """A task asked of a backend, as an evaluator (see the module's docstring). `repair` (0 or 1) is the repair
    rounds for an answer that does not read: by default the backend's `default_repair` (1 on a served backend, else
    0)."""

    _model_attributes = ()  # the backend leaves its model behind itself when pickled

    def __init__(self, name: str, task: Task, backend: Backend, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_new_tokens: int | None = None, rubric: Rubric | str | None = None, repair: int | None = None):
        super().__init__(rubric)
        if repair not in (None, 0, 1):
            raise ValueError(f"--repair must be 0 (off) or 1 (one repair round), not {repair!r}")
        self.name, self.task, self.backend = name, task, backend
        self.uses_rubric, self.record_type = task.uses_rubric, task.record_type
        self.model_name, self.random_weights = backend.model_name, backend.random_weights  # None: served
        self.device, self.worker_start_method = backend.device, backend.worker_start_method
        self.min_batch_size = max(1, backend.min_batch_size // task.questions_per_item)
        self.max_pixels = max_pixels
        self.max_new_tokens = max_new_tokens or task.default_max_new_tokens
        self.repair = backend.default_repair if repair is None else repair
        self.told_rubrics: set[str] = set()  # the rubrics, other than its adapter's, it has said it scores under
        task.check(backend, self.max_new_tokens)

    def settings(self) -> dict[str, Any]:
        task = self.task.settings(self.backend)
        return {"backend": self.backend.name, "max_pixels": self.max_pixels, "max_new_tokens": self.max_new_tokens,
                "parser": task.pop("parser"), **task, **self.backend.settings(),
                **({"repair": self.repair} if self.backend.default_repair or self.repair else {})}

    def result(self, item: ScoringItem, *args, **kwargs) -> EvalResult:
        """The record (`Evaluator.result`); the first time it is under a rubric other than the one its adapter was
        trained on (the backend's `adapter_rubric` setting, which every record keeps), a warning says so."""
        record = super().result(item, *args, **kwargs)
        trained, used = record.settings.get("adapter_rubric"), record.settings.get("rubric")
        if trained and used and used != trained and used not in self.told_rubrics:
            self.told_rubrics.add(used)
            warnings.warn(f"{self.name}'s adapter was trained on the rubric {trained} and scores under {used}, which "
                          "it never learned: its answers are a transfer, not its trained task (each result's settings "
                          "keep both: adapter_rubric and rubric)", Notice, stacklevel=2)
        return record

    def _prepare(self, items: Sequence[ScoringItem]) -> tuple[list[int], Any, list[Question]]:
        asked = [self.task.questions(it, self) for it in items]
        flat = [q for qs in asked for q in qs]
        return [len(qs) for qs in asked], self.backend.prepare(flat), flat

    def _run(self, inputs: tuple[list[int], Any, list[Question]], items: Sequence[ScoringItem]) -> list[EvalResult]:
        counts, prepared, flat = inputs
        attempts = ask(self.backend, flat, self.task.read, self.task.repair_prompt if self.repair else None, prepared)
        records, start = [], 0
        for item, n in zip(items, counts):
            records.append(self.task.record(self, item, attempts[start:start + n]))
            start += n
        return records

    def judge(self, items: Sequence) -> list:
        """What the compare driver calls (`tasks.pairwise.PairwiseJudge`): with the pairwise task, each ordered
        `PairItem`'s `PairAnswer`; the driver sizes the batch."""
        return self.score(items)

    def failed(self, item, error: str | None, kind: str | None):
        return self.task.failed(self, item, error, kind)

    def outcome(self, item: ScoringItem, attempt: Attempt, scores: dict | None = None,
                quality: float | None = None) -> EvalResult:
        """The record of an item asked one question: what was read goes in `scores` and `quality` (given by the
        task), the rest from the attempt."""
        answer = attempt.answer
        if attempt.reading is None:
            result = self.result(item, {}, None, None, "failed", answer.error, kind=answer.error_kind)
        else:
            result = self.result(item, scores or {}, quality, answer.text, attempt.status,
                                 attempt.error(self.task.noun))
        result.usage, result.repair = attempt.usage, attempt.repair_record
        result.settings.update(answer.meta)
        return result
