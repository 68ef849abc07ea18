"""Reading a judge's answer: one room for every task's reader, on one core. Never raises; never guesses.

The rule, for every reader: **a careful person reading the answer beside the question agrees with what the reader
returns, or it returns nothing** (a failed read, never a guess).

    core         what every reader does first: NFKC, `<think>` blocks, struck-through text, code fences, the
                 top-level JSON segments and lenient loading, containers and labels (a format, an example or a
                 draft is not an answer), correction words, negation
    dimensions   which rubric dimension a key or a phrase names
    scores       the rubric's scores: `parse_answer(text, rubric, explain=False) -> ParsedAnswer`
    reasons      explain mode's reasons, read apart from the scores: `read_reasons(text, rubric)`
    choice       one choice among labelled options: the pairwise winner (`parse_pair_answer`) and the Phase-1
                 letter (`parse_letter`)
    steps        SemJudge's steps: `read_json(text)` and `schema_problems(value, schema)` (jsonschema)

`VERSIONS` holds each reader's version, recorded by the results it reads (`settings["parser"]`), so a results file
is resumed only under the same rules. A change to a reader's readings bumps its version here, and only here.
See docs/reading.md.
"""

from .choice import ParsedLetter, ParsedPair, parse_letter, parse_pair_answer
from .reasons import read_reasons
from .scores import ParsedAnswer, answer_quality, excludable, parse_answer
from .steps import read_json, schema_problems

VERSIONS = {"scores": 6, "winner": 4, "letter": 4, "steps": 1}

__all__ = ["VERSIONS", "ParsedAnswer", "ParsedLetter", "ParsedPair", "answer_quality", "excludable", "parse_answer",
           "parse_letter", "parse_pair_answer", "read_json", "read_reasons", "schema_problems"]
