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
