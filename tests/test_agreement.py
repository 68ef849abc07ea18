"""SPEC §7 agreement statistics on hand-computed cases, the bootstrap, and the `evaluate` module."""

import json
import subprocess
import sys
from pathlib import Path

import evaluate
import numpy as np
import pytest
from scipy import stats

from conftest import load_module
from tangpoetrybench.stats.agreement import AgreementData, _weighted_spearman, agreement
from tangpoetrybench.rubric import load_rubric

RUBRIC = load_rubric("tang")


@pytest.fixture(scope="module")
def metric_dir(tmp_path_factory) -> Path:
    """The evaluate module as `tpb publish` writes it (in a folder named like the module, so the folder loads too)."""
    from tangpoetrybench.hub.publish import write_metric

    return write_metric(tmp_path_factory.mktemp("published") / "pae", org="acme")
N = None


def row(*values):
    assert len(values) == 10
    return list(values)


def test_hand_computed_case():
    # poem A: three images; poem B: two images whose human quality ties (τ undefined there)
    refs = [row(1, 1, 1, 1, N, 1, 1, 1, 1, 1),           # quality 1
            row(1, .5, .67, 1, .67, 1, .5, .67, .67, .75),  # quality 0.748...
            row(.5, .5, .33, 0, 0, .5, .5, .33, N, .25),    # quality 0.323...
            row(1, 1, 1, 1, 1, 1, 1, 1, 1, 1),
            row(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)]
    preds = [row(1, 1, 1, 1, .5, 1, 1, 1, 1, 1),          # scene predicted where the human said n/a: not a pair
             row(1, .5, .67, 1, .67, 1, .5, .67, .67, .75),
             row(.5, .5, .33, 0, 0, .5, .5, .33, .33, .25),
             row(.9, 1, 1, 1, 1, 1, 1, 1, 1, 1),
             None]                                        # no prediction at all
    data = AgreementData.from_lists(preds, refs, ["A", "A", "A", "B", "B"], RUBRIC)
    r = agreement(data, n_bootstrap=0)
    assert r["n_pairs"] == 9 + 10 + 9 + 10 + 10 == 48
    assert r["coverage"] == pytest.approx(38 / 48)
    assert r["mae"] == pytest.approx(0.1 / 38)
    assert r["within_0.05"] == pytest.approx(37 / 38)
    assert r["within_one_anchor"] == 1.0
    assert r["kendall_tau_poems"] == 1 and r["kendall_tau"] == pytest.approx(1.0)  # B: one image predicted
    h = [np.nanmean([np.nan if v is None else v for v in x]) for x in refs[:4]]
    p = [np.nanmean([np.nan if v is None else v for v in x]) for x in preds[:4]]
    assert r["spearman"] == pytest.approx(stats.spearmanr(p, h).statistic)
    dims = r["per_dimension"]
    assert dims["safety"]["mae"] == pytest.approx(0.1 / 4) and dims["safety"]["within_0.05"] == 0.75
    assert dims["scene_consistency"]["n_pairs"] == 4 and dims["scene_consistency"]["coverage"] == 0.75
    assert dims["emotional_resonance"]["n_pairs"] == 4


def test_within_one_anchor_is_exact_agreement_on_a_two_level_dimension_on_both_sides():
    """Text integrity has two levels (step 1): "within one step" would hold for any answer, so it is exact agreement,
    for the evaluator and for the human noise floor printed beside it (one shared rule)."""
    from tangpoetrybench.stats.agreement import anchor_tolerance
    from tangpoetrybench.stats.noise_floor import RatingTable, noise_floor

    refs = [row(1, 1, 1, 1, N, 1, 1, 1, 1, 1), row(1, 1, 1, 0, N, 1, 1, 1, 1, 1)]
    preds = [row(.5, 1, 1, 0, N, 1, 1, 1, 1, 1), row(1, 1, 1, 0, N, 1, 1, 1, 1, 1)]
    dims = agreement(AgreementData.from_lists(preds, refs, ["A", "B"], RUBRIC), n_bootstrap=0)["per_dimension"]
    assert dims["text_integrity"]["within_one_anchor"] == 0.5  # a 0 against a human 1 is not "within one anchor"
    assert dims["safety"]["within_one_anchor"] == 1.0  # 0.5 against 1 is one step of 0.5
    assert anchor_tolerance(1.0) == pytest.approx(0.01) and anchor_tolerance(0.33) == pytest.approx(0.34)
    humans = RatingTable(["u", "u", "v", "v"], ["p"] * 4, ["a", "b", "a", "b"], ("text_integrity",), np.array([1.0]),
                         np.array([[1.0], [0.0], [1.0], [1.0]]))
    assert noise_floor(humans)["per_dimension"]["text_integrity"]["within_one_level"] == 0.5


def test_noise_floor_summary_pools_like_the_evaluator():
    """The evaluator's overall MAE pools every pair; the floor beside it pools every rater deviation (not a mean of
    dimensions): with 3 deviations of 0.5 on one dimension and 2 of 0 on another, 0.3 — not 0.25."""
    from tangpoetrybench.stats.noise_floor import RatingTable, floor_summary, noise_floor

    copies = 5  # images: five like u, five like v (a floor needs at least five multi-rated images)
    units = [f"{u}{i}" for i in range(copies) for u in ("u", "u", "u", "v", "v", "v")]
    humans = RatingTable(units, ["p"] * len(units), ["a", "b", "c"] * 2 * copies, ("x", "y"), np.array([0.5, 0.5]),
                         np.array([[1, 1], [0, 1], [0.5, np.nan], [np.nan, 0], [np.nan, 0], [np.nan, np.nan]] * copies))
    nf = noise_floor(humans)
    x, y = nf["per_dimension"]["x"], nf["per_dimension"]["y"]
    assert (x["n_deviations"], y["n_deviations"]) == (3 * copies, 4 * copies)
    summary = floor_summary(nf)
    assert summary["mae"] == pytest.approx((x["loo_deviation"] * 3 + y["loo_deviation"] * 4) / 7)
    assert summary["within_one_anchor"] == pytest.approx((x["within_one_level"] * x["n_pairs"] + y["within_one_level"]
                                                          * y["n_pairs"]) / (x["n_pairs"] + y["n_pairs"]))
    assert summary["mae"] != pytest.approx((x["loo_deviation"] + y["loo_deviation"]) / 2)
    few = noise_floor(RatingTable(units[:6], ["p"] * 6, ["a", "b", "c"] * 2, ("x", "y"), np.array([0.5, 0.5]),
                                  humans.scores[:6]))
    assert not few["enough"] and floor_summary(few) == {"mae": None, "within_one_anchor": None, "kendall_tau": None}


def test_a_partial_prediction_has_no_quality():
    """A prediction that leaves an always-applicable dimension null has scores but no quality (it would not be
    comparable with a whole one's mean), as the parser rules; a null where the dimension can be excluded is fine."""
    refs = [row(1, 1, 1, 1, 1, 1, 1, 1, 1, 1)] * 2
    preds = [row(1, N, 1, 1, 1, 1, 1, 1, 1, 1), row(1, 1, 1, 1, N, 1, 1, 1, 1, .5)]
    data = AgreementData.from_lists(preds, refs, ["A", "A"], RUBRIC)
    assert np.isnan(data.pred_quality[0]) and data.pred_quality[1] == pytest.approx(8.5 / 9)


def test_ties_and_undefined_tau():
    refs = [row(*[1] * 10), row(*[1] * 10), row(*[.5] * 10), row(*[0] * 10)]
    preds = [row(*[.5] * 10), row(*[.5] * 10), [.2] * 10, [.2] * 10]  # poem A: human all tied; B: predictions tied
    r = agreement(AgreementData.from_lists(preds, refs, ["A", "A", "B", "B"], RUBRIC), n_bootstrap=0)
    assert r["kendall_tau"] is None and r["kendall_tau_poems"] == 0
    refs.append(row(*[.75] * 10))
    preds.append(row(*[.9] * 10))
    r = agreement(AgreementData.from_lists(preds, refs, ["A", "A", "B", "B", "B"], RUBRIC), n_bootstrap=0)
    # B: human .5, 0, .75 vs pred .2, .2, .9 -> tau-b with one tie on the predicted side
    assert r["kendall_tau"] == pytest.approx(stats.kendalltau([.2, .2, .9], [.5, 0, .75], variant="b").statistic)
    assert r["kendall_tau_poems"] == 1


def test_scalar_metric_gets_ranking_statistics_only():
    refs = [row(*[1] * 10), row(*[.5] * 10), row(*[0] * 10), row(*[.25] * 10)]
    data = AgreementData.from_lists([0.9, 0.4, 0.5, None], refs, ["A", "A", "A", "B"], RUBRIC)
    r = agreement(data, n_bootstrap=0)
    assert data.scalar and "mae" not in r and "per_dimension" not in r
    assert r["kendall_tau"] == pytest.approx(stats.kendalltau([.9, .4, .5], [1, .5, 0], variant="b").statistic)


def synthetic(n_poems, seed=3):
    """Synthetic human and predicted scores (labelled as such: no real evaluator produced these)."""
    rng = np.random.default_rng(seed)
    refs, preds, poems = [], [], []
    for p in range(n_poems):
        for _ in range(4):
            h = rng.choice([0, .33, .5, .67, 1], size=10)
            refs.append([None if rng.random() < .05 else float(v) for v in h])
            preds.append([float(np.clip(v + rng.normal(0, .15), 0, 1)) for v in h])
            poems.append(f"p{p:03d}")
    return preds, refs, poems


@pytest.mark.parametrize("front", ["package", "evaluate"])
def test_every_prediction_none_is_coverage_zero(front, metric_dir):
    """An evaluator that gave nothing (every answer failed) is not a scalar metric: coverage 0, no MAE."""
    refs = [[1.0, 0.5, 0.67, 1.0, N, 1.0, 0.5, 0.33, 0.67, 0.75]] * 4
    args = dict(predictions=[None] * 4, references=refs, poem_ids=["A", "A", "B", "B"], n_bootstrap=50)
    if front == "evaluate":
        got = evaluate.load(str(metric_dir)).compute(**args)
    else:
        got = agreement(AgreementData.from_lists(args["predictions"], refs, args["poem_ids"], RUBRIC), n_bootstrap=50)
    assert got["coverage"] == 0.0 and got["mae"] is None and got["n_scored_pairs"] == 0 and got["n_pairs"] == 36
    assert got["per_dimension"]["safety"]["coverage"] == 0.0 and got["kendall_tau"] is None


def test_interval_holds_the_estimate_and_narrows_with_more_poems():
    widths = []
    for n in (10, 40, 160):
        r = agreement(AgreementData.from_lists(*synthetic(n), RUBRIC), n_bootstrap=2000)
        for stat in ("coverage", "mae", "within_0.05", "within_one_anchor", "kendall_tau", "spearman"):
            low, high = r[f"{stat}_ci"]
            assert low <= r[stat] + 1e-12 and r[stat] <= high + 1e-12, stat
        widths.append(r["mae_ci"][1] - r["mae_ci"][0])
    assert widths[0] > widths[1] > widths[2]


def test_bootstrap_is_seeded():
    data = AgreementData.from_lists(*synthetic(20), RUBRIC)
    assert agreement(data, n_bootstrap=500, seed=0) == agreement(data, n_bootstrap=500, seed=0)
    assert agreement(data, n_bootstrap=500, seed=0)["mae_ci"] != agreement(data, n_bootstrap=500, seed=1)["mae_ci"]


def test_weighted_spearman_equals_spearman_of_the_repeated_sample():
    rng = np.random.default_rng(0)
    x, y = rng.integers(0, 5, 30).astype(float), rng.normal(size=30)  # ties in x
    w = rng.integers(0, 4, size=(3, 30)).astype(float)
    got = _weighted_spearman(x, y, w)
    for b in range(3):
        reps = w[b].astype(int)
        assert got[b] == pytest.approx(stats.spearmanr(np.repeat(x, reps), np.repeat(y, reps)).statistic)


def test_length_mismatch_is_a_clear_error():
    with pytest.raises(ValueError, match="same length"):
        AgreementData.from_lists([[1] * 10], [[1] * 10, [1] * 10], ["a", "b"], RUBRIC)
    with pytest.raises(ValueError, match=r"references\[0\]: expected 10 scores, got 3"):
        AgreementData.from_lists([[1] * 10], [[1, 1, 1]], ["a"], RUBRIC)


@pytest.mark.parametrize("file", ["", "pae.py"])
def test_evaluate_load_from_folder_and_file(metric_dir, file):
    metric = evaluate.load(str(metric_dir / file))
    preds, refs, poems = synthetic(12)
    got = metric.compute(predictions=preds, references=refs, poem_ids=poems, n_bootstrap=300)
    want = agreement(AgreementData.from_lists(preds, refs, poems, RUBRIC), n_bootstrap=300)
    assert got == want


def test_evaluate_equals_tpb_agree(demo_built, metric_dir, tmp_path):
    """Synthetic predictions (human scores plus noise) for the demo's test split, through both front ends."""
    from tangpoetrybench.dataset.reading import dataset_rows

    keys = list(RUBRIC.keys)
    rows = list(dataset_rows(demo_built, "images", "test", ["image_id", "poem_id", *keys]))
    rng = np.random.default_rng(7)
    records, preds = [], []
    for i, r in enumerate(rows):
        scores = {k: None if r[k] is None else float(np.clip(r[k] + rng.normal(0, .1), 0, 1)) for k in keys}
        if i == 3:
            scores = {k: None for k in keys}  # a failed parse
        present = [v for v in scores.values() if v is not None]
        records.append({"image_id": r["image_id"], "evaluator": "synthetic-noise", "scores": scores,
                        "quality": sum(present) / len(present) if present else None, "parse_status": "ok"})
        preds.append([scores[k] for k in keys])
    scores_file = tmp_path / "synthetic.jsonl"
    scores_file.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "agree.json"
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "agree", "--dataset", str(demo_built),
                           "--scores", str(scores_file), "--bootstrap", "1000", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert "Agreement of synthetic-noise" in done.stdout and "within_one_anchor" in done.stdout
    cli = json.loads(out.read_text())["agreement"]
    refs = [[r[k] for k in keys] for r in rows]
    via_evaluate = evaluate.load(str(metric_dir)).compute(predictions=preds, references=refs,
                                                          poem_ids=[r["poem_id"] for r in rows], n_bootstrap=1000)
    assert json.loads(json.dumps(via_evaluate)) == cli
    assert cli["coverage"] < 1  # the failed parse counts against coverage


@pytest.mark.parametrize("config,tradition", [("unseen_generator", "tang"), ("song_ci", "song_ci")])
def test_agree_on_the_generalization_configs(demo_built, tmp_path, config, tradition):
    """`tpb agree --config`: the paper's unseen-generator and Song Ci tables, under the rubric of the poems'
    tradition, beside the noise floor of those same images. Synthetic predictions: the human scores themselves."""
    from tangpoetrybench.dataset.reading import dataset_rows
    from tangpoetrybench.stats.agree import config_rubric

    rubric = load_rubric(tradition)
    assert config_rubric(demo_built, config, "test") == rubric
    keys = list(rubric.keys)
    rows = list(dataset_rows(demo_built, config, "test", ["image_id", "poem_id", "quality", *keys]))
    scores_file = tmp_path / "perfect.jsonl"
    scores_file.write_text("".join(json.dumps({"image_id": r["image_id"], "evaluator": "synthetic-perfect",
                                               "scores": {k: r[k] for k in keys}, "quality": r["quality"],
                                               "parse_status": "ok"}) + "\n" for r in rows))
    out = tmp_path / "agree.json"
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "agree", "--dataset", str(demo_built),
                           "--config", config, "--scores", str(scores_file), "--bootstrap", "200", "--out", str(out)],
                          capture_output=True, text=True, check=True)
    assert f"— {config}, test split, {len(rows)} images" in done.stdout
    result = json.loads(out.read_text())
    a = result["agreement"]
    assert result["config"] == config and a["n_images"] == len(rows) > 0
    assert a["mae"] == 0 and a["coverage"] == 1 and a["within_one_anchor"] == 1
    ratings = [r for r in dataset_rows(demo_built, "ratings", "test", ["image_config"]) if r["image_config"] == config]
    assert result["noise_floor"]["n_ratings"] == len(ratings) > 0


def test_metric_app_over_gradio_client(metric_dir):
    gradio_client = pytest.importorskip("gradio_client")
    app = load_module(metric_dir / "app.py", "metric_app")
    _, url, _ = app.demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        table, details = gradio_client.Client(url, verbose=False).predict(*app.EXAMPLE, 200, api_name="/compute")
        assert "| mae | 0.135 |" in table and details["kendall_tau"] == 1.0
    finally:
        app.demo.close()


def test_what_a_newcomer_gets_wrong_is_one_plain_sentence(demo_raw, demo_built, tiny_models, tmp_path, capsys):
    from tangpoetrybench.cli import main
    from tangpoetrybench.dataset.reading import dataset_rows

    rows = list(dataset_rows(demo_built, "images", "test", ["image_id", "quality", *RUBRIC.keys]))
    record = lambda image_id, r: {"image_id": image_id, "evaluator": "synthetic", "scores": {k: r[k] for k in RUBRIC.keys},
                                  "quality": r["quality"], "parse_status": "ok"}  # noqa: E731
    other = tmp_path / "other.jsonl"
    other.write_text("".join(json.dumps(record(f"elsewhere/{i}", r)) + "\n" for i, r in enumerate(rows)))
    some = tmp_path / "some.jsonl"
    some.write_text("".join(json.dumps(record(r["image_id"], r)) + "\n" for r in rows[:9]))
    cases = [
        (["agree", "--dataset", str(demo_built), "--scores", str(other)], "has results for none of the 12 images"),
        (["agree", "--dataset", str(demo_built), "--scores", str(tmp_path / "missing.jsonl")], "no scores file"),
        (["agree", "--dataset", str(demo_raw), "--scores", str(some)], "is a raw release"),
        (["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", str(tiny_models["clip"]), "--out",
          str(tmp_path / "x.jsonl")], "is a CLIP checkpoint, which this evaluator cannot use"),
    ]
    for argv, message in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and len(err.splitlines()) == 1 and "Errno" not in err, err
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(some), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert "WARNING: 3 of the 12 images of" in out and "count against coverage" in out
    assert "noise floor: too few images rated more than once" in out  # the demo's test split has fewer than five


def test_the_noise_floor_columns_are_there_only_with_a_noise_floor(demo_built, tmp_path, capsys):
    """`tpb agree`'s table: with too few multi-rated images there is no noise floor, so no column of blanks and
    dashes (the last lines say why); with one, every statistic's cell says something ("—" where a statistic has no
    human counterpart)."""
    from tangpoetrybench.cli import main
    from tangpoetrybench.dataset.reading import dataset_rows
    from tangpoetrybench.stats.agree import format_table

    keys = list(load_rubric("tang").keys)
    rows = list(dataset_rows(demo_built, "images", "test", ["image_id", "quality", *keys]))
    scores = tmp_path / "human.jsonl"  # SYNTHETIC: the human scores as predictions
    scores.write_text("".join(json.dumps({"image_id": r["image_id"], "evaluator": "synthetic", "model": "synthetic",
                                          "scores": {k: r[k] for k in keys}, "quality": r["quality"],
                                          "parse_status": "ok"}) + "\n" for r in rows))
    assert main(["agree", "--dataset", str(demo_built), "--scores", str(scores), "--bootstrap", "20", "--out",
                 str(tmp_path / "agree.json")]) == 0
    out = capsys.readouterr().out
    assert "noise floor: too few images rated more than once" in out
    assert "human noise floor" not in out and "LOO dev" not in out
    assert all(line == line.rstrip() for line in out.splitlines())
    result = json.loads((tmp_path / "agree.json").read_text())
    nf = result["noise_floor"]
    enough = {**nf, "enough": True, "rater_vs_rest_tau": 0.5,  # as if enough images were rated more than once
              "per_dimension": {k: {"loo_deviation": 0.1, "n_deviations": 4, "within_one_level": 0.9, "n_pairs": 4,
                                    "krippendorff_alpha": 0.6} for k in keys}}
    table = format_table({**result, "noise_floor": enough})
    head = table.splitlines().index(next(line for line in table.splitlines() if line.startswith("statistic")))
    assert table.splitlines()[head].endswith("human noise floor")
    for line in table.splitlines()[head + 1:head + 9]:
        assert line.rstrip().endswith(("—", "0.100", "0.900", "0.500")), line
