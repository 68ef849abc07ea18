"""Selective judging with a guarantee (`stats.selective`, `tpb calibrate --epsilon`): the Hoeffding–Bentkus p-value
and the per-poem errors by hand, the guarantee over sixty random poem splits of a SYNTHETIC judge whose error is
known, the threshold recomputed independently from the method's definition, refusals, and the calibration file."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats

from tangpoetrybench.errors import DataError
from tangpoetrybench.judging.abstention import Abstention, SelectiveOptions
from tangpoetrybench.judging.calibrated import FORMAT, FORMAT_2, Calibration, Target, load_calibration
from tangpoetrybench.stats.selective import (GRID, METHOD, Uncertifiable, abstention_sentence, fit_abstention,
                                             hb_p_value, kept_error, poem_losses)

EPSILON, DELTA = 0.08, 0.1
SPLITS = 60


# --- by hand ---

def test_the_hoeffding_bentkus_p_value_by_hand():
    # n = 10 losses with mean 0.1 against ε = 0.3: Hoeffding exp(−10·kl(0.1, 0.3)); Bentkus e·P(Bin(10, 0.3) ≤ 1)
    kl = 0.1 * math.log(0.1 / 0.3) + 0.9 * math.log(0.9 / 0.7)
    bentkus = math.e * (0.7 ** 10 + 10 * 0.3 * 0.7 ** 9)
    assert math.exp(-10 * kl) < bentkus and hb_p_value(0.1, 10, 0.3) == pytest.approx(math.exp(-10 * kl))
    # n = 100, mean 0.1, ε = 0.2: the binomial term e·P(Bin(100, 0.2) ≤ 10) is the smaller
    kl = 0.1 * math.log(0.1 / 0.2) + 0.9 * math.log(0.9 / 0.8)
    bentkus = math.e * sum(math.comb(100, j) * 0.2 ** j * 0.8 ** (100 - j) for j in range(11))
    assert bentkus < math.exp(-100 * kl) and hb_p_value(0.1, 100, 0.2) == pytest.approx(bentkus)
    assert hb_p_value(0.0, 20, 0.2) == pytest.approx(min(0.8 ** 20, math.e * 0.8 ** 20))  # kl(0, ε) = −log(1 − ε)
    assert hb_p_value(0.35, 50, 0.3) == 1.0  # a mean above ε rejects nothing
    assert hb_p_value(0.0, 0, 0.3) == 1.0  # nothing kept: nothing to test


def test_the_errors_per_poem_by_hand():
    """Each poem weighs one: its kept images' mean |human − score|, or the share of wrong orders among its pairs of
    kept images (human qualities at least 0.05 apart; equal scores half wrong); a poem with nothing kept is left
    out."""
    pred = np.array([0.5, 0.7, 0.2, 0.9, 0.4, np.nan, 0.6])
    human = np.array([0.6, 0.4, 0.3, 0.9, 0.5, 0.5, np.nan])
    spread = np.array([0.01, 0.02, 0.2, 0.01, 0.5, 0.01, 0.01])
    poem_of = np.array([0, 0, 0, 1, 2, 2, 2])
    poems, errors = poem_losses(pred, human, spread, poem_of, "mae", 0.02)
    assert poems.tolist() == [0, 1] and errors == pytest.approx([(0.1 + 0.3) / 2, 0.0])  # poem 2: nothing kept
    poems, errors = poem_losses(pred, human, spread, poem_of, "mae", None)  # every score; a failure is never kept
    assert poems.tolist() == [0, 1, 2] and errors == pytest.approx([(0.1 + 0.3 + 0.1) / 3, 0.0, 0.1])
    # poem 0 kept whole: pairs (0.6 vs 0.4: judge 0.5 < 0.7, wrong), (0.6 vs 0.3: right), (0.4 vs 0.3: right)
    poems, errors = poem_losses(pred, human, spread, poem_of, "pairwise", None)
    assert poems.tolist() == [0] and errors == pytest.approx([1 / 3])
    tie = poem_losses(np.array([0.5, 0.5]), np.array([0.2, 0.8]), np.array([0.1, 0.1]), np.array([0, 0]),
                      "pairwise", None)[1]
    assert tie == pytest.approx([0.5])


# --- known truth: a synthetic judge over random poem splits ---

def synthetic_pool(seed: int = 46, n_poems: int = 2400):
    """A SYNTHETIC judge on a pool of poems of one to six images: an image's people's quality is uniform on [0, 1],
    the judge reports a spread σ (log-uniform on [0.01, 0.5]) and its score is the people's plus h·σ·z cut to
    [0, 1], h a hardness per poem (uniform on [0.5, 1.5], unknown to the judge: its errors are correlated within a
    poem, which is why poems are the unit)."""
    rng = np.random.default_rng(seed)
    poem_of = np.repeat(np.arange(n_poems), rng.integers(1, 7, n_poems))
    n = len(poem_of)
    hardness = rng.uniform(0.5, 1.5, n_poems)[poem_of]
    spread = np.exp(rng.uniform(math.log(0.01), math.log(0.5), n))
    human = rng.uniform(0, 1, n)
    pred = np.clip(human + hardness * spread * rng.normal(size=n), 0, 1)
    return pred, human, spread, poem_of


def split(pool, poems: np.ndarray):
    """The pool's images of these poems, the poems renumbered."""
    pred, human, spread, poem_of = pool
    inside = np.isin(poem_of, poems)
    return pred[inside], human[inside], spread[inside], np.unique(poem_of[inside], return_inverse=True)[1]


def per_poem_kept_mae(pred, human, spread, poem_of, max_spread) -> float:
    """The error the guarantee bounds, computed here without the package: over the poems with a kept image, the mean
    of their kept images' mean |human − score|."""
    kept = np.ones(len(pred), bool) if max_spread is None else spread <= max_spread + 1e-9
    counts = np.bincount(poem_of[kept], minlength=int(poem_of.max()) + 1)
    sums = np.bincount(poem_of[kept], np.abs(pred - human)[kept], minlength=len(counts))
    return float(np.mean(sums[counts > 0] / counts[counts > 0])) if counts.any() else math.inf


def test_over_sixty_random_poem_splits_the_kept_error_exceeds_epsilon_in_at_most_a_delta_share():
    """400 calibration poems drawn at random from the pool, the other 2000 held out, sixty times: the threshold's
    per-poem MAE on the held-out poems (their population, as near as 2000 poems tell it) exceeds ε = 0.08 in at most
    a δ = 0.1 share of the splits — no more than a Binomial(60, 0.1) reaches with chance 1 %. The rule that takes the
    largest threshold whose calibration error is below ε, uncorrected, exceeds it far more often: the check can
    fail. And the threshold is not vacuous: it keeps most images."""
    pool = synthetic_pool()
    rng = np.random.default_rng(0)
    exceeded, naive_exceeded, kept = 0, 0, []
    for _ in range(SPLITS):
        order = rng.permutation(int(pool[3].max()) + 1)
        calibration, held = split(pool, order[:400]), split(pool, order[400:])
        abstention = fit_abstention(*calibration, SelectiveOptions(EPSILON, DELTA))
        exceeded += per_poem_kept_mae(*held, abstention.max_spread) > EPSILON
        kept.append(abstention.kept)
        below = [t for t in GRID if per_poem_kept_mae(*calibration, t) <= EPSILON]
        naive_exceeded += per_poem_kept_mae(*held, below[-1]) > EPSILON
    bound = stats.binom.ppf(0.99, SPLITS, DELTA)
    assert exceeded <= bound, (exceeded, bound)
    assert naive_exceeded > bound, naive_exceeded
    assert np.mean(kept) > 0.6


def independent_threshold(pred, human, spread, poem_of, target: str, epsilon: float, delta: float):
    """The threshold from the method's definition, written apart from the package: thresholds 0.01·√2^k
    (k = 0 … 12) and every score; per poem with something kept, its error; the Hoeffding–Bentkus p-value of R > ε
    over those poems; Bonferroni at δ over the 14 thresholds; the largest rejected. Returns (threshold, p, risk, n)."""
    grid = [0.01 * math.sqrt(2) ** k for k in range(13)] + [math.inf]
    rows = []
    for t in grid:
        by_poem: dict[int, list[int]] = {}
        for i in range(len(pred)):
            if not math.isnan(human[i]) and not math.isnan(pred[i]) and (t == math.inf or spread[i] <= t + 1e-9):
                by_poem.setdefault(int(poem_of[i]), []).append(i)
        errors = []
        for images in by_poem.values():
            if target == "mae":
                errors.append(sum(abs(pred[i] - human[i]) for i in images) / len(images))
                continue
            wrong = [0.5 if pred[i] == pred[j] else float((pred[i] > pred[j]) != (human[i] > human[j]))
                     for a, i in enumerate(images) for j in images[a + 1:] if abs(human[i] - human[j]) >= 0.05 - 1e-9]
            if wrong:
                errors.append(sum(wrong) / len(wrong))
        n = len(errors)
        risk = sum(errors) / n if n else 1.0
        rows.append((t, p_value(risk, n, epsilon), risk, n))
    passed = [row for row in rows if row[1] <= delta / len(grid)]
    return passed[-1] if passed else None


def p_value(risk: float, n: int, epsilon: float) -> float:
    if n == 0:
        return 1.0
    r = min(risk, epsilon)
    kl = (r * math.log(r / epsilon) if r > 0 else 0.0) + (1 - r) * math.log((1 - r) / (1 - epsilon))
    k = math.ceil(n * risk - 1e-9)
    cdf = sum(math.exp(math.lgamma(n + 1) - math.lgamma(j + 1) - math.lgamma(n - j + 1) + j * math.log(epsilon)
                       + (n - j) * math.log(1 - epsilon)) for j in range(k + 1))
    return min(1.0, math.exp(-n * kl), math.e * cdf)


@pytest.mark.parametrize("target, epsilon", [("mae", EPSILON), ("pairwise", 0.12)])
def test_an_independent_computation_of_the_threshold_on_one_split_equals_the_packages(target, epsilon):
    pool = synthetic_pool()
    order = np.random.default_rng(1).permutation(int(pool[3].max()) + 1)
    calibration = split(pool, order[:300])
    found = fit_abstention(*calibration, SelectiveOptions(epsilon, DELTA, target))
    t, p, risk, n = independent_threshold(*calibration, target, epsilon, DELTA)
    assert (math.inf if found.max_spread is None else found.max_spread) == pytest.approx(t, abs=1e-6)
    assert (found.p_value, found.risk, found.n_poems) == (pytest.approx(p, rel=1e-6), pytest.approx(risk, abs=1e-6), n)
    assert found.grid == list(GRID) and len(GRID) == 14
    # the smallest ε certified: certified at it, not a thousandth below it (the p-value falls as ε grows)
    smallest = found.smallest_epsilon
    assert independent_threshold(*calibration, target, smallest, DELTA) is not None
    assert independent_threshold(*calibration, target, round(smallest - 0.001, 3), DELTA) is None


def test_a_target_the_poems_cannot_certify_is_refused_with_the_smallest_they_can():
    pool = synthetic_pool(n_poems=300)
    with pytest.raises(Uncertifiable) as refused:
        fit_abstention(*pool, SelectiveOptions(0.02, DELTA))
    smallest = refused.value.smallest
    assert str(refused.value) == (f"300 calibration poems certify no threshold at ε = 0.02, δ = 0.1 for the mean "
                                  f"|human − score| of the kept quality scores: the smallest ε they certify at "
                                  f"δ = 0.1 is {smallest:g}")
    assert fit_abstention(*pool, SelectiveOptions(smallest, DELTA)).smallest_epsilon == smallest
    pred, human, spread, poem_of = split(pool, np.arange(3))
    with pytest.raises(Uncertifiable, match="3 calibration poems certify no threshold .*: they certify none below 1"):
        fit_abstention(np.full(len(pred), np.nan), human, spread, poem_of, SelectiveOptions(0.5, DELTA))  # all failed
    with pytest.raises(ValueError, match="--epsilon must lie strictly between 0 and 1, not 1.5"):
        fit_abstention(*pool, SelectiveOptions(1.5, DELTA))


def test_held_out_kept_error_and_a_shift_that_breaks_it():
    """On held-out poems like the calibration's the kept error is within ε; a judge shifted by 0.3 on them (an unseen
    generator) is caught: the error's bootstrap interval over poems lies above ε, and `holds` is False."""
    pool = synthetic_pool(n_poems=800)
    order = np.random.default_rng(2).permutation(800)
    calibration, held = split(pool, order[:400]), split(pool, order[400:])
    abstention = fit_abstention(*calibration, SelectiveOptions(EPSILON, DELTA))
    found = kept_error(abstention, *held, n_bootstrap=500)
    assert found["holds"] and found["error"] <= EPSILON and found["poems"] <= 400
    assert found["kept_images"] == int(np.sum(held[2] <= abstention.max_spread + 1e-9))
    pred, human, spread, poem_of = held
    shifted = kept_error(abstention, np.clip(pred + 0.3, 0, 1), human, spread, poem_of, n_bootstrap=500)
    assert not shifted["holds"] and shifted["error_ci"][0] > EPSILON
    assert abstention_sentence(found, "`held`") is None
    assert abstention_sentence(shifted, "`held`").startswith(
        f"The judge's kept error on `held` is {shifted['error']:.3f}, above the certified ε = 0.08 (its 95 % interval "
        "lies above it): these images are not like the calibration poems — a shift")


# --- the calibration file ---

def calibration(**changes) -> Calibration:
    made = Calibration(alpha=0.2, evaluator="pae", model="m", settings={"rubric": "r"}, dataset={}, poems=["p"],
                       n_images=4, quality=Target(4, 4, 0.2, 2.0), dimensions={})
    return dataclasses.replace(made, **changes)


def abstention(**changes) -> Abstention:
    made = Abstention(target="mae", epsilon=0.1, delta=0.1, max_spread=0.04, method=METHOD, grid=list(GRID),
                      p_value=0.001, risk=0.03, n_poems=40, kept=0.7, smallest_epsilon=0.07)
    return dataclasses.replace(made, **changes)


def test_a_calibration_with_a_threshold_is_format_3_and_one_of_format_2_still_reads(tmp_path):
    """A /2 file (no distribution, no threshold) reads and is written back as it was, its fingerprint unchanged: the
    records that carry that fingerprint still resume. A /3 file carries the people's distribution and the
    threshold."""
    old = calibration()
    assert old.to_json()["format"] == FORMAT_2 and "abstention" not in old.to_json()
    path = old.write(tmp_path / "old.json")
    assert load_calibration(path) == old and load_calibration(path).fingerprint == old.fingerprint
    new = calibration(human_quality=[[0.2, 0.5], [0.6, 0.5]], abstention=abstention())
    path = new.write(tmp_path / "new.json")
    assert json.loads(path.read_text())["format"] == FORMAT and load_calibration(path) == new
    assert new.fingerprint != calibration(human_quality=new.human_quality).fingerprint  # the threshold is content
    # the abstention rule, in one place, and the widest interval kept
    assert new.abstains(0.5, {"quality_sd": 0.05}) and not new.abstains(0.5, {"quality_sd": 0.04})
    assert new.abstains(0.5, None) and not new.abstains(None, None)  # no spread: abstained; no score: a failure
    assert not calibration(abstention=abstention(max_spread=None)).abstains(0.5, None)  # keep every score
    assert new.max_width() == pytest.approx(2 * 2.0 * (0.04 + 0.01))


def test_a_calibrations_new_fields_are_checked_each_named(tmp_path):
    path = calibration(human_quality=[[0.2, 0.5], [0.6, 0.5]], abstention=abstention()).write(tmp_path / "c.json")
    data = json.loads(path.read_text())
    cases = [({"abstention": {**data["abstention"], "epsilon": 1.5, "target": "mse"}},
              r"abstention.target: not one of mae, pairwise: 'mse'(.|\n)*abstention.epsilon: not a number above 0 "
              "and below 1: 1.5"),
             ({"abstention": {**data["abstention"], "max_spread": 0.05}}, "abstention.max_spread: 0.05 is not one of"),
             ({"abstention": {**data["abstention"], "p_value": 0.5}},
              r"abstention.p_value: 0.5 is above δ / 14 = 0.00714286: the threshold is not certified"),
             ({"abstention": {**data["abstention"], "smallest_epsilon": 0.9}},
              r"abstention.smallest_epsilon: 0.9 is above ε = 0.1, which the threshold is certified for"),
             ({"abstention": {k: v for k, v in data["abstention"].items() if k != "n_poems"}},
              "abstention.n_poems: missing \\(it must be a whole number of at least 1\\)"),
             ({"human_quality": [[0.6, 0.5], [0.2, 0.5]]}, "human_quality: values must rise"),
             ({"human_quality": [[0.5, 1.0, 2.0]]}, "human_quality: missing or not a list of"),
             ({"format": FORMAT_2}, "human_quality: a file of format 'tangpoetrybench-calibration/2' holds none")]
    for change, message in cases:
        path.write_text(json.dumps({**data, **change}))
        with pytest.raises(DataError, match=message):
            load_calibration(path)


def test_the_percentile_among_the_peoples_scores_by_hand():
    """Linear between (0, 0), each value the people gave at its mid-rank, and (1, 1)."""
    found = calibration(human_quality=[[0.2, 0.25], [0.5, 0.5], [1.0, 0.25]])
    assert found.percentile(0.2) == pytest.approx(0.125) and found.percentile(0.5) == pytest.approx(0.5)
    assert found.percentile(0.1) == pytest.approx(0.0625) and found.percentile(0.35) == pytest.approx(0.3125)
    assert found.percentile(1.0) == pytest.approx(0.875)  # the top value's mid-rank: no knot at (1, 1) above it
    assert np.allclose(found.percentile(np.array([0.0, 0.75])), [0.0, 0.6875])
    with pytest.raises(ValueError, match="holds no distribution of the people's scores"):
        calibration().percentile(0.5)


# --- the command line on the synthetic release ---

def test_tpb_calibrate_fits_a_threshold_or_says_the_smallest_epsilon_it_can(demo_built, tmp_path, capsys):
    """On the SYNTHETIC judge's train split (10 poems): ε = 0.1 is refused with the smallest ε they certify, nothing
    written; that ε is fitted and written (/3), `tpb agree` and the report say how the threshold fares on test."""
    from test_calibration import write_judge

    from tangpoetrybench.cli import main

    files = write_judge(demo_built, tmp_path)
    cal = tmp_path / "calibration.json"
    fit = ["calibrate", "--dataset", str(demo_built), "--scores", str(files["train"]), "--split", "train", "--alpha",
           "0.2", "--out", str(cal)]
    assert main([*fit, "--epsilon", "0.1"]) == 2
    err = capsys.readouterr().err
    assert "error: 10 calibration poems certify no threshold at ε = 0.1, δ = 0.1 for the mean |human − score| of " \
           "the kept quality scores: the smallest ε they certify at δ = 0.1 is " in err and not cal.exists()
    smallest = err.strip().rsplit(" ", 1)[1]
    assert smallest == "0.476"  # docs/calibration.md quotes it
    assert main([*fit, "--epsilon", smallest]) == 0
    assert "Selective judging: keep a quality score whose readout spread (quality_sd) is at most" in \
        capsys.readouterr().out
    threshold = load_calibration(cal).abstention
    assert threshold.epsilon == float(smallest) and threshold.target == "mae" and threshold.n_poems == 10
    assert json.loads(cal.read_text())["format"] == FORMAT
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(files["test"]), "--calibration", str(cal),
                 "--bootstrap", "100"]) == 0
    assert f"selective judging at ε = {smallest} (mae): the judge keeps " in capsys.readouterr().out
    report = tmp_path / "report"
    assert main(["report", "--dataset", str(demo_built), "--scores", str(files["test"]), "--calibration", str(cal),
                 "--unseen-scores", str(files["unseen"]), "--bootstrap", "100", "--out", str(report)]) == 0
    assert f"On `images/test`, selective judging at ε = {smallest} (mae): the judge keeps" in (
        report / "report.md").read_text()
    assert main([*fit[:-2], "--out", str(tmp_path / "x.json"), "--delta", "0.2"]) == 2
    assert "--delta applies with --epsilon only" in capsys.readouterr().err
    assert main(["calibrate", "--calibration", str(cal), "--epsilon", "0.2"]) == 2
    assert "give no --epsilon" in capsys.readouterr().err
