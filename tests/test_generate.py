"""`tpb generate` with the tiny random-weight diffusers pipeline of `tpb tiny-models` (real diffusers, real
denoising, 64×64 images in 2 steps): the paper's prompt verbatim, reproducible bytes, resuming, clear refusals.
The images are noise from random weights: plumbing, never quality."""

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import POEMS, SHARED
from tangpoetrybench.cli import main
from tangpoetrybench.generation.diffusers_generate import PROMPT_FILE, generate_images, image_seed, is_text_to_image, paper_prompt

PAPER = SHARED / "paper" / "tangpoetrybench-paper.txt"
FAST = dict(steps=2, height=64, width=64, guidance_scale=1.0, progress=False)
# The Appendix B prompt for 静夜思 by 李白, filled in by hand.
JINGYESI_PROMPT = """Create an elegant Chinese painting inspired by the poem ‘静夜思’ by 李白.
Poem content (for guidance only, do NOT place any text in the image):
床前明月光，疑是地上霜。
举头望明月，低头思故乡。

The image should reflect the poem’s atmosphere, emotion, and narrative through authentic traditional Chinese painting techniques.
You may choose from the following classical techniques:
- Gongbi: meticulous outlines and precise details
- Shuimo: ink wash and tonal gradation
- Xieyi: expressive freehand brushwork
- Mogu: soft, boneless color shapes
- Baimiao: pure ink line drawing without color
- Wash: layered mineral or plant pigment coloring
Select 1-2 techniques as the primary method, and optionally add more supporting technique if it enhances the composition naturally.
The painting should feel coherent, balanced, and stylistically intentional.
Use period-appropriate clothing, architecture, landscapes, and objects that match the historical setting described or implied by the poem, with harmony between brushwork, composition, and emotion.
Do not include any kind of text, poem lines, titles, or calligraphy in the image.
"""


@pytest.fixture(scope="module")
def pipeline(tiny_models) -> str:
    return str(tiny_models["text-to-image"])


@pytest.fixture(scope="module")
def poems_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("poems") / "poems.jsonl"
    path.write_text("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in POEMS[:2]), encoding="utf-8")
    return path


@pytest.mark.skipif(not PAPER.is_file(), reason="the paper's text is not on this machine")
def test_the_stored_prompt_is_the_papers_appendix_b():
    """The paper's text lost its line breaks and the braces of its placeholders; all else must match exactly."""
    paper = PAPER.read_text(encoding="utf-8")
    start, end = paper.index("Create an elegant Chinese painting"), paper.index("calligraphy in the image.")
    expected = " ".join(paper[start:end + len("calligraphy in the image.")].split())
    stored = " ".join(re.sub(r"\{(title|author|content)\}", r"\1", paper_prompt()).split())
    assert stored == expected


def test_seeds_come_from_seed_and_poem_id():
    assert image_seed(0, "p1") == 8969202611906589725  # SHA-256, the same in every process and on every machine
    assert len({image_seed(0, "p1"), image_seed(1, "p1"), image_seed(0, "p2")}) == 3


def test_generate_reproduce_resume(pipeline, poems_file, tmp_path):
    first = generate_images(pipeline, poems_file, tmp_path / "a", "tiny", **FAST)
    assert (first.generated, first.skipped, first.total) == (2, 0, 2)
    images = {p["poem_id"]: tmp_path / "a" / "images" / "tiny" / f"{p['poem_id']}.png" for p in POEMS[:2]}
    manifest = json.loads((tmp_path / "a" / "generation.json").read_text(encoding="utf-8"))["generators"]["tiny"]
    assert manifest["images"]["p1"] == {"seed": image_seed(0, "p1"), "prompt": JINGYESI_PROMPT}
    assert manifest["prompt_template"] == paper_prompt() and manifest["random_weights"] is True
    assert manifest["prompt_sha256"] == hashlib.sha256(paper_prompt().encode()).hexdigest()
    assert manifest["prompt_file"].endswith(PROMPT_FILE) and manifest["pipeline_class"] == "StableDiffusionPipeline"
    assert manifest["settings"] | {"pipeline": None} == {
        "pipeline": None, "seed": 0, "steps": 2, "guidance_scale": 1.0, "height": 64, "width": 64,
        "negative_prompt": None, "prompt_sha256": manifest["prompt_sha256"]}
    assert (tmp_path / "a" / "poems.jsonl").read_text(encoding="utf-8") == poems_file.read_text(encoding="utf-8")

    # A second run elsewhere gives the same bytes; a rerun in place regenerates nothing.
    generate_images(pipeline, poems_file, tmp_path / "b", "tiny", **FAST)
    for poem_id, path in images.items():
        assert path.read_bytes() == (tmp_path / "b" / "images" / "tiny" / f"{poem_id}.png").read_bytes()
    mtimes = {p: path.stat().st_mtime_ns for p, path in images.items()}
    again = generate_images(pipeline, poems_file, tmp_path / "a", "tiny", **FAST)
    assert (again.generated, again.skipped) == (0, 2)
    assert {p: path.stat().st_mtime_ns for p, path in images.items()} == mtimes

    # A run that dies after its first image (and left a temporary file) loses nothing and redoes nothing.
    class Killed(Exception):
        pass

    def die(poem_id):
        raise Killed(poem_id)

    with pytest.raises(Killed, match="p1"):
        generate_images(pipeline, poems_file, tmp_path / "c", "tiny", after_image=die, **FAST)
    done = tmp_path / "c" / "images" / "tiny" / "p1.png"
    half = done.with_name(".p2.png.999.tmp")
    half.write_bytes(b"\x89PNG\r\n")  # what a kill in the middle of writing leaves
    kept = done.stat().st_mtime_ns
    resumed = generate_images(pipeline, poems_file, tmp_path / "c", "tiny", **FAST)
    assert (resumed.generated, resumed.skipped) == (1, 1) and done.stat().st_mtime_ns == kept and not half.exists()
    for poem_id, path in images.items():
        assert path.read_bytes() == (tmp_path / "c" / "images" / "tiny" / f"{poem_id}.png").read_bytes()

    # Other settings for the same generator would mix two runs: refused before anything is loaded or written.
    with pytest.raises(ValueError, match="made with steps 2, not 3"):
        generate_images(pipeline, poems_file, tmp_path / "a", "tiny", **{**FAST, "steps": 3})
    assert {p: path.stat().st_mtime_ns for p, path in images.items()} == mtimes


@pytest.mark.parametrize("name,expected", [  # a few classes: each import of a pipeline module costs seconds
    ("StableDiffusionPipeline", True), ("StableDiffusionXLPipeline", True), ("KolorsPipeline", True),
    ("StableDiffusionXLImg2ImgPipeline", False), ("KolorsImg2ImgPipeline", False),
    ("StableDiffusionInpaintPipeline", False), ("StableDiffusionControlNetPipeline", False),
])
def test_which_pipelines_are_text_to_image(name, expected):
    import diffusers

    cls = getattr(diffusers, name)
    if not isinstance(cls, type):
        pytest.skip(f"{name} needs {cls._backends}")
    assert is_text_to_image(cls) is expected


def _one_line_error(capsys, argv) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "Traceback" not in err
    return err


def test_bad_input_is_one_line_and_writes_nothing(pipeline, poems_file, tmp_path, capsys):
    out = tmp_path / "out"
    base = ["generate", "--poems", str(poems_file), "--out", str(out), "--generator", "tiny", "--steps", "2",
            "--height", "64", "--width", "64", "--quiet"]
    err = _one_line_error(capsys, ["generate", "--pipeline", str(tmp_path / "nowhere"), *base[1:]])
    assert f"pipeline {tmp_path / 'nowhere'}: no such file or folder" in err and "\n" not in err
    (tmp_path / "empty").mkdir()
    assert "has no model_index.json" in _one_line_error(capsys, ["generate", "--pipeline", str(tmp_path / "empty"),
                                                                 *base[1:]])
    img2img = tmp_path / "img2img"
    shutil.copytree(pipeline, img2img)
    index = json.loads((img2img / "model_index.json").read_text())
    (img2img / "model_index.json").write_text(json.dumps({**index, "_class_name": "StableDiffusionImg2ImgPipeline"}))
    err = _one_line_error(capsys, ["generate", "--pipeline", str(img2img), *base[1:]])
    assert "is a StableDiffusionImg2ImgPipeline, not a text-to-image pipeline" in err and "\n" not in err
    repeated = tmp_path / "repeated.jsonl"
    repeated.write_text(poems_file.read_text(encoding="utf-8") + json.dumps(POEMS[0], ensure_ascii=False) + "\n",
                        encoding="utf-8")
    err = _one_line_error(capsys, ["generate", "--pipeline", pipeline, "--poems", str(repeated), *base[3:]])
    assert f"{repeated}:3: poem_id: poem 'p1' already on line 1" in err
    err = _one_line_error(capsys, ["generate", "--pipeline", pipeline, *base[1:5], "--generator", "../up", *base[7:]])
    assert "--generator '../up'" in err
    assert not out.exists()


def test_help_names_every_default(capsys):
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    text = capsys.readouterr().out
    assert "example:" in text and "(default: 30)" in text and "Appendix B" in text


@pytest.mark.slow
def test_throughput_benchmark_smoke_and_full_size_architecture(tmp_path):
    """The GPU benchmark keeps working (--smoke, the tiny pipeline on the CPU; no figure asserted), and its full-size
    pipeline, built on the meta device, has SDXL's published parameter counts (UNet 2.567B, VAE 83.65M, CLIP ViT-L
    123.06M, OpenCLIP bigG 694.66M)."""
    import torch
    from transformers import AutoTokenizer

    from tangpoetrybench import __version__
    from tangpoetrybench.judging.tiny_models import build_tiny_models

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "figures.json"
    done = subprocess.run([sys.executable, str(root / "benchmarks" / "generate_throughput.py"), "--smoke", "--images",
                           "1", "--out", str(out)], capture_output=True, text=True, check=True)
    assert "images/s" in done.stdout and json.loads(out.read_text())["smoke"] is True
    sys.path.insert(0, str(root / "benchmarks"))
    from generate_throughput import sdxl_pipeline

    tiny = build_tiny_models(Path(tempfile.gettempdir()) / f"tpb-tiny-models-{__version__}")["text-to-image"]
    pipe = sdxl_pipeline(torch.device("meta"), AutoTokenizer.from_pretrained(tiny / "tokenizer"))
    counts = {n: sum(p.numel() for p in getattr(pipe, n).parameters()) for n in ("unet", "vae", "text_encoder",
                                                                                 "text_encoder_2")}
    assert counts == {"unet": 2567463684, "vae": 83653863, "text_encoder": 123060480, "text_encoder_2": 694659840}


def test_only_a_splits_poems_and_the_first_n(pipeline, demo_raw, tmp_path, capsys):
    """`--split test` illustrates the poems the leaderboard compares on (the split `tpb build` gives the same poems),
    `--limit` the first N of them; OUT/poems.jsonl keeps every poem, and the summary says how many were left out."""
    from tangpoetrybench.dataset.builder import poem_splits
    from tangpoetrybench.generation.diffusers_generate import chosen_poems
    from tangpoetrybench.poems import read_poems

    poems = read_poems(demo_raw / "poems.jsonl")
    splits = poem_splits({p.poem_id: p for p in poems})
    test = [p for p in poems if splits[p.poem_id] == "test"]
    assert chosen_poems(poems, "test") == test and chosen_poems(poems, "test", 2) == test[:2]
    with pytest.raises(ValueError, match="--split 'dev': one of train, validation, test"):
        chosen_poems(poems, "dev")
    out = tmp_path / "new"
    assert main(["generate", "--pipeline", pipeline, "--poems", str(demo_raw / "poems.jsonl"), "--out", str(out),
                 "--generator", "tiny", "--split", "test", "--limit", "2", "--steps", "1", "--height", "64",
                 "--width", "64", "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert sorted(p.stem for p in (out / "images" / "tiny").iterdir()) == sorted(p.poem_id for p in test[:2])
    assert len(read_poems(out / "poems.jsonl")) == len(poems)
    assert f"2 poems, {len(poems) - 2} left out (not the test split and the first 2)." in printed
    assert (f"  tpb score --images {out}/images --poems {out}/poems.jsonl --evaluator pae --model MODEL --adapter "
            f"ADAPTER --constrained --out {out}/scores.jsonl") in printed


def test_without_diffusers_it_says_what_to_install(poems_file, tmp_path):
    """As `tpb tiny-models` does: the extra to install, not `No module named 'diffusers'`."""
    code = ("import sys; sys.modules['diffusers'] = None\n"  # an environment without diffusers
            "from tangpoetrybench.cli import main\n"
            f"sys.exit(main(['generate', '--pipeline', 'ORG/NAME', '--poems', {str(poems_file)!r}, '--out', "
            f"{str(tmp_path / 'out')!r}, '--generator', 'g']))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 2 and done.stderr.strip() == (
        'error: tpb generate needs diffusers: pip install -e ".[generate]" (or pip install "tangpoetrybench[generate]")')
    assert not (tmp_path / "out").exists()
