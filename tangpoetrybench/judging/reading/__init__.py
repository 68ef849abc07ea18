"""Reading a judge's answer: one room for every task's reader. Never raises; never guesses.

The rule, for every reader: **the answer, after its envelope, is exactly one form of its task's grammar**, every
value one token of the value grammar, free text only in a form's slot (the pairwise reason, explain mode's
reasons), each slot checked by a closed rule; anything else is a failed read whose error names the condition that
failed (a served judge's repair round then asks for the exact form). docs/reading.md has the grammar as a table.

    envelope     what every reader opens first: reasoning wrappers of every family (which must be empty), answer
                 wrappers and fences taken off, full-width characters as ASCII, struck-through text refused
    core         one JSON value read strictly (syntax repairs that cannot change a value; numbers as written)
    dimensions   which rubric dimension a key or a name names
    slots        the free-text slots' closed rules: the pairwise reason, explain mode's reasons
    scores       the rubric's scores: `parse_answer(text, rubric, explain=False) -> ParsedAnswer`, and explain
                 mode's reasons, kept only where the scores read: `read_reasons(text, rubric)`
    reasons      explain mode's reasons object, read entry by entry where it does not load
    choice       one choice among labelled options: the pairwise winner (`parse_pair_answer`) and the Phase-1
                 letter (`parse_letter`)
    steps        SemJudge's steps: `read_json(text)` and `schema_problems(value, schema)` (jsonschema)

`VERSIONS` holds each reader's version, recorded by the results it reads (`settings["parser"]`), so a results file
is resumed only under the same rules. A change to a reader's readings bumps its version here, and only here.
`REPAIR` holds the repair round's wording per task: it asks for exactly the strict form.
See docs/reading.md.
"""

from .choice import ParsedLetter, ParsedPair, parse_letter, parse_pair_answer
from .scores import ParsedAnswer, answer_quality, excludable, parse_answer, read_reasons
from .steps import read_json, schema_problems

VERSIONS = {"scores": 7, "winner": 5, "letter": 5, "steps": 1}
REPAIR = {
    "scores": "Reply with the JSON object only, in the schema above, and nothing else: no text before or after it, no "
              "comments, no reasoning.",
    "explain": "Reply with the JSON object only, in the schema above, and nothing else: no text before or after it, "
               "no comments, no reasoning. Each reason says only what the image shows for its own dimension: no "
               "numbers, option letters or words of another level.",
    "winner": 'Reply with the JSON object only, and nothing else: {"winner": "A" or "B", "reason": "<one sentence '
              'that names only the chosen image and says what it does better, e.g. Image B better captures the '
              'snow.>"}.',
}

__all__ = ["REPAIR", "VERSIONS", "ParsedAnswer", "ParsedLetter", "ParsedPair", "answer_quality", "excludable",
           "parse_answer", "parse_letter", "parse_pair_answer", "read_json", "read_reasons", "schema_problems"]
