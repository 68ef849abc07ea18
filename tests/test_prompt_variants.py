"""Prompt variants: `tpb generate --prompt` with the tiny random diffusers pipeline (plumbing, never quality), the
templates over the poem's fields, and the leaderboard's side-by-side comparison across variants (fast: SYNTHETIC
PAE and recognize results written here with a planted ranking change, so every figure can be checked)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.reading import dataset_rows
from tangpoetrybench.generation.diffusers_generate import paper_prompt
from tangpoetrybench.generation.prompt_variants import (NO_PARAPHRASE, VARIANTS, fill_template, imagery,
                                                        resolve_prompt)
from tangpoetrybench.poems import Poem, write_poems
from tangpoetrybench.rubric import rubric_for_tradition

KEYS = list(rubric_for_tradition("tang").keys)
JINGYESI = Poem("p1", "静夜思", "李白", "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。", "tang", form="五言绝句")
FAST = ["--steps", "2", "--height", "64", "--width", "64", "--guidance-scale", "1.0", "--quiet"]


def test_templates_over_the_poems_fields():
    assert resolve_prompt(None).template == paper_prompt() and resolve_prompt(None).name == "appendix-b"
    assert fill_template(resolve_prompt("terse").template, JINGYESI) == (
        "《静夜思》 李白\n床前明月光，疑是地上霜。\n举头望明月，低头思故乡。\na traditional Chinese painting\n")
    rich = fill_template(resolve_prompt("rich").template, JINGYESI)
    assert "1. 床前明月光，疑是地上霜。\n2. 举头望明月，低头思故乡。" in rich and "(五言绝句)" in rich
    assert "bright moon (明月), frost (霜), homeland (故乡)" in rich  # the longest word first, in the poem's order
    assert NO_PARAPHRASE in rich and "{" not in rich
    assert imagery("之乎者也") == "the scene the lines describe"
    braces = Poem("p", "题", "人", "一{title}二", "tang")
    assert fill_template("{content}|{title}", braces) == "一{title}二|题"  # one pass: the poem's braces stay


def test_a_prompt_file_and_refusals(tmp_path):
    good = tmp_path / "mine.txt"
    good.write_text("{title}: {lines} — {imagery}", encoding="utf-8")
    assert resolve_prompt(good).name == "file" and resolve_prompt(good).source == str(good)
    bad = tmp_path / "bad.txt"
    bad.write_text("a painting of {title}", encoding="utf-8")
    with pytest.raises(Exception, match="no \\{content\\}"):
        resolve_prompt(bad)
    with pytest.raises(Exception, match="not a prompt variant"):
        resolve_prompt(tmp_path / "missing.txt")


def test_generate_each_variant_records_the_prompt(tiny_models, tmp_path, capsys):
    poems = tmp_path / "poems.jsonl"
    write_poems([JINGYESI, Poem("p2", "春晓", "孟浩然", "春眠不觉晓，处处闻啼鸟。\n夜来风雨声，花落知多少。", "tang")], poems)
    out = tmp_path / "raw"
    mine = tmp_path / "mine.txt"
    mine.write_text("{title}, {author}: {content}", encoding="utf-8")
    pipeline = str(tiny_models["text-to-image"])
    for variant in [*VARIANTS, str(mine)]:
        key = "tiny-" + Path(variant).stem
        argv = ["generate", "--pipeline", pipeline, "--poems", str(poems), "--out", str(out), "--generator", key, *FAST]
        assert main(argv + ([] if variant == "appendix-b" else ["--prompt", variant])) == 0
        assert sorted(p.name for p in (out / "images" / key).iterdir()) == ["p1.png", "p2.png"]
    manifest = json.loads((out / "generation.json").read_text(encoding="utf-8"))["generators"]
    assert {k: v["prompt_variant"] for k, v in manifest.items()} == {
        "tiny-appendix-b": "appendix-b", "tiny-terse": "terse", "tiny-rich": "rich", "tiny-mine": "file"}
    assert manifest["tiny-mine"]["prompt_file"] == str(mine)
    for key, entry in manifest.items():
        template = resolve_prompt(entry["prompt_file"] if entry["prompt_variant"] == "file"
                                  else entry["prompt_variant"]).template
        assert entry["prompt_template"] == template
        assert entry["images"]["p1"]["prompt"] == fill_template(template, JINGYESI)
    assert manifest["tiny-terse"]["images"]["p1"]["prompt"].endswith("a traditional Chinese painting\n")
    capsys.readouterr()
    again = ["generate", "--pipeline", pipeline, "--poems", str(poems), "--out", str(out), "--generator", "tiny-terse",
             *FAST, "--prompt", "rich"]
    assert main(again) == 2 and "prompt_sha256" in capsys.readouterr().err  # one generator key, one prompt
    both = again[:-2] + ["--prompt", "terse", "--prompt-file", str(mine)]
    assert main(both) == 2 and "not both" in capsys.readouterr().err


def pae_record(image_id: str, quality: float) -> dict:
    return {"image_id": image_id, "evaluator": "pae", "model": "synthetic", "scores": {k: quality for k in KEYS},
            "quality": quality, "raw_output": "", "parse_status": "ok", "error": None, "seconds": 0.0,
            "settings": {"backend": "transformers", "parser": 2, "rubric": "tang@x"}}


def recognize_record(image_id: str, share: float) -> dict:
    return {"image_id": image_id, "evaluator": "recognize", "model": "synthetic", "scores": {"recognizability": share},
            "quality": share, "raw_output": "[]", "parse_status": "ok", "error": None, "seconds": 0.0,
            "settings": {"backend": "simulated", "orders": "rotations", "candidates": "x", "parser": 1}}


def test_leaderboard_shows_variants_side_by_side(demo_built, tmp_path):
    """SYNTHETIC results: pipeline `strong` beats `weak` under the paper's prompt and the terse one, and loses under
    the rich one; the comparison must say the ranking changes, with each cell's figures."""
    poems = sorted({r["poem_id"] for r in dataset_rows(demo_built, "images", "test", ["poem_id"])})
    planted = {("strong", "appendix-b"): 0.7, ("strong", "terse"): 0.6, ("strong", "rich"): 0.5,
               ("weak", "appendix-b"): 0.4, ("weak", "terse"): 0.3, ("weak", "rich"): 0.8}
    manifest = {"generators": {f"{p}-{v}": {"pipeline": f"org/{p}", "prompt_variant": v,
                                            "prompt_file": f"tangpoetrybench/rubrics/{VARIANTS[v]}"}
                               for p, v in planted}}
    (tmp_path / "generation.json").write_text(json.dumps(manifest), encoding="utf-8")
    pae = [pae_record(f"{p}-{v}/{poem}", q + 0.01 * i) for (p, v), q in planted.items() for i, poem in enumerate(poems)]
    rec = [recognize_record(f"{p}-{v}/{poem}", 0.25 if v == "terse" else 0.75) for (p, v) in planted for poem in poems]
    for name, rows in (("pae.jsonl", pae), ("rec.jsonl", rec)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "board"
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(tmp_path / "pae.jsonl"), "--recognize",
                 str(tmp_path / "rec.jsonl"), "--generation", str(tmp_path / "generation.json"), "--out", str(out),
                 "--bootstrap", "200"]) == 0
    numbers = json.loads((out / "leaderboard.json").read_text(encoding="utf-8"))
    c = numbers["prompt_variants"]
    assert c["variants"] == ["appendix-b", "terse", "rich"] and c["pipelines"] == ["org/strong", "org/weak"]
    assert c["ranking"] == {"appendix-b": ["org/strong", "org/weak"], "terse": ["org/strong", "org/weak"],
                            "rich": ["org/weak", "org/strong"]}
    assert c["ranking_changes"] is True and c["agreement"]["rich"]["kendall_tau_with_appendix-b"] == pytest.approx(-1)
    mean_offset = 0.01 * (len(poems) - 1) / 2
    board = {r["generator"]: r for r in numbers["leaderboard"]}
    assert board["weak-rich"]["judge"]["quality"] == pytest.approx(0.8 + mean_offset)
    assert board["strong-terse"]["recognizability"]["judge"]["value"] == pytest.approx(0.25)
    text = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "| Pipeline | appendix-b | terse | rich |" in text
    assert f"| org/weak | {100 * (0.4 + mean_offset):.1f}" in text and "recog. 75.0" in text
    assert "changes with the prompt" in text
    keep = {k: v for k, v in manifest["generators"].items() if "rich" not in k}
    (tmp_path / "same.json").write_text(json.dumps({"generators": keep}), encoding="utf-8")
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(tmp_path / "pae.jsonl"), "--generation",
                 str(tmp_path / "same.json"), "--out", str(tmp_path / "b2"), "--bootstrap", "0"]) == 0
    assert "is the same under every variant" in (tmp_path / "b2" / "leaderboard.md").read_text(encoding="utf-8")
