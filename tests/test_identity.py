"""Results say which dataset build, config and split they scored, and `agree`, `report` and `leaderboard` refuse
results of another (ids that happen to match are no proof) and warn on results that do not say. The scores here are
SYNTHETIC (the human scores copied as predictions), except the one tpb score run that checks what it records."""

import json
from pathlib import Path

import pytest

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.reading import dataset_fingerprint, dataset_rows
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl
from tangpoetrybench.reporting.leaderboard import build_leaderboard
from tangpoetrybench.reporting.report import build_report
from tangpoetrybench.rubric import rubric_for_tradition

KEYS = list(rubric_for_tradition("tang").keys)


def test_tpb_score_records_the_dataset_it_scored(tiny_models, demo_built, tmp_path):
    out = tmp_path / "s.jsonl"
    score_to_jsonl(load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), max_new_tokens=4),
                   DatasetSource(demo_built, "images", "test"), out, limit=2, progress=False)
    fingerprint = dataset_fingerprint(demo_built)
    assert fingerprint and len(fingerprint) == 16
    assert [json.loads(line)["dataset"] for line in out.read_text().splitlines()] == [
        {"fingerprint": fingerprint, "config": "images", "split": "test"}] * 2


def synthetic(demo_built, path: Path, **identity) -> Path:
    """Every test image of the `images` config, its human scores as the prediction, with `identity` edited in (a
    None value drops the key; dataset=None drops the whole field, as in a file of an older tpb)."""
    made = {"fingerprint": dataset_fingerprint(demo_built), "config": "images", "split": "test"}
    made = None if identity.get("dataset", 1) is None else {**made, **identity}
    lines = []
    for row in dataset_rows(demo_built, "images", "test", ["image_id", "quality", *KEYS]):
        record = {"image_id": row["image_id"], "evaluator": "pae", "model": "synthetic", "parse_status": "ok",
                  "scores": {k: row[k] for k in KEYS}, "quality": row["quality"],
                  "settings": {"parser": 2, "rubric": "tang@x"}}
        lines.append(json.dumps({**record, "dataset": made} if made else record))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_agree_refuses_another_build_config_or_split_and_warns_without(demo_built, tmp_path, capsys):
    agree = ["agree", "--dataset", str(demo_built), "--bootstrap", "20", "--scores"]
    assert main([*agree, str(synthetic(demo_built, tmp_path / "same.jsonl"))]) == 0
    assert "WARNING" not in capsys.readouterr().out
    other = synthetic(demo_built, tmp_path / "other.jsonl", fingerprint="0123456789abcdef")
    assert main([*agree, str(other)]) == 2
    err = capsys.readouterr().err
    assert f"scored the dataset build 0123456789abcdef, but {demo_built} is build {dataset_fingerprint(demo_built)}" in err
    assert main([*agree, str(synthetic(demo_built, tmp_path / "val.jsonl", split="validation"))]) == 2
    assert "scored the images config's validation split, not the images config's test split" in capsys.readouterr().err
    assert main([*agree, str(synthetic(demo_built, tmp_path / "old.jsonl", dataset=None))]) == 0
    assert "WARNING: " in (out := capsys.readouterr().out) and "does not say which dataset it scored" in out


def test_report_and_leaderboard_refuse_another_build_and_warn_without(demo_built, tmp_path):
    other = synthetic(demo_built, tmp_path / "other.jsonl", fingerprint="0123456789abcdef")
    old = synthetic(demo_built, tmp_path / "old.jsonl", dataset=None)
    with pytest.raises(ValueError, match="scored the dataset build 0123456789abcdef"):
        build_leaderboard(demo_built, [other], n_bootstrap=0)
    board = build_leaderboard(demo_built, [old], n_bootstrap=0)
    assert any("does not say which dataset it scored" in str(payload) for kind, payload in board.blocks)
    with pytest.raises(ValueError, match="scored the dataset build 0123456789abcdef"):
        build_report(demo_built, [other], n_bootstrap=20)
    report = build_report(demo_built, [old], n_bootstrap=20)
    assert any("does not say which dataset it scored" in str(payload) for kind, payload in report.blocks)
