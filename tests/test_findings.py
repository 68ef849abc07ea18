"""Every finding of `tpb report`, recomputed by a small independent implementation: the expected side reads the
built Parquet files with pyarrow and follows the definitions the report states in its own text, with no project
code, so a definition cannot drift without a failing test. Also: numbers.json is byte-identical across processes."""

import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from scipy import stats

from tangpoetrybench.reporting.report import build_report, render_markdown

KEYS = ["safety", "technical_quality", "ai_plausibility", "text_integrity", "scene_consistency", "cultural_coherence",
        "artistic_style", "core_imagery", "emotional_resonance", "overall_impression"]
EXCLUDED = {"scene_consistency": "e", "cultural_coherence": "d", "emotional_resonance": "c"}  # SPEC §1
EMOTION_OPTIONS = {"a": 1.0, "b": 0.67, "d": 0.33, "e": 0.0, "f": 0.0}


@pytest.fixture(scope="module")
def release(demo_built):
    """The bundled sample's synthetic release (seed 0) and its report's numbers."""
    return demo_built, build_report(demo_built, n_bootstrap=300).numbers


def _rows(folder: Path, config: str) -> list[dict]:
    return [r for f in sorted((folder / "data" / config).glob("*.parquet")) for r in pq.read_table(f).to_pylist()]


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _rho(x, y):
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    if len(pairs) < 3 or len({a for a, _ in pairs}) < 2 or len({b for _, b in pairs}) < 2:
        return None
    return stats.spearmanr(*zip(*pairs)).statistic


def _han(text: str) -> int:
    return sum(0x3400 <= ord(c) <= 0x4DBF or 0x4E00 <= ord(c) <= 0x9FFF or 0xF900 <= ord(c) <= 0xFAFF
               or 0x20000 <= ord(c) <= 0x323AF for c in text)


def test_every_finding_matches_an_independent_recomputation(release):
    folder, numbers = release
    images, ratings = _rows(folder, "images"), [r for r in _rows(folder, "ratings") if r["image_config"] == "images"]
    f = numbers["findings"]
    generators = sorted({r["generator"] for r in images})

    for k in KEYS[:-1]:  # ρ with overall impression
        expected = _rho([r[k] for r in images], [r["overall_impression"] for r in images])
        assert f["spearman_with_overall"][k] == pytest.approx(expected), k

    # difficulty: per poem, ties at the quartile boundary inside, per-poem means, overall impression left out
    poems = defaultdict(list)
    for r in images:
        poems[r["poem_id"]].append(r)
    level = {p: _mean([r["overall_impression"] for r in rs]) for p, rs in poems.items()}
    level = {p: v for p, v in level.items() if v is not None}
    cut = len(level) // 4
    low, high = sorted(level.values())[cut - 1], sorted(level.values())[-cut]
    hard = [p for p, v in level.items() if v <= low]
    easy = [p for p, v in level.items() if v >= high]
    d = f["difficulty"]
    assert (d["quartile_size"], d["hard_poems"], d["easy_poems"]) == (cut, len(hard), len(easy))
    assert "overall_impression" not in d["easy_minus_hard_gap"]
    for k in KEYS[:-1]:
        per_poem = {p: _mean([r[k] for r in rs]) for p, rs in poems.items()}
        expected = _mean([per_poem[p] for p in easy]) - _mean([per_poem[p] for p in hard])
        assert d["easy_minus_hard_gap"][k] == pytest.approx(expected), k
    lengths = {p: _han(rs[0]["poem"]) for p, rs in poems.items()}
    assert d["spearman_with_length"] == pytest.approx(_rho([level[p] for p in level], [lengths[p] for p in level]))
    assert (d["min"], d["max"]) == (pytest.approx(min(level.values())), pytest.approx(max(level.values())))

    rec = f["recognizability"]
    high_rated = [r["recognizability"] for r in images
                  if r["quality"] is not None and r["quality"] >= 0.9 and r["recognizability"] is not None]
    assert rec["highly_rated_images"] == len(high_rated)
    assert rec["mean_of_highly_rated"] == pytest.approx(_mean(high_rated))
    assert rec["spearman_with_quality"] == pytest.approx(_rho([r["recognizability"] for r in images],
                                                              [r["quality"] for r in images]))
    assert any(v["leakage_images_left_out"] for v in rec["by_generator"].values())  # the test reaches the rule
    for g in generators:
        mine = [r for r in images if r["generator"] == g and r["recognizability"] is not None]
        clean = [r["recognizability"] for r in mine if r["text_issue_type"] != "leakage"]
        assert rec["by_generator"][g]["mean_without_leakage"] == pytest.approx(_mean(clean)), g
        assert rec["by_generator"][g]["leakage_images_left_out"] == len(mine) - len(clean)

    # face avoidance pooled over applicable emotion ratings; the option breakdown over all generators
    applicable = [r for r in ratings if r["emotional_resonance_option"] not in (None, "c")]
    for g in generators:
        mine = [r["emotional_resonance_option"] for r in applicable if r["generator"] == g]
        assert f["face_avoidance"][g]["rate"] == pytest.approx(mine.count("d") / len(mine)), g
        assert f["face_avoidance"][g]["ratings"] == len(mine)
    for option in EMOTION_OPTIONS:
        share = sum(r["emotional_resonance_option"] == option for r in applicable) / len(applicable)
        assert f["emotion_option_shares"][option]["share"] == pytest.approx(share), option

    for k, option in EXCLUDED.items():
        answered = [r[f"{k}_option"] for r in ratings]
        assert f["applicability"][k]["share"] == pytest.approx(sum(a != option for a in answered) / len(answered))

    # the depict-to-evoke gap: Tang's rubric names core imagery as depicting and emotional resonance as evoking
    de = f["depict_evoke"]
    assert (de["depict"], de["evoke"]) == (["core_imagery"], ["emotional_resonance"])
    for g in generators:
        both = [(r["core_imagery"], r["emotional_resonance"]) for r in images if r["generator"] == g
                and r["core_imagery"] is not None and r["emotional_resonance"] is not None]
        mine = de["by_generator"][g]
        assert mine["images"] == len(both) and len(both) > 0, g
        assert mine["depict"] == pytest.approx(_mean([d for d, _ in both]))
        assert mine["evoke"] == pytest.approx(_mean([e for _, e in both]))
        assert mine["gap"] == pytest.approx(_mean([d - e for d, e in both]))
        assert mine["interval"][0] <= mine["gap"] <= mine["interval"][1]

    for group in ("expert", "crowd"):
        answers = [r["phase1_correct"] for r in ratings if r["rater_group"] == group and r["phase1_correct"] is not None]
        assert f["phase1_accuracy_by_group"][group]["accuracy"] == pytest.approx(np.mean(answers))
        assert f["phase1_accuracy_by_group"][group]["answers"] == len(answers)


def test_han_characters_of_every_ideograph_block_count():
    from tangpoetrybench.poems import han_count

    text = "月落乌啼\u3400\uf900\U00020000\U0002a700\U00030000，。ａA"  # extensions A, B, C, G; a compatibility one
    assert han_count(text) == _han(text) == 9


def test_ties_at_the_quartile_boundary_all_belong_to_the_quartile():
    from tangpoetrybench.reporting.findings import difficulty

    rows = [{"poem_id": f"p{i}", "poem": "月", "overall_impression": v, "core_imagery": c}
            for i, (v, c) in enumerate([(0.25, 0.0), (0.25, 1.0), (0.5, 0.5), (0.75, 0.5), (1.0, 1.0), (1.0, 1.0),
                                        (1.0, 0.0), (0.5, 0.5)])]
    d = difficulty(rows, ["core_imagery", "overall_impression"], "overall_impression")
    assert (d["quartile_size"], d["hard_poems"], d["easy_poems"]) == (2, 2, 3)
    assert d["easy_minus_hard_gap"] == {"core_imagery": pytest.approx(2 / 3 - 0.5)}


def test_headings_name_the_analysis_and_zero_width_intervals_are_marked(release):
    folder, _ = release
    md = render_markdown(build_report(folder, n_bootstrap=200))
    assert "Recognizing a poem is not" not in md and "### Recognizability and quality" in md
    assert "pooled over ratings" in md and "every poem tied at its boundary" in md and "exactly" in md
    if "‡" in md:  # a generator whose every image sits at one value
        assert "interval of zero width" in md


@pytest.mark.slow
def test_numbers_json_is_byte_identical_across_processes(release, tmp_path):
    folder, _ = release
    outputs = []
    for hash_seed in ("1", "2"):
        out = tmp_path / f"rep{hash_seed}"
        subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "report", "--dataset", str(folder), "--out",
                        str(out), "--bootstrap", "200"], check=True, capture_output=True,
                       env={**os.environ, "PYTHONHASHSEED": hash_seed})
        outputs.append((out / "numbers.json").read_bytes())
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["findings"]["difficulty"]["poems"] > 0
