"""Which of two illustrations of one poem is better: the pairwise question (`prompt.build_pair_messages`, image A shown
first), its answer `{"winner": "A" | "B", "reason": "…"}` read by `reading.parse_pair_answer`. With `constrained`, on
transformers every answer is decoded in that form (`constrained.PairAnswerConstraint`); vLLM and a server get its
JSON schema."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from PIL import Image

from ...models import fit_pixels
from ..backends import Answer, Backend, Question
from ..constrained import PairAnswerConstraint
from ..evaluators.base import ScoringItem
from ..reading import REPAIR, VERSIONS, parse_pair_answer
from ..prompt import build_pair_messages, pair_answer_schema
from . import Reading

DEFAULT_MAX_NEW_TOKENS = 256


@dataclass
class PairScoringItem(ScoringItem):
    """One ordered pairwise question as a scoring item: `image` is A (shown first), `image_b` is B."""

    image_b: Image.Image | None = None


@dataclass(frozen=True)
class PairConstraint:
    group = "pair"

    def processor(self, constraints: Sequence["PairConstraint"], tokenizer, prompt_length: int, eos: list[int],
                  budget: int) -> PairAnswerConstraint:
        return PairAnswerConstraint(tokenizer, prompt_length, eos, budget)


class Pairwise:
    name = "pairwise"
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
        if self.constrained and backend.name != "transformers":
            raise ValueError(f"--constrained applies to the transformers backend: {backend.name} holds every answer "
                             "to the pairwise JSON schema itself")
        if self.constrained:  # an answer budget too small for the form is an error now, not a failure per pair
            PairAnswerConstraint(backend.processor.tokenizer, 0, [], max_new_tokens)

    def questions(self, item: PairScoringItem, judge) -> list[Question]:
        messages = build_pair_messages(item.poem, judge.rubric_for(item), fit_pixels(item.image, judge.max_pixels),
                                       fit_pixels(item.image_b, judge.max_pixels))
        return [Question(messages, judge.max_new_tokens, schema=pair_answer_schema(), schema_name="pae_pair_answer",
                         constraint=PairConstraint() if self.constrained else None)]

    def read(self, question: Question, answer: Answer) -> Reading:
        parsed = parse_pair_answer(answer.text)
        return Reading(parsed if parsed.winner else None, parsed.status, parsed.error)

    def repair_prompt(self, question: Question, reading: Reading) -> str:
        return REPAIR["winner"]

    def record(self, judge, item, attempts: Sequence) -> Any:
        [attempt] = attempts
        result = judge.outcome(item, attempt)
        if attempt.value is not None:
            result.winner, result.reason = attempt.value.winner, attempt.value.reason
        return result
