"""A new tradition is one rubric file: tests/data/haiku.yaml, which no bundled rubric resembles (six dimensions of
keys and option counts of its own, not-applicable options that are not the last letter, no text-integrity or emotion
dimension, texts in English and Japanese), runs the whole pipeline from the CLI with no code change; ratings that do
not fit their rubric are refused, naming the file, line, column and value, with nothing written. Synthetic data and
tiny random-weight models: plumbing, not quality."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sys
from pathlib import Path

import datasets
import pytest
from PIL import Image

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.synthetic import write_demo_release
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import BUILTIN, load_rubric

ROOT = Path(__file__).resolve().parents[1]
HAIKU = ROOT / "tests" / "data" / "haiku.yaml"
POEMS = ROOT / "tests" / "data" / "haiku.jsonl"
BUNDLED = [load_rubric(t) for t in BUILTIN]
# What a report or leaderboard on another rubric must never say: the bundled rubrics' dimension keys and names.
BUNDLED_WORDS = sorted({w for r in BUNDLED for d in r.dimensions for w in (d.key, d.name["en"], d.name["zh"])})


def bundled_words_in(text: str) -> list[str]:
    return [w for w in BUNDLED_WORDS if w in text]


def test_the_haiku_rubric_resembles_no_bundled_one():
    haiku = load_rubric(HAIKU)
    for bundled in BUNDLED:
        assert len(haiku.keys) != len(bundled.keys) and not set(haiku.keys) & set(bundled.keys)
        assert sorted(len(d.options) for d in haiku.dimensions) != sorted(len(d.options) for d in bundled.dimensions)
    excluded = [(d, o) for d in haiku.dimensions for o in d.options if o.excluded]
    assert excluded and all(o.letter != d.letters[-1] for d, o in excluded)
    assert haiku.adjudicated_dimension is None and haiku.face_avoidance is None
    assert haiku.languages == {"en": "English", "ja": "Japanese"} and haiku.own_language == "ja"


def test_the_prompt_frames_the_question_with_the_rubric():
    from tangpoetrybench.judging.prompt import system_prompt

    prompt = system_prompt(load_rubric(HAIKU), explain="poem")
    assert prompt.startswith("You are an expert judge of illustrations of Japanese haiku (Haiku, 俳句).")
    assert "Chinese" not in prompt and "季語" in prompt and "Japanese, the poem's language" in prompt
    assert not bundled_words_in(prompt)


@pytest.fixture(scope="module")
def haiku_raw(tmp_path_factory) -> Path:
    """`tpb demo-release` on the haiku rubric and poems: a synthetic raw release that carries its rubric."""
    raw = tmp_path_factory.mktemp("haiku") / "raw"
    assert main(["demo-release", str(raw), "--rubric", str(HAIKU), "--poems-file", str(POEMS), "--size", "96",
                 "--quiet"]) == 0
    assert (raw / "rubrics" / "haiku.yaml").read_text(encoding="utf-8") == HAIKU.read_text(encoding="utf-8")
    return raw


def copy_release(raw: Path, to: Path) -> Path:
    shutil.copytree(raw, to)
    return to


def rewrite_ratings(raw: Path, change) -> None:
    """Rewrite ratings.csv in place with `change(rows)` applied to its rows (the header first), as lists."""
    rows = list(csv.reader(io.StringIO((raw / "ratings.csv").read_text(encoding="utf-8"))))
    change(rows)
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows(rows)
    (raw / "ratings.csv").write_text(buffer.getvalue(), encoding="utf-8")


def refused(raw: Path, folder: Path, capsys, *needles: str) -> str:
    """`tpb build RAW FOLDER/out` fails naming every needle, and leaves nothing in FOLDER."""
    folder.mkdir()
    out = folder / "out"
    assert main(["build", str(raw), str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    assert list(folder.iterdir()) == []
    return err


def test_ratings_that_do_not_fit_the_rubric_are_refused(haiku_raw, tmp_path, capsys):
    # a dimension the rubric lacks: the column is named, on the header line
    raw = copy_release(haiku_raw, tmp_path / "unknown_column")
    rewrite_ratings(raw, lambda rows: rows[0].__setitem__(rows[0].index("mood"), "feeling"))
    refused(raw, tmp_path / "a", capsys, "ratings.csv:1: feeling: 'feeling' is neither a rating column nor a dimension "
            "of the rubric haiku (rubrics/haiku.yaml)", "missing mood")

    # an option letter the dimension does not have (`e` is an option of `moment`, not of `mood`)
    raw = copy_release(haiku_raw, tmp_path / "unknown_letter")

    def bad_letter(rows):
        rows[3][rows[0].index("mood")] = "e"
    rewrite_ratings(raw, bad_letter)
    refused(raw, tmp_path / "b", capsys, "ratings.csv:4: mood: unknown option 'e' (the rubric haiku has a, b, c, d for "
            "mood)")

    # a release that does not bring the rubric of its tradition
    raw = copy_release(haiku_raw, tmp_path / "no_rubric")
    shutil.rmtree(raw / "rubrics")
    refused(raw, tmp_path / "c", capsys, "poems.jsonl:1: tradition: 'haiku' is not one of tang, song_ci",
            "rubrics/haiku.yaml")

    # traditions rated on different dimensions in one release: refused, naming both rubrics and the way out
    raw = copy_release(haiku_raw, tmp_path / "mixed")
    with open(raw / "poems.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps({"poem_id": "t1", "title": "静夜思", "author": "李白", "text": "床前明月光，疑是地上霜。",
                            "tradition": "tang"}, ensure_ascii=False) + "\n")
    Image.new("RGB", (32, 32)).save(raw / "images" / "painter_a" / "t1.png")
    refused(raw, tmp_path / "d", capsys, "the rubrics haiku (rubrics/haiku.yaml) and tang (bundled) rate different "
            "dimensions", "build each tradition apart")

    # a rubric file that claims a bundled tradition but says something else
    raw = copy_release(haiku_raw, tmp_path / "impostor")
    tang = (ROOT / "tangpoetrybench" / "rubrics" / "tang.yaml").read_text(encoding="utf-8")
    (raw / "rubrics" / "tang.yaml").write_text(tang.replace("en: excellent", "en: superb"), encoding="utf-8")
    refused(raw, tmp_path / "e", capsys, "rubrics/tang.yaml: tradition: differs from the bundled tang rubric")


@pytest.mark.slow
def test_a_new_tradition_runs_the_whole_pipeline(haiku_raw, tiny_models, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    haiku, tang = load_rubric(HAIKU), load_rubric("tang")
    qwen = str(tiny_models["qwen3-vl"])
    assert main(["build", str(haiku_raw), "built", "--quiet"]) == 0
    shutil.copytree("built", "copy")  # a copy elsewhere still has its rubric: everything below reads the copy
    shutil.rmtree("built")
    assert (Path("copy") / "rubrics" / "haiku.yaml").is_file()

    # load_dataset: a column per dimension of the rubric, none of Tang's
    images = datasets.load_dataset("copy", "images", cache_dir=str(tmp_path / "cache"))
    columns = set(images["test"].column_names)
    assert set(haiku.keys) <= columns and not columns & set(tang.keys)
    ratings = datasets.load_dataset("copy", "ratings", cache_dir=str(tmp_path / "cache"))
    assert {f"{k}_option" for k in haiku.keys} <= set(ratings["train"].column_names)
    assert set(ratings["train"]["season_word_option"]) <= set(haiku.dimension("season_word").letters)

    # score with the tiny Qwen3-VL, constrained to the haiku rubric's answer: the dataset's rubric, read from it
    assert main(["score", "--dataset", "copy", "--evaluator", "pae", "--model", qwen, "--constrained",
                 "--out", "scores.jsonl", "--quiet"]) == 0
    records = [json.loads(line) for line in Path("scores.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(records) == len(images["test"]) and all(r["parse_status"] == "ok" for r in records)
    assert all(list(r["scores"]) == list(haiku.keys) and r["settings"]["rubric"] == haiku.fingerprint for r in records)

    # a folder of images and a poems file: the rubric is given; without it the poems' tradition has none
    assert main(["score", "--images", str(haiku_raw / "images"), "--poems", str(POEMS), "--rubric", str(HAIKU),
                 "--evaluator", "pae", "--model", qwen, "--constrained", "--limit", "2", "--out", "folder.jsonl",
                 "--quiet"]) == 0
    folder = [json.loads(line) for line in Path("folder.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["settings"]["rubric"] for r in folder] == [haiku.fingerprint] * 2
    capsys.readouterr()
    assert main(["score", "--images", str(haiku_raw / "images"), "--poems", str(POEMS), "--evaluator", "pae",
                 "--model", qwen, "--out", "none.jsonl", "--quiet"]) == 2
    assert "--rubric haiku.yaml" in capsys.readouterr().err and not Path("none.jsonl").exists()

    # compare: the pairwise question, asked under the dataset's rubric
    assert main(["compare", "--dataset", "copy", "--evaluator", "pae", "--model", qwen, "--constrained", "--all-pairs",
                 "--limit", "2", "--max-new-tokens", "96", "--out", "pairs.jsonl"]) == 0
    pairs = [json.loads(line) for line in Path("pairs.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(pairs) == 2 and all(p["settings"]["rubric"] == [haiku.fingerprint] for p in pairs)

    # agree: per dimension of the rubric
    assert main(["agree", "--dataset", "copy", "--scores", "scores.jsonl", "--out", "agree.json",
                 "--bootstrap", "50"]) == 0
    agree = json.loads(Path("agree.json").read_text(encoding="utf-8"))
    assert list(agree["agreement"]["per_dimension"]) == list(haiku.keys)
    assert not bundled_words_in(capsys.readouterr().out)

    # report: the rubric's dimensions, its roles' findings, and each finding without a role left out in a sentence
    assert main(["report", "--dataset", "copy", "--scores", "scores.jsonl", "--out", "report",
                 "--bootstrap", "50"]) == 0
    md = Path("report/report.md").read_text(encoding="utf-8")
    assert not bundled_words_in(md) and "Tang" not in md.replace("TangPoetryBench", "")
    assert "Season word" in md and "### Dimensions and overall" in md and "### Poem difficulty" in md
    assert "letters and characters" in md and "Han characters" not in md  # poem length in the poems' language
    assert "Left out: face avoidance, since the rubric haiku names no face-avoidance option" in md
    assert "### The depict-to-evoke gap" in md and "Depiction (Season word, The moment) minus evocation (Mood)" in md
    assert "the rubric haiku names no adjudicated dimension" in md and "Table 3" not in md and "leakage" not in md
    numbers = json.loads(Path("report/numbers.json").read_text(encoding="utf-8"))
    assert "face_avoidance" not in numbers["findings"] and set(numbers["findings"]["applicability"]) == {"season_word",
                                                                                                      "mood"}
    assert set(numbers["table2"]["painter_a"]) == {*haiku.keys, "quality", "recognizability"}

    # leaderboard, and the Hub's Eval Results from it
    assert main(["leaderboard", "--dataset", "copy", "--scores", "scores.jsonl", "--out", "board",
                 "--bootstrap", "50"]) == 0
    board = json.loads(Path("board/leaderboard.json").read_text(encoding="utf-8"))
    assert board["settings"]["rubric"] == haiku.fingerprint
    columns = (*haiku.keys, "quality")
    assert set(board["leaderboard"][0]["judge"]) == {*columns, *(f"{k}_ci" for k in columns)}
    assert not bundled_words_in(Path("board/leaderboard.md").read_text(encoding="utf-8"))
    from tangpoetrybench.hub.eval_results import read_eval_results, write_eval_results

    written = write_eval_results(board, "eval", "acme/haiku-illustration")
    assert set(written) == {"painter_a", "painter_b", "painter_c", "painter_d"}
    assert {i["dataset"]["task_id"] for i in read_eval_results(written["painter_a"])} >= {"images_pae_quality"}

    # the evaluate module, on the rubric file the dataset carries
    import evaluate

    rows = {r["image_id"]: r for r in images["test"].remove_columns("image")}
    metric = evaluate.load(str(ROOT / "metric" / "pae"), rubric=str(Path("copy") / "rubrics" / "haiku.yaml"))
    result = metric.compute(predictions=[[r["scores"][k] for k in haiku.keys] for r in records],
                            references=[[rows[r["image_id"]][k] for k in haiku.keys] for r in records],
                            poem_ids=[rows[r["image_id"]]["poem_id"] for r in records], n_bootstrap=0)
    assert list(result["per_dimension"]) == list(haiku.keys) and result["coverage"] > 0

    # the Space: the dataset's rubric first among its choices, or the rubric file uploaded
    from tangpoetrybench.hub.space import UPLOADED, Scorer, SpaceConfig, leaderboard_view

    scorer = Scorer(SpaceConfig(model=qwen, dataset="copy"))
    assert list(scorer.rubrics)[0] == "Haiku (俳句)"
    png = tmp_path / "upload.png"
    Image.new("RGB", (64, 64), (180, 190, 200)).save(png)
    poem = json.loads(POEMS.read_text(encoding="utf-8").splitlines()[0])
    scored = scorer.score(str(png), poem["text"], poem["title"], poem["author"], "Haiku (俳句)", with_baselines=False)
    assert [row[0] for row in scored.table] == [f"{d.name['en']} / {d.name['ja']}" for d in haiku.dimensions]
    assert scored.parse_status == "ok" and scored.figure is not None
    uploaded = scorer.score(str(png), poem["text"], rubric_choice=UPLOADED, rubric_file=str(HAIKU),
                            with_baselines=False)
    assert len(uploaded.table) == len(haiku.keys)
    view = leaderboard_view("board/leaderboard.json", scorer.rubrics)
    assert view.figure is not None and len(view.rows) == 4

    # the training scripts' rows follow the dataset's rubric too
    sys.path.insert(0, str(ROOT / "training"))
    try:
        from data import dataset_rubric, load_images, training_rows
        from rewards import accuracy_reward, for_rubric
    finally:
        sys.path.remove(str(ROOT / "training"))
    rubric = dataset_rubric("copy")
    assert rubric == haiku
    sft = training_rows(load_images("copy")["train"].select(range(2)), "sft", rubric=rubric)
    answer = json.loads(sft[0]["completion"][0]["content"][0]["text"])
    assert list(answer) == list(haiku.keys)
    reward = for_rubric(accuracy_reward, rubric)
    assert reward.__name__ == "accuracy_reward"
    assert reward([json.dumps(answer)], [[answer[k] for k in haiku.keys]]) == [1.0]


def test_a_built_dataset_of_another_tradition_is_named_and_described_by_its_rubric(haiku_raw, tmp_path):
    """The haiku demo is named after its tradition, not "TangPoetryBench demo"; its card's sentences are sentences;
    it has no column its rubric leaves always empty (no adjudicated dimension: no text label; no face-avoidance
    role: no face_avoidance), and the card lists none of them, while the Tang demo keeps all four."""
    import re

    from tangpoetrybench.dataset.builder import build_dataset

    haiku = build_dataset(haiku_raw, tmp_path / "haiku", progress=False).out
    card = (haiku / "README.md").read_text(encoding="utf-8")
    assert "pretty_name: Haiku demo (synthetic)" in card and "# Haiku demo (synthetic)" in card
    assert "TangPoetryBench demo" not in card
    assert "this dataset holds illustrations of Japanese haiku (Haiku)." in " ".join(card.split())
    always_empty = ("text_issue", "text_issue_type", "text_label_source", "face_avoidance")
    columns = datasets.load_dataset(str(haiku), "images", split="test", cache_dir=str(tmp_path / "cache")).column_names
    assert not set(always_empty) & set(columns)
    body = card.split("\n---\n", 1)[1]
    assert not [c for c in always_empty if re.search(rf"\b{c}\b", body)]
    assert not [c for c in always_empty if f"name: {c}\n" in card]  # dataset_info's features

    tang = build_dataset(write_demo_release(tmp_path / "tang_raw", sample_poems(), n_poems=4, size=64,
                                            progress=False), tmp_path / "tang", progress=False).out
    tang_card = (tang / "README.md").read_text(encoding="utf-8")
    assert "# Tang poetry demo (synthetic)" in tang_card
    assert all(f"`{c}`" in tang_card and f"name: {c}\n" in tang_card for c in always_empty)


def test_a_rubric_without_roles_leaves_each_finding_out_in_a_sentence(tmp_path):
    """The haiku rubric with no roles (no overall, depicting or evoking dimensions) and no not-applicable option: the
    report leaves out each finding that rests on them, saying why in one sentence, and prints none of them."""
    from tangpoetrybench.reporting.report import build_report, render_markdown

    text = HAIKU.read_text(encoding="utf-8").replace("score: excluded", "score: 0")
    text = "".join(line for line in text.splitlines(keepends=True)
                   if not line.startswith(("overall:", "depict:", "evoke:")))
    rubric = tmp_path / "haiku.yaml"
    rubric.write_text(text, encoding="utf-8")
    assert main(["demo-release", str(tmp_path / "raw"), "--rubric", str(rubric), "--poems-file", str(POEMS),
                 "--size", "64", "--quiet"]) == 0
    assert main(["build", str(tmp_path / "raw"), str(tmp_path / "ds"), "--quiet"]) == 0
    report = build_report(tmp_path / "ds", n_bootstrap=50)
    md = render_markdown(report)
    for why in ("what drives the holistic judgment and what makes a poem hard, since the rubric haiku names no "
                "overall dimension", "the depict-to-evoke gap, since the rubric haiku does not name both",
                "face avoidance, since the rubric haiku names no face-avoidance option",
                "applicability, since no dimension of the rubric haiku has a not-applicable option"):
        assert f"Left out: {why}" in md, why
    assert not {"spearman_with_overall", "difficulty", "depict_evoke", "face_avoidance"} & set(
        report.numbers["findings"])
    assert "### Poem difficulty" not in md and "### The depict-to-evoke gap" not in md


def test_demo_release_refuses_what_build_would(tmp_path, capsys):
    """A poems file whose traditions rate different dimensions, and a rubric no poem belongs to: refused before
    anything is painted."""
    mixed = tmp_path / "mixed.jsonl"
    tang = {"poem_id": "t1", "title": "静夜思", "author": "李白", "text": "床前明月光，疑是地上霜。", "tradition": "tang"}
    mixed.write_text(POEMS.read_text(encoding="utf-8") + json.dumps(tang, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["demo-release", str(tmp_path / "a"), "--rubric", str(HAIKU), "--poems-file", str(mixed)]) == 2
    assert "the rubrics haiku and tang rate different dimensions" in capsys.readouterr().err
    assert main(["demo-release", str(tmp_path / "b"), "--rubric", str(HAIKU)]) == 2
    assert "no poem of the tradition 'haiku'" in capsys.readouterr().err
    assert main(["demo-release", str(tmp_path / "c"), "--poems-file", str(POEMS)]) == 2
    assert "rubrics/haiku.yaml" in capsys.readouterr().err
    assert not [p for p in tmp_path.iterdir() if p.is_dir()]
