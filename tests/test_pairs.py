"""Human pairs: pairwise accuracy against pair counting, CCC against its formula, the permutation p against brute
force, the human ceiling, Bradley–Terry, and the literal-bias test's known truth on the synthetic release."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import permutations, product
from pathlib import Path

import numpy as np
import pytest

from conftest import SHARED
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.stats.agreement import AgreementData, agreement
from tangpoetrybench.stats.pairs import (cohens_d, generator_strengths, evaluator_choices, human_ceiling, literal_bias,
                                         pair_table, pairwise_accuracy, permutation_p)

RUBRIC = load_rubric("tang")


def synthetic_scores(n_poems: int, per_poem: int = 4, seed: int = 5):
    """Synthetic human and predicted scores (labelled as such: no evaluator produced these)."""
    rng = np.random.default_rng(seed)
    refs, preds, poems = [], [], []
    for p in range(n_poems):
        for _ in range(per_poem):
            h = rng.choice([0, .33, .5, .67, 1], size=10)
            refs.append([float(v) for v in h])
            preds.append([float(np.round(np.clip(v + rng.normal(0, .2), 0, 1), 1)) for v in h])
            poems.append(f"p{p}")
    return preds, refs, poems


def counted_accuracy(pred, human, poems, margin=0.05):
    """Pairwise accuracy by counting pairs one by one."""
    credit = []
    for i in range(len(pred)):
        for j in range(i + 1, len(pred)):
            if poems[i] != poems[j] or None in (human[i], human[j]) or abs(human[i] - human[j]) < margin - 1e-9:
                continue
            if pred[i] is None or pred[j] is None:
                continue
            if pred[i] == pred[j]:
                credit.append(0.5)
            else:
                credit.append(float((pred[i] > pred[j]) == (human[i] > human[j])))
    return sum(credit) / len(credit), len(credit)


def test_pairwise_accuracy_equals_pair_counting():
    preds, refs, poems = synthetic_scores(12)
    data = AgreementData.from_lists(preds, refs, poems, RUBRIC)
    r = agreement(data, n_bootstrap=200)
    expected, n = counted_accuracy(list(data.pred_quality), list(data.human_quality), poems)
    assert r["pairwise_accuracy"] == pytest.approx(expected) and r["n_judged_pairs"] == n
    lo, hi = r["pairwise_accuracy_ci"]
    assert lo <= r["pairwise_accuracy"] <= hi
    for j, key in enumerate(RUBRIC.keys):  # per dimension, ties (equal scores) are common: they count one half
        col_p = [p[j] for p in preds]
        col_h = [h[j] for h in refs]
        expected, n = counted_accuracy(col_p, col_h, poems)
        d = r["per_dimension"][key]
        assert d["pairwise_accuracy"] == pytest.approx(expected) and d["n_judged_pairs"] == n


def test_scalar_metric_gets_pairwise_accuracy_and_a_missing_score_is_not_judged():
    human = [[1.0] * 10, [0.5] * 10, [0.0] * 10, [0.2] * 10, [0.9] * 10]
    data = AgreementData.from_lists([0.3, 0.3, 0.1, None, 0.5], human, ["A", "A", "A", "B", "B"], RUBRIC)
    r = agreement(data, n_bootstrap=0)
    # A: (1, .5) tie → ½, (1, 0) right, (.5, 0) right; B: no score for one image → not judged
    assert r["n_human_pairs"] == 4 and r["n_judged_pairs"] == 3
    assert r["pairwise_accuracy"] == pytest.approx(2.5 / 3)
    assert "ccc" not in r  # a scalar metric is not on the rubric's scale


def test_ccc_equals_its_formula_by_hand():
    preds, refs, poems = synthetic_scores(10)
    data = AgreementData.from_lists(preds, refs, poems, RUBRIC)
    r = agreement(data, n_bootstrap=100)
    x, y = data.pred_quality, data.human_quality
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    cov = ((x - x.mean()) * (y - y.mean())).mean()
    by_hand = 2 * cov / (x.var() + y.var() + (x.mean() - y.mean()) ** 2)
    assert r["ccc"] == pytest.approx(by_hand)
    lo, hi = r["ccc_ci"]
    assert lo <= r["ccc"] <= hi
    j = RUBRIC.keys.index("core_imagery")
    x, y = data.pred[:, j], data.human[:, j]
    cov = ((x - x.mean()) * (y - y.mean())).mean()
    assert r["per_dimension"]["core_imagery"]["ccc"] == pytest.approx(
        2 * cov / (x.var() + y.var() + (x.mean() - y.mean()) ** 2))
    # a constant shift keeps Spearman ρ but lowers CCC: agreement in value, not only in order
    shifted = AgreementData.from_lists([[min(1.0, v + 0.3) for v in p] for p in preds], refs, poems, RUBRIC)
    assert agreement(shifted, n_bootstrap=0)["ccc"] < r["ccc"]


def brute_force_p(credit, labels, poem):
    """Every permutation of the labels within each poem (repeats included, all equally likely)."""
    def delta(lab):
        lab = np.asarray(lab)
        return credit[lab == 1].mean() - credit[lab == -1].mean()

    observed = delta(labels)
    groups = [np.flatnonzero(poem == p) for p in np.unique(poem)]
    hits = total = 0
    for choice in product(*[list(permutations(labels[g])) for g in groups]):
        permuted = labels.copy()
        for g, arrangement in zip(groups, choice):
            permuted[g] = arrangement
        hits += delta(permuted) >= observed - 1e-12
        total += 1
    return hits / total


def test_permutation_p_equals_brute_force_enumeration():
    credit = np.array([1, 1, 0.5, 0, 1, 0, 1, 1, 0.5, 0])
    labels = np.array([1, 1, -1, -1, 1, -1, 1, -1, 1, -1])
    poem = np.array([0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
    p, method = permutation_p(credit, labels, poem)
    assert method == "exact"
    assert p == pytest.approx(brute_force_p(credit, labels, poem))
    # Monte Carlo (fewer permutations asked than there are arrangements) lands near the exact value, seeded
    mc, method = permutation_p(credit, labels, poem, n_permutations=20, seed=1)
    assert method == "monte carlo" and mc == permutation_p(credit, labels, poem, n_permutations=20, seed=1)[0]
    many = np.tile(credit, 3), np.tile(labels, 3), np.concatenate([poem, poem + 3, poem + 6])
    exact, _ = permutation_p(*many, n_permutations=10 ** 7)
    approx, _ = permutation_p(*many, n_permutations=5_000, seed=0)
    assert abs(exact - approx) < 0.03


def test_cohens_d_by_hand():
    a, b = np.array([1.0, 1.0, 0.5, 0.0]), np.array([0.0, 0.5, 0.0])
    pooled = np.sqrt((3 * a.var(ddof=1) + 2 * b.var(ddof=1)) / 5)
    assert cohens_d(a, b) == pytest.approx((a.mean() - b.mean()) / pooled)
    assert cohens_d(a, b[:1]) is None


def test_human_pairs_of_a_built_dataset(demo_built, tmp_path):
    table = pair_table(demo_built, "train")
    assert len(table.pairs) > 0
    poem_of = {i: p for i, p in zip(table.image_ids, table.poem_ids)}
    for a, b, x_wins in zip(table.pairs.x, table.pairs.y, table.pairs.x_wins):
        assert poem_of[table.image_ids[a]] == poem_of[table.image_ids[b]]
        assert abs(table.quality[a] - table.quality[b]) >= 0.05 - 1e-9
        assert x_wins == (table.quality[a] > table.quality[b])
    # an evaluator that knows human quality is always right; its reverse, always wrong
    truth = tmp_path / "truth.jsonl"
    truth.write_text("".join(json.dumps({"image_id": i, "evaluator": "synthetic-truth", "scores": {},
                                         "quality": None if np.isnan(q) else q})  # NaN is refused: null, no quality
                             + "\n" for i, q in zip(table.image_ids, table.quality)))
    _, _, choices = evaluator_choices(table, truth)
    assert pairwise_accuracy(table, choices, n_bootstrap=0)["accuracy"] == 1.0
    assert pairwise_accuracy(table, 1 - choices, n_bootstrap=0)["accuracy"] == 0.0
    ceiling = human_ceiling(demo_built, table, "train", n_bootstrap=100)
    assert ceiling["judged"] > 0 and 0 <= ceiling["accuracy"] <= 1
    bt = generator_strengths(table, choices, n_bootstrap=50)
    rates = np.array([[np.nan if v is None else v for v in row] for row in bt["win_rate"]])
    met = np.isfinite(rates)
    assert met.sum() > 0 and np.allclose((rates + rates.T)[met], 1.0)  # every pair is won by one side (ties: half)
    assert bt["judged_pairs"] == len(table.pairs) and abs(np.nansum(bt["strength"])) < 1e-9  # log scale, mean 0


def test_tpb_agree_shows_the_pairwise_table_and_literal_bias(demo_built, tmp_path):
    from tangpoetrybench.dataset.synthetic import write_simulated_scores

    scores = write_simulated_scores(demo_built, "literal", tmp_path / "literal.jsonl", split="train")
    out = tmp_path / "agree.json"
    run = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "agree", "--dataset", str(demo_built),
                          "--scores", str(scores), "--split", "train", "--bootstrap", "200", "--literal-bias",
                          "--margin", "0.1", "--out", str(out)], capture_output=True, text=True, check=True)
    assert "Pairwise, on" in run.stdout and "human ceiling" in run.stdout and "Literal bias" in run.stdout
    result = json.loads(out.read_text())
    assert result["pairs"]["margin"] == 0.1 and result["agreement"]["margin"] == 0.1
    assert result["pairs"]["accuracy"]["accuracy"] == pytest.approx(result["agreement"]["pairwise_accuracy"])
    assert {"delta", "delta_ci", "cohens_d", "p_value"} <= set(result["pairs"]["literal_bias"])


@pytest.fixture(scope="module")
def full_release(tmp_path_factory) -> Path:
    """The full-size synthetic release (every Tang poem of the shared poem source, small images)."""
    source = SHARED / "data" / "poems" / "tang300.jsonl"
    if not source.is_file():
        pytest.skip("the shared poem source is absent")
    from tangpoetrybench.dataset.builder import build_dataset
    from tangpoetrybench.dataset.synthetic import write_demo_release
    from tangpoetrybench.poems import convert_chinese_poetry

    root = tmp_path_factory.mktemp("full")
    raw = write_demo_release(root / "raw", convert_chinese_poetry(source), seed=0, size=64, progress=False)
    return build_dataset(raw, root / "ds", progress=False).out


@pytest.mark.slow
@pytest.mark.parametrize("kind, significant", [("literal", True), ("follower", False)])
def test_literal_bias_has_power_and_keeps_its_size(full_release, kind, significant, tmp_path):
    from tangpoetrybench.dataset.synthetic import write_simulated_scores

    table = pair_table(full_release, "test")
    _, _, choices = evaluator_choices(table, write_simulated_scores(full_release, kind, tmp_path / f"{kind}.jsonl"))
    result = literal_bias(table, choices, n_bootstrap=2_000)
    assert result["literal_pairs"] > 20 and result["evocative_pairs"] > 10
    if significant:
        assert result["delta"] > 0 and result["delta_ci"][0] > 0 and result["p_value"] < 0.05
    else:
        assert result["p_value"] > 0.05


@pytest.mark.slow
def test_bradley_terry_recovers_the_planted_order(full_release):
    table = pair_table(full_release, "test")
    bt = generator_strengths(table, table.pairs.x_wins.astype(float), n_bootstrap=200)
    strength = dict(zip(bt["generators"], bt["strength"]))
    # planted: A ≥ B ≈ C > D, D far behind
    assert strength["painter_d"] < min(strength[g] for g in ("painter_a", "painter_b", "painter_c"))
    low, high = bt["strength_ci"][bt["generators"].index("painter_d")]
    assert high < min(bt["strength_ci"][bt["generators"].index(g)][0] for g in ("painter_a", "painter_b"))
    assert low <= strength["painter_d"] <= high
