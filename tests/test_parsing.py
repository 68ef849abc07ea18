"""The answer parser, table-driven: `tests/data/parser_cases.jsonl` holds one adversarial answer per line with
the status, scores and a phrase of the notes it must give. A new case is one more line."""

import json
from pathlib import Path

import pytest

from tangpoetrybench.judging.reading import parse_answer
from tangpoetrybench.judging.prompt import format_answer
from tangpoetrybench.rubric import load_rubric

RUBRIC = load_rubric("tang")
CASES = [json.loads(line) for line in (Path(__file__).parent / "data" / "parser_cases.jsonl").read_text(
    encoding="utf-8").splitlines() if line.strip()]
ALWAYS = [k for k in RUBRIC.keys if not any(o.excluded for o in RUBRIC.dimension(k).options)]


def expected_quality(scores: dict) -> float | None:
    """The rule, stated independently: the mean of the scores, if every always-applicable dimension has one."""
    if any(scores[k] is None for k in ALWAYS):
        return None
    values = [v for v in scores.values() if v is not None]
    return sum(values) / len(values)


@pytest.mark.parametrize("case", CASES, ids=[c["case"] for c in CASES])
def test_case(case):
    parsed = parse_answer(case["answer"], RUBRIC)
    assert parsed.status == case["status"], parsed.notes
    if case["status"] == "failed":
        assert parsed.scores == {k: None for k in RUBRIC.keys} and parsed.quality is None and parsed.error
    else:
        expected = dict(zip(RUBRIC.keys, case["scores"]))
        assert parsed.scores == pytest.approx(expected), parsed.notes
        assert parsed.quality == pytest.approx(expected_quality(expected))
    if case["status"] == "ok":
        assert parsed.error is None
    if "note" in case:
        assert case["note"] in (parsed.error or ""), parsed.notes


def test_the_table_covers_enough():
    assert len(CASES) >= 40 and len({c["case"] for c in CASES}) == len(CASES)
    assert {c["status"] for c in CASES} == {"ok", "repaired", "failed"}


def test_what_pae_is_trained_to_answer_is_ok():
    scores = {k: 0.5 for k in RUBRIC.keys}
    assert parse_answer(format_answer(scores, RUBRIC), RUBRIC).status == "ok"
    song = load_rubric("song_ci")
    assert parse_answer(format_answer({k: 1 for k in song.keys}, song), song).status == "ok"
