"""`tpb score`: deterministic, pipelined, resumable after a kill, data-parallel over two real processes, two sources,
one bad image never stops a run, a broken model always does."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch
from PIL import Image

from conftest import Flaky
from tangpoetrybench.cli import main
from tangpoetrybench.errors import SystematicFailure
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.results import read_lines
from tangpoetrybench.judging.scoring import DatasetSource, FolderSource, row_item, score_to_jsonl


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def without_timing(rows):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]


def score_cmd(dataset, model, out, *extra):
    return [sys.executable, "-m", "tangpoetrybench.cli", "score", "--dataset", str(dataset), "--split", "train",
            "--evaluator", "pae", "--model", str(model), "--out", str(out), "--quiet", *extra]


def test_two_runs_give_identical_jsonl_with_or_without_workers(tiny_models, demo_built, tmp_path):
    """Batches prepared in two data-loader worker processes give the file a single process gives."""
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]))
    for name, workers in (("a.jsonl", 0), ("b.jsonl", 2)):
        score_to_jsonl(pae, DatasetSource(demo_built, "images", "test"), tmp_path / name, batch_size=4,
                       num_workers=workers, progress=False)
    a, b = records(tmp_path / "a.jsonl"), records(tmp_path / "b.jsonl")
    assert len(a) == 12 and without_timing(a) == without_timing(b)


def test_spawned_workers_get_the_evaluator_without_its_model(tiny_models, demo_built, tmp_path):
    """A worker started by spawn (vLLM's choice, and Python 3.14's default) unpickles the evaluator and the source."""
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), tmp_path / "a.jsonl", num_workers=0, progress=False)
    clip.worker_start_method = "spawn"
    score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), tmp_path / "b.jsonl", num_workers=1, progress=False)
    a, b = records(tmp_path / "a.jsonl"), records(tmp_path / "b.jsonl")
    assert [r["quality"] for r in a] == pytest.approx([r["quality"] for r in b], abs=1e-6) and len(a) == 12


def test_killed_run_resumes_with_every_image_once(tiny_models, demo_built, tmp_path):
    out = tmp_path / "scores.jsonl"
    proc = subprocess.Popen(score_cmd(demo_built, tiny_models["qwen3-vl"], out, "--batch-size", "2"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # The event waited for is the run's fourth record (or its end), however long the machine takes to get there.
    while proc.poll() is None and (not out.exists() or out.read_text().count("\n") < 4):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = len(read_lines(out, partial="cut"))
    assert 4 <= before < 40, f"the run should have been killed part-way ({before} records, exit {proc.returncode})"
    with open(out, "a", encoding="utf-8") as f:
        f.write('{"image_id": "painter_a/half-writ')  # a line cut short by the kill
    done = subprocess.run(score_cmd(demo_built, tiny_models["qwen3-vl"], out, "--batch-size", "8"),
                          capture_output=True, text=True, check=True)
    assert f"{40 - before} scored now" in done.stdout and f"{before} already there" in done.stdout
    ids = [r["image_id"] for r in records(out)]
    expected = [it.image_id for it in DatasetSource(demo_built, "images", "train")]
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids)) == 40
    again = subprocess.run(score_cmd(demo_built, tiny_models["qwen3-vl"], out), capture_output=True, text=True, check=True)
    assert "0 scored now" in again.stdout and len(records(out)) == 40


@pytest.mark.slow
def test_two_processes_equal_one(tiny_models, demo_built, tmp_path):
    """Two real processes under torchrun (gloo on the CPU), each with a preparing worker: both ranks say they ran,
    and the merged file is the one a single process writes."""
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    subprocess.run(score_cmd(demo_built, tiny_models["qwen3-vl"], one, "--batch-size", "4"), check=True,
                   capture_output=True)
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
              "tangpoetrybench.cli"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(launch + score_cmd(demo_built, tiny_models["qwen3-vl"], two, "--batch-size", "4",
                                             "--num-workers", "1")[3:], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "process 0 of 2" in done.stderr and "process 1 of 2" in done.stderr
    assert done.stdout.count("40 scored now") == 1  # the main process reports for both
    assert without_timing(records(one)) == without_timing(records(two))
    assert not list(tmp_path.glob("two.jsonl.part*"))


class Counting:
    """A source that counts the items it was asked for."""

    def __init__(self, source):
        self.source, self.streamed = source, 0

    def ids(self):
        return self.source.ids()

    def __iter__(self):
        for item in self.source:
            self.streamed += 1
            yield item


def test_folder_source_and_limit(tiny_models, demo_raw, tmp_path):
    source = FolderSource(demo_raw / "images", demo_raw / "poems.jsonl")
    items = list(source)
    assert items[0].image_id.startswith("painter_a/") and source.ids() == [it.image_id for it in items]
    assert all(it.poem.poem_id == it.image_id.split("/")[1] for it in items)
    out = tmp_path / "clip.jsonl"
    assert main(["score", "--images", str(demo_raw / "images"), "--poems", str(demo_raw / "poems.jsonl"),
                 "--evaluator", "clipscore", "--model", str(tiny_models["clip"]), "--limit", "7", "--out", str(out),
                 "--quiet"]) == 0
    assert [r["image_id"] for r in records(out)] == [it.image_id for it in items[:7]]
    counting = Counting(source)  # items are streamed: nothing past the limit is read
    score_to_jsonl(load_evaluator("clipscore", model=str(tiny_models["clip"])), counting, tmp_path / "c.jsonl",
                   batch_size=2, limit=3, progress=False)
    assert counting.streamed == 3 and len(records(tmp_path / "c.jsonl")) == 3


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


def test_resuming_with_other_settings_is_refused(tiny_models, demo_built, tmp_path, capsys):
    """Every setting that changes an answer is checked on resume, and the error names it."""
    out = tmp_path / "s.jsonl"
    qwen = str(tiny_models["qwen3-vl"])
    score_to_jsonl(load_evaluator("pae", model=qwen, max_new_tokens=4), DatasetSource(demo_built, "images", "test"),
                   out, limit=2, progress=False)
    source = DatasetSource(demo_built, "images", "test")
    for record in records(out):  # scored under an older parser's rules
        assert record["settings"]["parser"] >= 2
    cases = [(load_evaluator("clipscore", model=str(tiny_models["clip"])), "evaluator 'pae', not 'clipscore'"),
             (load_evaluator("pae", model=qwen, max_new_tokens=8), "max_new_tokens 4, not 8"),
             (load_evaluator("pae", model=qwen, max_new_tokens=4, max_pixels=256 * 256), "max_pixels 1048576, not 65536"),
             (load_evaluator("pae", model=qwen, max_new_tokens=4, rubric="song_ci"), "rubric 'tang@")]
    for evaluator, message in cases:
        with pytest.raises(ValueError, match=message):
            score_to_jsonl(evaluator, source, out, progress=False)
    assert len(records(out)) == 2
    lines = records(out)
    for edit, message in ((lambda r: r["settings"].update(backend="vllm"), "backend 'vllm', not 'transformers'"),
                          (lambda r: r["settings"].pop("parser"), "no parser setting, not parser"),
                          # constrained decoding changes every answer: refused both ways (an old record lacks the key)
                          (lambda r: r["settings"].update(constrained=True), "constrained True, not no constrained"),
                          (lambda r: r.pop("settings"), "without their settings")):
        edited = tmp_path / "edited.jsonl"
        changed = [json.loads(json.dumps(r)) for r in lines]
        edit(changed[1])
        edited.write_text("".join(json.dumps(r) + "\n" for r in changed))
        assert main(["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", qwen,
                     "--max-new-tokens", "4", "--out", str(edited), "--quiet"]) == 2
        assert message in capsys.readouterr().err
    assert len(records(out)) == 2
    with pytest.raises(ValueError, match="no constrained setting, not constrained True"):
        score_to_jsonl(load_evaluator("pae", model=qwen, max_new_tokens=4, constrained=True), source, out,
                       progress=False)
    assert len(records(out)) == 2


def test_transient_failures_are_retried_and_parse_failures_are_not(tiny_models, demo_built, tmp_path, capsys):
    out = tmp_path / "s.jsonl"
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), max_new_tokens=4)
    ids = DatasetSource(demo_built, "images", "test").ids()
    Flaky(pae, {ids[5]}, torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"))
    summary = score_to_jsonl(pae, DatasetSource(demo_built, "images", "test"), out, batch_size=4, progress=False)
    first = records(out)
    assert summary.scored == 12 and summary.retryable == 1 and first[5]["error_kind"] == "transient"
    assert all(r["error_kind"] == "parse" for i, r in enumerate(first) if i != 5)  # random weights: gibberish
    assert main(["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", str(tiny_models["qwen3-vl"]),
                 "--max-new-tokens", "4", "--out", str(out), "--quiet"]) == 0
    assert "1 scored now (1 failed), 11 already there" in capsys.readouterr().out
    second = records(out)
    assert [r["image_id"] for r in second] == ids and second[5]["error_kind"] == "parse"
    assert without_timing(second[:5] + second[6:]) == without_timing(first[:5] + first[6:])


def test_a_bad_image_alone_never_stops_a_run(tiny_models, demo_raw, tmp_path):
    """A 5000×20 image (Qwen's processor refuses aspect ratios over 200) alone in its batch is a failed result; the
    run finishes, and a rerun does not try it again."""
    folder = tmp_path / "images"
    folder.mkdir()
    shutil.copy(demo_raw / "images/painter_a/tang300-013.png", folder / "tang300-013.png")
    Image.new("RGB", (5000, 20), "white").save(folder / "tang300-068.png")
    out = tmp_path / "s.jsonl"
    cmd = ["score", "--images", str(folder), "--poems", str(demo_raw / "poems.jsonl"), "--evaluator", "pae",
           "--model", str(tiny_models["qwen3-vl"]), "--max-new-tokens", "4", "--batch-size", "1", "--out", str(out),
           "--quiet"]
    assert main(cmd) == 0
    good, bad = records(out)
    assert bad["error_kind"] == "input" and "aspect ratio" in bad["error"] and good["raw_output"]
    assert main(cmd) == 0 and len(records(out)) == 2


def mismatched_model(tiny_models, folder):
    """Qwen3-VL's weights with InternVL's processor: every item reaches the model and fails there."""
    shutil.copytree(tiny_models["qwen3-vl"], folder)
    for path in tiny_models["internvl"].iterdir():
        if path.name not in ("config.json", "model.safetensors", "generation_config.json"):
            shutil.copy(path, folder / path.name)
    return folder


def test_a_model_failure_in_the_first_batch_of_a_working_run_is_one_items(tiny_models, demo_built, tmp_path):
    """Batch size 1, the first image fails in the model, the rest work: the run finishes, records the failure, and
    a rerun tries it again."""
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    ids = DatasetSource(demo_built, "images", "test").ids()
    Flaky(clip, {ids[0]}, RuntimeError("this image breaks the model"))
    out = tmp_path / "s.jsonl"
    summary = score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), out, batch_size=1, progress=False)
    assert summary.scored == 12 and summary.retryable == 1 and records(out)[0]["error_kind"] == "model"
    fixed = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    again = score_to_jsonl(fixed, DatasetSource(demo_built, "images", "test"), out, progress=False)
    assert again.scored == 1 and [r["image_id"] for r in records(out)] == ids and records(out)[0]["error_kind"] is None


def test_a_retried_result_wins_over_the_failure_in_any_file(tiny_models, demo_built, tmp_path):
    """A transient failure left in a part file by a killed parallel run, retried by a one-process resume: the new
    result is the one kept, whichever file is read last."""
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    full = tmp_path / "full.jsonl"
    score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), full, progress=False)
    rows = records(full)
    failed = dict(rows[0], quality=None, parse_status="failed", error="OutOfMemoryError: CUDA out of memory",
                  error_kind="transient")
    out = tmp_path / "s.jsonl"
    (tmp_path / "s.jsonl.part0").write_text(json.dumps(failed) + "\n")
    (tmp_path / "s.jsonl.part1").write_text("".join(json.dumps(r) + "\n" for r in rows[1:4]))
    summary = score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), out, progress=False)
    assert summary.skipped == 3 and summary.retryable == 0
    merged = records(out)
    assert [r["image_id"] for r in merged] == [r["image_id"] for r in rows] and merged[0]["error_kind"] is None
    assert [r["quality"] for r in merged] == pytest.approx([r["quality"] for r in rows], abs=1e-5)  # other batches


def test_a_broken_model_stops_the_run_and_writes_nothing(tiny_models, demo_built, tmp_path, capsys):
    model = mismatched_model(tiny_models, tmp_path / "mismatched")
    out = tmp_path / "s.jsonl"
    cmd = ["score", "--dataset", str(demo_built), "--evaluator", "pae", "--model", str(model), "--max-new-tokens", "4",
           "--batch-size", "2", "--out", str(out), "--quiet"]
    assert main(cmd) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: every image of the first 3 batch(es) failed in the model (")
    assert not records(out)
    # The same failures in a run whose file already shows the model working are the items' own: they are recorded.
    pae = load_evaluator("pae", model=str(model), max_new_tokens=4)
    with pytest.raises(SystematicFailure):
        score_to_jsonl(pae, DatasetSource(demo_built, "images", "test"), out, batch_size=12, progress=False)
    first = next(iter(DatasetSource(demo_built, "images", "test"))).load()
    out.write_text(json.dumps(pae.result(first, {}, None, "{}", "ok", None).to_json()) + "\n")
    summary = score_to_jsonl(pae, DatasetSource(demo_built, "images", "test"), out, progress=False)
    assert summary.scored == 11 and summary.failed == 11
    assert {r["error_kind"] for r in records(out)[1:]} == {"model"}


def test_an_engine_gets_batches_of_at_least_its_minimum(tiny_models, demo_built, tmp_path):
    """vLLM schedules its own batches (min_batch_size 256): --batch-size never makes them smaller."""
    from tangpoetrybench.judging.backends.vllm import MIN_CHUNK, VLLMBackend

    assert VLLMBackend.min_batch_size == MIN_CHUNK >= 256
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    clip.min_batch_size = 5
    sizes = Flaky(clip, set(), RuntimeError())
    score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), tmp_path / "s.jsonl", batch_size=2,
                   progress=False)
    assert [len(c) for c in sizes.calls] == [5, 5, 2]


def test_parts_left_by_a_killed_parallel_run_are_merged(tiny_models, demo_built, tmp_path):
    """A run killed under 3 processes left part files; a single-process rerun counts them and merges them."""
    out = tmp_path / "s.jsonl"
    clip = load_evaluator("clipscore", model=str(tiny_models["clip"]))
    score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), tmp_path / "full.jsonl", progress=False)
    full = records(tmp_path / "full.jsonl")
    (tmp_path / "s.jsonl.part0").write_text("".join(json.dumps(r) + "\n" for r in full[0:9:3]))
    (tmp_path / "s.jsonl.part2").write_text("".join(json.dumps(r) + "\n" for r in full[2:9:3]) + '{"image_id": "cut')
    summary = score_to_jsonl(clip, DatasetSource(demo_built, "images", "test"), out, progress=False)
    assert summary.skipped == 6 and summary.scored == 6
    assert [r["image_id"] for r in records(out)] == [r["image_id"] for r in full]
    assert not list(tmp_path.glob("s.jsonl.part*"))


def test_the_advice_when_a_run_stops_follows_from_its_failure():
    """A server's refusal is not blamed on memory; memory is named where it ran out."""
    from tangpoetrybench.judging.scoring import FailureGuard, what_to_fix
    from tangpoetrybench.judging.evaluators.base import ScoresResult

    assert what_to_fix("OutOfMemoryError: CUDA out of memory").startswith("It is out of memory: lower --batch-size")
    refused = "HTTP 400 from http://127.0.0.1:8000/v1: {\"detail\": \"Server is pinned to 'm'; requested 'x'.\"}"
    assert what_to_fix(refused).startswith("The server refused every request: its message is above (a --model")
    assert what_to_fix("ValueError: shapes do not match") == "Fix the cause and run again"
    guard = FailureGuard(trusted=False, batches=1)
    failed = ScoresResult("g/p1", "api", {}, None, None, "failed", refused, 0.0, error_kind="model")
    with pytest.raises(SystematicFailure) as stopped:
        guard.admit([failed.to_json()])  # the guard holds records
    assert "The server refused every request" in str(stopped.value) and "memory" not in str(stopped.value)


def test_a_flat_folder_names_its_generator_or_is_warned_of_before_scoring(tiny_models, demo_raw, tmp_path, capsys):
    """`DIR/<poem_id>.png` ids name no generator, which the leaderboard needs: --generator names it; without it,
    tpb score says so before it scores (not the leaderboard, after the expensive step)."""
    folder = tmp_path / "flat"
    folder.mkdir()
    for image in sorted((demo_raw / "images" / "painter_a").iterdir())[:2]:
        shutil.copy(image, folder / image.name)
    common = ["--images", str(folder), "--poems", str(demo_raw / "poems.jsonl"), "--evaluator", "clipscore",
              "--model", str(tiny_models["clip"]), "--quiet"]
    assert main(["score", *common, "--generator", "mine", "--out", str(tmp_path / "named.jsonl")]) == 0
    assert {r["image_id"].split("/")[0] for r in records(tmp_path / "named.jsonl")} == {"mine"}
    assert "names no generator" not in capsys.readouterr().err
    assert main(["score", *common, "--out", str(tmp_path / "flat.jsonl")]) == 0
    assert "holds images directly (<poem_id>.png), so their ids name no generator and the leaderboard cannot " \
           "rank them: give --generator NAME" in capsys.readouterr().err
    assert main(["score", "--images", str(demo_raw / "images"), *common[2:], "--generator", "x", "--out",
                 str(tmp_path / "x.jsonl")]) == 2
    assert "has generator folders (DIR/<generator>/<poem_id>.png): give no --generator" in capsys.readouterr().err


def folder_forms(tmp_path, demo_raw) -> dict[str, str]:
    """One folder of two generators' images (two each), named four ways from `tmp_path` (the working directory):
    relative, absolute, with `..`, and through a symbolic link to its parent folder."""
    real = tmp_path / "elsewhere" / "images"
    for generator in ("painter_a", "painter_b"):
        (real / generator).mkdir(parents=True)
        for image in sorted((demo_raw / "images" / generator).iterdir())[:2]:
            shutil.copy(image, real / generator / image.name)
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    return {"relative": "elsewhere/images", "absolute": str(real), "dotdot": "sub/../elsewhere/images",
            "linked parent": "link/images"}


@pytest.mark.parametrize("form", ["relative", "absolute", "dotdot", "linked parent"])
def test_an_images_folder_named_any_way_scores_every_image(form, tiny_models, demo_raw, tmp_path, monkeypatch):
    """`--images` relative, absolute, with `..` or through a linked parent: every image is read (the rows name their
    files below the folder, and the folder is made absolute once, where the source is made). The rows a Ray worker
    or a data-loader worker gets read the same files from another working directory."""
    monkeypatch.chdir(tmp_path)
    images = folder_forms(tmp_path, demo_raw)[form]
    out = tmp_path / "clip.jsonl"
    assert main(["score", "--images", images, "--poems", str(demo_raw / "poems.jsonl"), "--evaluator", "clipscore",
                 "--model", str(tiny_models["clip"]), "--out", str(out), "--quiet"]) == 0
    rows = records(out)
    assert len(rows) == 4 and all(r["parse_status"] == "ok" for r in rows), [r["error"] for r in rows]
    source = FolderSource(images, demo_raw / "poems.jsonl")
    monkeypatch.chdir(tmp_path / "sub")  # a worker whose working directory is another
    assert all(row_item(row, source.root).load().image is not None for row in source.rows())
