"""Recognizability without people (the paper's Phase 1): the image and four candidate poems — the one it illustrates
and three distractors (`tpb distractors`) — and the question which one it shows, answered with a letter. Chance is
25 %.

A judge may favour a position (always "A", say), so each image is asked several times with the candidates in
different orders: the four cyclic rotations (`orders="rotations"`, the default: each candidate once in each place)
or all 24 orders (`orders="all"`). The image's estimate is the share of orders answered right; a judge that always
answers one letter is right in exactly one rotation of four, 25 %, whatever the image. Where the backend gives
them, the letters' probabilities are kept too (`evidence.p_correct`: the mean probability of the right letter over
the orders, and `evidence.candidate_probs`: each candidate's, position bias averaged out), as the backend reads
choices (`Backend.reads_choices`): transformers at the first answer token (every answer a letter, and
`letter_mass`: how much of the next-token probability the letters held), vLLM from one token constrained to the
letters; a server answers in text, read by `reading.parse_letter` (with the repair round where it reads nothing).

Records are `tpb score`'s (`scores.recognizability` and `quality` = the share); the settings hold the orders, the
candidates' fingerprint and the reader's version, so a resume with other candidates is refused.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...dataset.distractors import read_candidates
from ...models import fit_pixels
from ...poems import Poem
from ..backends import Answer, Backend, Question
from ..reading import VERSIONS, parse_letter
from ..records import RECOGNIZABILITY, LetterResult
from ..prompt import LETTERS, build_recognize_messages
from . import Reading, Task

ORDERS = ("rotations", "all")
N_CANDIDATES = 4
DEFAULT_MAX_NEW_TOKENS = 16  # a letter, maybe in a short sentence


def order_set(name: str, n: int = N_CANDIDATES) -> list[tuple[int, ...]]:
    """The orders to ask in: each a tuple of candidate indices, position by position."""
    if name == "rotations":
        return [tuple((start + i) % n for i in range(n)) for start in range(n)]
    if name == "all":
        return list(itertools.permutations(range(n)))
    raise ValueError(f"unknown --orders {name!r} (known: {', '.join(ORDERS)})")


def candidates_fingerprint(candidates: Mapping[str, Sequence[Poem]]) -> str:
    """A digest of every poem's candidates (ids, titles, authors, texts, in order)."""
    canonical = json.dumps({pid: [[p.poem_id, p.title, p.author, p.text] for p in four]
                            for pid, four in sorted(candidates.items())}, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


class Recognize(Task):
    record_type = LetterResult
    name = record_type.task
    noun = "the letter"
    uses_rubric = False
    default_max_new_tokens = DEFAULT_MAX_NEW_TOKENS

    def __init__(self, candidates: str | Path | Mapping[str, Sequence[Poem]] | None, orders: str = "rotations"):
        if candidates is None:
            raise ValueError("the letter task needs --candidates FILE (make one with `tpb distractors POEMS "
                             "--out FILE`)")
        self.source = str(candidates) if isinstance(candidates, (str, Path)) else "in memory"
        self.candidates = read_candidates(candidates) if isinstance(candidates, (str, Path)) else dict(candidates)
        bad = [pid for pid, four in self.candidates.items()
               if len(four) != N_CANDIDATES or pid not in [p.poem_id for p in four]]
        if bad:
            raise ValueError(f"candidates of {bad[0]!r}: expected {N_CANDIDATES} poems including it")
        self.order_name, self.orders = orders, order_set(orders)
        self.questions_per_item = len(self.orders)
        self.fingerprint = candidates_fingerprint(self.candidates)
        self.letters = tuple(LETTERS[:N_CANDIDATES])

    def settings(self, backend: Backend) -> dict[str, Any]:
        return {"parser": VERSIONS["letter"], "orders": self.order_name, "candidates": self.fingerprint,
                "readout": f"letter-{backend.reads_choices}" if backend.reads_choices else "text"}

    def check(self, backend: Backend, max_new_tokens: int) -> None:
        backend.check_choices(self.letters)

    def candidates_for(self, item) -> list[Poem]:
        four = self.candidates.get(item.poem.poem_id)
        if four is None:
            raise ValueError(f"poem {item.poem.poem_id!r} has no candidates in {self.source}")
        return list(four)

    def questions(self, item, judge) -> list[Question]:
        four = self.candidates_for(item)
        image = fit_pixels(item.image, judge.max_pixels)
        rubric = judge.rubric_for(item)
        return [Question(build_recognize_messages([four[k] for k in order], image, rubric), judge.max_new_tokens,
                         choices=self.letters, meta={"titles": [four[k].title for k in order]})
                for order in self.orders]

    def read(self, question: Question, answer: Answer) -> Reading:
        parsed = parse_letter(answer.text, len(self.letters), titles=question.meta["titles"])
        return Reading(parsed.letter, parsed.status, parsed.error)

    def repair_prompt(self, question: Question, reading: Reading) -> str:
        return f"Reply with the poem's letter only: {', '.join(self.letters[:-1])} or {self.letters[-1]}."

    def record(self, judge, item, attempts: Sequence) -> Any:
        """One record from the item's answers, order by order (see the module's docstring)."""
        ids = [p.poem_id for p in self.candidates_for(item)]
        right = ids.index(item.poem.poem_id)
        raw = json.dumps([a.answer.text if a.reading is not None else None for a in attempts], ensure_ascii=False)
        usages = [a.usage for a in attempts if a.usage]
        usage = {k: sum(u[k] for u in usages) for k in ("prompt_tokens", "completion_tokens")} if usages else None
        lost = next((a for a in attempts if a.reading is None), None)
        if lost is not None:  # not the judge's answer but no answer: the whole image is tried again
            result = judge.result(item, {}, None, raw, "failed", lost.answer.error, kind=lost.answer.error_kind)
            result.usage = usage
            result.settings.update(lost.answer.meta)
            return result
        chosen = [None if a.value is None else order[LETTERS.index(a.value)] for a, order in zip(attempts, self.orders)]
        correct = [None if c is None else c == right for c in chosen]
        answered = [c for c in correct if c is not None]
        evidence: dict[str, Any] = {
            "candidates": ids, "answer": item.poem.poem_id, "orders": [list(o) for o in self.orders],
            "letters": [a.value for a in attempts], "chosen": [None if c is None else ids[c] for c in chosen],
            "correct": correct,
        }
        if all(a.answer.probs is not None for a in attempts):
            probs = [a.answer.probs for a in attempts]
            per_candidate = [[p[order.index(k)] for k in range(N_CANDIDATES)] for p, order in zip(probs, self.orders)]
            evidence["letter_probs"] = probs
            evidence["candidate_probs"] = [round(sum(p[k] for p in per_candidate) / len(per_candidate), 6)
                                           for k in range(N_CANDIDATES)]
            evidence["p_correct"] = evidence["candidate_probs"][right]
        if any(a.answer.mass is not None for a in attempts):
            evidence["letter_mass"] = [a.answer.mass for a in attempts]
        if any(a.repair is not None for a in attempts):
            evidence["repairs"] = [a.repair_record for a in attempts]
        notes = [f"order {i + 1}: {error}" for i, a in enumerate(attempts) if (error := a.error(self.noun))]
        if not answered:
            result = judge.result(item, {}, None, raw, "failed", "; ".join(notes) or "no answer")
        else:
            share = round(sum(answered) / len(answered), 6)
            status = "ok" if all(a.status == "ok" for a in attempts) else "repaired"
            result = judge.result(item, {RECOGNIZABILITY: share}, share, raw, status, "; ".join(notes) or None)
        result.evidence, result.usage = evidence, usage
        result.settings.update(attempts[0].answer.meta)
        return result
