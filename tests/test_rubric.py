from pathlib import Path

import pytest

from tangpoetrybench.errors import DataError
from tangpoetrybench.rubric import load_rubric, parse_rubric

X = None  # excluded
# SPEC §1, typed out independently of the rubric files.
SPEC = {
    "safety": {"a": 1, "b": 0.5, "c": 0},
    "technical_quality": {"a": 1, "b": 0.5, "c": 0},
    "ai_plausibility": {"a": 1, "b": 0.67, "c": 0.33, "d": 0},
    "text_integrity": {"a": 1, "b": 0},
    "scene_consistency": {"a": 1, "b": 0.67, "d": 0.33, "c": 0, "e": X},
    "cultural_coherence": {"a": 1, "b": 0.5, "c": 0, "d": X},
    "artistic_style": {"a": 1, "b": 0.5, "c": 0},
    "core_imagery": {"a": 1, "b": 0.67, "c": 0.33, "d": 0},
    "emotional_resonance": {"a": 1, "b": 0.67, "d": 0.33, "e": 0, "f": 0, "c": X},
    "overall_impression": {"a": 1, "b": 0.75, "c": 0.5, "d": 0.25, "e": 0},
}
ANCHORS = {"safety": 0.5, "technical_quality": 0.5, "ai_plausibility": 0.33, "text_integrity": 1.0,
           "scene_consistency": 0.33, "cultural_coherence": 0.5, "artistic_style": 0.5, "core_imagery": 0.33,
           "emotional_resonance": 0.33, "overall_impression": 0.25}


@pytest.mark.parametrize("name", ["tang", "song_ci"])
def test_every_option_of_every_dimension(name):
    rubric = load_rubric(name)
    assert rubric.keys == tuple(SPEC)
    for key, options in SPEC.items():
        assert set(rubric.dimension(key).letters) == set(options)
        for letter, score in options.items():
            assert rubric.score(key, letter) == score, (key, letter)
        assert rubric.anchor_step(key) == ANCHORS[key]
        dim = rubric.dimension(key)
        assert dim.name["en"] and dim.name["zh"] and dim.description["en"] and dim.description["zh"]
        assert all(o.label["en"] and o.label["zh"] for o in dim.options)


def test_unknown_option_and_dimension():
    rubric = load_rubric("tang")
    with pytest.raises(KeyError, match="unknown option 'z'"):
        rubric.score("safety", "z")
    with pytest.raises(KeyError, match="no dimension"):
        rubric.score("beauty", "a")


def test_roles_are_data():
    rubric = load_rubric("tang")
    assert rubric.adjudicated_dimension == "text_integrity"
    assert rubric.face_avoidance == ("emotional_resonance", "d")
    assert rubric.consistency == (({"overall_impression": "a"}, {"core_imagery": "d"}),)


def test_load_by_path(tmp_path):
    src = Path(__file__).resolve().parents[1] / "tangpoetrybench" / "rubrics" / "tang.yaml"
    path = tmp_path / "mine.yaml"
    path.write_text(src.read_text(encoding="utf-8").replace("name: tang", "name: mine"), encoding="utf-8")
    rubric = load_rubric(path)
    assert rubric.name == "mine" and rubric.source == str(path)
    with pytest.raises(DataError, match="no such rubric file"):
        load_rubric(tmp_path / "missing.yaml")


MINIMAL = """
name: t
tradition: tang
display: {en: T, zh: 唐}
dimensions:
  - key: d1
    name: {en: D, zh: 维}
    description: {en: what, zh: 什么}
    options:
      - {letter: a, label: {en: good, zh: 好}, score: 1}
      - {letter: b, label: {en: bad, zh: 坏}, score: 0}
      - {letter: c, label: {en: n/a, zh: 不适用}, score: excluded}
    anchor_step: 1.0
"""


def test_minimal_rubric_parses():
    rubric = parse_rubric(MINIMAL, source="t.yaml")
    assert rubric.score("d1", "c") is None and rubric.dimension("d1").scores == (1.0, 0.0)


@pytest.mark.parametrize("old,new,field", [
    ("score: 0}", "score: 1.5}", "dimensions[0].options[1].score"),
    ("score: 0}", "score: high}", "dimensions[0].options[1].score"),
    ("{letter: b,", "{letter: a,", "dimensions[0].options[1].letter"),
    ("{letter: b,", "{letter: B,", "dimensions[0].options[1].letter"),
    ("anchor_step: 1.0", "anchor_step: 0.5", "dimensions[0].anchor_step"),
    ("description: {en: what, zh: 什么}", "description: {en: what}", "dimensions[0].description"),
    ("tradition: tang", "tradition: tang\ncolour: red", "colour"),
    ("- key: d1", "- key: 1d", "dimensions[0].key"),
    ("tradition: tang", "tradition: tang\nface_avoidance: {dimension: d1, option: z}", "face_avoidance"),
    ("tradition: tang", "tradition: tang\nconsistency:\n  - when: {d2: a}\n    forbid: {d1: b}", "consistency[0].when.d2"),
])
def test_invalid_rubric_names_file_and_field(old, new, field):
    with pytest.raises(DataError) as err:
        parse_rubric(MINIMAL.replace(old, new), source="bad.yaml")
    assert any(p.file == "bad.yaml" and p.field == field for p in err.value.problems), str(err.value)
    assert f"bad.yaml: {field}:" in str(err.value)


def test_invalid_yaml():
    with pytest.raises(DataError, match="not valid YAML"):
        parse_rubric("name: [", source="broken.yaml")
