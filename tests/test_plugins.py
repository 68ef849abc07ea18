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
from tangpoetrybench.judging.registry import evaluator_names, evaluator_spec, plugins
from tangpoetrybench.poems import sample_poems

EXAMPLE = Path(__file__).resolve().parents[1] / "docs" / "examples" / "tpb-plugin-example"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin built and installed by pip into a folder of its own (no network: no dependencies, no
    build isolation)."""
    root = tmp_path_factory.mktemp("plugin")
    shutil.copytree(EXAMPLE, root / "src")
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                           "--target", str(root / "site"), str(root / "src")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((root / "site").glob("tpb_plugin_example-*.dist-info/entry_points.txt"))
    return root / "site"


@pytest.fixture
def installed(plugin_site, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_site))
    plugins.cache_clear()
    yield plugin_site
    plugins.cache_clear()


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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed), os.environ.get("PYTHONPATH", "")])}
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
