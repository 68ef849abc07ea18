"""Reading a judge's answer: one room for every task's reader. Never raises; never guesses.

The rule, for every reader: **a value only where the answer is one of the forms of its task's grammar and no
ambiguity detector fires**; anything else is a failed read whose error names the condition that failed (a served
judge's repair round then asks for the exact form). docs/reading.md has the grammar as a table.

    envelope     what every reader opens first: reasoning wrappers of every family set apart, answer wrappers and
                 fences taken off, NFKC, struck-through text refused
    ambiguity    the detectors every reader runs before it returns a value: corrections, doubts, ties, a scale of
                 the answer's own, a score moved, drafts, stray numbers, a reasoning that concludes otherwise
    core         JSON segments and lenient loading (duplicate keys kept as a `Conflict`, comments returned)
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
