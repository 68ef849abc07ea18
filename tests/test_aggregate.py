"""Aggregation (SPEC §3) on cases computed by hand."""

import pytest

from conftest import rating, write_release
from tangpoetrybench.dataset.aggregate import aggregate
from tangpoetrybench.dataset.qc import QCConfig, run_qc
from tangpoetrybench.dataset.raw_release import read_release

# answers in SPEC order: safety, technical, ai, text, scene, cultural, style, core, emotion, overall
RATINGS = [
    rating("r1", "u1", "g1", "p1", "abbaeaabdb", choice="p1"),
    rating("r2", "u2", "g1", "p1", "aacbbdcaab", choice="p2"),
    rating("r3", "u1", "g2", "p1", "aaaaaaaaca", choice="p1"),
    rating("r4", "u2", "g2", "p1", "aaaaaaaaca", choice=""),
    rating("r5", "u3", "g2", "p1", "aaabaaaaca", choice="p3"),
    rating("r6", "u3", "g1", "p2", "aaaaaaaaaa", seconds=5),  # dropped by the response-time floor
    rating("r7", "u4", "g2", "p2", "aaaaaaaaba", choice="", candidates=""),
    rating("r8", "u4", "g1", "s1", "abaaaaaaaa", choice="", candidates=""),
]
LABELS = ["g1,p1,1,leakage", "g1,p2,0,none"]


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    release = read_release(write_release(tmp_path_factory.mktemp("agg") / "raw", RATINGS, LABELS))
    return aggregate(release, run_qc(release, QCConfig()).kept)


def test_excluded_options_and_adjudicated_label(scores):
    s = scores["g1/p1"]
    expected = {"safety": 1, "technical_quality": 0.75, "ai_plausibility": 0.5, "text_integrity": 0.0,
                "scene_consistency": 0.67, "cultural_coherence": 1.0, "artistic_style": 0.5,
                "core_imagery": 0.835, "emotional_resonance": 0.665, "overall_impression": 0.75}
    assert s.scores == pytest.approx(expected)
    assert s.quality == pytest.approx(6.67 / 10)
    assert s.text_label_source == "adjudicated" and s.text_issue == 1 and s.text_issue_type == "leakage"
    assert s.recognizability == 0.5
    assert s.face_avoidance == 0.5  # one of the two applicable emotion answers is d
    assert s.n_ratings == 2 and s.multi_rated


def test_all_excluded_survey_text_and_missing_phase1(scores):
    s = scores["g2/p1"]
    assert s.scores["emotional_resonance"] is None
    assert s.face_avoidance is None
    assert s.scores["text_integrity"] == pytest.approx(2 / 3)
    assert s.text_label_source == "survey" and s.text_issue is None and s.text_issue_type is None
    assert s.quality == pytest.approx((8 + 2 / 3) / 9)  # nine non-null dimensions
    assert s.recognizability == 0.5  # p1 right, p3 wrong; the missing answer does not count
    assert s.n_ratings == 3


def test_image_whose_ratings_qc_dropped_keeps_its_label(scores):
    s = scores["g1/p2"]
    assert s.n_ratings == 0 and not s.multi_rated
    assert s.quality is None and s.recognizability is None and s.face_avoidance is None
    assert s.scores["text_integrity"] == 1.0 and s.text_label_source == "adjudicated"
    assert all(v is None for k, v in s.scores.items() if k != "text_integrity")


def test_unrated_unlabelled_image(scores):
    s = scores["g1/p3"]
    assert s.n_ratings == 0 and s.quality is None and s.text_label_source is None
    assert all(v is None for v in s.scores.values())


def test_no_phase1_answers_gives_null_recognizability(scores):
    s = scores["g2/p2"]
    assert s.recognizability is None
    assert s.scores["emotional_resonance"] == 0.67 and s.face_avoidance == 0.0


def test_song_ci_uses_its_rubric(scores):
    s = scores["g1/s1"]
    assert s.scores["technical_quality"] == 0.5 and s.n_ratings == 1
