"""The Hub's Eval Results: `tpb leaderboard --eval-results`, the judge's own results beside its model card, the
dataset's eval.yaml (not written: the documented format cannot name this benchmark's framework), and the pull
request `tpb publish --eval-results` would open (a dry run: no Hub here, so the push itself stays unverified).
The scores are SYNTHETIC (the test_leaderboard fixtures: human scores plus a planted offset per generator)."""

import json

import pytest
import yaml

from test_leaderboard import files, human  # noqa: F401 (a fixture)
from test_publish import adapter, agree_json, hub  # noqa: F401 (fixtures)
from tangpoetrybench.cli import main
from tangpoetrybench.errors import DataError
from tangpoetrybench.hub.eval_results import (EVAL_RESULT_FIELDS, RESULTS_FILE, TASK_IDS, dataset_eval_yaml,
                                              eval_results_pr, judge_results, read_eval_results,
                                              validate_eval_results)
from tangpoetrybench.hub.model_card import indexed_results, render_model_card


def documented(item: dict) -> None:
    """Exactly the fields and types hub-docs' eval-results.md documents, checked here independently."""
    assert set(item) <= {"dataset", "value", "verifyToken", "date", "source", "notes"}
    assert set(item["dataset"]) <= {"id", "task_id", "revision"} and {"id", "task_id"} <= set(item["dataset"])
    assert isinstance(item["value"], float) and isinstance(item["dataset"]["id"], str)
    assert isinstance(item["date"], str) and len(item["date"]) == 10
    assert set(item["source"]) <= {"url", "name", "user"} and item["source"]["url"].startswith("https://")


@pytest.fixture(scope="module")
def written(demo_built, files, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("lb")
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", *map(str, files), "--out", str(out / "board"),
                 "--bootstrap", "0", "--eval-results", str(out / "results"), "--dataset-id", "acme/TangPoetryBench",
                 "--dataset-revision", "0123abcd"]) == 0
    return out


def test_leaderboard_eval_results(demo_built, written):
    numbers = json.loads((written / "board" / "leaderboard.json").read_text(encoding="utf-8"))
    rows = {r["generator"]: r for r in numbers["leaderboard"]}
    folders = sorted(p.name for p in (written / "results").iterdir())
    assert folders == sorted(rows)
    people = human(demo_built)
    for g, row in rows.items():
        text = (written / "results" / g / RESULTS_FILE).read_text(encoding="utf-8")
        items = yaml.safe_load(text)
        for item in items:
            documented(item)
            assert item["dataset"]["id"] == "acme/TangPoetryBench" and item["dataset"]["revision"] == "0123abcd"
            assert item["notes"].startswith("SYNTHETIC dataset") and "tangpoetrybench 0.1.0" in item["notes"]
        by_task = {i["dataset"]["task_id"]: i for i in items}
        config = "unseen_generator" if g == "painter_e" else "images"
        assert by_task[f"{config}_pae_quality"]["value"] == pytest.approx(row["judge"]["quality"], abs=5e-5)
        assert "Evaluator pae (synthetic;" in by_task[f"{config}_pae_quality"]["notes"]
        if g == "newgen":  # people never rated it: its PAE quality only
            assert list(by_task) == ["images_pae_quality"]
            continue
        assert by_task[f"{config}_human_quality"]["value"] == pytest.approx(row["human"]["quality"], abs=5e-5)
        rec = [r["recognizability"] for r in people if r["generator"] == g and r.get("recognizability") is not None]
        if rec:
            assert by_task[f"{config}_recognizability"]["value"] == pytest.approx(sum(rec) / len(rec), abs=5e-5)
        assert read_eval_results(written / "results" / g / RESULTS_FILE) == items


def test_validator_names_item_and_field(tmp_path):
    good = {"dataset": {"id": "acme/TangPoetryBench", "task_id": "images_pae_quality"}, "value": 0.5}
    validate_eval_results([good])
    cases = [({**good, "score": 1}, "2: score: not a documented field"),
             ({**good, "value": "0.5"}, "2: value: expected int or float, got str"),
             ({**good, "value": True}, "2: value: expected int or float, got bool"),
             ({"value": 0.5}, "2: dataset: required field is missing"),
             ({**good, "dataset": {"id": "acme/T"}}, "2: dataset.task_id: required field is missing"),
             ({**good, "source": {"name": "x"}}, "2: source.url: required field is missing"),
             ({**good, "date": "yesterday"}, "2: date: 'yesterday' is not an ISO-8601"),
             ({**good, "dataset": {"id": "acme/T", "task_id": "accuracy"}}, "2: dataset.task_id: 'accuracy' is not")]
    for bad, message in cases:
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump([good, bad]))
        with pytest.raises(DataError, match=message.replace("(", r"\(")):
            read_eval_results(path)
    assert set(EVAL_RESULT_FIELDS) == {"dataset", "value", "verifyToken", "date", "source", "notes"}
    with pytest.raises(DataError, match="non-empty YAML list"):
        validate_eval_results({"dataset": {}})


def test_dataset_eval_yaml_is_not_written(demo_built, tmp_path, capsys):
    text, why = dataset_eval_yaml()
    assert text is None and "lmms-eval is not among them" in why
    assert dataset_eval_yaml(framework="inspect-ai")[0] is None
    listed, _ = dataset_eval_yaml(framework="mteb")  # what the format would hold, were the framework listed
    body = yaml.safe_load(listed)
    assert set(body) == {"name", "description", "evaluation_framework", "tasks"}
    assert {t["id"] for t in body["tasks"]} == TASK_IDS
    assert main(["publish", str(tmp_path / "hub"), "--dataset", str(demo_built), "--org", "acme"]) == 0
    assert "No eval.yaml in" in capsys.readouterr().out and not (tmp_path / "hub" / "dataset" / "eval.yaml").exists()


def test_publish_dry_run_shows_the_pull_request(written, capsys):
    folder = written / "results" / "painter_a"
    with pytest.raises(ValueError, match="synthetic dataset: they measure nothing"):
        eval_results_pr("acme/painter-a", folder)
    # a copy without the synthetic caveat, as a real dataset's results would be
    items = read_eval_results(folder / RESULTS_FILE)
    real = written / "real"
    (real / RESULTS_FILE).parent.mkdir(parents=True)
    (real / RESULTS_FILE).write_text(yaml.safe_dump([dict(i, notes=i["notes"].split(". ", 1)[1]) for i in items]))
    assert main(["publish", "--eval-results", "acme/painter-a", "--from", str(real), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "Pull request on https://huggingface.co/acme/painter-a (model repo), not a push to main" in out
    assert "adds .eval_results/tangpoetrybench.yaml:" in out and "task_id: images_pae_quality" in out
    assert out.rstrip().endswith("Dry run: nothing was sent.")
    assert main(["publish", "--eval-results", "acme/painter-a", "--from", str(written), "--dry-run"]) == 2
    assert "no .eval_results/tangpoetrybench.yaml in" in capsys.readouterr().err


def test_judge_results_and_model_card_share_numbers(demo_built, tmp_path):
    agree = {"dataset": str(demo_built), "config": "images", "split": "test", "random_weights": False,
             "agreement": {"n_images": 15, "n_poems": 5, "bootstrap": {"resamples": 50}, "mae": 0.12345678,
                           "kendall_tau": 0.5, "spearman": 0.61, "within_0.05": 0.3}}
    items = judge_results(agree, "acme/TangPoetryBench", "PAE", date="2026-12-01")
    for item in items:
        documented(item)
    values = {i["dataset"]["task_id"]: i["value"] for i in items}
    assert values == {"images_judge_mae": 0.1235, "images_judge_kendall_tau": 0.5, "images_judge_spearman": 0.61}
    assert {k: v for k, _, v in indexed_results(agree)} == {"mae": 0.1235, "within_0.05": 0.3, "kendall_tau": 0.5,
                                                            "spearman": 0.61}
    assert items[0]["notes"].startswith("SYNTHETIC dataset")
    assert judge_results({**agree, "random_weights": True}, "acme/TangPoetryBench", "PAE") == []


def test_model_index_and_eval_results_from_one_source(agree_json, tmp_path):  # noqa: F811
    agree = json.loads(agree_json.read_text(encoding="utf-8"))
    card = render_model_card(agree, base_model="Qwen/Qwen3-VL-8B-Instruct", adapter_ref="acme/PAE",
                             dataset="acme/TangPoetryBench")
    meta = yaml.safe_load(card.split("---")[1])
    indexed = {m["type"]: m["value"] for m in meta["model-index"][0]["results"][0]["metrics"]}
    assert indexed == {k: v for k, _, v in indexed_results(agree)}
    assert main(["model-card", "--agree", str(agree_json), "--adapter", "acme/PAE", "--dataset", "acme/TangPoetryBench",
                 "--out", str(tmp_path / "README.md")]) == 0
    items = read_eval_results(tmp_path / RESULTS_FILE)
    assert {i["dataset"]["task_id"]: i["value"] for i in items} == {
        f"images_judge_{k}": v for k, v in indexed.items() if k in ("mae", "kendall_tau", "spearman")}


def test_published_model_repo_carries_its_results(hub):  # noqa: F811
    items = read_eval_results(hub / "model" / RESULTS_FILE)
    card = yaml.safe_load((hub / "model" / "README.md").read_text(encoding="utf-8").split("---")[1])
    indexed = {m["type"]: m["value"] for m in card["model-index"][0]["results"][0]["metrics"]}
    assert {i["dataset"]["task_id"]: i["value"] for i in items} == {
        f"images_judge_{k}": indexed[k] for k in ("mae", "kendall_tau", "spearman") if k in indexed}
    assert all(i["dataset"]["id"] == "acme/TangPoetryBench" for i in items)
