"""Conformal calibration (`tpb calibrate`, `judging.calibrated`, `stats.calibration`): known truth from a synthetic
judge on the synthetic release, independent recomputation of small cases by hand, bad input, and the command line,
the records, the reward, the Space and the leaderboard on the tiny random-weight models."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.reading import dataset_identity, dataset_rows
from tangpoetrybench.dataset.synthetic import simulated_readout, simulated_readout_scores, write_records
from tangpoetrybench.errors import DataError
from tangpoetrybench.judging.abstention import Abstention
from tangpoetrybench.judging.calibrated import Calibration, Target, load_calibration, prediction_set, scaled, spread_of
from tangpoetrybench.poems import Poem, write_poems
from tangpoetrybench.rubric import rubric_for_tradition
from tangpoetrybench.judging.results import ResultsFile
from tangpoetrybench.stats.agree import calibrate, judged_file, judged_of
from tangpoetrybench.stats.calibration import (TooFew, conformal_quantile, evaluate, evaluate_records, fit, fit_sets,
                                               fit_target, fit_temperature, needed, one_way, poem_coverage, reliability,
                                               risk_coverage)

TANG = rubric_for_tradition("tang")
COLUMNS = ["image_id", "poem_id", "generator", "quality", *TANG.keys]
SEEDS = range(20)


def rows(dataset: Path, split: str, config: str = "images") -> list[dict]:
    return list(dataset_rows(dataset, config, split, COLUMNS))


def by_id(records: list[dict]) -> dict[str, dict]:
    return {r["image_id"]: r for r in records}


def results(records: dict[str, dict]) -> ResultsFile:
    """A SIMULATED judge's records as a results file (read by the one rule, never written)."""
    return ResultsFile.of_records(records.values(), "simulated.jsonl")


def fitted(dataset: Path, train: list[dict], alpha: float, **judge) -> tuple[Calibration, dict]:
    records = by_id(simulated_readout(train, TANG, **judge))
    judged = judged_of(train, results(records), TANG, "train")
    return fit(judged, one_way(records, "train"), dataset_identity(dataset, "images", "train"), alpha), records


# --- by hand ---

def test_the_conformal_quantile_and_its_finite_sample_correction_by_hand():
    scores = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6]  # n = 9 images, each a poem of its own
    assert conformal_quantile(scores, 0.2) == 0.8  # ⌈0.8 · 10⌉ = 8th smallest
    assert conformal_quantile(scores, 0.1) == 0.9  # ⌈0.9 · 10⌉ = 9th, not the 10th (float)
    with pytest.raises(TooFew, match="8 calibration images of 8 poems, but α = 0.1 needs images of at least 9 poems"):
        conformal_quantile(scores[:8], 0.1)
    assert needed(0.1) == 9 and needed(0.2) == 4 and needed(0.4) == 2 and needed(0.5) == 1
    assert conformal_quantile([math.inf, *scores[:8]], 0.2) == 0.9  # one miss among nine: still finite
    assert conformal_quantile([math.inf, math.inf, *scores[:7]], 0.2) == math.inf  # two: the whole range
    # poems of unequal sizes weigh one each: A's three residuals 1/3 each, B, C and D's one 1 each; K = 4
    residuals, poems = [0.1, 0.2, 0.9, 0.3, 0.5, 0.4], [0, 0, 0, 1, 2, 3]
    # α = 0.4: (1 − α)(K + 1) = 3; cumulative weights 1/3, 2/3, 5/3 (0.3), 8/3 (0.4), 11/3 (0.5): the first ≥ 3 is 0.5
    # (a quantile ranked per image, k = ⌈0.6 · (6 + 3)⌉ = 6, gave 0.9); α = 0.5: 2.5, reached at 0.4
    assert conformal_quantile(residuals, 0.4, poems) == 0.5 and conformal_quantile(residuals, 0.5, poems) == 0.4
    # equal sizes m: the weight reaches (1 − α)(K + 1) at the ⌈(1 − α)(n + m)⌉-th residual; K = 4, m = 2, α = 0.4:
    # the ⌈0.6 · 10⌉ = 6th smallest of 0.1, 0.2, 0.3, 0.4, 0.5, 0.7, 0.8, 0.9
    assert conformal_quantile(scores[:8], 0.4, [0, 0, 1, 1, 2, 2, 3, 3]) == 0.7
    with pytest.raises(TooFew, match="6 calibration images of 1 poem, but α = 0.1 needs images of at least 9 poems"):
        conformal_quantile(residuals, 0.1, [0] * 6)


def test_coverage_counts_each_poem_once_as_the_guarantee_does_by_hand():
    # poem 0: 1 of 1 covered, poem 1: 1 of 3, poem 2: no pair; pooled over images it would be 2/4
    hit, total = np.array([1.0, 1.0, 0.0]), np.array([1.0, 3.0, 0.0])
    assert poem_coverage(hit, total) == pytest.approx((1 + 1 / 3) / 2)
    weights = np.array([[1, 1, 1], [2, 0, 1], [0, 0, 3]])  # resamples: as drawn, poem 0 twice, only poem 2
    assert np.allclose(poem_coverage(hit, total, weights), [(1 + 1 / 3) / 2, 1.0, np.nan], equal_nan=True)
    assert poem_coverage(np.zeros(2), np.zeros(2)) is None


def test_intervals_sets_and_confidences_applied_by_hand():
    calibration = Calibration(
        alpha=0.2, evaluator="pae", model="m", settings={"rubric": "r"}, dataset={}, poems=[], n_images=9,
        quality=Target(9, 1, q_plain=0.2, q_normalised=2.0),
        dimensions={"safety": Target(9, 1, 0.3, None, 9, set_threshold=0.75, temperature=2.0)}, spread_floor=0.01)
    readout = {"quality_sd": 0.04, "dimensions": {"safety": {"distribution": {"1.0": 0.6, "0.5": 0.3, "0.0": 0.1}}}}
    block = calibration.apply({"safety": 0.75}, 0.5, readout)
    assert block["quality"] == [0.4, 0.6]  # 0.5 ± 2 · (0.04 + 0.01)
    assert block["scores"]["safety"] == [0.45, 1.0]  # plain: 0.75 ± 0.3, cut at 1
    assert block["sets"]["safety"] == ["1.0", "0.5"]  # p ≥ 1 − 0.75
    top = 0.6 ** 0.5 / (0.6 ** 0.5 + 0.3 ** 0.5 + 0.1 ** 0.5)  # p^(1/T), T = 2
    assert block["confidence"]["safety"] == pytest.approx(top, abs=1e-6)
    assert calibration.apply({"safety": 0.75}, 0.5, None)["quality"] == [0.3, 0.7]  # no spread: the plain interval
    assert calibration.apply({}, None, None) is None  # a failed answer has no interval
    assert prediction_set({"1.0": 0.6, "0.5": 0.3, "0.0": 0.1}, 0.5) == ["1.0"]
    assert prediction_set({"1.0": 0.6, "0.5": 0.3, "0.0": 0.1}, 1.0) == ["1.0", "0.5", "0.0"]
    assert scaled({"a": 0.9, "b": 0.1}, 2.0)["a"] == pytest.approx(0.75)  # 3 / (3 + 1)
    mean = 0.6 + 0.15
    assert spread_of(readout["dimensions"]["safety"]) == pytest.approx(
        math.sqrt(0.6 * (1 - mean) ** 2 + 0.3 * (0.5 - mean) ** 2 + 0.1 * mean ** 2))
    assert spread_of({"distribution": {"1.0": 0.0, "null": 1.0}}) is None


def test_ece_the_prediction_set_threshold_and_the_temperature_by_hand():
    found = reliability([0.95, 0.95, 0.65, 0.65, 0.25, 0.7], [1, 0, 1, 1, 0, 1])
    # bins: 0.9–1.0 (conf 0.95, acc 0.5), 0.6–0.7 (0.65, 0.65, 0.7 on its upper edge: conf 2/3, acc 1), 0.2–0.3
    assert found["ece"] == pytest.approx(2 / 6 * 0.45 + 3 / 6 * (1 - 2 / 3) + 1 / 6 * 0.25)
    assert [b["n"] for b in found["bins"]] == [0, 0, 1, 0, 0, 0, 3, 0, 0, 2]
    probs = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]])
    labels = np.array([0, 0, 0, 1])  # 1 − p(label): 0.1, 0.4, 0.7, 0.2; n = 4, α = 0.5: k = ⌈0.5 · 5⌉ = 3 → 0.4
    target = fit_sets(Target(4, 1, 0.1), probs, labels, np.arange(4), 0.5)
    assert target.set_threshold == pytest.approx(0.4) and target.set_n == 4
    # p = (0.9, 0.1) throughout and the top anchor right 3 times in 4: p_T(top) = 9^(1/T) / (9^(1/T) + 1) = 3/4 at
    # T = ln 9 / ln 3 = 2, which minimises the negative log-likelihood
    assert fit_temperature(np.array([[0.9, 0.1]] * 4), np.array([0, 0, 0, 1])) == pytest.approx(2.0, abs=1e-4)
    assert fit_temperature(np.zeros((0, 2)), np.zeros(0, int)) is None


def test_a_human_score_half_way_between_two_anchors_goes_to_the_higher_everywhere(demo_built):
    """docs/calibration.md: ties go to the higher anchor. Half-way is decided exactly (0.5 is as far from 0.33 as from
    0.67, though their float distances differ in the last bit), for every pair of neighbouring anchors of both bundled
    rubrics, by the one snapping rule (`Dimension.nearest_score`) that the calibration's people's anchors, the
    synthetic judge and the Space's nearest anchor use. Each rated image's human core imagery set to 0.5 and the
    readout's mass on 0.67 (0.6) and 0.33 (0.3): the people's anchor is 0.67, so the prediction set's threshold is
    1 − 0.6, the readout's ECE |1 − 0.6| and the fitted temperature sharpens (below 1)."""
    from tangpoetrybench.hub.space import nearest_anchor

    for rubric in (TANG, rubric_for_tradition("song_ci")):
        for dim in rubric.dimensions:
            ordered = sorted(dim.scores)
            for low, high in zip(ordered, ordered[1:]):
                half = (low + high) / 2
                assert dim.nearest_score(half) == high and dim.nearest_score(half - 1e-6) == low, (dim.key, half)
    imagery = TANG.dimension("core_imagery")
    assert nearest_anchor(TANG, imagery, 0.5).startswith("b: ") and nearest_anchor(TANG, imagery, 0.835).startswith("a")
    train = [{**row, "core_imagery": 0.5 if row["quality"] is not None else None} for row in rows(demo_built, "train")]
    records = by_id(simulated_readout(train, TANG))
    for record in records.values():
        record["readout"]["dimensions"]["core_imagery"]["distribution"] = {"1.0": 0.05, "0.67": 0.6, "0.33": 0.3,
                                                                           "0.0": 0.05}
    judged = judged_of(train, results(records), TANG, "train")
    rated = judged.labels("core_imagery")[judged.rated]
    assert len(rated) and set(rated) == {judged.anchor_texts("core_imagery").index("0.67")}
    calibration = fit(judged, one_way(records, "train"), dataset_identity(demo_built, "images", "train"), 0.2)
    target = calibration.dimensions["core_imagery"]
    assert target.set_threshold == pytest.approx(0.4) and target.temperature < 1
    assert calibration.diagnostics["per_dimension"]["core_imagery"]["ece_before"] == pytest.approx(0.4)


# --- known truth: the synthetic judge on the synthetic release ---

def test_coverage_over_twenty_seeds_is_in_the_band_and_adaptive_intervals_follow_the_spread(demo_built):
    """The synthetic judge's quality error is σ·z with σ drawn per image and reported as `quality_sd`: the normalised
    residuals are exchangeable across images, so test coverage has a known distribution. Over 20 seeds, coverage of
    the held-out images (four of each poem: pooled over images is per poem) lies within the binomial band (plus the
    calibration quantile's own spread over K poems) between the promised 1 − α and 1 − α + 2/(K + 1)."""
    alpha = 0.2
    train, held = rows(demo_built, "train"), rows(demo_built, "validation") + rows(demo_built, "test")
    covered, spread, width = [], [], []
    adaptive_low_high, plain_low_high = [], []
    for seed in SEEDS:
        calibration, _ = fitted(demo_built, train, alpha, seed=seed)
        records = by_id(simulated_readout(held, TANG, seed=seed))
        assert evaluate(calibration, judged_of(held, results(records), TANG, "held"))["quality"]["method"] == "normalised"
        plain = dataclasses.replace(calibration, quality=dataclasses.replace(calibration.quality, q_normalised=None))
        sd = np.array([r["readout"]["quality_sd"] for r in records.values()])
        human = np.array([r["quality"] for r in held])
        small = sd < np.median(sd)
        for cal, store in ((calibration, adaptive_low_high), (plain, plain_low_high)):
            intervals = [cal.apply(r["scores"], r["quality"], r["readout"])["quality"] for r in records.values()]
            inside = np.array([lo <= h <= hi for (lo, hi), h in zip(intervals, human)])
            store.append((inside[small].mean(), inside[~small].mean()))
            if cal is calibration:
                covered += list(inside)
                spread += list(sd)
                width += [hi - lo for lo, hi in intervals]
    poems, n_test = calibration.quality.n_poems, len(held)
    top = 1 - alpha + 2 / (poems + 1)  # the most a quantile over K poems covers, where residuals do not tie
    p = 1 - alpha
    sd = math.sqrt((p * (1 - p) / (poems + 2) + p * (1 - p) / n_test) / len(SEEDS))
    assert 1 - alpha - 3 * sd <= np.mean(covered) <= top + 3 * sd
    spread, width = np.array(spread), np.array(width)
    low = spread < np.median(spread)
    assert width[low].mean() < 0.6 * width[~low].mean()  # narrow where the judge is sure
    adaptive, plain = np.mean(adaptive_low_high, axis=0), np.mean(plain_low_high, axis=0)
    assert abs(adaptive[0] - adaptive[1]) < abs(plain[0] - plain[1])  # plain over-covers the sure images
    assert plain[0] > adaptive[0]


def test_coverage_per_poem_holds_when_hard_poems_have_fewer_images():
    """Known truth with poems of unequal sizes, as real data has them (unrated images, dimensions the people judged
    not applicable): a hard poem (error σ = 0.3) has one or two pairs, an easy one (σ = 0.05) four to six. The
    guarantee is over a new poem and one of its images: over 20 seeds, the mean over held-out poems of the share of
    their images covered lies in the binomial band (plus the quantile's own spread over K calibration poems) between
    1 − α and 1 − α + 2/(K + 1). Pooled over images coverage is higher (the easy poems' many images weigh more
    there); the rank ⌈(1 − α)(n + m)⌉ of a pooled quantile met only that, and gave about 0.83 per poem here."""
    alpha, n_poems, n_test = 0.1, 40, 200
    per_poem, per_image = [], []
    for seed in SEEDS:
        rng = np.random.default_rng(seed)

        def poems(k: int) -> tuple[np.ndarray, np.ndarray]:
            hard = rng.random(k) < 0.3
            sizes = np.where(hard, rng.integers(1, 3, k), rng.integers(4, 7, k))
            return np.repeat(np.arange(k), sizes), np.repeat(np.where(hard, 0.3, 0.05), sizes)

        poem_of, sigma = poems(n_poems)
        pred = np.full(len(sigma), 0.5)
        human = pred + sigma * rng.normal(size=len(sigma))
        target = fit_target(pred, human, np.full(len(sigma), np.nan), poem_of, alpha)
        test_of, test_sigma = poems(n_test)
        inside = np.abs(test_sigma * rng.normal(size=len(test_sigma))) <= target.q_plain
        per_poem.append(np.mean(np.bincount(test_of, inside) / np.bincount(test_of)))
        per_image.append(inside.mean())
    p = 1 - alpha
    sd = math.sqrt(p * (1 - p) * (1 / (n_poems + 2) + 1 / n_test) / len(SEEDS))
    assert p - 3 * sd <= np.mean(per_poem) <= p + 2 / (n_poems + 1) + 3 * sd, np.mean(per_poem)
    assert np.mean(per_image) > np.mean(per_poem) + 0.02


def test_temperature_scaling_lowers_an_over_confident_readouts_ece_on_held_out_images(demo_built):
    train, test = rows(demo_built, "train"), rows(demo_built, "test")
    before, after, temperatures = [], [], []
    for seed in SEEDS:
        calibration, _ = fitted(demo_built, train, 0.2, seed=seed, overconfidence=3.0)
        records = by_id(simulated_readout(test, TANG, seed=seed, overconfidence=3.0))
        found = evaluate(calibration, judged_of(test, results(records), TANG, "test"))["reliability"]
        before.append(found["before"]["ece"])
        after.append(found["after"]["ece"])
        temperatures += [t.temperature for t in calibration.dimensions.values()]
    assert np.mean(after) < 0.8 * np.mean(before) and sum(a < b for a, b in zip(after, before)) >= 15
    assert np.median(temperatures) > 1.2  # over-confident: spread out, not sharpened
    calibrated, _ = fitted(demo_built, train, 0.2, seed=0)  # a calibrated readout gets no such push
    assert np.median([t.temperature for t in calibrated.dimensions.values()]) < np.median(temperatures)


def test_selective_judging_keeps_the_narrowest_intervals_by_hand():
    """The risk–coverage curve: a failed answer (no interval) goes to people first, then the widest intervals; an
    unrated image is never counted."""
    nan = math.nan
    pred = np.array([0.5, 0.5, 0.5, 0.5, 0.5, nan, 0.5])
    human = np.array([0.6, 0.4, 0.5, 0.9, 0.45, 0.3, nan])
    intervals = [[0.4, 0.6], [0.3, 0.7], [0.45, 0.55], [0.2, 0.8], [0.35, 0.65], None, [0.45, 0.55]]
    everything, half = risk_coverage(pred, human, intervals, shares=(0.0, 0.5))
    assert everything["kept"] == 6 and everything["mae"] == pytest.approx((0.1 + 0.1 + 0 + 0.4 + 0.05) / 5)
    assert everything["within_0.05"] == pytest.approx(2 / 5) and everything["coverage"] == pytest.approx(4 / 6)
    # half of six left to people: the failed one, then the widths 0.6 and 0.4; kept: widths 0.3, 0.2, 0.1
    assert half["kept"] == 3 and half["mae"] == pytest.approx(0.05) and half["coverage"] == 1.0
    assert half["spearman"] is None  # every kept score alike: no ranking to measure


def test_selective_judging_on_the_synthetic_judge_leaves_out_its_largest_errors(demo_built):
    """The synthetic judge's error grows with its reported spread, and so do its adaptive intervals: leaving the
    widest to people, the error on the images kept falls with every share left out (averaged over 20 seeds)."""
    train, held = rows(demo_built, "train"), rows(demo_built, "validation") + rows(demo_built, "test")
    maes = []
    for seed in SEEDS:
        calibration, _ = fitted(demo_built, train, 0.2, seed=seed)
        records = by_id(simulated_readout(held, TANG, seed=seed))
        curve = evaluate(calibration, judged_of(held, results(records), TANG, "held"))["risk_coverage"]
        assert [row["abstain"] for row in curve] == [i / 10 for i in range(10)]
        assert [row["kept"] for row in curve] == [16, 14, 13, 11, 10, 8, 6, 5, 3, 2]  # 16 − round(share · 16)
        maes.append([row["mae"] for row in curve])
    mae = np.mean(maes, axis=0)
    assert (np.diff(mae) < 0).all(), mae
    assert mae[-1] < 0.6 * mae[0]


def write_judge(dataset: Path, folder: Path, **judge) -> dict[str, Path]:
    """The synthetic judge's results on train, test and the unseen generator, as tpb score would write them."""
    files = {"train": ("train", "images"), "test": ("test", "images"), "unseen": ("test", "unseen_generator")}
    return {name: write_records(simulated_readout_scores(dataset, split, config, **judge), folder / f"{name}.jsonl")
            for name, (split, config) in files.items()}


def test_a_shifted_generator_loses_coverage_and_agree_and_the_report_say_so(demo_built, tmp_path, capsys):
    files = write_judge(demo_built, tmp_path, shift={"painter_e": 0.5})
    cal = tmp_path / "calibration.json"
    assert main(["calibrate", "--dataset", str(demo_built), "--scores", str(files["train"]), "--split", "train",
                 "--alpha", "0.2", "--out", str(cal)]) == 0
    assert "synthetic judge" in capsys.readouterr().out
    out = tmp_path / "unseen.json"
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(files["unseen"]), "--config",
                 "unseen_generator", "--calibration", str(cal), "--bootstrap", "200", "--out", str(out)]) == 0
    shown = capsys.readouterr().out
    assert "WARNING: Coverage drops on unseen_generator/test" in shown and "not under" not in shown
    assert "can it rank, can it score?" in shown and "selective judging" in shown
    found = json.loads(out.read_text())["calibration"]
    assert found["quality"]["holds"] is False and found["quality"]["coverage_ci"][1] < 0.8
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(files["test"]), "--calibration", str(cal),
                 "--bootstrap", "200"]) == 0
    assert "Coverage drops" not in capsys.readouterr().out
    report = tmp_path / "report"
    assert main(["report", "--dataset", str(demo_built), "--scores", str(files["test"]), "--calibration", str(cal),
                 "--unseen-scores", str(files["unseen"]), "--bootstrap", "200", "--out", str(report)]) == 0
    text = (report / "report.md").read_text()
    assert "Table 4C" in text and "**Coverage drops on `unseen_generator/test`" in text
    assert "On `images/test` the coverage is consistent with the promised 80 %." in text
    assert (report / "figures" / "reliability_synthetic-readout_images_test.png").is_file()
    numbers = json.loads((report / "numbers.json").read_text())["calibration"]
    assert set(numbers) == {"images/test", "unseen_generator/test"}


# --- bad input ---

def test_too_few_images_for_alpha_are_refused_with_the_number_needed(demo_built, tmp_path, capsys):
    scores = write_records(simulated_readout_scores(demo_built, "validation"), tmp_path / "val.jsonl")
    with pytest.raises(ValueError, match="quality: 4 calibration images of 1 poem, but α = 0.1 needs images of at "
                                         "least 9 poems: calibrate on more poems"):
        calibrate(demo_built, scores)
    assert main(["calibrate", "--dataset", str(demo_built), "--scores", str(scores), "--out", str(tmp_path / "c.json")
                 ]) == 2
    assert "needs images of at least 9 poems" in capsys.readouterr().err and not (tmp_path / "c.json").exists()
    calibration, _ = calibrate(demo_built, scores, alpha=0.5)  # 4 images of one poem: enough for α = 0.5
    assert calibration.n_images == 4 and calibration.dimensions["emotional_resonance"].q_plain is None


def test_a_config_is_the_datasets_own_checked_when_it_is_read(demo_built, tmp_path, capsys):
    """--config takes any name (a haiku release's config is `haiku`); the dataset says which it has."""
    scores = write_records(simulated_readout_scores(demo_built, "validation"), tmp_path / "val.jsonl")
    assert main(["calibrate", "--dataset", str(demo_built), "--scores", str(scores), "--config", "haiku", "--out",
                 str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert "has no config 'haiku'" in err and all(f"'{c}'" in err for c in ("images", "song_ci", "unseen_generator"))
    assert not (tmp_path / "c.json").exists()


def test_a_calibration_refuses_other_settings_evaluators_builds_and_its_own_poems(demo_built, tmp_path):
    train, test = rows(demo_built, "train"), rows(demo_built, "test")
    calibration, train_records = fitted(demo_built, train, 0.2)
    other = by_id(simulated_readout(test, TANG, overconfidence=2.0))
    with pytest.raises(ValueError, match="made with overconfidence 2.0, but the calibration .images/train. with 1.0"):
        evaluate_records(calibration, judged_of(test, results(other), TANG, "t.jsonl"), other, demo_built)
    scalar = {i: {**r, "evaluator": "synthetic-literal"} for i, r in by_id(simulated_readout(test, TANG)).items()}
    with pytest.raises(ValueError, match="made with evaluator 'synthetic-literal', but the calibration .images/train. "
                                         "with 'synthetic-readout'"):
        evaluate_records(calibration, judged_of(test, results(scalar), TANG, "t.jsonl"), scalar, demo_built)
    with pytest.raises(ValueError, match="10 poems of these images .* were calibrated on .images/train.: coverage "
                                         "there would be in-sample"):
        evaluate_records(calibration, judged_of(train, results(train_records), TANG, "train.jsonl"), train_records, demo_built)
    elsewhere = dataclasses.replace(calibration, dataset={**calibration.dataset, "fingerprint": "0" * 16})
    same = by_id(simulated_readout(test, TANG))
    with pytest.raises(ValueError, match="fitted on dataset build 0000000000000000"):
        evaluate_records(elsewhere, judged_of(test, results(same), TANG, "t.jsonl"), same, demo_built)
    # a file: read back as written; edited or incomplete, refused naming the field
    path = calibration.write(tmp_path / "c.json")
    assert load_calibration(path).fingerprint == calibration.fingerprint
    data = json.loads(path.read_text())
    path.write_text(json.dumps({**data, "alpha": 0.3}))
    with pytest.raises(DataError, match="fingerprint: .* does not match the file's content"):
        load_calibration(path)
    path.write_text(json.dumps({**data, "format": "tangpoetrybench-calibration/1"}))
    with pytest.raises(DataError, match="format: a calibration of an earlier version .* counted images, not poems"):
        load_calibration(path)
    broken = {k: v for k, v in data.items() if k != "poems"}
    broken["quality"] = {**data["quality"], "n": -1}
    path.write_text(json.dumps(broken))
    with pytest.raises(DataError, match=r"c.json: poems: missing \(it must be a list(.|\n)*quality.n: not a whole"):
        load_calibration(path)


def served_by(records: list[dict], models: dict[str, str]) -> list[dict]:
    """The records as a fleet's answers: each says which replica answered it (`server`, in turn) and the model that
    replica said it served (`served_model`, `models[server]`), as the served judge records them."""
    servers = list(models)
    return [{**r, "settings": {**r["settings"], "server": servers[k % len(servers)],
                               "served_model": models[servers[k % len(servers)]]}} for k, r in enumerate(records)]


def test_a_fleets_results_calibrate_and_a_fleet_mixing_models_is_refused_naming_them(demo_built, tmp_path, capsys):
    """The served judge's results from two identical replicas (each record naming its server) calibrate, and the
    calibration applies to their test results answered in another order; a fleet whose replicas serve two models is
    refused, naming the models and the servers that answered each; so is applying a calibration of one served model
    to another's results."""
    a, b = "http://10.0.0.5:8000/v1", "http://10.0.0.5:8001/v1"
    same = {a: "pae", b: "pae"}
    train = write_records(served_by(simulated_readout_scores(demo_built, "train"), same), tmp_path / "train.jsonl")
    test = write_records(served_by(simulated_readout_scores(demo_built, "test"), {b: "pae", a: "pae"}),
                         tmp_path / "test.jsonl")
    cal = tmp_path / "calibration.json"
    assert main(["calibrate", "--dataset", str(demo_built), "--scores", str(train), "--split", "train", "--alpha",
                 "0.2", "--out", str(cal)]) == 0, capsys.readouterr().err
    calibration = load_calibration(cal)
    assert calibration.settings["served_model"] == "pae" and "server" not in calibration.settings
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(test), "--calibration", str(cal),
                 "--bootstrap", "200"]) == 0, capsys.readouterr().err
    capsys.readouterr()
    mixed = write_records(served_by(simulated_readout_scores(demo_built, "train"), {a: "pae", b: "Qwen/Qwen3-VL-8B"}),
                          tmp_path / "mixed.jsonl")
    assert main(["calibrate", "--dataset", str(demo_built), "--scores", str(mixed), "--split", "train", "--alpha",
                 "0.2", "--out", str(tmp_path / "mixed.json")]) == 2
    err = capsys.readouterr().err
    assert "answered by more than one model: 'Qwen/Qwen3-VL-8B' (at http://10.0.0.5:8001/v1), 'pae' (at " \
           "http://10.0.0.5:8000/v1)" in err, err
    other = write_records(served_by(simulated_readout_scores(demo_built, "test"), {a: "other"}), tmp_path / "o.jsonl")
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(other), "--calibration", str(cal),
                 "--bootstrap", "200"]) == 2
    assert "made with served_model 'other', but the calibration (images/train) with 'pae'" in capsys.readouterr().err


def test_records_without_human_scores_are_reported_never_dropped(demo_built, tmp_path, capsys):
    """The train split has three unrated images: a calibration fitted on test, applied to train (poem-disjoint),
    lists them; so does a calibration fitted on train."""
    files = write_judge(demo_built, tmp_path)
    calibration, _ = calibrate(demo_built, files["test"], alpha=0.5, split="test")
    judged, read, _ = judged_file(demo_built, files["train"], "train", "images")
    unrated = sorted(r["image_id"] for r in rows(demo_built, "train") if r["quality"] is None)
    found = evaluate_records(calibration, judged, read.records, demo_built)
    assert len(unrated) == 3 and sorted(found["unrated"]) == unrated and found["quality"]["n_pairs"] == 37
    cal = calibration.write(tmp_path / "c.json")
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(files["train"]), "--split", "train",
                 "--calibration", str(cal), "--bootstrap", "0"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "with a result but no human score" in x)
    assert line.startswith("3 images with a result but no human score, left out: ") and all(i in line for i in unrated)
    on_train, _ = calibrate(demo_built, files["train"], alpha=0.2, split="train")
    assert sorted(on_train.diagnostics["unrated"]) == unrated and on_train.n_images == 37


def test_tpb_calibrate_selects_the_widest_intervals_for_people(demo_built, tmp_path, capsys):
    files = write_judge(demo_built, tmp_path)
    cal = tmp_path / "calibration.json"
    assert main(["calibrate", "--dataset", str(demo_built), "--scores", str(files["train"]), "--split", "train",
                 "--alpha", "0.2", "--out", str(cal), "--select", "3", "--pool", str(files["test"]), "--select-out",
                 str(tmp_path / "first.txt")]) == 0
    ids = (tmp_path / "first.txt").read_text().splitlines()
    calibration = load_calibration(cal)
    records = [json.loads(line) for line in files["test"].read_text().splitlines()]
    widths = {r["image_id"]: np.subtract(*calibration.apply(r["scores"], r["quality"], r["readout"])["quality"][::-1])
              for r in records}
    assert ids == sorted(widths, key=lambda i: (-widths[i], i))[:3]
    capsys.readouterr()
    assert main(["calibrate", "--calibration", str(cal), "--select", "2", "--pool", str(files["test"]),
                 "--select-out", str(tmp_path / "first.jsonl")]) == 0
    chosen = [json.loads(line) for line in (tmp_path / "first.jsonl").read_text().splitlines()]
    assert [c["image_id"] for c in chosen] == ids[:2] and chosen[0]["poem_id"] == ids[0].split("/")[1]
    assert chosen[0]["interval"][0] <= chosen[0]["quality"] <= chosen[0]["interval"][1]
    assert main(["calibrate", "--calibration", str(cal), "--out", str(tmp_path / "x.json")]) == 2
    assert main(["calibrate", "--calibration", str(cal), "--select", "2"]) == 2
    assert "needs --pool" in capsys.readouterr().err


# --- the tiny random-weight models: records, resume, reward, Space, leaderboard ---

@pytest.fixture(scope="module")
def tiny_calibrations(demo_built, tiny_models, tmp_path_factory) -> dict[str, Path]:
    """Calibrations (α = 0.5: four validation images of one poem are enough) of the tiny PAE with the readout and
    decoding constrained (the Space's default)."""
    root = tmp_path_factory.mktemp("tiny_cal")
    out = {}
    for name, options in (("expected", ["--readout", "expected"]), ("constrained", ["--constrained"])):
        scores = root / f"val_{name}.jsonl"
        assert main(["score", "--dataset", str(demo_built), "--split", "validation", "--evaluator", "pae", "--model",
                     str(tiny_models["qwen3-vl"]), *options, "--out", str(scores), "--quiet"]) == 0
        calibration, _ = calibrate(demo_built, scores, alpha=0.5)
        out[name] = calibration.write(root / f"{name}.json")
    return out


@pytest.mark.slow
def test_score_with_a_calibration_writes_intervals_and_a_resume_never_mixes(demo_built, tiny_models,
                                                                            tiny_calibrations, tmp_path, capsys):
    model, cal = str(tiny_models["qwen3-vl"]), str(tiny_calibrations["expected"])
    out = tmp_path / "test.jsonl"
    score = ["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", model, "--readout", "expected",
             "--out", str(out), "--quiet"]
    assert main([*score, "--calibration", cal]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    fingerprint = load_calibration(cal).fingerprint
    assert len(records) == 12 and all(r["settings"]["calibration"] == fingerprint for r in records)
    for r in records:
        low, high = r["calibrated"]["quality"]
        assert r["calibrated"]["alpha"] == 0.5 and 0 <= low <= r["quality"] <= high <= 1
        assert set(r["calibrated"]["sets"]) <= set(TANG.keys) and r["calibrated"]["confidence"]
    capsys.readouterr()
    assert main(score) == 2  # the same file without the calibration
    assert "made with calibration" in capsys.readouterr().err
    assert main([*score[:-3], "--out", str(tmp_path / "other.jsonl"), "--max-pixels", "200000", "--calibration",
                 cal]) == 2
    assert "made with max_pixels 200000, but the calibration" in capsys.readouterr().err
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(out), "--calibration", cal, "--bootstrap",
                 "100"]) == 0
    shown = capsys.readouterr().out
    assert "NOTE: random weights" in shown and "Calibrated intervals at 50 %" in shown
    board = tmp_path / "board"
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(out), "--bootstrap", "100", "--out",
                 str(board)]) == 0
    coverage = json.loads((board / "leaderboard.json").read_text())["agreement_with_humans"]["interval_coverage"]
    assert coverage["calibration"] == [fingerprint] and coverage["n_images"] == 12 and coverage["level"] == 0.5
    assert f"The judge's 50 % intervals (calibration {fingerprint}) hold the human quality of" in (
        board / "leaderboard.md").read_text()


def with_threshold(calibration: Path, scores: Path, out: Path) -> Calibration:
    """The calibration with a selective-judging threshold SET BY HAND at the median spread the tiny judge reported
    on its calibration images (`scores`), so that it abstains on some images and keeps others: nothing here is
    certified by data (tests/test_selective.py tests the fitting)."""
    spreads = [json.loads(line)["readout"]["quality_sd"] for line in scores.read_text().splitlines()]
    threshold = float(np.median(spreads))
    made = dataclasses.replace(load_calibration(calibration), abstention=Abstention(
        "mae", 0.1, 0.1, threshold, "set by hand", sorted({0.01, threshold}) + [None], 0.0, 0.0, 1, 1.0, 0.1))
    made.write(out)
    return made


@pytest.mark.slow
def test_score_abstain_marks_each_record_and_a_resume_with_other_abstain_is_refused(demo_built, tiny_models,
                                                                                    tiny_calibrations, tmp_path,
                                                                                    capsys):
    """`tpb score --calibration F --abstain` keeps every record and marks in each whether the judge abstains on it,
    as `Calibration.abstains` says from its quality and spread; a resume with or without --abstain is refused, and
    --abstain without a threshold is refused before a model loads. The leaderboard ranks on the kept ones and
    `tpb calibrate --select` puts the abstained first."""
    plain = tiny_calibrations["expected"]
    cal = with_threshold(plain, plain.parent / "val_expected.jsonl", tmp_path / "threshold.json")
    out = tmp_path / "test.jsonl"
    score = ["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", str(tiny_models["qwen3-vl"]),
             "--readout", "expected", "--out", str(out), "--quiet"]
    nowhere = [*score[:6], str(tmp_path / "no-model-is-loaded"), *score[7:]]  # refused before a model loads
    assert main([*nowhere, "--calibration", str(plain), "--abstain"]) == 2
    assert "--abstain needs a calibration with a selective-judging threshold, and " \
        f"{load_calibration(plain).fingerprint} holds none: make one with tpb calibrate ... --epsilon E" in \
        capsys.readouterr().err
    assert main([*score, "--abstain"]) == 2
    assert "--abstain needs --calibration FILE" in capsys.readouterr().err and not out.exists()
    assert main([*score, "--calibration", str(tmp_path / "threshold.json"), "--abstain"]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    marks = [r["calibrated"]["abstained"] for r in records]
    assert len(records) == 12 and all(r["settings"]["abstain"] is True for r in records)
    assert marks == [cal.abstains(r["quality"], r["readout"]) for r in records] and 0 < sum(marks) < 12
    assert f"abstained on {sum(marks)} of the 12 images scored now" in capsys.readouterr().out
    assert main([*score, "--calibration", str(tmp_path / "threshold.json")]) == 2  # a resume without --abstain
    assert "made with abstain True" in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == 12
    board = tmp_path / "board"
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(out), "--kept-only",
                 str(tmp_path / "threshold.json"), "--bootstrap", "0", "--out", str(board)]) == 0
    rows = json.loads((board / "leaderboard.json").read_text())["leaderboard"]
    assert sum(r["abstained"] for r in rows) == sum(marks)
    assert main(["calibrate", "--calibration", str(tmp_path / "threshold.json"), "--select", "12", "--pool", str(out),
                 "--select-out", str(tmp_path / "first.jsonl")]) == 0
    chosen = [json.loads(line) for line in (tmp_path / "first.jsonl").read_text().splitlines()]
    by_id = {r["image_id"]: r for r in records}
    assert [by_id[c["image_id"]]["calibrated"]["abstained"] for c in chosen] == sorted(marks, reverse=True)


@pytest.mark.slow
def test_the_reward_carries_the_intervals(tiny_models, tiny_calibrations):
    from PIL import Image

    from tangpoetrybench.poems import sample_poems
    from tangpoetrybench.reward import load_reward

    poems = sample_poems()
    reward = load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", poems=poems, batch_size=2,
                         calibration=tiny_calibrations["expected"])
    images = [Image.new("RGB", (64, 64), (40 * i, 90, 160)) for i in range(3)]
    scores, info = reward(images, [p.poem_id for p in poems[:3]])
    assert info["quality_interval"].shape == (3, 2) and info["alpha"] == 0.5
    assert np.all(info["quality_interval"][:, 0] <= info["quality"])
    assert np.all(info["quality"] <= info["quality_interval"][:, 1])
    assert set(info["score_intervals"]) == set(info["scores"]) and set(info["calibrated_confidence"])
    with pytest.raises(ValueError, match="calibration does not apply"):
        load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", readout="decode",
                    calibration=tiny_calibrations["expected"])


@pytest.mark.slow
def test_the_space_shows_the_interval_beside_each_score(demo_built, tiny_models, tiny_calibrations, tmp_path):
    from PIL import Image

    from tangpoetrybench.hub.space import RUBRICS, Scorer, SpaceConfig, summary_line
    from tangpoetrybench.poems import sample_poems

    scorer = Scorer(SpaceConfig(model=str(tiny_models["qwen3-vl"]), device="cpu",
                                calibration=str(tiny_calibrations["constrained"])))
    image = tmp_path / "moon.png"
    Image.new("RGB", (96, 96), (200, 180, 90)).save(image)
    poem = sample_poems()[0]
    result = scorer.score(str(image), poem.text, poem.title, poem.author, "Tang poetry (唐诗)", with_baselines=False)
    assert "50 % interval [" in summary_line(result, scorer.pae_label, scorer.random_weights)
    intervals = result.calibrated["scores"]
    assert any(intervals.values())
    for row, key in zip(result.table, TANG.keys):
        if row[1] is not None and intervals[key]:
            assert row[1].endswith(f" [{intervals[key][0]:.2f}, {intervals[key][1]:.2f}]")
        elif row[1] is not None:
            assert isinstance(row[1], float)  # a dimension the calibration could not cover: its score alone
    song = next(name for name, key in RUBRICS.items() if key == "song_ci")
    other = scorer.score(str(image), poem.text, poem.title, poem.author, song, with_baselines=False)
    assert "no interval: calibrated under rubric tang@" in summary_line(other, scorer.pae_label, False)


@pytest.mark.parametrize("where, value, says", [
    ("quality.q_plain", float("nan"), "not a number at least 0 or null: nan"),
    ("dimensions.safety.temperature", float("nan"), "not a number above 0 or null: nan"),
    ("dimensions.safety.temperature", 0, "not a number above 0 or null: 0"),
    ("spread_floor", -0.5, "not a number above 0: -0.5"),
    ("quality.q_normalised", float("inf"), "not a number at least 0 or null: inf"),
    ("dimensions.safety.set_threshold", 1.5, "not a number at least 0 and at most 1 or null: 1.5"),
    ("alpha", "0.1", "not a number above 0 and below 1: '0.1'"),
    ("n_images", True, "not a whole number of at least 0: True"),
    ("quality.n_poems", 2.5, "not a whole number of at least 0: 2.5"),
    ("poems", ["p1", 7], "not a list of poem ids: ['p1', 7]"),
    ("random_weights", "no", "not true or false: 'no'"),
])
def test_a_calibration_file_with_a_bad_field_is_refused_at_load_naming_it(tmp_path, capsys, where, value, says):
    """A calibration file edited with a value that no fit makes (NaN, a negative floor, a wrong type) and its
    fingerprint computed again, as anyone can: `tpb score --calibration` refuses it before any model loads, naming the
    file and the field. Before the fix a NaN quantile or temperature, or a negative spread_floor, was taken, and gave
    intervals such as [7.9, -6.9]."""
    calibration = Calibration(
        alpha=0.2, evaluator="pae", model="m", settings={"rubric": "r"}, dataset={}, poems=["p1"], n_images=9,
        quality=Target(9, 1, q_plain=0.2, q_normalised=2.0),
        dimensions={"safety": Target(9, 1, 0.3, None, 9, set_threshold=0.75, temperature=2.0)}, spread_floor=0.01)
    record = json.loads(calibration.write(tmp_path / "good.json").read_text())
    *parents, last = where.split(".")
    node = record
    for key in parents:
        node = node[key]
    node[last] = value
    # the fingerprint computed again over the edited content, as Calibration.fingerprint computes it: anyone can
    record["fingerprint"] = hashlib.sha256(json.dumps({k: v for k, v in record.items() if k not in (
        "fingerprint", "diagnostics")}, sort_keys=True).encode()).hexdigest()[:16]
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(record))  # NaN and Infinity as Python's JSON writes them
    with pytest.raises(DataError, match=re.escape(f"edited.json: {where}: {says}")):
        load_calibration(bad)
    (tmp_path / "images").mkdir()
    Image.new("RGB", (32, 32), "white").save(tmp_path / "images" / "p1.png")
    write_poems([Poem("p1", "静夜思", "李白", "床前明月光", "tang")], tmp_path / "poems.jsonl")
    assert main(["score", "--images", str(tmp_path / "images"), "--poems", str(tmp_path / "poems.jsonl"),
                 "--evaluator", "pae", "--model", str(tmp_path / "no-model-is-loaded"), "--calibration", str(bad),
                 "--out", str(tmp_path / "out.jsonl"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"edited.json: {where}: {says}" in err and "no-model-is-loaded" not in err
    assert not (tmp_path / "out.jsonl").exists()
