"""`tpb publish`: every Hub repo self-contained. The fast tests read the folders here; the `slow` ones install
them the way the Hub would, in fresh virtual environments with nothing of this checkout but the folder."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import venv
from pathlib import Path

import evaluate
import pyarrow.parquet as pq
import pytest
import yaml
from huggingface_hub import ModelCard

from tangpoetrybench.dataset import builder
from tangpoetrybench.stats.agreement import RubricScale
from tangpoetrybench.dataset.builder import build_dataset
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.judging.prompt import user_prompt
from tangpoetrybench.hub.publish import flat_imports, publish
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.models import trained_on, write_trained_on

ROOT = Path(__file__).resolve().parents[1]
ORG = "acme"


def card_meta(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---")[1])


@pytest.fixture(scope="module")
def adapter(tiny_models, tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    folder = tmp_path_factory.mktemp("adapter") / "pae"
    model = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"])
    get_peft_model(model, LoraConfig(r=2, target_modules=["q_proj"], exclude_modules=r".*\.visual\..*")
                   ).save_pretrained(folder)
    write_trained_on(folder, load_rubric("tang"), "sample/dataset")  # as the training scripts record it
    return folder


@pytest.fixture(scope="module")
def agree_json(demo_built, tmp_path_factory):
    """`tpb agree --out` of synthetic predictions (the human scores themselves) on the demo's test split."""
    from tangpoetrybench.dataset.reading import dataset_rows

    keys = list(load_rubric("tang").keys)
    folder = tmp_path_factory.mktemp("agree")
    scores = folder / "synthetic.jsonl"
    scores.write_text("".join(json.dumps({"image_id": r["image_id"], "evaluator": "pae", "scores": {k: r[k] for k in keys},
                                          "quality": r["quality"], "parse_status": "ok"}) + "\n"
                              for r in dataset_rows(demo_built, "images", "test", ["image_id", "quality", *keys])))
    out = folder / "agree.json"
    subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "agree", "--dataset", str(demo_built), "--scores",
                    str(scores), "--bootstrap", "50", "--out", str(out)], check=True, capture_output=True)
    return out


@pytest.fixture(scope="module")
def hub(demo_built, adapter, agree_json, tmp_path_factory):
    out = tmp_path_factory.mktemp("hub") / "hub"
    publish(out, org=ORG, dataset=demo_built, adapter=adapter, agree=agree_json)
    return out


def test_the_metric_carries_its_statistics(hub):
    metric = hub / "metric"
    assert sorted(p.name for p in metric.iterdir()) == ["README.md", "agreement.py", "app.py", "numeric.py", "pae.py",
                                                         "requirements.txt", "rubrics.py"]
    assert (metric / "agreement.py").read_text() == flat_imports((ROOT / "tangpoetrybench" / "stats" / "agreement.py"
                                                                  ).read_text())
    assert 'evaluate.load("acme/pae")' in (metric / "README.md").read_text() and "metric/pae" not in (
        metric / "README.md").read_text()
    for module in ("agreement.py", "numeric.py", "pae.py"):  # nothing of the package, at the top level or indented
        assert not re.search(r"^from tangpoetrybench|^import tangpoetrybench", (metric / module).read_text(), re.M)
    namespace: dict = {}
    exec((metric / "rubrics.py").read_text(), namespace)
    assert {k: RubricScale(**v) for k, v in namespace["SCALES"].items()} == {
        name: RubricScale.of(load_rubric(name)) for name in ("tang", "song_ci")}
    assert "tangpoetrybench" not in (metric / "requirements.txt").read_text().split("\n", 2)[-1]
    assert card_meta(metric / "README.md")["sdk"] == "gradio"


def test_the_metric_fits_other_harnesses(hub):
    pae = evaluate.load(str(hub / "metric" / "pae.py"))
    refs = [[1, .5, .67, 1, None, 1, 1, .67, .33, .75], [.5, .5, .33, 0, .33, .5, .5, .33, None, .25],
            [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]]
    preds = [[1, .5, .67, 1, None, 1, .5, .67, .67, .75], [.5, .5, .33, 0, 0, .5, .5, .33, .33, .25],
             [1, 1, .67, 1, 1, 1, 1, 1, 1, .75]]
    grouped = pae.compute(predictions=preds, references=refs, poem_ids=["a", "a", "b"], n_bootstrap=100)
    assert grouped["kendall_tau_poems"] == 1 and grouped["bootstrap"]["unit"] == "poem"
    alone = pae.compute(predictions=preds, references=refs, n_bootstrap=100)  # no poem ids: no τ, the rest computed
    assert alone["kendall_tau"] is None and alone["kendall_tau_poems"] == 0 and alone["bootstrap"]["unit"] == "image"
    assert alone["mae"] == grouped["mae"] and alone["mae_ci"] is not None
    scalar = pae.compute(predictions=[0.3, 0.1, 0.2], references=refs, n_bootstrap=0)  # plain numbers, not [x]
    assert scalar["spearman"] == pytest.approx(0.5) and "mae" not in scalar
    both = evaluate.combine([pae, evaluate.load(str(hub / "metric" / "pae.py"))], force_prefix=True)
    assert both.compute(predictions=preds, references=refs)["pae_0_mae"] == grouped["mae"]


def test_scoring_configurations_say_what_to_install(hub):
    with pytest.raises(ValueError, match=r"unknown evaluator 'fid' \(known: pae, api, "):  # the package's registry
        evaluate.load(str(hub / "metric" / "pae.py"), config_name="fid")


def test_the_dataset_card_names_its_repo(hub, demo_built, tmp_path):
    text = (hub / "dataset" / "README.md").read_text(encoding="utf-8")
    assert f'load_dataset("{ORG}/TangPoetryBench", "images")' in text and "path/to/this" not in text
    assert "https://arxiv.org/abs/2608.11452" in text
    meta = card_meta(hub / "dataset" / "README.md")
    assert all(info["download_size"] > 0 for info in meta["dataset_info"])
    from conftest import load

    assert load(hub / "dataset", "images", tmp_path / "cache")["test"].num_rows == 12


def test_other_licence_needs_its_name_and_link(tmp_path):
    from conftest import POEMS, rating, write_release
    from tangpoetrybench.errors import DataError

    raw = write_release(tmp_path / "raw", [rating("r1", "x", "g1", "p1")], poems=POEMS[:4],
                        images=["g1/p1", "g2/p1", "gx/p1"])
    meta = json.loads((raw / "release.json").read_text())
    (raw / "release.json").write_text(json.dumps({**meta, "license": "other"}))
    with pytest.raises(DataError, match="license_name: required") as err:
        build_dataset(raw, tmp_path / "ds", progress=False)
    assert "license_link: required" in str(err.value)
    (raw / "release.json").write_text(json.dumps({**meta, "license": "other", "license_name": "tpb-release",
                                                  "license_link": "LICENSE.md"}))
    built = build_dataset(raw, tmp_path / "ds", progress=False).out
    assert {k: card_meta(built / "README.md")[k] for k in ("license", "license_name", "license_link")} == {
        "license": "other", "license_name": "tpb-release", "license_link": "LICENSE.md"}
    (raw / "release.json").write_text(json.dumps(meta))  # no licence stated: never one made up
    assert card_meta(build_dataset(raw, tmp_path / "ds2", progress=False).out / "README.md")["license"] == "unknown"


def test_the_model_card_points_at_the_published_repos(hub):
    card = ModelCard.load(hub / "model" / "README.md")
    assert card.data.datasets == [f"{ORG}/TangPoetryBench"] and card.data.base_model == "Qwen/Qwen3-VL-8B-Instruct"
    [result, *_] = card.data.eval_results
    assert (result.dataset_type, result.dataset_config, result.dataset_split) == (f"{ORG}/TangPoetryBench", "images",
                                                                                  "test")
    assert f'adapter="{ORG}/PAE"' in card.text and "https://arxiv.org/abs/2608.11452" in card.text
    assert (hub / "model" / "adapter_model.safetensors").is_file()
    tang = load_rubric("tang").fingerprint  # the rubric it was trained on: its record and the card's words
    assert trained_on(hub / "model")["rubric"] == tang and card.data.tpb_rubric == tang
    assert f"## The rubric it was trained on\n\nTrained (pointwise) on the rubric `{tang}`" in card.text
    # the plain transformers + peft snippet asks exactly what the prompt builder asks
    poem = next(p for p in sample_poems() if p.title == "枫桥夜泊")
    snippet = re.search(r'"text": "(Poem: .*?Answer with the JSON object only\.)"\}', card.text, re.S).group(1)
    asked = json.loads('"' + re.sub(r'"\s*\n\s*"', "", snippet) + '"')
    assert asked == user_prompt(poem)


def test_the_space_installs_its_own_package(hub):
    meta = card_meta(hub / "space" / "README.md")
    assert meta["python_version"] == "3.11" and meta["sdk"] == "gradio"
    assert meta["datasets"] == [f"{ORG}/TangPoetryBench"] and f"{ORG}/PAE" in meta["models"]
    [wheel] = (hub / "space").glob("tangpoetrybench-*.whl")
    requirements = (hub / "space" / "requirements.txt").read_text().splitlines()
    assert f"./{wheel.name}" in requirements and "tangpoetrybench>=0.1" not in requirements


def test_the_rating_space_of_a_new_tradition_carries_its_rubric(tmp_path):
    """A release of haiku carries rubrics/haiku.yaml; its published rating Space has it too (copied from the checked
    rubric, not through a link), so the Space's campaign loads and asks the haiku questions. It once copied poems,
    images and candidates but no rubric, and could not start."""
    from test_annotation import HAIKU, haiku_release
    from tangpoetrybench.annotation.campaign import load_campaign
    from tangpoetrybench.hub.annotation_space import space_app
    from tangpoetrybench.hub.sealed import unseal
    from tangpoetrybench.hub.publish import write_annotation_space

    raw = haiku_release(tmp_path / "raw")
    (raw / "rubrics").mkdir()
    shutil.copy(HAIKU, raw / "rubrics" / "haiku.yaml")
    folder = write_annotation_space(tmp_path / "annotation", ORG, raw)
    release, key = folder / "release", tmp_path / "annotation-key"
    assert sorted(p.name for p in (release / "rubrics").iterdir()) == ["haiku.yaml"]
    assert not (release / "rubrics" / "haiku.yaml").is_symlink()
    assert load_campaign(unseal(release, key, tmp_path / "unsealed")).keys == load_rubric(HAIKU).keys
    demo, scheduler = space_app({"TPB_ANNOTATE_RELEASE": str(release), "TPB_ANNOTATE_DB": str(tmp_path / "s.sqlite"),
                                 "TPB_ANNOTATE_KEY": str(key)})
    radios = [b.elem_id for b in demo.blocks.values() if type(b).__name__ == "Radio" and b.elem_id.startswith("q-")]
    assert radios == [f"q-{k}" for k in load_rubric(HAIKU).keys] and scheduler is None


def test_the_published_rating_space_holds_no_answer_key(tmp_path, capsys):
    """`tpb publish --annotation RAW`: nothing in the Space's folder says which poem an image illustrates. No path
    names a poem or generator, no file maps an image to one, there are no candidates (each poem's set would name
    it), and each image is its pixels alone (PNG, no metadata) under a random name; the key is written beside the
    Space for a private dataset repo, and the Space serves the campaign from both (TPB_ANNOTATE_KEY), each image's
    pixels as the release's. Before the fix the Space held `release/images/<generator>/<poem_id>.png` and the
    candidates."""
    from PIL import Image, PngImagePlugin

    from test_annotation import unrated_release
    from test_annotation_app import PIXELS_ONLY_CHUNKS, png_chunks
    from tangpoetrybench.annotation.campaign import load_campaign
    from tangpoetrybench.annotation.store import Store
    from tangpoetrybench.cli import main
    from tangpoetrybench.hub.annotation_space import space_app
    from tangpoetrybench.hub.sealed import OPAQUE

    raw = unrated_release(tmp_path / "raw")
    told = PngImagePlugin.PngInfo()
    told.add_text("prompt", "g2/p3: 江雪 by 柳宗元")  # a generator's prompt, as generators write it
    Image.open(raw / "images" / "g2" / "p3.png").save(raw / "images" / "g2" / "p3.png", pnginfo=told)
    campaign = load_campaign(raw)
    main(["publish", str(tmp_path / "hub"), "--annotation", str(raw), "--org", ORG])
    assert "annotation-key" in capsys.readouterr().out
    space, key = tmp_path / "hub" / "annotation", tmp_path / "hub" / "annotation-key"
    files = {p.relative_to(space).as_posix(): p for p in space.rglob("*") if p.is_file() and p.suffix != ".whl"}
    names = set(campaign.release.poems) | set(campaign.release.generators)
    assert not [f for f in files if set(f.removesuffix(".png").split("/")) & names]
    assert not [f for f in files if "candidates" in f]
    images = sorted(f for f in files if f.startswith("release/images/"))
    assert len(images) == len(campaign.images) and all(OPAQUE.fullmatch(f.split("/")[-1]) for f in images)
    assert all(set(png_chunks(files[f].read_bytes())) <= PIXELS_ONLY_CHUNKS for f in images)
    for name, path in files.items():
        data = path.read_bytes()
        assert not [i for i in campaign.images if i.encode() in data], name
    mapped = [json.loads(line) for line in (key / "images.jsonl").read_text().splitlines()]
    assert sorted(m["image_id"] for m in mapped) == sorted(campaign.images)
    assert (key / "candidates.jsonl").is_file() and "private" in (key / "README.md").read_text()
    space_app({"TPB_ANNOTATE_RELEASE": str(space / "release"), "TPB_ANNOTATE_KEY": str(key),
               "TPB_ANNOTATE_DB": str(tmp_path / "s.sqlite")})
    # the campaign the Space unsealed is the release's: its poems, images, rubric and candidates, digest for digest
    assert json.loads(Store(tmp_path / "s.sqlite").meta("settings")) == json.loads(json.dumps(campaign.settings()))
    for m in mapped:
        sealed = Image.open(space / "release" / "images" / m["file"])
        assert sealed.tobytes() == Image.open(campaign.images[m["image_id"]].path).convert("RGB").tobytes()


def test_a_republish_leaves_exactly_the_new_files(demo_raw, tmp_path, monkeypatch):
    monkeypatch.setattr(builder, "MAX_SHARD_BYTES", 200_000)  # many small shards
    many = build_dataset(demo_raw, tmp_path / "many", progress=False).out
    monkeypatch.undo()
    few = build_dataset(demo_raw, tmp_path / "few", progress=False).out
    out = tmp_path / "hub"
    publish(out, org=ORG, dataset=many)
    assert len(list((out / "dataset").rglob("*.parquet"))) > len(list(few.rglob("*.parquet")))
    publish(out, org=ORG, dataset=few)
    files = sorted(str(p.relative_to(out / "dataset")) for p in (out / "dataset").rglob("*") if p.is_file())
    assert files == sorted(str(p.relative_to(few)) for p in few.rglob("*") if p.is_file())


def test_row_groups_are_sized_in_bytes(demo_raw, tmp_path, monkeypatch):
    monkeypatch.setattr(builder, "ROW_GROUP_BYTES", 300_000)
    built = build_dataset(demo_raw, tmp_path / "ds", progress=False).out
    image_sizes = [p.stat().st_size for p in (demo_raw / "images").rglob("*.*")]
    for path in (built / "data" / "images").glob("*.parquet"):
        meta = pq.ParquetFile(path).metadata
        assert meta.num_row_groups > 1
        for g in range(meta.num_row_groups):
            rows = meta.row_group(g).num_rows
            assert rows <= max(1, 300_000 // min(image_sizes))


def test_python_3_10_compatible():
    """Spaces default to Python 3.10 and requires-python says ≥ 3.10: no 3.11-only API anywhere (vermin reads the
    code; no 3.10 interpreter is installable from the package registries here)."""
    vermin = shutil.which("vermin") or pytest.skip("vermin is not installed")
    done = subprocess.run([vermin, "--target=3.10-", "--no-tips", "--violations", "--eval-annotations",
                           "tangpoetrybench", "metric", "space", "annotation_space", "training", "benchmarks"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:]


# --- installed the way the Hub installs them (slow: fresh virtual environments) ----------------------------

def fresh_venv(folder: Path) -> Path:
    venv.create(folder, with_pip=True)
    return folder / "bin" / "python"


def fresh_env(**settings: str) -> dict[str, str]:
    """This environment without PYTHONPATH (which would let a fresh venv import this checkout), with `settings`."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **settings}


def pip(python: Path, *args: str, cwd: Path | None = None) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args], check=True,
                   cwd=cwd)


@pytest.mark.slow
def test_the_metric_in_a_fresh_venv(hub, tmp_path):
    """Only the metric's requirements: the module's doctests pass with their printed output, and the scoring
    configurations say what to install."""
    python = fresh_venv(tmp_path / "venv")
    pip(python, "-r", str(hub / "metric" / "requirements.txt"))
    script = (
        "import doctest, importlib.util, sys, evaluate\n"
        "assert importlib.util.find_spec('tangpoetrybench') is None\n"
        "m = evaluate.load('pae.py')\n"
        "result = doctest.testmod(sys.modules[type(m).__module__])\n"
        "assert result.attempted >= 4 and result.failed == 0, result\n"
        "try:\n"
        "    evaluate.load('pae.py', config_name='pae')\n"
        "    raise SystemExit('the scoring configuration loaded without the package')\n"
        "except ImportError as exc:\n"
        "    assert 'pip install tangpoetrybench' in str(exc), exc\n"
        "print('doctests', result.attempted)\n")
    done = subprocess.run([str(python), "-c", script], cwd=hub / "metric", capture_output=True, text=True,
                          env=fresh_env(HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf")))
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]


@pytest.mark.slow
def test_the_space_in_a_fresh_venv(hub, tiny_models, tmp_path):
    """Only the Space's requirements (the wheel beside them): app.py starts on loopback and /score answers."""
    python = fresh_venv(tmp_path / "venv")
    pip(python, "-r", "requirements.txt", cwd=hub / "space")  # as a Space installs it: from its own folder
    port = 7861
    env = {**fresh_env(), "PAE_MODEL": str(tiny_models["qwen3-vl"]), "CLIP_MODEL": str(tiny_models["clip"]),
           "BLIP_MODEL": str(tiny_models["blip"]), "GRADIO_SERVER_NAME": "127.0.0.1", "GRADIO_SERVER_PORT": str(port),
           "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False"}
    server = subprocess.Popen([str(python), "app.py"], cwd=hub / "space", env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    image = tmp_path / "moon.png"
    from PIL import Image

    Image.new("RGB", (96, 64), (200, 190, 170)).save(image)
    client = (
        "from gradio_client import Client, handle_file\n"
        f"c = Client('http://127.0.0.1:{port}/', verbose=False)\n"
        f"table, summary, plot, reasons, raw, baselines = c.predict(handle_file({str(image)!r}), '床前明月光，疑是地上霜。', "
        "api_name='/score')\n"
        "assert len(table['data']) == 10 and 'random-weight' in summary, summary\n"
        "print('scored', summary)\n")
    try:
        while server.poll() is None:  # the event: the Space listens (however long a loaded machine takes to start it)
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        done = subprocess.run([str(python), "-c", client], capture_output=True, text=True)
    finally:
        server.terminate()
        log = server.communicate()[0]
    assert done.returncode == 0, done.stderr[-3000:] + log[-3000:]


@pytest.mark.slow
def test_the_package_builds_for_pypi(tmp_path):
    python = fresh_venv(tmp_path / "venv")
    pip(python, "build", "twine")
    subprocess.run([str(python), "-m", "build", "--outdir", str(tmp_path / "dist"), str(ROOT)], check=True,
                   capture_output=True)
    dists = sorted(p.name for p in (tmp_path / "dist").iterdir())
    assert sorted(d.rsplit(".", 1)[-1] for d in dists) == ["gz", "whl"], dists
    done = subprocess.run([str(python), "-m", "twine", "check", "--strict", *map(str, (tmp_path / "dist").iterdir())],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def _python_blocks(card: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", card.read_text(encoding="utf-8"), flags=re.M | re.S)


def test_the_metric_loads_from_a_checkout_and_its_card_runs(monkeypatch):
    """`evaluate.load("metric/pae")` in a checkout (the statistics from the installed package), and the card's
    agreement example verbatim; published, the card names the Hub repo (checked in test_the_metric_carries...)."""
    monkeypatch.chdir(ROOT)
    assert not (ROOT / "metric" / "pae" / "agreement.py").exists()  # nothing of publish's copies in the checkout
    agreement_example, scoring_example = _python_blocks(ROOT / "metric" / "pae" / "README.md")
    namespace: dict = {}
    exec(agreement_example, namespace)
    assert namespace["results"]["n_images"] == 2 and namespace["results"]["mae_ci"] is not None
    assert "metric/pae" in scoring_example and "ORG/PAE" in scoring_example
