"""The Space: the scoring function directly, the app through gradio_client on 127.0.0.1, and a real headless
Chromium that uploads an image and clicks Score. Tiny random-weight models: plumbing, not quality."""

import json
import shutil
from pathlib import Path

import pytest
from PIL import Image

from conftest import launched_space
from tangpoetrybench.hub.space import (RUBRICS, UPLOADED, Scorer, SpaceConfig, UserError, dimension_table, nearest_anchor,
                                   poem_catalogue, summary_line)
from tangpoetrybench.rubric import load_rubric

RUBRIC_DIR = Path(__file__).resolve().parents[1] / "tangpoetrybench" / "rubrics"
POEM = "月落乌啼霜满天，江枫渔火对愁眠。\n姑苏城外寒山寺，夜半钟声到客船。"


@pytest.fixture(scope="module")
def env(tiny_models):
    return {"PAE_MODEL": str(tiny_models["qwen3-vl"]), "CLIP_MODEL": str(tiny_models["clip"]),
            "BLIP_MODEL": str(tiny_models["blip"]), "PAE_MAX_IMAGE_BYTES": "2000000", "PAE_MAX_IMAGE_PIXELS": "4000000"}


@pytest.fixture(scope="module")
def scorer(env):
    return Scorer(SpaceConfig.from_env(env))


@pytest.fixture
def png(tmp_path):
    path = tmp_path / "moon.png"
    Image.new("RGB", (96, 64), (200, 190, 170)).save(path)
    return path


def test_config_from_env(env):
    config = SpaceConfig.from_env({**env, "PAE_ADAPTER": "a", "PAE_BACKEND": "vllm", "PAE_CONCURRENCY": "3"})
    assert (config.model, config.adapter, config.backend, config.concurrency) == (env["PAE_MODEL"], "a", "vllm", 3)
    assert SpaceConfig.from_env({}).model == "Qwen/Qwen3-VL-8B-Instruct"
    assert SpaceConfig.from_env({}).constrained and not SpaceConfig.from_env({"PAE_CONSTRAINED": "0"}).constrained
    own = Scorer(SpaceConfig.from_env({**env, "VQA_MODEL": "vqa"}))  # each variable is the registry spec's
    assert own.config.models == {"clipscore": env["CLIP_MODEL"], "blipscore": env["BLIP_MODEL"], "vqascore": "vqa"}
    assert [own.model_of(n) for n in ("pae", "clipscore", "vqascore", "text-ocr")] == [env["PAE_MODEL"],
                                                                                       env["CLIP_MODEL"], "vqa", None]
    assert not own.shares_qwen and Scorer(SpaceConfig.from_env(env)).model_of("vqascore") == env["PAE_MODEL"]
    assert [Scorer.scale(n) for n in ("clipscore", "blipscore", "vqascore")] == ["0 – 2.5", "0 – 1", "0 – 1"]


def test_score_function(scorer, png):
    result = scorer.score(str(png), POEM, "枫桥夜泊", "张继", next(iter(RUBRICS)))
    assert [row[0] for row in result.table][0] == "Safety / 安全性" and len(result.table) == 10
    # by default the answer is decoded in the rubric's form: even the tiny random-weight model's answer reads
    assert result.parse_status == "ok" and isinstance(result.raw_output, str)
    assert scorer.evaluator("pae").settings()["constrained"] is True
    assert "quality" in summary_line(result, scorer.pae_label, scorer.random_weights)
    assert [b[0] for b in result.baselines] == ["clipscore", "blipscore", "vqascore"]
    assert all(b[1] is not None for b in result.baselines)
    assert result.figure.axes and scorer.random_weights
    song = scorer.score(str(png), POEM, rubric_choice="Song Ci (宋词)", with_baselines=False)
    assert song.baselines == []


def test_uploaded_rubric(scorer, png, tmp_path):
    result = scorer.score(str(png), POEM, rubric_choice=UPLOADED, rubric_file=str(RUBRIC_DIR / "song_ci.yaml"),
                          with_baselines=False)
    assert len(result.table) == 10
    bad = tmp_path / "bad.yaml"
    bad.write_text((RUBRIC_DIR / "tang.yaml").read_text(encoding="utf-8").replace("anchor_step: 0.25", "anchor_step: 0.3"))
    with pytest.raises(UserError, match="dimensions\\[9\\].anchor_step"):
        scorer.score(str(png), POEM, rubric_choice=UPLOADED, rubric_file=str(bad))
    with pytest.raises(UserError, match="Choose a rubric YAML file"):
        scorer.score(str(png), POEM, rubric_choice=UPLOADED)


@pytest.mark.parametrize("case,message", [
    ("empty poem", "Enter the poem's text"),
    ("not an image", "not an image this app can read"),
    ("too many pixels", "over the limit of 4,000,000 pixels"),
    ("too many bytes", "the limit is 2 MB"),
    ("no image", "Upload an image first"),
])
def test_clear_errors(scorer, png, tmp_path, case, message):
    path, text = str(png), POEM
    if case == "empty poem":
        text = "  \n "
    elif case == "not an image":
        path = str(tmp_path / "notes.png")
        Path(path).write_text("not a picture")
    elif case == "too many pixels":
        path = str(tmp_path / "huge.png")
        Image.new("1", (3000, 3000)).save(path)
    elif case == "too many bytes":
        path = str(tmp_path / "heavy.png")
        Image.effect_noise((1000, 1000), 100).convert("RGB").save(path)
    elif case == "no image":
        path = None
    with pytest.raises(UserError, match=message):
        scorer.score(path, text)


def test_model_that_fails_to_load(png, tmp_path):
    broken = Scorer(SpaceConfig(model=str(tmp_path / "nowhere")))
    with pytest.raises(UserError, match="could not be loaded"):
        broken.score(str(png), POEM)


def test_a_baseline_that_cannot_load_leaves_pae_standing(env, tiny_models, png, tmp_path):
    scorer = Scorer(SpaceConfig.from_env({**env, "CLIP_MODEL": str(tmp_path / "unreachable-clip")}))
    result = scorer.score(str(png), POEM, "枫桥夜泊", "张继")
    assert len(result.table) == 10 and result.parse_status in ("ok", "repaired", "failed")
    clip, blip, vqa = result.baselines
    assert clip[:3] == ["clipscore", None, "0 – 2.5"] and clip[3].startswith("unavailable: The clipscore model (")
    assert str(tmp_path / "unreachable-clip") in clip[3]
    assert blip[1] is not None and blip[3] == "" and vqa[1] is not None


def test_vqascore_shares_paes_model_and_asks_the_base(env, tiny_models, png, tmp_path):
    """One Qwen3-VL in memory for PAE and VQAScore; with an adapter PAE keeps it apart and VQAScore asks the base
    model, exactly as a VQAScore of its own would."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    from tangpoetrybench.judging.evaluators import load_evaluator

    plain = Scorer(SpaceConfig.from_env(env))
    plain.preload()
    assert plain.evaluator("vqascore").model is plain.evaluator("pae").backend.model
    assert plain.pae_label.startswith("zero-shot")
    base = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"])
    torch = pytest.importorskip("torch")
    torch.manual_seed(3)
    get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], exclude_modules=r".*\.visual\..*",
                                    init_lora_weights=False)).save_pretrained(tmp_path / "adapter")
    adapted = Scorer(SpaceConfig.from_env({**env, "PAE_ADAPTER": str(tmp_path / "adapter")}))
    adapted.preload()
    assert adapted.pae_label == "PAE" and adapted.evaluator("vqascore").model is adapted.evaluator("pae").backend.model
    image = Image.open(png).convert("RGB")
    poem = poem_catalogue(SpaceConfig())["枫桥夜泊 — 张继"]
    alone = load_evaluator("vqascore", model=str(tiny_models["qwen3-vl"]))
    shared = adapted.evaluator("vqascore")([image], [poem])[0].quality
    assert shared == pytest.approx(alone([image], [poem])[0].quality, abs=1e-5)
    merged = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(tmp_path / "adapter"),
                            max_new_tokens=8)
    unmerged = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(tmp_path / "adapter"),
                              max_new_tokens=8, merge_adapter=False)
    assert merged([image], [poem])[0].raw_output == unmerged([image], [poem])[0].raw_output


def test_an_image_the_model_refuses_is_a_failed_result(scorer, tmp_path):
    sliver = tmp_path / "sliver.png"
    Image.new("RGB", (16, 4000), "white").save(sliver)
    result = scorer.score(str(sliver), POEM, with_baselines=False)
    assert result.parse_status == "failed" and "aspect ratio" in result.error and result.quality is None
    # a failed answer shows no scores (not "not applicable"), no radar, and says it failed and why
    assert all(row[1] is None and row[2] == "no score: the answer failed" for row in result.table)
    assert result.figure is None
    line = summary_line(result, scorer.pae_label, scorer.random_weights)
    assert "the answer failed, so there are no scores" in line and "aspect ratio" in line and "quality" not in line


def test_anchor_labels_and_catalogue():
    rubric = load_rubric("tang")
    assert nearest_anchor(rubric, rubric.dimension("overall_impression"), 0.7) == "b: good / 良好"
    assert nearest_anchor(rubric, rubric.dimension("scene_consistency"), None).startswith("not applicable")
    assert dimension_table({"safety": 1.0}, rubric)[0][1:3] == [1.0, "a: no issues / 无问题"]
    assert "枫桥夜泊 — 张继" in poem_catalogue(SpaceConfig())


@pytest.fixture(scope="module")
def app(env):
    with launched_space(env, "space_app") as launched:
        yield launched


def test_compare_two_illustrations(scorer, png, tmp_path):
    other = tmp_path / "dark.png"
    Image.new("RGB", (64, 96), (30, 40, 60)).save(other)
    found = scorer.compare(str(png), str(other), POEM, "枫桥夜泊", "张继")
    sentence, rows = found.sentence, found.rows
    assert found.drawn == (None, None) and found.poem_graph == ""  # graphs are SemJudge's
    assert [r[0] for r in rows] == ["A shown first", "B shown first"]
    assert all(r[3] == "ok" and r[1] in ("A", "B") for r in rows)  # constrained: always in form
    verdict = {"A": "Illustration A is better", "B": "Illustration B is better"}.get(rows[0][1]) \
        if rows[0][1] == rows[1][1] else "No preference (a tie)"
    assert verdict in sentence
    with pytest.raises(UserError, match="poem's text"):
        scorer.compare(str(png), str(other), " ")
    with pytest.raises(UserError, match="Unknown judge 'CLIP': PAE or SemJudge"):
        scorer.compare(str(png), str(other), POEM, judge="CLIP")


@pytest.mark.slow
def test_compare_with_semjudge_draws_each_images_sub_signs(env, server, png, tmp_path):
    """SemJudge through a real `transformers serve` (the proxy writes the graphs: random weights write none): each
    uploaded image comes back with its sub-signs' boxes drawn where the judge put them, and the poem's graph as a
    tree; a judgment that stays invalid is no verdict, with the step named."""
    from fault_proxy import FaultProxy
    from test_semjudge import Model

    from tangpoetrybench.hub.space import SIGN_COLOURS

    other = tmp_path / "tall.png"
    Image.new("RGB", (64, 96), (30, 40, 60)).save(other)
    with FaultProxy(server["url"], rewrite=Model()) as proxy:
        scorer = Scorer(SpaceConfig.from_env({**env, "PAE_SEMJUDGE_URL": proxy.url,
                                              "PAE_SEMJUDGE_MODEL": server["model"]}))
        found = scorer.compare(str(png), str(other), POEM, "枫桥夜泊", "张继", judge="SemJudge")
        assert len(proxy.requests) == 5  # the poem's graph once, each image's once, a judgment per order
    assert [r[1] for r in found.rows] == ["A", "B"] and "No preference (a tie)" in found.sentence  # always "A"
    assert found.rows[0][2] == "A's graph reaches the poem's symbolic object." and found.rows[0][3] == "ok"
    assert not found.random_weights  # a served model: the Space cannot tell (the app's note follows the judge)
    for drawn, path in zip(found.drawn, (png, other)):
        assert drawn.size == Image.open(path).size
        assert drawn.getpixel((0, drawn.height // 2)) == SIGN_COLOURS[2]  # each sub-sign's first box is the whole
        # image (the third sub-sign's outline drawn last, on top); its second box ends at the middle:
        assert drawn.getpixel((drawn.width // 2, drawn.height // 4)) == SIGN_COLOURS[2]
    assert found.poem_graph.splitlines()[:2] == ["《枫桥夜泊》", "root (root)"]
    with FaultProxy(server["url"], rewrite=Model({"judgment": ("no", "still no")})) as proxy:
        scorer = Scorer(SpaceConfig.from_env({**env, "PAE_SEMJUDGE_URL": proxy.url,
                                              "PAE_SEMJUDGE_MODEL": server["model"]}))
        failed = scorer.compare(str(png), str(other), POEM, judge="SemJudge")
    assert "No verdict" in failed.sentence and failed.rows[0][2].startswith("judgment: still invalid")
    assert failed.drawn[0] is not None  # the graphs were made: they are shown all the same


@pytest.mark.slow
def test_semjudge_on_the_spaces_own_model_asks_the_base_model(env, tiny_pae, png):
    """Without PAE_SEMJUDGE_URL SemJudge shares PAE's loaded model, with PAE's adapter kept apart and disabled while
    it asks; random weights write no graph, so the item fails cleanly and PAE still answers after."""
    scorer = Scorer(SpaceConfig.from_env({**env, "PAE_ADAPTER": str(tiny_pae)}))
    judge = scorer.semjudge()
    backend = judge.backend
    assert backend.model is scorer.evaluator("pae").backend.model and hasattr(backend.model, "disable_adapter")
    assert not backend.use_adapter and scorer.evaluator("pae").backend.use_adapter
    judge.max_new_tokens = 4
    found = scorer.compare(str(png), str(png), POEM, judge="SemJudge")
    assert "No verdict" in found.sentence and found.drawn == (None, None)
    assert found.rows[0][2].startswith("poem_graph: still invalid after the repair round")
    assert scorer.score(str(png), POEM, with_baselines=False).parse_status == "ok"  # the adapter is on again


def test_api_over_gradio_client(app, png):
    from gradio_client import Client, handle_file

    module, url = app
    client = Client(url, verbose=False)
    table, summary, plot, reasons, raw, baselines = client.predict(handle_file(str(png)), POEM, api_name="/score")
    assert table["headers"] == ["dimension", "score", "nearest anchor", "what it judges"] and len(table["data"]) == 10
    assert "random-weight test model" in summary and plot["type"] == "matplotlib"
    assert [row[0] for row in baselines["data"]] == ["clipscore", "blipscore", "vqascore"]
    assert baselines["headers"] == ["metric", "score", "scale", "note"]
    with pytest.raises(Exception, match="Enter the poem's text"):
        client.predict(handle_file(str(png)), " ", api_name="/score")
    sentence, rows, signs_a, signs_b, poem_graph = client.predict(handle_file(str(png)), handle_file(str(png)), POEM,
                                                                  api_name="/compare")
    assert "random-weight test model" in sentence and len(rows["data"]) == 2
    assert signs_a is None and signs_b is None and poem_graph == ""  # PAE, the default judge, draws no graphs


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_real_browser(app, png, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    module, url = app
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(0)  # wait for each event however long a loaded machine takes (0: no limit)
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            thumbnails = page.locator("button.thumbnail-item img")  # the examples gallery: pictures, not file names
            thumbnails.first.wait_for(timeout=0)
            assert thumbnails.count() == len(module.EXAMPLES)
            thumbnails.nth(2).click()  # an example fills the form
            playwright.expect(page.get_by_role("textbox", name="Title", exact=True)).to_have_value(
                module.EXAMPLES[2][2], timeout=0)
            page.locator("input[type=file]").first.set_input_files(str(png))
            page.get_by_label("Poem text").fill(POEM)
            page.get_by_role("button", name="Score", exact=True).click()
            page.get_by_text("Safety / 安全性").first.wait_for(timeout=0)
            page.get_by_text("clipscore").first.wait_for(timeout=0)
            page.screenshot(path=str(tmp_path / "space.png"), full_page=True)
            assert (tmp_path / "space.png").stat().st_size > 10_000 and not errors
        finally:
            browser.close()


@pytest.fixture(scope="module")
def haiku_dataset(tmp_path_factory):
    """A built dataset of another tradition (tests/data/haiku.yaml, as tests/test_new_tradition.py makes one)."""
    from tangpoetrybench.cli import main

    data, root = Path(__file__).parent / "data", tmp_path_factory.mktemp("haiku")
    assert main(["demo-release", str(root / "raw"), "--rubric", str(data / "haiku.yaml"), "--poems-file",
                 str(data / "haiku.jsonl"), "--size", "96", "--quiet"]) == 0
    assert main(["build", str(root / "raw"), str(root / "ds"), "--quiet"]) == 0
    return root / "ds"


def test_the_space_on_another_traditions_dataset_speaks_of_it(env, haiku_dataset, png):
    """PAE_DATASET of haiku, through the real app on loopback: its poems, its own images as examples, a header in
    its rubric's words; the compare tab asks under its rubric, and the OCR tab, which needs an adjudicated text
    dimension haiku's rubric does not name, is hidden and says why. Nothing Tang's is offered."""
    import httpx
    from gradio_client import Client, handle_file

    haiku = load_rubric(Path(__file__).parent / "data" / "haiku.yaml")
    tang = load_rubric("tang")
    with launched_space({**env, "PAE_DATASET": str(haiku_dataset)}, "space_app_haiku") as (module, url):
        assert module.SCORER.rubric == haiku and module.POEMS
        assert all(p.tradition == "haiku" for p in module.POEMS.values())
        assert len(module.EXAMPLES) == 3 and all(p.tradition == "haiku" for p in (e.poem for e in module.SHOWN))
        assert all(e.caption.endswith(("(painter_a)", "(painter_b)", "(painter_c)", "(painter_d)"))
                   for e in module.SHOWN)  # the dataset's own images, named by generator
        config = httpx.get(f"{url}config", timeout=None).json()
        shown = json.dumps([c.get("props", {}) for c in config["components"]], ensure_ascii=False)
        assert "Japanese haiku" in shown and "season word" in shown
        assert not [w for w in ("Chinese", "床前明月光", tang.dimensions[0].name["en"]) if w in shown]
        first = next(iter(module.POEMS.values()))
        client = Client(url, verbose=False)
        table, *_ = client.predict(handle_file(str(png)), first.text, api_name="/score")
        assert [row[0] for row in table["data"]] == [haiku.in_languages(d.name) for d in haiku.dimensions]
        sentence, rows, *_ = client.predict(handle_file(str(png)), handle_file(str(png)), first.text,
                                            api_name="/compare")
        assert len(rows["data"]) == 2
        assert module.SCORER.pairwise_judge().settings()["rubric"] == [haiku.fingerprint]
        ocr_group = [c for c in config["components"] if c.get("type") == "group"]
        assert ocr_group and not ocr_group[0]["props"].get("visible", True)
        with pytest.raises(UserError, match="has no adjudicated text dimension"):
            module.SCORER.text_regions(str(png), first.text)


def tagged_images(folder: Path, told: str) -> list[Path]:
    """The same picture as a PNG, a JPEG and a WebP, each carrying `told` in every kind of metadata its format holds
    (text chunks, EXIF, XMP, a comment) and an sRGB colour profile."""
    from PIL import ImageCms, PngImagePlugin

    picture = Image.new("RGB", (48, 32), (180, 60, 40))
    exif = Image.Exif()
    exif[0x010E] = told  # ImageDescription
    xmp = f'<x:xmpmeta xmlns:x="adobe:ns:meta/">{told}</x:xmpmeta>'.encode()
    icc = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    info = PngImagePlugin.PngInfo()
    info.add_itxt("Description", told)
    paths = [folder / "tagged.png", folder / "tagged.jpg", folder / "tagged.webp"]
    picture.save(paths[0], pnginfo=info, exif=exif, icc_profile=icc)
    picture.save(paths[1], exif=exif, xmp=xmp, icc_profile=icc, comment=told.encode())
    picture.save(paths[2], exif=exif, xmp=xmp, icc_profile=icc, lossless=True)
    return paths


def test_an_image_shown_back_carries_none_of_the_uploads_metadata(tmp_path):
    """What the Space shows of an upload (the preview, and the drawings made on it) is its pixels alone: read as the
    Space reads it, then written by gradio's own Image component (WebP, its default, and PNG), it carries no text,
    EXIF, XMP or profile, whatever the upload held. Before the fix gradio wrote the upload's text chunks and EXIF
    back."""
    import gradio as gr

    from tangpoetrybench.hub.space import read_image

    told = "taken at 31.2304N 121.4737E by Li Bai"
    for path in tagged_images(tmp_path, told):
        assert Image.open(path).info.keys() & {"exif", "xmp", "icc_profile", "Description", "comment"}, path
        image = read_image(str(path), 2_000_000, 4_000_000)
        assert image.getpixel((0, 0)) == Image.open(path).convert("RGB").getpixel((0, 0))
        for fmt in ("webp", "png"):
            shown = gr.Image(format=fmt, interactive=False).postprocess(image)
            data = Path(shown.path).read_bytes()
            assert told.encode() not in data and b"Li Bai" not in data, (path.name, fmt)
            assert not Image.open(shown.path).info.keys() & {"exif", "xmp", "icc_profile", "Description",
                                                              "XML:com.adobe.xmp"}


def test_an_upload_over_the_byte_limit_is_refused_as_it_arrives(app, png):
    """PAE_MAX_IMAGE_BYTES (2 MB here) holds at upload: gradio answers 413 before the file is stored, and its config
    tells the page the same limit. Before the fix the upload was stored whole, and refused only when scored."""
    import secrets

    import httpx

    module, url = app
    name = f"too-big-{secrets.token_hex(8)}.png"  # found nowhere else in gradio's shared upload folder
    over = b"\x89PNG\r\n\x1a\n" + b"\0" * 2_000_001
    answer = httpx.post(url + "gradio_api/upload", files={"files": (name, over)}, timeout=None)
    assert answer.status_code == 413, (answer.status_code, answer.text[:300])
    assert not list(Path(module.demo.app.uploaded_file_dir).rglob(name))
    assert httpx.get(url + "config", timeout=None).json()["max_file_size"] == 2_000_000
    small = httpx.post(url + "gradio_api/upload", files={"files": ("small.png", png.read_bytes())}, timeout=None)
    assert small.status_code == 200 and Path(small.json()[0]).read_bytes() == png.read_bytes()
