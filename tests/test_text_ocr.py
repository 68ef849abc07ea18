"""The text-ocr evaluator with the real OCR model (RapidOCR, PP-OCRv6, bundled ONNX files) on pictures rendered here
with an installed Chinese font: leaked and typo'd poem lines, pseudo-characters, stroke scribbles, red seals and
clean paintings, in varied sizes, colours, orientations and backgrounds. Everything is synthetic; the floors below
are for these renderings (seed 0), not claims about real generators' images."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tangpoetrybench.dataset.synthetic.painting import _glyph, paint, pseudo_character
from tangpoetrybench.dataset.synthetic.demo_release import PAINTERS
from tangpoetrybench.errors import Notice
from tangpoetrybench.fonts import cjk_font
from tangpoetrybench.poems import Poem, sample_poems
from tangpoetrybench.judging.ocr.evidence import TextRegion, align, cjk, judge, poem_characters

pytest.importorskip("rapidocr", reason='the text-ocr evaluator needs the ocr extra: pip install -e ".[ocr]"')
needs_font = pytest.mark.skipif(cjk_font() is None, reason="no Chinese font installed (apt-get install fonts-noto-cjk)")
POEMS = [p for p in sample_poems() if p.tradition == "tang"]
HAIKU = Path(__file__).parent / "data" / "haiku.yaml"  # a tradition with no adjudicated dimension
FENGQIAO = Poem("fq", "枫桥夜泊", "张继", "月落乌啼霜满天，江枫渔火对愁眠。\n姑苏城外寒山寺，夜半钟声到客船。", "tang")
KINDS = ("leak", "typo", "pseudo", "strokes", "seal", "clean")
ISSUES = ("leaked_poem_text", "garbled_characters", "other_text")


# --- the rules alone (no OCR) --------------------------------------------------------------------------------------

def region(text: str, confidence: float = 0.99, box=((10, 10), (200, 10), (200, 50), (10, 50)), chars=()) -> TextRegion:
    return TextRegion([list(p) for p in box], text, confidence, list(chars))


def test_alignment_tolerates_a_misread_and_text_around_a_leak():
    poem = poem_characters(FENGQIAO)
    assert align("月落鸟啼霜满天", poem) == (5, "月落啼霜满天")  # one misread character costs one
    assert align("签名江枫渔火", poem)[1] == "江枫渔火"  # what surrounds the leak costs nothing
    assert align("对愁眠姑苏城", poem) == (5, "对愁眠姑苏城")  # a column running on into the next line costs one
    assert align("张继", poem)[1] == "张继"  # the author counts as leaked text too


@pytest.mark.parametrize("regions, verdict, matched", [
    ([region("月落鸟啼霜满天")], "leaked_poem_text", "月落啼霜满天"),
    ([region("寒山", 0.95)], "leaked_poem_text", "寒山"),  # two characters, read with confidence
    ([region("寒山", 0.6)], "garbled_characters", ""),  # read unsure: no leak, but garbled
    ([region("錕購胎哈厠", 0.42)], "garbled_characters", ""),
    ([region("春风得意", 0.93, chars=(0.99, 0.3, 0.2, 0.99))], "garbled_characters", ""),
    ([region("ヨキNドT", 0.6)], "garbled_characters", ""),  # pseudo-script
    ([region("春风得意", 0.97)], "other_text", ""),
    ([region("SALE", 0.95)], "other_text", ""),
    ([region("安", 0.3), region("A", 0.4)], "clean", ""),  # single marks from brushwork
    ([], "clean", ""),
])
def test_verdict_rules(regions, verdict, matched):
    judgement = judge(regions, FENGQIAO, np.full((512, 512, 3), 235, np.uint8))
    assert (judgement.verdict, judgement.matched) == (verdict, matched)
    assert judgement.text_issue == (verdict in ISSUES)


def test_a_small_red_square_is_a_seal_and_no_text_issue():
    image = np.full((512, 512, 3), 235, np.uint8)
    image[400:450, 60:110] = (178, 36, 34)
    seal = region("张继", 0.5, box=((55, 395), (115, 395), (115, 455), (55, 455)))
    assert judge([seal], FENGQIAO, image).verdict == "seal_only"
    big = region("月落乌啼", 0.99, box=((0, 300), (300, 300), (300, 512), (0, 512)))  # red, but no small square
    image[300:512, 0:300] = (178, 36, 34)
    assert judge([big], FENGQIAO, image).verdict == "leaked_poem_text"


# --- the real OCR on rendered pictures -----------------------------------------------------------------------------

def render(kind: str, rng: np.random.Generator) -> tuple[Image.Image, Poem]:
    """One test picture: a plain or painted background with the kind's text drawn on it."""
    font = cjk_font()
    poem = POEMS[int(rng.integers(len(POEMS)))]
    img = (Image.new("RGB", (512, 512), tuple(int(v) for v in rng.integers(200, 250, 3))) if rng.random() < 0.5 else
           paint(POEMS[int(rng.integers(len(POEMS)))].text, PAINTERS[int(rng.integers(4))].style, rng))
    size, vertical = int(rng.integers(22, 48)), bool(rng.integers(2))
    colour = tuple(int(v) for v in rng.integers(0, 90, 3)) if rng.random() < 0.7 else (150, 30, 30)
    x, y = rng.uniform(0.05, 0.2) * 512, rng.uniform(0.05, 0.2) * 512
    step = (0, size * 1.1) if vertical else (size * 1.1, 0)
    draw = ImageDraw.Draw(img)
    line = cjk(poem.lines[int(rng.integers(len(poem.lines)))])[:7]
    if kind == "typo":  # the generator wrote one character wrong: still a leak
        k = int(rng.integers(len(line)))
        line = line[:k] + chr(int(rng.integers(0x4E00, 0x9FA5))) + line[k + 1:]
    for i in range(len(line) if kind in ("leak", "typo") else int(rng.integers(3, 7)) if kind in ("pseudo", "strokes") else 0):
        at = (x + i * step[0], y + i * step[1])
        if kind in ("leak", "typo"):
            draw.text(at, line[i], font=font.at(size), fill=colour)
        elif kind == "pseudo":
            img.paste(colour, (round(at[0]), round(at[1])), pseudo_character(font, size, rng))
        else:
            _glyph(draw, int(rng.integers(0x4E00, 0x9FFF)), at[0], at[1], size, colour)
    if kind == "seal":  # a red square with the author's name in white, like a painter's seal
        s, sx, sy = int(rng.integers(36, 60)), rng.uniform(0.05, 0.85) * 512, rng.uniform(0.6, 0.85) * 512
        draw.rectangle([sx, sy, sx + s, sy + s], fill=(178, 36, 34))
        for i, c in enumerate(cjk(poem.author)[:2]):
            draw.text((sx + s * 0.29, sy + s * 0.06 + i * s * 0.45), c, font=font.at(int(s * 0.42)), fill=(245, 230, 220))
    return img, poem


@pytest.fixture(scope="module")
def ocr():
    from tangpoetrybench.judging.evaluators import load_evaluator

    return load_evaluator("text-ocr")


def verdicts_of_rendered(ocr, seed: int, per_kind: int):
    """Render `per_kind` pictures of every kind (seed `seed`), score them, check every record, and return a function
    giving the share of a kind's pictures whose verdict is among those accepted."""
    rng = np.random.default_rng(seed)
    cases = [(kind, *render(kind, rng)) for kind in KINDS for _ in range(per_kind)]
    results = ocr([img for _, img, _ in cases], [poem for _, _, poem in cases])
    for (kind, _, poem), r in zip(cases, results):
        assert r.parse_status == "ok" and r.evaluator == "text-ocr" and not r.random_weights
        issue = r.evidence["verdict"] in ISSUES
        assert r.scores == {"text_integrity": 0.0 if issue else 1.0} and r.quality == r.scores["text_integrity"]
        assert set(r.evidence["matched"]) <= set(poem_characters(poem))
        for reg in r.evidence["regions"]:
            assert len(reg["box"]) == 4 and 0 <= reg["confidence"] <= 1 and reg["kind"]
    verdicts = Counter((kind, r.evidence["verdict"]) for (kind, _, _), r in zip(cases, results))

    def share(kind: str, *accepted: str) -> float:
        return sum(n for (k, v), n in verdicts.items() if k == kind and v in accepted) / per_kind

    return share, verdicts


@needs_font
def test_rendered_pictures_get_the_expected_verdicts(ocr):
    share, verdicts = verdicts_of_rendered(ocr, seed=0, per_kind=2)
    assert share("leak", "leaked_poem_text") == 1, verdicts
    assert share("typo", "leaked_poem_text") >= 1 / 2, verdicts
    assert share("pseudo", "garbled_characters") >= 1 / 2, verdicts
    assert share("seal", "seal_only", "clean") == share("clean", "clean", "seal_only") == 1, verdicts
    assert share("strokes", "leaked_poem_text", "other_text") == 0, verdicts


@pytest.mark.slow
@needs_font
def test_recall_and_false_alarm_floors_on_rendered_pictures(ocr):
    """Eight pictures of each kind (seed 1): the floors the rules must keep."""
    share, verdicts = verdicts_of_rendered(ocr, seed=1, per_kind=8)
    assert share("leak", "leaked_poem_text") >= 7 / 8, verdicts  # recall of leaked lines
    assert share("typo", "leaked_poem_text") >= 6 / 8, verdicts  # a wrong character inside a leak is tolerated
    assert share("pseudo", "garbled_characters") >= 6 / 8, verdicts  # recall of pseudo-characters
    assert share("seal", "seal_only", "clean") == 1, verdicts  # a seal is never a text issue
    assert share("clean", "clean", "seal_only") == 1, verdicts  # no false alarm on clean paintings
    assert share("strokes", "leaked_poem_text", "other_text") == 0, verdicts  # scribbles are never read as the poem


@needs_font
def test_evidence_of_a_leak_names_the_poem_characters(ocr):
    img = Image.new("RGB", (512, 512), (236, 228, 210))
    draw = ImageDraw.Draw(img)
    draw.text((40, 40), "月落乌啼霜满天", font=cjk_font().at(40), fill=(30, 30, 30))
    for i, c in enumerate("江枫渔火对愁眠"):  # a vertical column too
        draw.text((440, 100 + i * 48), c, font=cjk_font().at(40), fill=(120, 20, 20))
    [r] = ocr([img], [FENGQIAO])
    assert r.evidence["verdict"] == "leaked_poem_text"
    assert r.evidence["matched"] == "月落乌啼霜满天江枫渔火对愁眠"
    assert [g["text"] for g in r.evidence["regions"]] == ["月落乌啼霜满天", "江枫渔火对愁眠"]
    assert json.loads(r.raw_output) == ["月落乌啼霜满天", "江枫渔火对愁眠"]
    record = r.to_json()
    assert record["evidence"]["regions"][0]["kind"] == "poem" and "random_weights" not in record
    assert r.settings["ocr"].startswith("rapidocr 3.") and r.settings["rules"] >= 1


def test_the_ocr_scores_its_rubrics_adjudicated_dimension_whatever_its_key(tmp_path):
    """A tradition whose adjudicated dimension has another key gets that key scored; one that names none has nothing
    for the OCR to score, and says so (before, the OCR named `text_integrity` itself and failed on both)."""
    from importlib import resources

    from tangpoetrybench.judging.evaluators import load_evaluator
    from tangpoetrybench.rubric import load_rubric

    tang = resources.files("tangpoetrybench").joinpath("rubrics/tang.yaml").read_text(encoding="utf-8")
    renamed = tmp_path / "renamed.yaml"
    renamed.write_text(tang.replace("text_integrity", "written_text"), encoding="utf-8")
    assert load_rubric(renamed).adjudicated_dimension == "written_text"
    clean = Image.new("RGB", (256, 256), (236, 228, 210))
    [r] = load_evaluator("text-ocr", rubric=load_rubric(renamed))([clean], [FENGQIAO])
    assert r.parse_status == "ok" and r.scores == {"written_text": 1.0} and r.to_json()["task"] == "text"
    [none] = load_evaluator("text-ocr", rubric=load_rubric(HAIKU))([clean], [FENGQIAO])
    assert none.parse_status == "failed" and none.error_kind == "input"
    assert "names no adjudicated dimension" in none.error


def test_records_of_other_evaluators_keep_their_format():
    from tangpoetrybench.judging.evaluators.base import ScalarResult

    record = ScalarResult("a/b", "clipscore", {}, 0.3, None, "ok", None, 0.1).to_json()
    assert "evidence" not in record and "random_weights" not in record and record["task"] == "scalar"


def test_the_ocr_refuses_a_gpu_and_a_model():
    from tangpoetrybench.judging.evaluators import load_evaluator

    with pytest.raises(ValueError, match="runs on the CPU"):
        load_evaluator("text-ocr", device="cuda")
    with pytest.raises(ValueError, match="--model does not apply to text-ocr"):
        load_evaluator("text-ocr", model="some/model")


# --- offline, through the command line -----------------------------------------------------------------------------

def offline_command(argv: list[str]) -> tuple[list[str], dict]:
    """The command with the network cut (its own network namespace where `unshare -n` works), the Hub offline and
    no proxies."""
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(HF_HUB_OFFLINE="1", PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    unshare = shutil.which("unshare")
    if unshare and subprocess.run([unshare, "-n", "true"], capture_output=True).returncode == 0:
        return [unshare, "-n", *argv], env
    return argv, env


def model_files() -> dict[str, int]:
    import rapidocr

    root = Path(rapidocr.__file__).parent
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


@needs_font
def test_tpb_score_text_ocr_runs_offline_and_downloads_nothing(tmp_path):
    rng = np.random.default_rng(1)
    (tmp_path / "images" / "gen").mkdir(parents=True)
    poems = []
    for i, kind in enumerate(("leak", "pseudo")):
        img, poem = render(kind, rng)
        img.save(tmp_path / "images" / "gen" / f"p{i}.png")
        poems.append(json.dumps({**{k: getattr(poem, k) for k in ("title", "author", "text", "tradition")},
                                 "poem_id": f"p{i}"}, ensure_ascii=False))
    (tmp_path / "poems.jsonl").write_text("\n".join(poems) + "\n", encoding="utf-8")
    before = model_files()
    argv, env = offline_command([sys.executable, "-m", "tangpoetrybench.cli", "score", "--images", str(tmp_path / "images"),
                                 "--poems", str(tmp_path / "poems.jsonl"), "--evaluator", "text-ocr",
                                 "--out", str(tmp_path / "ocr.jsonl"), "--quiet"])
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "2 scored now (0 failed)" in done.stdout
    records = [json.loads(line) for line in (tmp_path / "ocr.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["image_id"] for r in records] == ["gen/p0", "gen/p1"]
    assert records[0]["evidence"]["verdict"] == "leaked_poem_text" and records[0]["scores"] == {"text_integrity": 0.0}
    assert model_files() == before  # no model, dictionary or font fetched into the package
    again = subprocess.run(argv, env=env, capture_output=True, text=True)
    assert "0 scored now" in again.stdout and "2 already there" in again.stdout  # resumed, same settings


# --- the label draft, the report and the Space ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def ocr_on_demo(demo_raw, ocr, tmp_path_factory):
    """A copy of the demo release (the session's is shared) and text-ocr results for one image of each planted
    issue type and two clean images of the same painters."""
    from tangpoetrybench.judging.evaluators import ScoringItem
    from tangpoetrybench.dataset.raw_release import read_release

    raw = tmp_path_factory.mktemp("ocr_demo") / "raw"
    shutil.copytree(demo_raw, raw)
    release = read_release(raw)
    labels = release.text_labels
    issues = [next(i for i in sorted(labels) if labels[i].issue_type == kind) for kind in ("leakage", "fake_characters")]
    clean = [i for i in sorted(labels) if not labels[i].text_issue and i.split("/")[0] in ("painter_c", "painter_d")][:2]
    items = [ScoringItem(i, Image.open(release.images[i].path).convert("RGB"), release.poems[release.images[i].poem_id])
             for i in issues + clean]
    out = raw.parent / "ocr.jsonl"
    out.write_text("".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in ocr.score(items)), encoding="utf-8")
    return raw, out, {i: labels[i].issue_type for i in issues + clean}


@needs_font
def test_the_demo_release_draws_text_the_ocr_reads(ocr_on_demo):
    from tangpoetrybench.judging.ocr.labels import issue_agreement, read_ocr

    raw, out, planted = ocr_on_demo
    assert "drawn with the font Noto" in json.loads((raw / "release.json").read_text(encoding="utf-8"))["description"]
    found = {i: r["evidence"]["issue_type"] for i, r in read_ocr(out).items()}
    agreement = issue_agreement(planted, found)
    assert agreement["leakage"].human == 1 and agreement["leakage"].recall == 1.0
    assert agreement["fake_characters"].human == 1 and agreement["fake_characters"].recall == 1.0
    assert agreement["any"].precision == 1.0  # no clean image of theirs flagged


@needs_font
def test_build_writes_a_text_labels_draft_the_validator_accepts(ocr_on_demo, tmp_path):
    from tangpoetrybench.cli import main
    from tangpoetrybench.dataset.raw_release import read_release

    raw, out, planted = ocr_on_demo
    original = (raw / "text_labels.csv").read_bytes()
    assert main(["build", str(raw), "--text-labels-from", str(out)]) == 0
    draft = (raw / "text_labels.draft.csv").read_text(encoding="utf-8").splitlines()
    evidence = [json.loads(line) for line in (raw / "text_labels.draft.evidence.jsonl").read_text(encoding="utf-8").splitlines()]
    assert draft[0] == "generator,poem_id,text_issue,issue_type" and len(draft) - 1 == len(planted) == len(evidence)
    assert (raw / "text_labels.csv").read_bytes() == original  # the adjudicated labels are never touched
    row = dict(zip(draft[0].split(","), draft[1].split(",")))
    assert evidence[0]["generator"] == row["generator"] and evidence[0]["poem_id"] == row["poem_id"]
    assert {"verdict", "matched", "regions"} <= set(evidence[0])
    adjudicated = tmp_path / "raw"
    shutil.copytree(raw, adjudicated)
    shutil.copy(raw / "text_labels.draft.csv", adjudicated / "text_labels.csv")
    labels = read_release(adjudicated).text_labels  # the draft, renamed, passes validation
    assert len(labels) == len(planted)
    assert main(["build", str(raw), "--text-labels-from", str(out)]) == 2  # an existing draft is not overwritten


def test_a_draft_from_results_for_other_images_is_refused(demo_raw, tmp_path, capsys):
    from tangpoetrybench.cli import main

    raw = tmp_path / "raw"
    shutil.copytree(demo_raw, raw)
    out = tmp_path / "ocr.jsonl"
    out.write_text(json.dumps({"image_id": "painter_x/nope", "evaluator": "text-ocr", "parse_status": "ok",
                               "evidence": {"issue_type": "none"}}) + "\n", encoding="utf-8")
    assert main(["build", str(raw), "--text-labels-from", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out}: image_id: no image 'painter_x/nope' in {raw}" in err and "tpb score --images" in err
    clip = tmp_path / "clip.jsonl"
    clip.write_text(json.dumps({"image_id": "painter_a/x", "evaluator": "clipscore"}) + "\n", encoding="utf-8")
    assert main(["build", str(raw), "--text-labels-from", str(clip)]) == 2
    assert "holds clipscore results, not text-ocr ones" in capsys.readouterr().err
    assert main(["build", str(raw)]) == 2 and "give OUT" in capsys.readouterr().err


@needs_font
def test_report_puts_the_ocr_table3_beside_the_adjudicated_one(ocr_on_demo, demo_built):
    from tangpoetrybench.reporting.report import build_report, render_markdown

    _, out, planted = ocr_on_demo
    rep = build_report(demo_built, n_bootstrap=20, ocr=out)
    text = render_markdown(rep)
    assert text.index("Table 3 — text issues") < text.index("Table 3 beside the OCR") < text.index("Table 5")
    numbers = rep.numbers["table3_ocr"]
    assert numbers["images_compared"] == len(planted)
    assert numbers["agreement"]["leakage"]["human"] == sum(t == "leakage" for t in planted.values())
    assert "| Issue type | Adjudicated | OCR | Both | Precision | Recall |" in text


@needs_font
def test_space_draws_the_text_regions_with_the_verdict(tmp_path):
    from tangpoetrybench.hub.space import Scorer, SpaceConfig

    img = Image.new("RGB", (400, 300), (236, 228, 210))
    ImageDraw.Draw(img).text((30, 40), "姑苏城外寒山寺", font=cjk_font().at(36), fill=(20, 20, 20))
    img.save(tmp_path / "up.png")
    drawn, summary = Scorer(SpaceConfig()).text_regions(str(tmp_path / "up.png"), FENGQIAO.text, "枫桥夜泊", "张继")
    assert drawn.size == img.size and "leaked_poem_text" in summary and "姑苏城外寒山寺" in summary
    pixels = np.asarray(drawn).reshape(-1, 3)
    assert (pixels == (214, 39, 40)).all(axis=1).any()  # the region outlined in the poem colour


def test_without_a_chinese_font_the_demo_falls_back_to_strokes_and_says_so(monkeypatch, tmp_path):
    from tangpoetrybench import fonts
    from tangpoetrybench.dataset.synthetic import write_demo_release

    monkeypatch.setenv(fonts.FONT_ENV, "none")
    fonts.cjk_font.cache_clear()
    try:
        assert fonts.cjk_font() is None
        assert paint(FENGQIAO.text, PAINTERS[2].style, np.random.default_rng(0), size=96, glyphs="leakage").size == (96, 96)
        with pytest.warns(Notice, match="no Chinese font is installed, so the planted text is drawn as stroke patterns"):
            raw = write_demo_release(tmp_path / "raw", sample_poems(), n_poems=2, size=64, progress=False)
        assert "stroke patterns" in json.loads((raw / "release.json").read_text(encoding="utf-8"))["description"]
        monkeypatch.setenv(fonts.FONT_ENV, str(tmp_path / "raw" / "poems.jsonl"))
        fonts.cjk_font.cache_clear()
        with pytest.raises(ValueError, match="not a font file"):
            fonts.cjk_font()
    finally:
        monkeypatch.delenv(fonts.FONT_ENV)
        fonts.cjk_font.cache_clear()
