"""The lmms-eval task `tangpoetrybench` (harness/lmms_eval/) and its `tpb_diffusers` model. The fast tests check the
package's side of it (documents, judge from the environment, metrics) with the tiny judge; the slow one installs
lmms-eval in an environment of its own and runs it for real, offline, with the tiny diffusers pipeline and the
tiny judge, then checks that `tpb generate` + `tpb score` + `tpb leaderboard` give the same images and numbers.
Random weights: these check plumbing, never quality. The dataset is the SYNTHETIC demo release."""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from scipy import stats

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.reading import dataset_rows, row_image
from tangpoetrybench.generation.diffusers_generate import image_path
from tangpoetrybench.numeric import mean_or_none
from tangpoetrybench.reporting import harness

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "harness" / "lmms_eval" / "tangpoetrybench"
LMMS_EVAL = "lmms-eval==0.7.3"
# lmms-eval 0.7.3 patches filelock._api, which filelock 4 no longer has
LMMS_PINS = ("filelock<4",)
SIZE, STEPS = 64, 2


class _Functions(yaml.SafeLoader):
    """Reads the task YAML's `!function utils.name` tags as the names they are."""


_Functions.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def test_task_yaml_names_every_metric():
    config = yaml.load((TASK / "tangpoetrybench.yaml").read_text(encoding="utf-8"), Loader=_Functions)
    assert config["output_type"] == "generate_until" and config["task"] == "tangpoetrybench"
    metrics = [m["metric"] for m in config["metric_list"]]
    assert metrics == ["quality", *harness.KEYS, "answers_without_quality", "kendall_tau_human"]
    functions = {config[k] for k in ("process_docs", "doc_to_visual", "doc_to_text", "doc_to_target", "process_results")}
    functions |= {m["aggregation"] for m in config["metric_list"]}
    source = (TASK / "utils.py").read_text(encoding="utf-8")
    for name in functions:
        short = name.split(".", 1)[1]
        assert f"def {short}(" in source or f"{short} = harness." in source or f"import {short}" in source, name


def test_docs_judge_and_metrics(demo_built, tiny_models, tmp_path):
    rows = list(dataset_rows(demo_built, "images", "test"))
    docs = harness.poem_docs(rows)
    assert [d["poem_id"] for d in docs] == sorted({r["poem_id"] for r in rows if r["tradition"] == "tang"})
    human = json.loads(docs[0]["human"])
    assert human == {r["generator"]: r["quality"] for r in rows if r["poem_id"] == docs[0]["poem_id"]
                     and r["quality"] is not None}
    env = {"TPB_JUDGE": "pae", "TPB_JUDGE_MODEL": str(tiny_models["qwen3-vl"]), "TPB_JUDGE_CONSTRAINED": "1",
           "TPB_JUDGE_DEVICE": "cpu", "TPB_JUDGE_MAX_NEW_TOKENS": "256"}
    assert harness.judge_options(env) == ("pae", {"model": str(tiny_models["qwen3-vl"]), "device": "cpu",
                                                  "max_new_tokens": 256, "constrained": True})
    judge = harness.judge(env)
    assert harness.judge(env) is judge  # loaded once
    generator = next(iter(human))
    image = next(r["image"] for r in rows if r["poem_id"] == docs[0]["poem_id"] and r["generator"] == generator)
    row_image(image, demo_built).save(tmp_path / "a.png")
    answer = json.dumps({"text": "", "images": [str(tmp_path / "a.png")], "generator": generator})
    values = harness.metric_values(judge, docs[0], answer)
    assert values["quality"] is not None and set(harness.KEYS) <= set(values)  # constrained: every answer parses
    assert values["kendall_tau_human"] == {"judge": values["quality"], "human": human[generator]}
    missing = harness.metric_values(judge, docs[0], json.dumps({"text": "", "images": [str(tmp_path / "no.png")]}))
    assert missing["quality"] is None and missing["answers_without_quality"] is True
    assert mean_or_none([0.5, None, 0.7]) == pytest.approx(0.6) and mean_or_none([None]) is None  # the task's mean
    pairs = [{"judge": j, "human": h} for j, h in [(0.1, 0.2), (0.5, 0.3), (0.4, 0.9), (None, 0.1)]]
    assert harness.kendall_tau_human(pairs) == pytest.approx(stats.kendalltau([0.1, 0.5, 0.4], [0.2, 0.3, 0.9]).statistic)
    assert harness.kendall_tau_human([{"judge": 0.3, "human": None}] * 3) is None


# --- lmms-eval for real (slow: an environment of its own) ----------------------------------------------------

def lmms_env() -> Path:
    """An environment of its own with lmms-eval, which sees the running environment's packages (this project's
    dependencies, diffusers, torch: lmms-eval pins no torch build, and a second CUDA torch would be gigabytes)
    through a `.pth` file naming the running environment's site-packages. (`venv --system-site-packages` would see
    the base interpreter's only, which lack them where the project was installed in a venv, as the README does.)
    Built once per running environment in ${TMPDIR:-/tmp}/tpb-lmms-env-HASH and reused while it imports what the
    run needs; skips when it cannot be built (no network)."""
    running = [p for p in dict.fromkeys(sys.path) if p.endswith("site-packages") and Path(p).is_dir()]
    key = hashlib.sha256("\n".join(running).encode()).hexdigest()[:8]
    env = Path(os.environ.get("TMPDIR", "/tmp")) / f"tpb-lmms-env-{key}"
    python = env / "bin" / "python"
    probe = [str(python), "-c", "import lmms_eval, diffusers, tangpoetrybench, filelock._api; from importlib.metadata "
             "import entry_points; assert entry_points(group='lmms_eval.models', name='tpb_diffusers')"]
    if python.is_file() and subprocess.run(probe, capture_output=True).returncode == 0:
        return env
    shutil.rmtree(env, ignore_errors=True)
    made = subprocess.run([sys.executable, "-m", "venv", str(env)], capture_output=True, text=True)
    if made.returncode == 0:
        [own] = (env / "lib").glob("python*/site-packages")
        (own / "tpb-running-environment.pth").write_text("".join(p + "\n" for p in running), encoding="utf-8")
        made = subprocess.run([str(python), "-m", "pip", "install", "-q", LMMS_EVAL, *LMMS_PINS, "-e", str(ROOT)],
                              capture_output=True, text=True)
    if made.returncode != 0 or subprocess.run(probe, capture_output=True).returncode != 0:
        pytest.skip(f"could not build an lmms-eval environment in {env} (no network?): "
                    f"{(made.stderr or '')[-500:]}")
    return env


def logged_errors(output: str) -> list[str]:
    """The errors lmms-eval logs (loguru's `| ERROR |` lines, "Error during evaluation", a traceback) though it
    exits 0 after them: each is a failure of the run."""
    return [line for line in output.splitlines()
            if re.search(r"\|\s*ERROR\s*\||Error during evaluation|^Traceback \(most recent call last\)", line)]


def test_lmms_evals_logged_errors_are_failures():
    """lmms-eval logs `Error during evaluation: No module named 'diffusers'` and exits 0: the slow run fails on it
    there, not later on a missing results file."""
    output = ("2026-12-02 10:00:01 | INFO | lmms_eval.evaluator:simple_evaluate:120 - Evaluating\n"
              "2026-12-02 10:00:02 | ERROR    | lmms_eval.__main__:cli_evaluate:400 - Error during evaluation: No module "
              "named 'diffusers'\nPlease check your inputs")
    assert logged_errors(output) == [output.splitlines()[1]]
    assert logged_errors("2026-12-02 | INFO | all fine: 0 errors") == []


def offline(tmp: Path, **extra: str) -> dict:
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               HF_HOME=str(tmp / "hf"), PYTHONPATH=str(ROOT), **extra)
    return env


@pytest.mark.slow
def test_lmms_eval_run_equals_tpb_leaderboard(demo_built, tiny_models, tmp_path):
    env_dir = lmms_env()
    tasks = tmp_path / "tasks"
    shutil.copytree(TASK.parent, tasks)
    (tasks / "tangpoetrybench" / "tangpoetrybench_local.yaml").write_text(
        f"include: tangpoetrybench.yaml\ntask: tangpoetrybench_local\ndataset_path: {demo_built}\n", encoding="utf-8")
    generator = "painter_a"  # a generator people rated: τ against them is defined
    judge = {"TPB_JUDGE": "pae", "TPB_JUDGE_MODEL": str(tiny_models["qwen3-vl"]), "TPB_JUDGE_CONSTRAINED": "1",
             "TPB_JUDGE_DEVICE": "cpu"}
    pipeline = tiny_models["text-to-image"]
    model_args = (f"pretrained={pipeline},generator={generator},output_dir={tmp_path / 'lmms_raw'},steps={STEPS},"
                  f"height={SIZE},width={SIZE},device=cpu")
    run = subprocess.run([str(env_dir / "bin" / "lmms-eval"), "--model", "tpb_diffusers", "--model_args", model_args,
                          "--tasks", "tangpoetrybench_local", "--include_path", str(tasks), "--batch_size", "1",
                          "--output_path", str(tmp_path / "lmms_out"), "--log_samples"],
                         env=offline(tmp_path, **judge), capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert not logged_errors(run.stdout + run.stderr), "\n".join(logged_errors(run.stdout + run.stderr))
    [results_file] = (tmp_path / "lmms_out").rglob("*_results.json")
    lmms = json.loads(results_file.read_text(encoding="utf-8"))["results"]["tangpoetrybench_local"]

    # the same images from tpb generate, then tpb score and tpb leaderboard on them
    poems = tmp_path / "lmms_raw" / "poems.jsonl"
    assert main(["generate", "--pipeline", str(pipeline), "--poems", str(poems), "--out", str(tmp_path / "raw"),
                 "--generator", generator, "--steps", str(STEPS), "--height", str(SIZE), "--width", str(SIZE),
                 "--device", "cpu", "--quiet"]) == 0
    made = sorted((tmp_path / "lmms_raw" / "images" / generator).glob("*.png"))
    assert made and all(p.read_bytes() == image_path(tmp_path / "raw", generator, p.stem).read_bytes() for p in made)
    assert main(["score", "--images", str(tmp_path / "raw" / "images"), "--poems", str(tmp_path / "raw" / "poems.jsonl"),
                 "--evaluator", "pae", "--model", str(tiny_models["qwen3-vl"]), "--constrained", "--device", "cpu",
                 "--out", str(tmp_path / "scores.jsonl"), "--quiet"]) == 0
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(tmp_path / "scores.jsonl"),
                 "--out", str(tmp_path / "board"), "--bootstrap", "0"]) == 0
    [row] = json.loads((tmp_path / "board" / "leaderboard.json").read_text(encoding="utf-8"))["leaderboard"]
    assert row["generator"] == generator and row["images"] == len(made) == lmms_n(results_file)
    for key in ("quality", *harness.KEYS):
        assert lmms[f"{key},none"] == pytest.approx(row["judge"][key], abs=1e-9), key
    assert lmms["answers_without_quality,none"] == row["answers_without_quality"]
    # τ against people: the judge's quality of each image beside the human quality of painter_a's image of the poem
    scored = {json.loads(line)["image_id"]: json.loads(line)["quality"]
              for line in (tmp_path / "scores.jsonl").read_text(encoding="utf-8").splitlines()}
    people = {r["poem_id"]: r["quality"] for r in dataset_rows(demo_built, "images", "test")
              if r["generator"] == generator}
    pairs = [(scored[f"{generator}/{p.stem}"], people[p.stem]) for p in made if people.get(p.stem) is not None]
    assert len(pairs) >= 2
    expected = stats.kendalltau(*zip(*pairs)).statistic  # NaN when the tiny judge ties every image: then None
    assert lmms["kendall_tau_human,none"] == (None if expected != expected else pytest.approx(expected))


def lmms_n(results_file: Path) -> int:
    return json.loads(results_file.read_text(encoding="utf-8"))["n-samples"]["tangpoetrybench_local"]["effective"]


def test_lmms_env_skips_with_the_reason_when_it_cannot_be_built(tmp_path, monkeypatch):
    """No package index (as without a network): the slow test skips, saying why, instead of failing."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    with pytest.raises(pytest.skip.Exception, match="could not build an lmms-eval environment in .*tpb-lmms-env"):
        lmms_env()
