"""The answer parser on well-formed and malformed answers: it never raises, and says what it repaired."""

import json

import pytest

from tangpoetrybench.parsing import parse_answer
from tangpoetrybench.prompt import format_answer
from tangpoetrybench.rubric import load_rubric

RUBRIC = load_rubric("tang")
KEYS = RUBRIC.keys
GOOD = {"safety": 1, "technical_quality": 0.5, "ai_plausibility": 0.67, "text_integrity": 1,
        "scene_consistency": None, "cultural_coherence": 1, "artistic_style": 0.5, "core_imagery": 0.33,
        "emotional_resonance": 0.67, "overall_impression": 0.75}
GOOD_JSON = json.dumps(GOOD)
N = None


def scores(*values):
    return dict(zip(KEYS, values))


EXPECTED = scores(1.0, 0.5, 0.67, 1.0, N, 1.0, 0.5, 0.33, 0.67, 0.75)


def test_strict_json_is_ok():
    parsed = parse_answer(GOOD_JSON, RUBRIC)
    assert parsed.status == "ok" and parsed.scores == EXPECTED and parsed.error is None
    assert parse_answer(format_answer(GOOD, RUBRIC), RUBRIC).status == "ok"
    assert parse_answer("  \n" + GOOD_JSON + "\n", RUBRIC).status == "ok"


# (answer, expected scores, a phrase the notes must contain)
REPAIRED = [
    (f"```json\n{GOOD_JSON}\n```", EXPECTED, "code fence"),
    (f"```\n{GOOD_JSON}\n```", EXPECTED, "code fence"),
    (f"Here is my assessment:\n{GOOD_JSON}\nHope this helps!", EXPECTED, "text around"),
    (f"Sure. {GOOD_JSON}", EXPECTED, "text around"),
    (GOOD_JSON.replace('"', "'"), EXPECTED, "repaired JSON syntax"),
    (GOOD_JSON[:-1] + ",}", EXPECTED, "repaired JSON syntax"),
    (GOOD_JSON.replace('"safety"', "safety"), EXPECTED, "repaired JSON syntax"),
    (GOOD_JSON.replace('"safety"', '"Safety"').replace('"technical_quality"', '"Technical Quality"'),
     EXPECTED, "renamed keys"),
    (GOOD_JSON.replace('"ai_plausibility"', '"AI plausibility"').replace('"core_imagery"', '"core-imagery"'),
     EXPECTED, "renamed keys"),
    (GOOD_JSON.replace('"safety"', '"安全性"').replace('"overall_impression"', '"整体印象"'), EXPECTED, "renamed keys"),
    (GOOD_JSON.replace('"safety": 1', '"safety": "a"').replace('"artistic_style": 0.5', '"artistic_style": "b"'),
     EXPECTED, "option 'a' read as 1"),
    (GOOD_JSON.replace('"scene_consistency": null', '"scene_consistency": "e"'), EXPECTED, "null (excluded)"),
    (GOOD_JSON.replace('"safety": 1', '"safety": "(a)"'), EXPECTED, "option 'a'"),
    (json.dumps(scores(10, 5, 7, 10, N, 10, 5, 3, 7, 7.5)), scores(1.0, 0.5, 0.7, 1.0, N, 1.0, 0.5, 0.3, 0.7, 0.75),
     "0–10 scale"),
    (json.dumps({k: None if v is None else round(v * 100) for k, v in GOOD.items()}),
     scores(1.0, 0.5, 0.67, 1.0, N, 1.0, 0.5, 0.33, 0.67, 0.75), "0–100 scale"),
    (GOOD_JSON.replace('"safety": 1', '"safety": "100%"').replace('"technical_quality": 0.5', '"technical_quality": "50%"'),
     EXPECTED, "100% read as 1"),
    (GOOD_JSON.replace('"technical_quality": 0.5', '"technical_quality": "5/10"'), EXPECTED, "5/10 read as 0.5"),
    (GOOD_JSON.replace('"safety": 1', '"safety": 1.7'), {**EXPECTED, "safety": None}, "out of range"),
    (GOOD_JSON.replace('"safety": 1', '"safety": -0.2'), {**EXPECTED, "safety": None}, "out of range"),
    (GOOD_JSON.replace('"safety": 1, ', ""), {**EXPECTED, "safety": None}, "safety: missing"),
    (GOOD_JSON.replace('"safety": 1', '"safety": 1, "beauty": 0.3'), EXPECTED, "ignored unknown keys: beauty"),
    (GOOD_JSON.replace('"safety": 1', '"safety": true'), {**EXPECTED, "safety": None}, "not a score"),
    (GOOD_JSON.replace('"safety": 1', '"safety": "high"'), {**EXPECTED, "safety": None}, "not a score"),
    (GOOD_JSON.replace('"safety": 1', '"safety": null'), {**EXPECTED, "safety": None}, "always applies"),
    (GOOD_JSON.replace('"scene_consistency": null', '"scene_consistency": "N/A"'), EXPECTED, "read as null"),
    (GOOD_JSON.replace('"safety": 1', '"safety": {"score": 1, "reason": "fine"}'), EXPECTED, "nested object"),
    (GOOD_JSON.replace('"safety": 1', '"safety": "1"'), EXPECTED, "read the text '1' as a number"),
    (GOOD_JSON.replace('"safety": 1', '"safety": "f"'), {**EXPECTED, "safety": None}, "not an option"),
    (GOOD_JSON.replace(", ", "，").replace(": ", "："), EXPECTED, "repaired JSON syntax"),
    (GOOD_JSON.replace('"safety": 1', '"safety": NaN'), {**EXPECTED, "safety": None}, None),
    (GOOD_JSON[:-1], EXPECTED, "key: value pairs"),  # the closing brace cut off
    ("Safety: 1\nTechnical quality: 0.5\nAI plausibility: 0.67\nText integrity: 1\nScene consistency: null\n"
     "Cultural coherence: 1\nArtistic style: 0.5\nCore imagery: 0.33\nEmotional resonance: 0.67\n"
     "Overall impression: 0.75", EXPECTED, "key: value pairs"),
    ("safety = a, technical_quality = b, overall_impression = 0.75",
     scores(1.0, 0.5, N, N, N, N, N, N, N, 0.75), "ai_plausibility: missing"),
    ("The image deserves: safety: 1; 整体印象: 0.5", {**{k: None for k in KEYS}, "safety": 1.0, "overall_impression": 0.5},
     "key: value pairs"),
    (GOOD_JSON.replace('"safety": 1', '"safety": 1, "Safety": 0'), EXPECTED, "given twice"),
    (json.dumps({k: None if v is None else v * 10 for k, v in GOOD.items()}), None, None),  # 6.7 on 0–10: not halves
    (GOOD_JSON.replace('"overall_impression": 0.75', '"overall_impression": 3'),  # one stray value is not a scale
     {**EXPECTED, "overall_impression": None}, "overall_impression: 3 is out of range"),
    ("Safety: 1\nScene consistency: a moonlit river that barely matches\nOverall impression: b",
     {**{k: None for k in KEYS}, "safety": 1.0, "overall_impression": 0.75}, "scene_consistency: missing"),
    ("Emotional resonance: e.g. the sadness is missing; safety: 1e-1; technical quality: 10**1000",
     {**{k: None for k in KEYS}, "safety": 0.1}, "technical_quality: missing"),
]


@pytest.mark.parametrize("answer,expected,note", REPAIRED)
def test_repairs(answer, expected, note):
    parsed = parse_answer(answer, RUBRIC)
    assert parsed.status == "repaired", (parsed.status, parsed.notes)
    if expected is not None:
        assert parsed.scores == pytest.approx(expected), parsed.notes
    if note is not None:
        assert note in parsed.error, parsed.notes


def test_ambiguous_scale_is_not_guessed():
    answer = json.dumps({k: None if v is None else v * 10 for k, v in GOOD.items()})  # 6.7 and 3.3: not halves
    parsed = parse_answer(answer, RUBRIC)
    assert "scale" not in parsed.error
    assert parsed.scores["safety"] is None and parsed.scores["technical_quality"] is None  # 10 and 5: out of range


FAILED = [
    "",
    "   ",
    None,
    "I cannot evaluate this image.",
    "{}",
    '{"beauty": 1, "charm": 0.5}',
    "[1, 0.5, 0.67]",
    "{{{{",
    "}" * 3 + "{" * 3,
    '{"safety": ' * 2000,
]


@pytest.mark.parametrize("answer", FAILED)
def test_failures_never_raise_and_score_nothing(answer):
    parsed = parse_answer(answer, RUBRIC)
    assert parsed.status == "failed", parsed.notes
    assert parsed.scores == {k: None for k in KEYS}
    assert parsed.error


def test_at_least_thirty_malformed_answers():
    assert len(REPAIRED) + len(FAILED) >= 30
