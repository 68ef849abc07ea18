"""The one prompt builder: a snapshot of the exact text, determinism, the SFT target and the schema."""

import json
from pathlib import Path

import pytest
from PIL import Image

from tangpoetrybench.errors import DataError
from tangpoetrybench.judging.reading import parse_answer
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.judging.prompt import answer_schema, build_messages, format_answer, system_prompt, user_prompt
from tangpoetrybench.rubric import load_rubric

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.mark.parametrize("rubric,title,snapshot", [
    ("tang", "枫桥夜泊", "prompt_tang_fengqiao.txt"),
    ("song_ci", "卜算子·咏梅", "prompt_song_ci_yongmei.txt"),
])
def test_prompt_snapshot(rubric, title, snapshot):
    poem = next(p for p in sample_poems() if p.title == title)
    text = system_prompt(load_rubric(rubric)) + "\n=====\n" + user_prompt(poem) + "\n"
    assert text == (SNAPSHOTS / snapshot).read_text(encoding="utf-8")


def test_messages_shape_and_determinism():
    rubric, poem = load_rubric("tang"), sample_poems()[0]
    image = Image.new("RGB", (32, 32))
    messages = build_messages(poem, rubric, image)
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"][0] == {"type": "image", "image": image}
    assert messages[0]["content"][0]["text"] == system_prompt(rubric)
    assert build_messages(poem, rubric, image) == messages
    assert build_messages(poem, rubric)[1]["content"][0] == {"type": "image"}  # placeholder for TRL's images column
    for key in rubric.keys:
        assert key in messages[0]["content"][0]["text"]
    assert poem.text in messages[1]["content"][1]["text"]


def test_format_answer_round_trips_through_the_parser():
    rubric = load_rubric("tang")
    scores = {"safety": 1.0, "technical_quality": 0.75, "ai_plausibility": 2 / 3, "text_integrity": 0.0,
              "scene_consistency": None, "cultural_coherence": 1.0, "artistic_style": 0.5, "core_imagery": 0.835,
              "emotional_resonance": None, "overall_impression": 0.625}
    text = format_answer(scores, rubric)
    assert list(json.loads(text)) == list(rubric.keys)
    assert json.loads(text)["ai_plausibility"] == 0.67 and json.loads(text)["overall_impression"] == 0.62
    parsed = parse_answer(text, rubric)
    assert parsed.status == "ok"
    assert parsed.scores == {k: None if v is None else round(v, 2) for k, v in scores.items()}


def test_answer_schema():
    rubric = load_rubric("tang")
    schema = answer_schema(rubric)
    assert schema["required"] == list(rubric.keys) and schema["additionalProperties"] is False
    assert schema["properties"]["safety"] == {"type": "number", "minimum": 0, "maximum": 1}
    assert {"type": "null"} in schema["properties"]["scene_consistency"]["anyOf"]
    nullable = {k for k, v in schema["properties"].items() if "anyOf" in v}
    assert nullable == {"scene_consistency", "cultural_coherence", "emotional_resonance"}


def test_a_rubric_says_how_titles_are_written_in_every_prompt():
    """Titles were always wrapped in 《》: a rubric's `title_format` now writes them, in the scores, pairwise and
    recognizability prompts alike (one function, `rubric.format_title`); the bundled rubrics keep 《》 and their
    fingerprints, and naming the default changes nothing."""
    from tangpoetrybench.judging.prompt import build_pair_messages, build_recognize_messages
    from tangpoetrybench.rubric import DEFAULT_TITLE, format_title, parse_rubric

    tang = load_rubric("tang")
    poem = next(p for p in sample_poems() if p.title == "枫桥夜泊")
    assert tang.title_format == DEFAULT_TITLE and format_title("枫桥夜泊") == format_title("枫桥夜泊", tang) == "《枫桥夜泊》"
    quoted = parse_rubric(tang.yaml_text + "title_format: '“{title}”'\n")
    assert quoted.fingerprint != tang.fingerprint  # it shapes the prompt
    assert parse_rubric(tang.yaml_text + "title_format: 《{title}》\n").fingerprint == tang.fingerprint
    assert user_prompt(poem, quoted).startswith(f"Poem: “枫桥夜泊” {poem.author}\n")
    assert user_prompt(poem) == user_prompt(poem, tang) and "《枫桥夜泊》" in user_prompt(poem)
    texts = [build_messages(poem, quoted)[1]["content"][1]["text"],
             build_pair_messages(poem, quoted)[1]["content"][-1]["text"],
             build_recognize_messages([poem] * 4, rubric=quoted)[1]["content"][1]["text"]]
    assert all("“枫桥夜泊”" in t and "《" not in t for t in texts)
    for bad in ("no title here", "{title}{title}", "{0} {title}", "{title.__class__}", "x" * 50 + "{title}"):
        with pytest.raises(DataError, match="title_format: expected one line"):
            parse_rubric(tang.yaml_text + f"title_format: '{bad}'\n")
