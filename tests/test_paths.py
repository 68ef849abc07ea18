"""A value that looks like a local path and does not exist is an error naming it, before any network call; offline,
a Hub id that is not in the cache fails at once with one sentence."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tangpoetrybench.cli import main
from tangpoetrybench.files import local_or_hub, looks_like_path


def test_what_looks_like_a_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "sample").mkdir()
    for value in ("./x", "../x", "/x/y", "~/x", ".", "sample/datset", "a/b/c", "a\\b", "sample/"):
        assert looks_like_path(value), value
    for value in ("Qwen/Qwen3-VL-8B-Instruct", "ORG/TangPoetryBench", "gpt2"):
        assert not looks_like_path(value), value
    assert local_or_hub("sample", "--dataset") == "sample"  # an existing folder is given back as it is
    with pytest.raises(FileNotFoundError, match="--dataset sample/datset: no such file or folder"):
        local_or_hub("sample/datset", "--dataset")


def _fails_naming(capsys, argv: list[str], path: Path) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and f"{path}: no such file or folder" in err and "\n" not in err.strip(), err


def test_every_command_names_a_missing_path_at_once(demo_built, tiny_models, tmp_path, capsys):
    """A typo'd folder beside real ones (its parent exists) is never sent to the Hub, for every option that could."""
    typo = tmp_path / "datset"
    qwen = str(tiny_models["qwen3-vl"])
    scores = tmp_path / "s.jsonl"  # a scores file to compare (its contents are not reached)
    scores.write_text('{"image_id": "g1/p1", "evaluator": "pae", "model": "m", "settings": {}, "scores": {}}\n')
    _fails_naming(capsys, ["score", "--dataset", str(typo), "--evaluator", "pae", "--model", qwen,
                           "--out", str(tmp_path / "d.jsonl")], typo)
    _fails_naming(capsys, ["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", str(typo),
                           "--out", str(tmp_path / "a.jsonl")], typo)
    _fails_naming(capsys, ["score", "--dataset", str(demo_built), "--evaluator", "clipscore", "--model", str(typo),
                           "--out", str(tmp_path / "b.jsonl")], typo)
    _fails_naming(capsys, ["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", qwen,
                           "--adapter", str(typo), "--out", str(tmp_path / "c.jsonl")], typo)
    _fails_naming(capsys, ["agree", "--dataset", str(typo), "--scores", str(scores)], typo)
    _fails_naming(capsys, ["report", "--dataset", str(typo), "--out", str(tmp_path / "r")], typo)
    _fails_naming(capsys, ["leaderboard", "--dataset", str(typo), "--scores", str(scores), "--out",
                           str(tmp_path / "b")], typo)
    assert not any((tmp_path / n).exists() for n in ("a.jsonl", "b.jsonl", "c.jsonl", "d.jsonl", "r", "b"))


def test_offline_a_hub_id_fails_at_once(demo_raw, tmp_path):
    """With HF_HUB_OFFLINE=1 and an empty Hub cache, a Hub dataset and the default model are one sentence each."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")}
    images = ["--images", str(demo_raw / "images"), "--poems", str(demo_raw / "poems.jsonl")]
    code = ("import sys; from tangpoetrybench.cli import main; "
            f"main(['score', '--dataset', 'ORG/NoSuchBench', '--evaluator', 'pae', '--out', 'a.jsonl']); "
            f"main(['score', *{images!r}, '--evaluator', 'pae', '--out', 'b.jsonl'])")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, cwd=tmp_path)
    forbidden = "is neither a local folder nor in the Hub cache, and HF_HUB_OFFLINE=1 forbids downloading it"
    assert done.stderr.splitlines() == [
        f"error: dataset ORG/NoSuchBench {forbidden}: give the path of a local copy, or unset HF_HUB_OFFLINE",
        f"error: model Qwen/Qwen3-VL-8B-Instruct {forbidden}: give the path of a local copy, or unset HF_HUB_OFFLINE",
    ], done.stderr
