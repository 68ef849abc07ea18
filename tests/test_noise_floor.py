"""The human noise floor, on a hand-computed case and on real multi-rater ratings of other T2I benchmarks
(GenAI-Bench, DSG TIFA160), each checked against an independent computation written here."""

import csv
import json
from collections import defaultdict
from itertools import combinations, permutations

import numpy as np
import pytest
from scipy import stats

from conftest import SHARED
from tangpoetrybench.stats.external_ratings import read_dsg, read_genai_bench
from tangpoetrybench.stats.noise_floor import RatingTable, noise_floor

RATINGS = SHARED / "data" / "ratings"
needs_ratings = pytest.mark.skipif(not RATINGS.is_dir(), reason="../shared/data/ratings is absent")


def test_hand_computed():
    # image u1: raters a, b, c on one dimension (anchor 0.25); image u2: a single rating (not multi-rated)
    table = RatingTable(["u1", "u1", "u1", "u2"], ["p", "p", "p", "p"], ["a", "b", "c", "a"], ("d",),
                        np.array([0.25]), np.array([[1.0], [0.75], [0.25], [0.5]]))
    d = noise_floor(table)["per_dimension"]["d"]
    # leave one out: |1 - .5|, |.75 - .625|, |.25 - .875|
    assert d["loo_deviation"] == pytest.approx((0.5 + 0.125 + 0.625) / 3)
    # pairs: (1, .75) within one level; (1, .25) and (.75, .25) not
    assert d["n_pairs"] == 3 and d["within_one_level"] == pytest.approx(1 / 3)
    assert d["n_images"] == 1 and d["krippendorff_alpha"] == pytest.approx(alpha_interval([[1.0, 0.75, 0.25]]))


def test_excluded_scores_are_left_out():
    table = RatingTable(["u1", "u1", "u2", "u2"], ["p"] * 4, ["a", "b", "a", "b"], ("d",), np.array([0.5]),
                        np.array([[1.0], [np.nan], [0.5], [1.0]]))
    d = noise_floor(table)["per_dimension"]["d"]
    assert d["n_images"] == 1 and d["n_pairs"] == 1 and d["within_one_level"] == 1.0 and d["loo_deviation"] == 0.5


# --- independent computations ---------------------------------------------------------------------------

def groups(units, values):
    out = defaultdict(list)
    for u, v in zip(units, values):
        out[u].append(v)
    return [vs for vs in out.values() if len(vs) >= 2]


def loo(groups_):
    devs = [abs(vs[i] - np.mean(vs[:i] + vs[i + 1:])) for vs in groups_ for i in range(len(vs))]
    return float(np.mean(devs))


def within_one(groups_, step):
    pairs = [abs(a - b) <= step + 0.01 + 1e-9 for vs in groups_ for a, b in combinations(vs, 2)]
    return sum(pairs) / len(pairs)


def alpha_interval(groups_):
    """Krippendorff's α (interval) from its definition: 1 − D_o / D_e over pairable values."""
    n = sum(len(vs) for vs in groups_)
    d_o = sum(sum((a - b) ** 2 for a, b in permutations(vs, 2)) / (len(vs) - 1) for vs in groups_) / n
    allv = np.array([v for vs in groups_ for v in vs])
    d_e = (np.sum((allv[:, None] - allv[None, :]) ** 2)) / (n * (n - 1))
    return 1 - d_o / d_e


def tau_rater_vs_rest(rows):
    """rows: (prompt, image, rater, value). Per prompt and rater: τ-b of the rater's values vs others' mean."""
    per_image = defaultdict(dict)
    for prompt, image, rater, v in rows:
        per_image[(prompt, image)][rater] = v
    series = defaultdict(lambda: ([], []))
    for (prompt, _), by_rater in per_image.items():
        for rater, v in by_rater.items():
            others = [w for r, w in by_rater.items() if r != rater]
            if others:
                series[(prompt, rater)][0].append(v)
                series[(prompt, rater)][1].append(sum(others) / len(others))
    taus = []
    for x, y in series.values():
        if len(x) >= 2 and len(set(x)) > 1 and len(set(y)) > 1:
            taus.append(stats.kendalltau(x, y).statistic)  # scipy's default variant is τ-b
    return float(np.mean(taus)), len(taus)


def check(table, rows):
    units = [f"{p}|{i}" for p, i, _, _ in rows]
    values = [(v - 1) / 4 for *_, v in rows]
    g = groups(units, values)
    got = noise_floor(table)
    d = got["per_dimension"]["alignment"]
    assert d["n_images"] == len(g)
    assert d["loo_deviation"] == pytest.approx(loo(g))
    assert d["within_one_level"] == pytest.approx(within_one(g, 0.25))
    assert d["krippendorff_alpha"] == pytest.approx(alpha_interval(g), abs=1e-9)
    tau, n = tau_rater_vs_rest([(p, i, r, (v - 1) / 4) for p, i, r, v in rows])
    assert got["rater_vs_rest_tau"] == pytest.approx(tau) and got["rater_vs_rest_tau_cases"] == n
    return d, got


@needs_ratings
def test_genai_bench(caplog):
    """Two images hold a corrupt rating ([5, 41, 4] and [3, 3, 33]): they are left out, counted and named."""
    path = RATINGS / "genai_bench_image_human_ratings.json"
    data = json.loads(path.read_text())
    rows = [(pid, model, f"r{k}", float(r)) for pid, e in data.items() for model, rs in e["models"].items()
            if all(r in (1, 2, 3, 4, 5) for r in rs) for k, r in enumerate(rs)]
    with caplog.at_level("WARNING", logger="tangpoetrybench.stats.external_ratings"):
        table = read_genai_bench(path)
    assert table.dropped == ["DALLE_3/00232: 41 outside 1–5", "DeepFloyd_I_XL_v1/00253: 33 outside 1–5"]
    assert "dropped 2 image(s) holding a rating outside the 1–5 scale" in caplog.text and str(path) in caplog.text
    d, got = check(table, rows)
    assert got["n_ratings"] == 9480 and got["n_multi_rated_images"] == 3160
    assert float(table.scores.max()) == 1.0 and float(table.scores.min()) == 0.0
    # the figures quoted in the docs
    assert (round(d["loo_deviation"], 3), round(d["within_one_level"], 3),
            round(d["krippendorff_alpha"], 3)) == (0.151, 0.892, 0.711)
    assert round(got["rater_vs_rest_tau"], 3) == 0.685 and got["rater_vs_rest_tau_cases"] == 1395
    with pytest.raises(ValueError, match=r"genai_bench_image_human_ratings.json: ratings outside the 1–5 scale: "
                                         r"DALLE_3/00232: 41 outside 1–5; DeepFloyd_I_XL_v1/00253: 33"):
        read_genai_bench(path, out_of_scale="refuse")


def test_ratings_outside_the_scale_are_dropped_or_refused(tmp_path):
    """Synthetic ratings: an image with a 0, a 2.5 or a 6 goes, with all its ratings; the others stay."""
    path = tmp_path / "synthetic_likert.csv"
    path.write_text("t2i_model,item_id,worker_id,answer\n" + "".join(
        f"m,{item},w{k},{r}\n"
        for item, rs in {"i1": [5, 4], "i2": [0, 3], "i3": [2.5, 2], "i4": [6, 1], "i5": [1, 1]}.items()
        for k, r in enumerate(rs)))
    table = read_dsg(path)
    assert sorted(set(table.units)) == ["m/i1", "m/i5"] and len(table.dropped) == 3
    assert table.scores[:, 0].tolist() == [1.0, 0.75, 0.0, 0.0]
    assert noise_floor(table)["n_ratings"] == 4
    with pytest.raises(ValueError, match="m/i2: 0 outside 1–5; m/i3: 2.5 outside 1–5; m/i4: 6 outside 1–5"):
        read_dsg(path, out_of_scale="refuse")
    with pytest.raises(ValueError, match="out_of_scale must be one of"):
        read_dsg(path, out_of_scale="keep")


@needs_ratings
def test_dsg_tifa160():
    with open(RATINGS / "dsg_tifa160_likert_anns.csv", encoding="utf-8") as f:
        rows = [(r["item_id"], r["t2i_model"], r["worker_id"], float(r["answer"])) for r in csv.DictReader(f)]
    table = read_dsg(RATINGS / "dsg_tifa160_likert_anns.csv")
    assert table.dropped == []
    d, got = check(table, rows)
    assert got["n_ratings"] == 3995 and got["n_multi_rated_images"] == 800
    assert (round(d["loo_deviation"], 3), round(d["within_one_level"], 3), round(d["krippendorff_alpha"], 3)) == (0.117, 0.933, 0.684)
    assert round(got["rater_vs_rest_tau"], 3) == 0.558 and got["rater_vs_rest_tau_cases"] == 716


def test_two_level_dimension_counts_exact_agreement():
    table = RatingTable(["u1", "u1", "u2", "u2"], ["p"] * 4, ["a", "b", "a", "b"], ("text",), np.array([1.0]),
                        np.array([[1.0], [0.0], [1.0], [1.0]]))
    assert noise_floor(table)["per_dimension"]["text"]["within_one_level"] == 0.5
