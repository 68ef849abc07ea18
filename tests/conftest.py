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
def launched_space(env: dict[str, str], name: str, app: Path | None = None):
    """A Space's app.py (default the demo's, space/app.py) imported with `env` set (the environment is restored once
    it has loaded) and launched on 127.0.0.1 by its own `main` (as `python app.py` launches it, with its options):
    yields (module, url)."""
    import os

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        module = load_module(app or Path(__file__).resolve().parents[1] / "space" / "app.py", name)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k)
            else:
                os.environ[k] = v
    _, url, _ = module.main(server_name="127.0.0.1", server_port=None, prevent_thread_lock=True, quiet=True)
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


TINY_PAE_STEPS = 2000
TINY_PAE_IMAGES = [((64, 48), (20, 90, 120)), ((48, 64), (220, 200, 40)), ((64, 64), (120, 30, 200))]


def without_engine(task, rubric=None, max_pixels: int | None = None):
    """A judge of `task` on the vLLM backend with no engine (vLLM generates on a GPU only): its questions and requests
    are built as the judge builds them."""
    from tangpoetrybench.judging.backends.vllm import VLLMBackend
    from tangpoetrybench.judging.judge import Judge
    from tangpoetrybench.models import DEFAULT_MAX_PIXELS

    backend = VLLMBackend.__new__(VLLMBackend)
    backend.model_name, backend.random_weights, backend.lora, backend.adapter_rubric = "engineless", False, None, None
    return Judge("pae", task, backend, max_pixels=max_pixels or DEFAULT_MAX_PIXELS, rubric=rubric)


def tiny_pae_items(rubric_name: str = "tang"):
    """Synthetic images (flat colours) and sample poems, the ones the tiny PAE below was trained on."""
    from tangpoetrybench.judging.evaluators.base import ScoringItem

    poems = sample_poems()[:len(TINY_PAE_IMAGES)]
    return [ScoringItem(f"synthetic/{i}", Image.new("RGB", size, colour), poem)
            for i, ((size, colour), poem) in enumerate(zip(TINY_PAE_IMAGES, poems))]


def tiny_pae_targets(rubric) -> list[dict]:
    """The answers the tiny PAE is trained to give, one per image: every dimension at its best anchor, but a null for
    the second image's scene consistency (a random two-layer model's states barely tell positions apart, so the
    answers are kept easy to learn)."""
    targets = []
    for i in range(len(TINY_PAE_IMAGES)):
        scores = {d.key: d.scores[0] for d in rubric.dimensions}
        if i == 1:
            scores["scene_consistency"] = None
        targets.append(scores)
    return targets


@pytest.fixture(scope="session")
def tiny_pae(tiny_models, tmp_path_factory) -> Path:
    """A trained tiny PAE: a real adapter (peft, safetensors) of the tiny Qwen3-VL whose output head (peft's
    `modules_to_save`) is fitted until it answers each of the synthetic images in `tiny_pae_items` with its own
    answer in the trained form. Only the head trains (the LoRA's B stays at zero), so the hidden states are computed
    once and training takes seconds. Random base weights: plumbing only."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText, AutoProcessor

    from tangpoetrybench.judging.prompt import build_messages, format_answer
    from tangpoetrybench.models import chat_inputs
    from tangpoetrybench.rubric import load_rubric

    rubric = load_rubric("tang")
    processor = AutoProcessor.from_pretrained(tiny_models["qwen3-vl"])
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"]).eval(),
                           LoraConfig(r=1, target_modules=["q_proj"], exclude_modules=r".*\.visual\..*",
                                      modules_to_save=["lm_head"]))
    states, labels = [], []
    for item, target in zip(tiny_pae_items(), tiny_pae_targets(rubric)):
        inputs = chat_inputs(processor, [build_messages(item.poem, rubric, item.image)])
        answer = processor.tokenizer.encode(format_answer(target, rubric), add_special_tokens=False)
        answer = torch.tensor([answer + [processor.tokenizer.eos_token_id]])
        n = inputs["input_ids"].shape[1]
        inputs["input_ids"] = torch.cat([inputs["input_ids"], answer], 1)
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
        inputs["mm_token_type_ids"] = torch.nn.functional.pad(inputs["mm_token_type_ids"], (0, answer.shape[1]))
        with torch.no_grad():  # the head alone is adapted: these states do not change while it trains
            hidden = model.base_model.model.model(**inputs).last_hidden_state
        states.append(hidden[0, n - 1:-1])
        labels.append(answer[0])
    states, labels = torch.cat(states), torch.cat(labels)
    head = model.base_model.model.lm_head
    optimizer = torch.optim.Adam([p for p in head.parameters() if p.requires_grad], lr=3e-2)
    for _ in range(TINY_PAE_STEPS):
        logits = head(states)
        if bool((logits.argmax(-1) == labels).all()) and torch.nn.functional.cross_entropy(logits, labels) < 0.05:
            break
        torch.nn.functional.cross_entropy(logits, labels).backward()
        optimizer.step()
        optimizer.zero_grad()
    else:
        wrong = (head(states).argmax(-1) != labels).nonzero().flatten().tolist()
        raise AssertionError(f"the tiny PAE did not learn its answers: wrong at {wrong} of {len(labels)}")
    folder = tmp_path_factory.mktemp("tiny_pae") / "adapter"
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def server(tiny_models, tmp_path_factory):
    """`transformers serve` with the tiny Qwen3-VL on loopback, offline, for the whole module."""
    with transformers_serve(tiny_models["qwen3-vl"], tmp_path_factory.mktemp("serve")) as served:
        yield served


@pytest.fixture(scope="module")
def pae_server(tiny_models, tiny_pae, tmp_path_factory):
    """`transformers serve` with the tiny PAE merged into its base model, on loopback, offline, for the whole module:
    a served judge whose answers read (for the synthetic images of `tiny_pae_items`, each with its poem)."""
    from peft import PeftModel
    from transformers import AutoModelForImageTextToText, AutoProcessor

    folder = tmp_path_factory.mktemp("pae_served") / "model"
    base = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"])
    PeftModel.from_pretrained(base, tiny_pae).merge_and_unload().save_pretrained(folder)
    AutoProcessor.from_pretrained(tiny_models["qwen3-vl"]).save_pretrained(folder)
    with transformers_serve(folder, folder.parent) as served:
        yield served
