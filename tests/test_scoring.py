"""`tpb score`: deterministic, resumable after a kill, data-parallel under accelerate, two sources."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from PIL import Image

from tangpoetrybench.cli import main
from tangpoetrybench.evaluators import load_evaluator
from tangpoetrybench.scoring import dataset_items, folder_items, read_done, score_to_jsonl


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def without_timing(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def score_cmd(dataset, model, out, *extra):
    return [sys.executable, "-m", "tangpoetrybench.cli", "score", "--dataset", str(dataset), "--split", "train",
            "--evaluator", "pae", "--model", str(model), "--out", str(out), "--quiet", *extra]


def test_two_runs_give_identical_jsonl(tiny_models, demo_built, tmp_path):
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]))
    for name in ("a.jsonl", "b.jsonl"):
        score_to_jsonl(pae, dataset_items(demo_built, "images", "test"), tmp_path / name, batch_size=4, progress=False)
    a, b = records(tmp_path / "a.jsonl"), records(tmp_path / "b.jsonl")
    assert len(a) == 12 and without_timing(a) == without_timing(b)


def test_killed_run_resumes_with_every_image_once(tiny_models, demo_built, tmp_path):
    out = tmp_path / "scores.jsonl"
    proc = subprocess.Popen(score_cmd(demo_built, tiny_models["qwen3-vl"], out, "--batch-size", "2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and (not out.exists() or out.read_text().count("\n") < 4):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(read_done(out))
    assert 4 <= before < 40, "the run should have been killed part-way"
    with open(out, "a", encoding="utf-8") as f:
        f.write('{"image_id": "painter_a/half-writ')  # a line cut short by the kill
    done = subprocess.run(score_cmd(demo_built, tiny_models["qwen3-vl"], out, "--batch-size", "8"),
                          capture_output=True, text=True, check=True)
    assert f"{40 - before} scored now" in done.stdout and f"{before} already there" in done.stdout
    ids = [r["image_id"] for r in records(out)]
    expected = [it.image_id for it in dataset_items(demo_built, "images", "train")]
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids)) == 40
    again = subprocess.run(score_cmd(demo_built, tiny_models["qwen3-vl"], out), capture_output=True, text=True, check=True)
    assert "0 scored now" in again.stdout and len(records(out)) == 40


def test_two_processes_equal_one(tiny_models, demo_built, tmp_path):
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    subprocess.run(score_cmd(demo_built, tiny_models["qwen3-vl"], one, "--batch-size", "4"), check=True,
                   capture_output=True)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "2", "--num_machines", "1",
              "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "tangpoetrybench.cli"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    subprocess.run(launch + score_cmd(demo_built, tiny_models["qwen3-vl"], two, "--batch-size", "4")[3:],
                   check=True, capture_output=True, env=env)
    assert without_timing(records(one)) == without_timing(records(two))
    assert not list(tmp_path.glob("two.jsonl.part*"))


def test_folder_source_and_limit(tiny_models, demo_raw, tmp_path):
    items = list(folder_items(demo_raw / "images", demo_raw / "poems.jsonl"))
    assert items[0].image_id == "painter_a/songci-1000-555" or items[0].image_id.startswith("painter_a/")
    assert all(it.poem.poem_id == it.image_id.split("/")[1] for it in items)
    out = tmp_path / "clip.jsonl"
    assert main(["score", "--images", str(demo_raw / "images"), "--poems", str(demo_raw / "poems.jsonl"),
                 "--evaluator", "clipscore", "--model", str(tiny_models["clip"]), "--limit", "7", "--out", str(out),
                 "--quiet"]) == 0
    assert [r["image_id"] for r in records(out)] == [it.image_id for it in items[:7]]


def test_unreadable_image_in_a_folder(tiny_models, demo_raw, tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    shutil.copy(demo_raw / "images/painter_a/tang300-013.png", folder / "tang300-013.png")
    (folder / "tang300-068.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    out = tmp_path / "s.jsonl"
    assert main(["score", "--images", str(folder), "--poems", str(demo_raw / "poems.jsonl"), "--evaluator",
                 "blipscore", "--model", str(tiny_models["blip"]), "--out", str(out), "--quiet"]) == 0
    good, bad = records(out)
    assert good["parse_status"] == "ok" and bad["parse_status"] == "failed" and "unreadable image" in bad["error"]


def test_cli_errors(tmp_path, demo_raw, capsys):
    assert main(["score", "--evaluator", "clipscore", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "give --dataset DIR, or --images DIR" in capsys.readouterr().err
    (tmp_path / "imgs").mkdir()
    Image.new("RGB", (8, 8)).save(tmp_path / "imgs" / "nopoem.png")
    assert main(["score", "--images", str(tmp_path / "imgs"), "--poems", str(demo_raw / "poems.jsonl"),
                 "--evaluator", "clipscore", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "nopoem.png: no poem 'nopoem'" in capsys.readouterr().err
    assert main(["score", "--images", str(demo_raw / "images"), "--poems", str(demo_raw / "poems.jsonl"),
                 "--evaluator", "clipscore", "--model", str(tmp_path / "no-such-model"), "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "error:" in capsys.readouterr().err and not (tmp_path / "x.jsonl").exists()


def test_resuming_with_another_evaluator_is_refused(tiny_models, demo_built, tmp_path):
    out = tmp_path / "s.jsonl"
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    score_to_jsonl(clip, dataset_items(demo_built, "images", "test"), out, limit=2, progress=False)
    other = load_evaluator("clipscore", model=str(tiny_models["chinese-clip"]))
    with pytest.raises(ValueError, match="holds results of clipscore"):
        score_to_jsonl(other, dataset_items(demo_built, "images", "test"), out, progress=False)
    assert len(records(out)) == 2


def test_parts_left_by_a_killed_parallel_run_are_merged(tiny_models, demo_built, tmp_path):
    """A run killed under 3 processes left part files; a single-process rerun counts them and merges them."""
    out = tmp_path / "s.jsonl"
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    score_to_jsonl(clip, dataset_items(demo_built, "images", "test"), tmp_path / "full.jsonl", progress=False)
    full = records(tmp_path / "full.jsonl")
    (tmp_path / "s.jsonl.part0").write_text("".join(json.dumps(r) + "\n" for r in full[0:9:3]))
    (tmp_path / "s.jsonl.part2").write_text("".join(json.dumps(r) + "\n" for r in full[2:9:3]) + '{"image_id": "cut')
    summary = score_to_jsonl(clip, dataset_items(demo_built, "images", "test"), out, progress=False)
    assert summary.skipped == 6 and summary.scored == 6
    assert [r["image_id"] for r in records(out)] == [r["image_id"] for r in full]
    assert not list(tmp_path.glob("s.jsonl.part*"))
