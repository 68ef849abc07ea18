"""The rubric's scores: PAE's question (`prompt.build_messages`), its answer read by `reading.parse_answer`.

- `constrained`: on a backend that constrains decoding (`Backend.constrains`: transformers), decoding keeps every
  answer in the rubric's JSON form (`constrained.AnswerConstraint`), so every answer reads; vLLM and a server get the
  rubric's JSON schema as structured output / response format.
- `explain` ("poem" or "en"): the same question asks for a one-sentence reason per dimension too; the records keep them
  (`EvalResult.reasons`), read apart from the scores so that a broken reason never costs a score.
- `readout="expected"`: nothing is decoded on a local backend, the scores are read from the anchors' probabilities
  (`readout`); a server is asked for its token log-probabilities, read where they hold the anchors (else the decoded
  answer is used, and the record says why).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

from ...models import fit_pixels
from ...rubric import Rubric
from ..backends import Answer, Backend, Question
from ..constrained import AnswerConstraint
from ..reading import REPAIR, VERSIONS, parse_answer
from ..records import ScoresResult
from ..prompt import answer_schema, build_messages
from ..readout import Readout, logprob_tokens, read_logprobs
from . import Reading, Task

DEFAULT_MAX_NEW_TOKENS = 256  # the ten-key answer is about 120 Qwen tokens
EXPLAIN_MAX_NEW_TOKENS = 1536  # room for ten reasons at their longest (MAX_REASON_CHARS each) after the scores
READOUTS = ("decode", "expected")
FALLBACK = "readout: {why}, the decoded answer is used"  # an answer's note where the readout fell back to decoding


def readout_fallback(record: dict) -> str | None:
    """Why a record (`EvalResult.to_json()`) asked for the readout holds a decoded answer instead (a server that
    returned no logprobs, or none at a value's place), or None where it was read out, or not asked for, or read
    nothing."""
    if ((record.get("settings") or {}).get("readout") != "expected" or record.get("readout") is not None
            or record.get("parse_status") == "failed"):
        return None
    found = re.search(re.escape(FALLBACK).replace(re.escape("{why}"), "([^;]+?)"), record.get("error") or "")
    return found.group(1) if found else "decoded"


def refuse_unconstrained(constrained: bool, backend: Backend, form: str) -> None:
    """`--constrained` on a backend that cannot hold decoding to a form (`Backend.constrains`) is refused."""
    if constrained and not backend.constrains:
        raise ValueError(f"--constrained needs a backend that holds decoding to the answer's form; {backend.name} "
                         f"does not, and is asked for {form} JSON schema instead")


@dataclass(frozen=True)
class ScoresConstraint:
    """Decoding held to a rubric's answer form (explain mode's with `explain`); rows of other rubrics decode
    together."""

    rubric: Rubric
    explain: bool

    @property
    def group(self) -> bool:
        return self.explain

    def processor(self, constraints: Sequence["ScoresConstraint"], tokenizer, prompt_length: int, eos: list[int],
                  budget: int) -> AnswerConstraint:
        return AnswerConstraint(tokenizer, [c.rubric for c in constraints], prompt_length, eos, explain=self.explain)


class RubricScores(Task):
    record_type = ScoresResult
    name = record_type.task
    noun = "scores"
    uses_rubric = True
    questions_per_item = 1

    def __init__(self, constrained: bool = False, explain: str | None = None, readout: str = "decode"):
        if readout not in READOUTS:
            raise ValueError(f"unknown readout {readout!r} (known: {', '.join(READOUTS)})")
        if readout == "expected" and constrained:
            raise ValueError("--readout expected decodes nothing, so --constrained has nothing to constrain: give one")
        self.constrained, self.explain, self.readout = constrained, explain, readout
        self.default_max_new_tokens = EXPLAIN_MAX_NEW_TOKENS if explain else DEFAULT_MAX_NEW_TOKENS

    def settings(self, backend: Backend) -> dict[str, Any]:
        return {"parser": VERSIONS["scores"], **({"constrained": True} if self.constrained else {}),
                **({"explain": self.explain} if self.explain else {}),
                **({"readout": self.readout} if self.readout != "decode" else {})}

    def check(self, backend: Backend, max_new_tokens: int) -> None:
        refuse_unconstrained(self.constrained, backend, "the rubric's")

    def questions(self, item, judge) -> list[Question]:
        rubric = judge.rubric_for(item)
        messages = build_messages(item.poem, rubric, fit_pixels(item.image, judge.max_pixels), self.explain)
        return [self.question(rubric, messages, judge.max_new_tokens)]

    def question(self, rubric: Rubric, messages: list[dict], max_new_tokens: int) -> Question:
        """The question under `rubric` with these messages. Its reader needs no messages: an engine that answers
        elsewhere (Ray Data's vLLM stage) reads each answer with `question(rubric, [], …)`."""
        explain = bool(self.explain)
        return Question(messages, max_new_tokens, schema=answer_schema(rubric, explain), schema_name="pae_answer",
                        constraint=ScoresConstraint(rubric, explain) if self.constrained else None,
                        anchors=rubric if self.readout == "expected" else None, meta={"rubric": rubric})

    def read(self, question: Question, answer: Answer) -> Reading:
        if answer.readout is not None:
            return Reading(answer.readout, "ok")
        rubric = question.meta["rubric"]
        if question.anchors is not None and answer.logprobs:  # a server's answer: read out from its logprobs
            read = read_logprobs(logprob_tokens(answer.logprobs), rubric)
            if read is not None:
                return Reading(read, "ok")
        parsed = parse_answer(answer.text, rubric, explain=bool(self.explain))
        if question.anchors is not None:
            why = "the server returned no logprobs" if not answer.logprobs else "the logprobs hold no anchor of a value"
            parsed.notes.append(FALLBACK.format(why=why))
        return Reading(parsed, parsed.status, parsed.error)

    def repair_prompt(self, question: Question, reading: Reading) -> str:
        return REPAIR["explain" if self.explain else "scores"]

    def record(self, judge, item, attempts: Sequence) -> Any:
        [attempt] = attempts
        value = attempt.value
        if isinstance(value, Readout):
            result = judge.outcome(item, attempt, value.scores, value.quality)
            result.readout = value.to_json()
            return result
        if value is None:  # read nothing: every dimension null
            return judge.outcome(item, attempt, dict.fromkeys(judge.rubric_for(item).keys), None)
        result = judge.outcome(item, attempt, value.scores, value.quality)
        result.reasons = value.reasons or None
        return result
