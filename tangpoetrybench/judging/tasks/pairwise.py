"""Which of two illustrations of one poem is better: the pairwise question (`prompt.build_pair_messages`, image A shown
first), its answer `{"winner": "A" | "B", "reason": "…"}` read by `reading.parse_pair_answer`. With `constrained`, on a
backend that constrains decoding (transformers) every answer is decoded in that form
(`constrained.PairAnswerConstraint`); vLLM and a server get its JSON schema.

The pairwise contract every pairwise judge follows (this task joined to a backend, SemJudge's, a plugin's), which
the compare driver (`judging.pairwise`) asks:

- a judge (`PairwiseJudge`) is an object with `name: str`, `model_name: str`, `random_weights: bool | None` (None:
  a served model, whose records say "unknown"), `settings() -> dict` (what, besides the model, shapes an answer: a
  resumed run must match it) and `judge(items) -> list[PairAnswer]`;
- a `PairItem` is one *ordered* question: `image_a` is shown first, `image_b` second; the judge answers it as asked
  and never swaps them;
- a `PairAnswer` says which it prefers (`winner` "A" or "B", None when it gave no readable answer), with the raw
  output(s), a parse `status` ("ok" | "repaired" | "failed"), an `error`, a `reason`, token `usage` and `extra`
  (per-dimension winners, a judge's own evidence, what a server said of its answer). `error_kind` (optional) is
  `evaluators.base.error_kind`'s word for a failure in the model ("model", "transient"), which a rerun asks again; a
  failed parse is final.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, Sequence

from PIL import Image

from ...models import fit_pixels
from ...poems import Poem
from ...rubric import Rubric
from ..backends import Answer, Backend, Question
from ..constrained import PairAnswerConstraint
from ..reading import REPAIR, VERSIONS, parse_pair_answer
from ..prompt import build_pair_messages, pair_answer_schema
from ..records import STATUSES, WINNERS, PairRecord
from . import Reading, Task
from .scores import refuse_unconstrained

DEFAULT_MAX_NEW_TOKENS = 256


@dataclass
class PairItem:
    """One ordered question: is `image_a` (shown first) or `image_b` the better illustration of `poem`? `rubric`
    overrides the judge's, as a `ScoringItem`'s does."""

    pair_id: str
    poem: Poem
    image_a: Image.Image
    image_b: Image.Image
    rubric: Rubric | None = None

    @property
    def problem(self) -> str | None:
        """Why it cannot be asked (an image missing), or None."""
        return None if self.image_a is not None and self.image_b is not None else "no image"


@dataclass
class PairAnswer:
    """A judge's answer to one ordered question."""

    winner: str | None  # "A", "B", or None (no readable answer)
    raw: str | list[str] | None
    status: str  # ok | repaired | failed
    error: str | None = None
    reason: str | None = None
    usage: dict[str, int] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    error_kind: str | None = None  # for a failure: "parse" (final), "model" or "transient" (asked again by a rerun)

    def __post_init__(self) -> None:
        if self.winner not in (*WINNERS, None):
            raise ValueError(f"a pair answer's winner is 'A', 'B' or None, not {self.winner!r}")
        if self.status not in STATUSES:
            raise ValueError(f"a pair answer's status is one of {', '.join(STATUSES)}, not {self.status!r}")
        if (self.winner is None) != (self.status == "failed"):
            raise ValueError("a failed answer has no winner, and an answer with no winner is failed")


class PairwiseJudge(Protocol):
    """What the compare driver needs of a pairwise judge (see the module's docstring)."""

    name: str
    model_name: str
    random_weights: bool | None  # None: a served model (its records say "unknown")

    def settings(self) -> dict[str, Any]: ...

    def judge(self, items: list[PairItem]) -> list[PairAnswer]: ...


@dataclass(frozen=True)
class PairConstraint:
    group = "pair"

    def processor(self, constraints: Sequence["PairConstraint"], tokenizer, prompt_length: int, eos: list[int],
                  budget: int) -> PairAnswerConstraint:
        return PairAnswerConstraint(tokenizer, prompt_length, eos, budget)


class Pairwise(Task):
    record_type = PairRecord  # what a pair's record is, once both orders are answered (`judging.pairwise`)
    name = record_type.task
    noun = "the winner"
    uses_rubric = True
    questions_per_item = 1
    default_max_new_tokens = DEFAULT_MAX_NEW_TOKENS

    def __init__(self, constrained: bool = False):
        self.constrained = constrained
        self.fingerprints: list[str] = []

    def settings(self, backend: Backend) -> dict[str, Any]:
        return {"parser": VERSIONS["winner"], **({"constrained": True} if self.constrained else {}),
                "task": self.name, "rubric": self.fingerprints}

    def check(self, backend: Backend, max_new_tokens: int) -> None:
        refuse_unconstrained(self.constrained, backend, "the pairwise")
        if self.constrained:  # an answer budget too small for the form is an error now, not a failure per pair
            PairAnswerConstraint(backend.tokenizer, 0, [], max_new_tokens)

    def questions(self, item: PairItem, judge) -> list[Question]:
        messages = build_pair_messages(item.poem, judge.rubric_for(item), fit_pixels(item.image_a, judge.max_pixels),
                                       fit_pixels(item.image_b, judge.max_pixels))
        return [Question(messages, judge.max_new_tokens, schema=pair_answer_schema(), schema_name="pae_pair_answer",
                         constraint=PairConstraint() if self.constrained else None)]

    def read(self, question: Question, answer: Answer) -> Reading:
        parsed = parse_pair_answer(answer.text)
        return Reading(parsed if parsed.winner else None, parsed.status, parsed.error)

    def repair_prompt(self, question: Question, reading: Reading) -> str:
        return REPAIR["winner"]

    def record(self, judge, item: PairItem, attempts: Sequence) -> PairAnswer:
        """The ordered question's answer: what a server said of it in `extra`; a request that failed keeps its kind
        (asked again by a rerun), an answer that did not read is a final `parse` failure."""
        [attempt] = attempts
        answer, extra = attempt.answer, dict(attempt.answer.meta)
        if attempt.reading is None:
            return self.failed(judge, item, answer.error, answer.error_kind, usage=attempt.usage, extra=extra)
        value = attempt.value
        if value is None:
            return PairAnswer(None, answer.text, "failed", attempt.error(self.noun), usage=attempt.usage, extra=extra,
                              error_kind="parse")
        return PairAnswer(value.winner, answer.text, attempt.status, attempt.error(self.noun), value.reason,
                          attempt.usage, extra)

    def failed(self, judge, item: PairItem, error: str | None, kind: str | None, **more) -> PairAnswer:
        return PairAnswer(None, None, "failed", error, error_kind=kind or "parse", **more)
