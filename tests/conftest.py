"""Shared fixtures: a hand-written raw release small enough to compute by hand, and the bundled demo."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path

import pytest
from PIL import Image

from tangpoetrybench.dataset.builder import build_dataset
from tangpoetrybench.dataset.synthetic import write_demo_release
from tangpoetrybench.poems import sample_poems

SHARED = Path(__file__).resolve().parents[2] / "shared"
HEADER = ("rating_id,rater_id,rater_group,generator,poem_id,seconds,phase1_candidates,phase1_choice,"
          "safety,technical_quality,ai_plausibility,text_integrity,scene_consistency,cultural_coherence,"
          "artistic_style,core_imagery,emotional_resonance,overall_impression")
POEMS = [
    {"poem_id": "p1", "title": "静夜思", "author": "李白", "text": "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。", "tradition": "tang"},
    {"poem_id": "p2", "title": "春晓", "author": "孟浩然", "text": "春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。", "tradition": "tang"},
    {"poem_id": "p3", "title": "江雪", "author": "柳宗元", "text": "千山鸟飞绝，万径人踪灭。\n孤舟蓑笠翁，独钓寒江雪。", "tradition": "tang"},
    {"poem_id": "p4", "title": "相思", "author": "王维", "text": "红豆生南国，春来发几枝。\n愿君多采撷，此物最相思。", "tradition": "tang"},
    {"poem_id": "s1", "title": "卜算子·咏梅", "author": "陆游", "text": "驿外断桥边，寂寞开无主。", "tradition": "song_ci",
     "tune": "卜算子"},
]
CANDIDATES = "p1|p2|p3|p4"


def rating(rid: str, rater: str, gen: str, poem: str, answers: str = "aaaaaaaaaa", seconds: float = 60,
           choice: str | None = None, group: str = "crowd", candidates: str = CANDIDATES) -> str:
    """One ratings.csv line; `answers` holds the ten option letters in SPEC order."""
    choice = poem if choice is None else choice
    return f"{rid},{rater},{group},{gen},{poem},{seconds},{candidates},{choice}," + ",".join(answers)


def write_release(root: Path, ratings: list[str], labels: list[str] | None = None, poems: list[dict] = POEMS,
                  generators: dict | None = None, images: list[str] | None = None) -> Path:
    """A raw release by hand: 64×64 PNGs for `images` ("gen/poem_id"), default every generator × Tang poem."""
    generators = generators or {"g1": {"display": "G1", "unseen": False}, "g2": {"display": "G2", "unseen": False},
                                "gx": {"display": "GX", "unseen": True}}
    root.mkdir(parents=True, exist_ok=True)
    (root / "release.json").write_text(json.dumps({"name": "hand-made test release", "generators": generators}))
    (root / "poems.jsonl").write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in poems), encoding="utf-8")
    if images is None:
        images = [f"{g}/{p['poem_id']}" for g in generators for p in poems if p["tradition"] == "tang"] + ["g1/s1"]
    for i, image_id in enumerate(images):
        path = root / "images" / f"{image_id}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (64, 64), (i * 20 % 256, 120, 200)).save(path)
    (root / "ratings.csv").write_text("\n".join([HEADER] + ratings) + "\n", encoding="utf-8")
    if labels is not None:
        (root / "text_labels.csv").write_text("\n".join(["generator,poem_id,text_issue,issue_type"] + labels) + "\n")
    return root


@pytest.fixture(scope="session")
def demo_raw(tmp_path_factory) -> Path:
    """The bundled sample as a synthetic raw release (seed 0)."""
    return write_demo_release(tmp_path_factory.mktemp("demo") / "raw", sample_poems(), seed=0, progress=False)


@pytest.fixture(scope="session")
def demo_built(demo_raw, tmp_path_factory) -> Path:
    return build_dataset(demo_raw, tmp_path_factory.mktemp("demo_built") / "ds", progress=False).out


def load(folder: Path, config: str, cache: Path):
    import datasets

    return datasets.load_dataset(str(folder), config, cache_dir=str(cache))


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory) -> dict[str, Path]:
    """Tiny random-weight models (Qwen3-VL, CLIP, Chinese-CLIP, BLIP), built once per test session."""
    from tangpoetrybench.judging.tiny_models import build_tiny_models

    return build_tiny_models(tmp_path_factory.mktemp("tiny") / "models")


def load_module(path: Path, name: str):
    """Import a script (an app.py) under its own module name, so two apps never shadow each other."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def launched_space(env: dict[str, str], name: str):
    """The Space's app.py imported with `env` set (the environment is restored once it has loaded) and launched on
    127.0.0.1: yields (module, url)."""
    import os

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        module = load_module(Path(__file__).resolve().parents[1] / "space" / "app.py", name)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    _, url, _ = module.demo.launch(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
    try:
        yield module, url
    finally:
        module.demo.close()


@contextmanager
def transformers_serve(model: str | Path, log_dir: Path):
    """`transformers serve` with a local model on a free loopback port, offline: yields {"url", "model"} once its
    /health answers; stopped on exit."""
    import os
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(log_dir / "serve.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "transformers.cli.transformers", "serve", str(model), "--host",
                             "127.0.0.1", "--port", str(port), "--device", "cpu"], stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    url = f"http://127.0.0.1:{port}"
    while True:  # until the server answers, or ends: however long a loaded machine takes to start it
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            break
        except OSError:
            assert proc.poll() is None, open(log.name).read()[-3000:]
            time.sleep(0.5)
    try:
        yield {"url": url, "model": str(model)}
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


class Flaky:
    """Wraps an evaluator's model step: the items named in `fail` make any batch holding them raise `exc`; with
    `alone`, also when scored by themselves. The model itself runs for real on every other call."""

    def __init__(self, evaluator, fail: set[str], exc: Exception, alone: bool = True):
        self.evaluator, self.fail, self.exc, self.alone, self.calls = evaluator, fail, exc, alone, []
        self.run = evaluator._run
        evaluator._run = self

    def __call__(self, inputs, items):
        self.calls.append([it.image_id for it in items])
        if any(it.image_id in self.fail for it in items) and (self.alone or len(items) > 1):
            raise self.exc
        return self.run(inputs, items)
