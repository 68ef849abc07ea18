"""An evaluator plugin (docs/plugins.md), installed for real with pip from a copy of docs/examples/tpb-plugin-example:
its entry point alone makes `tpb score --evaluator brightness`, `load_evaluator("brightness")` and the Space find
it, with no change to this project."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import Evaluator, LetterResult, ScalarResult
from tangpoetrybench.judging.registry import evaluator_names, evaluator_spec, plugins
from tangpoetrybench.poems import sample_poems

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "tpb-plugin-example"


MISSING = "tpb_plugin_dependency_not_installed"  # what the broken copy of the example imports


def install(root: Path, broken: bool = False) -> Path:
    """The example plugin copied to ROOT/src and installed there by pip into ROOT/site (no network: no dependencies,
    no build isolation). `broken`: its module first imports a module that is not installed, as a plugin whose
    dependency is missing does."""
    shutil.copytree(EXAMPLE, root / "src")
    if broken:
        module = root / "src" / "tpb_plugin_example.py"
        future = "from __future__ import annotations\n"
        module.write_text(module.read_text(encoding="utf-8").replace(future, f"{future}import {MISSING}  # noqa\n"),
                          encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(root / "site"), str(root / "src")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((root / "site").glob("tpb_plugin_example-*.dist-info/entry_points.txt"))
    return root / "site"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    return install(tmp_path_factory.mktemp("plugin"))


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory) -> Path:
    return install(tmp_path_factory.mktemp("broken"), broken=True)


def on_path(site: Path, monkeypatch):
    """The plugins installed in `site` found by this process (the example's module imported afresh from there)."""
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "tpb_plugin_example", raising=False)
    plugins.cache_clear()
    yield site
    plugins.cache_clear()


@pytest.fixture
def installed(plugin_site, monkeypatch):
    yield from on_path(plugin_site, monkeypatch)


@pytest.fixture
def installed_broken(broken_site, monkeypatch):
    yield from on_path(broken_site, monkeypatch)


def with_site(site: Path) -> dict:
    """The environment of a `tpb` subprocess that finds the plugins installed in `site`."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}


@pytest.mark.filterwarnings("error::DeprecationWarning:tpb_plugin_example")  # the example uses no deprecated API
def test_load_evaluator_and_the_registry_find_the_plugin(installed):
    assert "brightness" in evaluator_names("pointwise") and "brightness" not in evaluator_names("pairwise")
    spec = evaluator_spec("brightness")
    assert spec.source == "tpb-plugin-example" and spec.tasks == ("scalar",) and spec.options == ("max_pixels",)
    judge = load_evaluator("brightness", max_pixels=64 * 64)
    [white, black] = judge([Image.new("RGB", (32, 32), "white"), Image.new("RGB", (32, 32), "black")],
                           sample_poems()[:2])
    assert (white.quality, black.quality) == (1.0, 0.0) and judge.settings() == {"max_pixels": 4096}
    with pytest.raises(ValueError, match="--adapter does not apply to brightness"):
        load_evaluator("brightness", adapter="x")


def test_tpb_score_runs_the_plugin(installed, demo_raw, tmp_path):
    out = tmp_path / "brightness.jsonl"
    env = with_site(installed)
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "score", "--images", str(demo_raw / "images"),
                           "--poems", str(demo_raw / "poems.jsonl"), "--evaluator", "brightness", "--out", str(out),
                           "--quiet"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows and all(r["evaluator"] == "brightness" and 0 <= r["quality"] <= 1 for r in rows)
    listed = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "score", "--help"], capture_output=True,
                            text=True, env=env).stdout
    assert "brightness: a plugin's evaluator (tpb_plugin_example:brightness)" in " ".join(listed.split())


def test_the_space_shows_the_plugin_beside_the_baselines(installed):
    from tangpoetrybench.hub.space import Scorer, SpaceConfig, baselines

    assert "brightness" in baselines()
    [name, value, scale, note] = Scorer(SpaceConfig()).baseline("brightness", Image.new("RGB", (8, 8), "white"),
                                                               sample_poems()[0])
    assert (name, value, scale, note) == ("brightness", 1.0, "—", "")


def test_a_plugin_that_does_not_load_is_named_and_left_out(installed_broken):
    """Its module fails to import: a warning names the distribution, the entry point and the error; the lists, the
    Space and every command work without it; choosing it says why it cannot be had."""
    from tangpoetrybench.hub.space import baselines

    with pytest.warns(UserWarning, match=f"'brightness' of tpb-plugin-example \\(tpb_plugin_example:brightness\\) "
                                         f"does not load and is left out: ModuleNotFoundError: .*{MISSING}"):
        names = evaluator_names()
    assert "brightness" not in names and "clipscore" in names and "brightness" not in baselines()
    with pytest.raises(ValueError, match=f"the evaluator 'brightness' of the plugin tpb-plugin-example "
                                         f"\\(tpb_plugin_example:brightness\\) does not load: .*{MISSING}"):
        load_evaluator("brightness")
    for command in ("compare", "agree"):
        done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", command, "--help"], capture_output=True,
                              text=True, env=with_site(installed_broken))
        assert done.returncode == 0 and "--dataset" in done.stdout, done.stderr[-3000:]
        assert "'brightness' of tpb-plugin-example" in done.stderr and MISSING in done.stderr
        assert done.stderr.startswith("warning: the evaluator plugin") and "warnings.warn" not in done.stderr


# --- plugins that answer the letter task and the scores task: their records read as what they are -------------------

TASK_PLUGINS = '''"""Two evaluator plugins that join a built-in task to a backend under names of their own."""

from tangpoetrybench.judging.backends import load_backend
from tangpoetrybench.judging.judge import Judge
from tangpoetrybench.judging.tasks.letter import Recognize
from tangpoetrybench.judging.tasks.scores import RubricScores


def letter_judge(model, candidates, device=None):
    """The Phase-1 letter question, asked of a local Qwen3-VL."""
    return Judge("letter-plugin", Recognize(candidates), load_backend("transformers", model=model, device=device))


letter_judge.tasks = ("letter",)


def served_scores(model, base_url, max_new_tokens=None, rubric=None):
    """The rubric's scores, asked of a served model."""
    return Judge("served-scores", RubricScores(), load_backend("api", model=model, base_url=base_url),
                 max_new_tokens=max_new_tokens, rubric=rubric)


served_scores.tasks = ("scores",)
'''
TASK_PLUGINS_PROJECT = '''[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "tpb-task-plugins"
version = "0.1.0"

[tool.setuptools]
py-modules = ["tpb_task_plugins"]

[project.entry-points."tangpoetrybench.evaluators"]
letter-plugin = "tpb_task_plugins:letter_judge"
served-scores = "tpb_task_plugins:served_scores"
'''


@pytest.fixture(scope="module")
def task_plugins(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("task-plugins")
    (root / "src").mkdir()
    (root / "src" / "tpb_task_plugins.py").write_text(TASK_PLUGINS, encoding="utf-8")
    (root / "src" / "pyproject.toml").write_text(TASK_PLUGINS_PROJECT, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(root / "site"), str(root / "src")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return root / "site"


def tpb(site: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", *map(str, args)], capture_output=True,
                          text=True, env={**with_site(site), "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_plugins_answering_letter_and_scores_are_read_as_what_they_are(task_plugins, server, tiny_models, demo_raw,
                                                                        demo_built, tmp_path):
    """A plugin's letter judge (a local tiny Qwen3-VL) and a plugin's rubric judge (a served one, `transformers serve`
    on loopback): their records name their tasks, so `tpb agree` reads the first against the Phase-1 track and the
    second against the human scores, `tpb report` puts them in the recognizability table and Table 4, and
    `tpb leaderboard` ranks by the second, labelled by its name, with the first as its recognizability. (Before,
    every file not named recognize was read as rubric scores, and the leaderboard took only pae's.) Random weights:
    plumbing only."""
    from tangpoetrybench.dataset.distractors import choose_distractors, write_candidates
    from tangpoetrybench.poems import read_poems

    poems = read_poems(demo_raw / "poems.jsonl")
    candidates = write_candidates(choose_distractors(poems, seed=0), poems, tmp_path / "candidates.jsonl", {"seed": 0})
    letter, scores = tmp_path / "letter.jsonl", tmp_path / "scores.jsonl"
    tpb(task_plugins, "score", "--dataset", demo_built, "--evaluator", "letter-plugin", "--model",
        tiny_models["qwen3-vl"], "--candidates", candidates, "--device", "cpu", "--out", letter, "--quiet")
    tpb(task_plugins, "score", "--dataset", demo_built, "--evaluator", "served-scores", "--model", server["model"],
        "--base-url", server["url"] + "/v1", "--max-new-tokens", "8", "--out", scores, "--quiet")
    made = {path.stem: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
            for path in (letter, scores)}
    assert {(r["evaluator"], r["task"]) for r in made["letter"]} == {("letter-plugin", "letter")}
    assert {(r["evaluator"], r["task"]) for r in made["scores"]} == {("served-scores", "scores")}
    assert all(r["settings"]["server"] == server["url"] + "/v1" for r in made["scores"] if r.get("error_kind") is None)

    read_letter = tpb(task_plugins, "agree", "--dataset", demo_built, "--scores", letter, "--bootstrap", "20").stdout
    assert "against the human Phase-1 track" in read_letter and "chance 0.25" in read_letter
    read_scores = tpb(task_plugins, "agree", "--dataset", demo_built, "--scores", scores, "--bootstrap", "20").stdout
    assert "Agreement of served-scores" in read_scores and "Phase-1" not in read_scores

    tpb(task_plugins, "report", "--dataset", demo_built, "--scores", letter, scores, "--out", tmp_path / "report",
        "--bootstrap", "20")
    numbers = json.loads((tmp_path / "report" / "numbers.json").read_text(encoding="utf-8"))
    assert list(numbers["recognizability_judge"]) == ["letter"]
    assert [k for k in numbers["table4"] if k.startswith("served-scores")] and "letter-plugin" not in numbers["table4"]

    tpb(task_plugins, "leaderboard", "--dataset", demo_built, "--scores", scores, "--recognize", letter, "--out",
        tmp_path / "board", "--bootstrap", "20")
    board = json.loads((tmp_path / "board" / "leaderboard.json").read_text(encoding="utf-8"))
    md = (tmp_path / "board" / "leaderboard.md").read_text(encoding="utf-8")
    assert board["evaluator"] == "served-scores" and "**served-scores** columns" in md
    assert f"`served-scores` (`{server['model']}` at {server['url']}/v1, settings" in md
    assert "PAE" not in md.replace("PAE_", "")


class Undeclared(Evaluator):
    """A plugin's evaluator that does not say what it answers: an image's width, as a letter share (plumbing)."""

    name, model_name = "undeclared", "width"

    def _prepare(self, items):
        return [min(1.0, it.image.width / 100) for it in items]

    def _run(self, inputs, items):
        return [self.result(it, {"recognizability": v}, v, None, "ok", None) for it, v in zip(items, inputs)]


class Scalar(Undeclared):
    record_type = ScalarResult


def undeclared(task: str = "letter") -> Evaluator:
    return Undeclared()


def scalar() -> Evaluator:
    return Scalar()


def test_a_plugins_evaluator_writes_the_records_of_the_task_it_was_asked_for(monkeypatch):
    """An evaluator that does not declare its record type is given its task's (its records then name it); one that
    declares another task's is refused by name."""
    from tangpoetrybench.judging import registry
    from tangpoetrybench.judging.registry import EvaluatorSpec

    specs = (EvaluatorSpec("undeclared", "", f"{__name__}:undeclared", ("letter",), (), source="test"),
             EvaluatorSpec("mislabelled", "", f"{__name__}:scalar", ("letter",), (), source="test"))
    monkeypatch.setattr(registry, "plugins", lambda: specs)
    judge = load_evaluator("undeclared")
    [record] = judge([Image.new("RGB", (50, 8))], sample_poems()[:1])
    assert judge.record_type is LetterResult and record.to_json()["task"] == "letter" and record.quality == 0.5
    with pytest.raises(ValueError, match="mislabelled was asked for the letter task but writes scalar records"):
        load_evaluator("mislabelled")
