"""`tpb report` on a release with planted structure: it recovers what was planted, numbers.json equals
direct computations from the Parquet files, and the HTML renders in a real headless Chromium."""

import json
import re
import shutil
import subprocess
import sys
from collections import defaultdict

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import rating, write_release
from tangpoetrybench.dataset.builder import build_dataset
from tangpoetrybench.reporting.report import build_report, write_report

TEXTS = ["床前明月光，疑是地上霜。", "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。", "千山鸟飞绝，万径人踪灭。",
         "红豆生南国，春来发几枝。愿君多采撷，此物最相思。", "白日依山尽，黄河入海流。", "空山不见人，但闻人语响。",
         "移舟泊烟渚，日暮客愁新。野旷天低树，江清月近人。", "向晚意不适，驱车登古原。"]
POEMS = [{"poem_id": f"q{i}", "title": f"t{i}", "author": "a", "text": t, "tradition": "tang"} for i, t in enumerate(TEXTS)]
GENERATORS = {"good": {"display": "Good", "unseen": False}, "mid": {"display": "Mid", "unseen": False},
              "poor": {"display": "Poor", "unseen": False}}
# Per generator, the answers (SPEC order); core imagery (8th) and overall impression (10th) move together.
ANSWERS = {"good": ["aaaaaaaaaa", "aaaaaaabab"], "mid": ["abbabaabbb", "abbabaacbc"], "poor": ["bccbbbcdcd", "bccbbbcccd"]}
LABELS = ["poor,q0,1,fake_characters", "poor,q1,1,fake_characters", "poor,q2,1,fake_characters", "mid,q3,1,leakage"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("planted")
    ratings, n = [], 0
    for g, answers in ANSWERS.items():
        for i, poem in enumerate(POEMS):
            pid = poem["poem_id"]
            others = [p["poem_id"] for p in POEMS if p["poem_id"] != pid][:3]
            for k in range(1 + (i % 3 == 0)):  # every third image rated twice
                n += 1
                rater, group = (f"e{k}", "expert") if k == 0 else (f"c{i}", "crowd")
                wrong = g == "poor" and i % 2 == 0  # the poor generator is recognised half the time
                ratings.append(rating(f"r{n}", rater, g, pid, answers[(i + k) % 2], candidates="|".join([pid] + others),
                                      choice=others[0] if wrong else pid, group=group))
    raw = write_release(root / "raw", ratings, LABELS, poems=POEMS, generators=GENERATORS,
                        images=[f"{g}/{p['poem_id']}" for g in GENERATORS for p in POEMS])
    out = build_dataset(raw, root / "ds", progress=False).out
    rep = build_report(out, n_bootstrap=2000)
    return out, rep, write_report(rep, root / "report")


def test_planted_structure_is_recovered(planted):
    _, rep, _ = planted
    q = {g: rep.numbers["table2"][g]["quality"] for g in GENERATORS}
    assert q["good"] > q["mid"] > q["poor"]
    stability = rep.numbers["findings"]["ranking_stability"]
    assert stability["first"]["good"] == 1.0 and stability["last"]["poor"] == 1.0
    assert rep.numbers["findings"]["spearman_with_overall"]["core_imagery"] > 0.8
    t3 = rep.numbers["table3"]
    assert (t3["poor"]["fake_characters"], t3["poor"]["leakage"], t3["mid"]["leakage"], t3["good"]["total"]) == (3, 0, 1, 0)
    assert rep.numbers["strong_generators"] == ["good"]
    assert "synthetic" not in rep.numbers


def _parquet(folder, config):
    rows = []
    for path in sorted((folder / "data" / config).glob("*.parquet")):
        rows += pq.read_table(path, columns=[c for c in pq.read_schema(path).names if c != "image"]).to_pylist()
    return rows


def test_numbers_equal_direct_computations(planted):
    folder, rep, out = planted
    numbers = json.loads((out / "numbers.json").read_text())
    rows = _parquet(folder, "images")
    by_gen = defaultdict(list)
    for r in rows:
        by_gen[r["generator"]].append(r)
    for g, rs in by_gen.items():
        for key in ("core_imagery", "emotional_resonance", "quality", "recognizability", "text_integrity"):
            values = [r[key] for r in rs if r[key] is not None]
            if not values:  # the poor generator's emotion is never applicable
                assert numbers["table2"][g][key] is None and numbers["table2_ci"][g][key] is None
                continue
            assert numbers["table2"][g][key] == pytest.approx(100 * np.mean(values)), (g, key)
            low, high = numbers["table2_ci"][g][key]
            assert low <= numbers["table2"][g][key] <= high
        assert numbers["table3"][g]["total"] == sum(r["text_issue"] == 1 for r in rs)
    ratings = [r for r in _parquet(folder, "ratings") if r["phase1_correct"] is not None]
    for group in ("expert", "crowd"):
        answers = [r["phase1_correct"] for r in ratings if r["rater_group"] == group]
        assert numbers["findings"]["phase1_accuracy_by_group"][group]["accuracy"] == pytest.approx(np.mean(answers))
    per_poem = defaultdict(list)
    for r in rows:
        per_poem[r["poem_id"]].append(r["overall_impression"])
    difficulty = [np.mean(v) for v in per_poem.values()]
    assert numbers["findings"]["difficulty"]["min"] == pytest.approx(min(difficulty))
    assert numbers["findings"]["difficulty"]["max"] == pytest.approx(max(difficulty))


def test_outputs_and_cli(planted, tmp_path, demo_built):
    folder, _, out = planted
    assert {p.name for p in (out / "figures").iterdir()} == {"figure2a_all.png", "figure2b_strong.png"}
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "## Table 2" in md and "| Quality |" in md and "figures/figure2a_all.png" in md
    scores = tmp_path / "s.jsonl"
    scores.write_text("".join(json.dumps({"image_id": f"{g}/{p}", "evaluator": "synthetic-metric", "scores": {},
                                          "quality": 0.5, "parse_status": "ok"}) + "\n"
                              for g in ("painter_a", "painter_b") for p in ("tang300-011", "tang300-278")))
    done = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "report", "--dataset", str(demo_built),
                           "--out", str(tmp_path / "rep"), "--scores", str(scores), "--bootstrap", "200"],
                          capture_output=True, text=True, check=True)
    assert "report.html" in done.stdout
    numbers = json.loads((tmp_path / "rep" / "numbers.json").read_text())
    assert numbers["synthetic"] is True and "synthetic-metric" in numbers["table4"]
    rep = build_report(demo_built, scores=[scores, scores], n_bootstrap=50)  # one evaluator twice: both kept
    assert set(rep.numbers["table4"]) == {"synthetic-metric", "synthetic-metric (s)"}
    assert set(rep.numbers["pairwise"]["evaluators"]) == {"synthetic-metric", "synthetic-metric (s)"}
    assert len([f for f in rep.figures if not f.startswith("win_rate_")]) == 4  # radars and scatters
    assert {"win_rate_human.png", "win_rate_synthetic-metric.png", "win_rate_synthetic-metric_s_.png"} <= set(rep.figures)
    assert "**Synthetic data.**" in (tmp_path / "rep" / "report.md").read_text(encoding="utf-8")


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_html_renders_without_console_errors(planted, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    _, _, out = planted
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in html and "figures/" not in html  # self-contained
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                          "--disable-background-networking", "--disable-component-update"])
        try:
            page = browser.new_page()
            problems = []
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.goto((out / "report.html").as_uri())
            widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.naturalWidth)")
            assert len(widths) == 2 and all(w > 100 for w in widths)
            assert page.locator("table").count() >= 5
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            assert not problems, problems
        finally:
            browser.close()


def test_a_generator_without_kept_ratings_is_not_ranked(tmp_path):
    gens = {"g1": {"display": "G1", "unseen": False}, "g2": {"display": "G2", "unseen": False}}
    raw = write_release(tmp_path / "raw", [rating(f"r{i}", "u1", "g1", p, "aaaaaaabab") for i, p in
                                           enumerate(["p1", "p2", "p3", "p4"])], generators=gens,
                        images=[f"{g}/p{i}" for g in gens for i in range(1, 5)])
    rep = build_report(build_dataset(raw, tmp_path / "ds", progress=False).out, n_bootstrap=100)
    stability = rep.numbers["findings"]["ranking_stability"]
    assert stability["first"] == {"g1": 1.0, "g2": None} and stability["last"] == {"g1": 1.0, "g2": None}
    assert rep.numbers["table2"]["g2"]["quality"] is None


def test_chinese_is_drawn_with_a_simplified_chinese_face():
    from matplotlib import font_manager

    from tangpoetrybench.fonts import CJK_FONT_PREFERENCE
    from tangpoetrybench.fonts import cjk_family as cjk_font

    chosen = cjk_font()  # first: it adds Noto CJK files installed after matplotlib cached its list of fonts
    installed = {f.name for f in font_manager.fontManager.ttflist}
    if not installed & set(CJK_FONT_PREFERENCE):
        pytest.skip("no simplified-Chinese font installed (Debian: fonts-noto-cjk)")
    assert chosen == next(n for n in CJK_FONT_PREFERENCE if n in installed)  # never the JP or KR face first


def test_an_interval_of_zero_width_is_marked_not_printed():
    from tangpoetrybench.numeric import fmt_interval

    assert fmt_interval([1.0, 1.0]) == "‡" and fmt_interval(None) == "—"
    assert fmt_interval([0.1, 0.25], 1, scale=100) == "[10.0, 25.0]"


def test_the_report_reads_each_config_once(planted, monkeypatch, tmp_path):
    """Every number is computed from one read of each config (all its splits in one pass), then laid out."""
    import datasets

    out = planted[0]
    reads = []
    real = datasets.load_dataset

    def counted(path, name=None, *args, **kwargs):
        reads.append((name, kwargs.get("split")))
        return real(path, name, *args, **kwargs)

    monkeypatch.setattr(datasets, "load_dataset", counted)
    scores = tmp_path / "s.jsonl"
    scores.write_text("".join(json.dumps({"image_id": f"{g}/{p['poem_id']}", "evaluator": "synthetic-metric",
                                          "scores": None, "quality": 0.5}) + "\n"
                              for g in GENERATORS for p in POEMS), encoding="utf-8")
    rep = build_report(out, scores=[scores], split="train", n_bootstrap=10)
    assert sorted(reads) == [("images", None), ("ratings", None)]
    assert "table4" in rep.numbers


def test_a_served_judge_is_named_by_its_model_and_server(demo_built, tmp_path):
    """`api` alone says nothing of who answered: Table 4 and the pairwise tables name the served model and the
    server its results record (SYNTHETIC records: the human scores as the served judge's answers)."""
    from tangpoetrybench.dataset.reading import dataset_rows
    from tangpoetrybench.judging.results import ResultsFile
    from tangpoetrybench.rubric import rubric_for_tradition

    keys = list(rubric_for_tradition("tang").keys)
    settings = {"backend": "api", "max_pixels": 1048576, "max_new_tokens": 256, "parser": 2, "temperature": 0.0,
                "seed": 0, "repair": 1, "served_model": "Qwen/Qwen3-VL-8B-Instruct", "server": "http://10.0.0.5:8000/v1"}
    scores = tmp_path / "served.jsonl"
    scores.write_text("".join(json.dumps({"image_id": r["image_id"], "evaluator": "api", "model": "pae",
                                          "scores": {k: r[k] for k in keys}, "quality": r["quality"],
                                          "parse_status": "ok", "settings": settings}) + "\n"
                              for r in dataset_rows(demo_built, "images", "test", ["image_id", "quality", *keys])))
    assert ResultsFile.read(scores).label == "api: pae at http://10.0.0.5:8000/v1"
    rep = build_report(demo_built, scores=[scores], n_bootstrap=20)
    assert set(rep.numbers["table4"]) == {"api: pae at http://10.0.0.5:8000/v1"}
    assert set(rep.numbers["pairwise"]["evaluators"]) == {"api: pae at http://10.0.0.5:8000/v1"}
    md = write_report(rep, tmp_path / "rep") / "report.md"
    assert "## Table 4 — api: pae at http://10.0.0.5:8000/v1 against the human scores" in md.read_text(encoding="utf-8")


def tables(md: str) -> list[tuple[list[list[str]], str]]:
    """Each Markdown table of `md` (its rows of cells, the header first) with the text after it up to the next
    table or heading."""
    found, lines, i = [], md.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("|"):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                if not set(lines[i]) <= set("|-"):
                    rows.append([c.strip() for c in lines[i].strip().strip("|").split("|")])
                i += 1
            after = []
            while i < len(lines) and not lines[i].startswith(("|", "#")):
                after.append(lines[i])
                i += 1
            found.append((rows, "\n".join(after)))
        else:
            i += 1
    return found


def one_poem_scores(demo_built, path):
    """SYNTHETIC scores of the images of one poem of the test split (the human scores, nudged apart), so that Kendall
    τ is defined over one poem and the pairs are one poem's; every other image has no result."""
    from tangpoetrybench.dataset.reading import dataset_rows
    from tangpoetrybench.rubric import rubric_for_tradition

    keys = list(rubric_for_tradition("tang").keys)
    rows = list(dataset_rows(demo_built, "images", "test", ["image_id", "poem_id", "quality", *keys]))
    mine = [r for r in rows if r["poem_id"] == rows[0]["poem_id"]]
    path.write_text("".join(json.dumps({"image_id": r["image_id"], "evaluator": "synthetic", "model": "synthetic",
                                        "scores": {k: r[k] for k in keys}, "quality": r["quality"] + 0.01 * i,
                                        "parse_status": "ok"}) + "\n" for i, r in enumerate(mine)))
    return path


def test_every_cell_of_the_report_says_something_and_every_mark_is_explained(planted, demo_built, tmp_path):
    """No blank cell beside an explained "—" (Table 4's noise floor, the human ceiling's row of Table 4P): a
    statistic without a value is "—", and a column with no value at all (no noise floor on too few multi-rated
    images) is left out, the sentence below saying why. A table with a zero-width interval (‡) is followed by the
    note that explains it; counts are in the number's form ("1 poem", never "1 poems")."""
    from tangpoetrybench.numeric import ZERO_WIDTH, ZERO_WIDTH_NOTE
    from tangpoetrybench.reporting.report import compute_report, lay_out, read_inputs, render_markdown

    scores = one_poem_scores(demo_built, tmp_path / "one.jsonl")
    folder, _, _ = planted
    data = compute_report(read_inputs(demo_built), scores=[scores], n_bootstrap=50)
    assert not data.split_floor["enough"]  # the demo's test split: too few multi-rated images for a noise floor
    without_floor = render_markdown(lay_out(data))
    assert "| Kendall τ per poem, mean (1 poem) |" in without_floor and "Human noise floor |" not in without_floor
    data.split_floor = data.noise_floor  # all splits': enough multi-rated images
    with_floor = render_markdown(lay_out(data))
    assert "| Statistic | Value | 95 % interval (poems resampled) | Human noise floor |" in with_floor
    for md in (without_floor, with_floor, render_markdown(build_report(folder, n_bootstrap=50))):
        for rows, after in tables(md):
            assert all(cell for row in rows for cell in row), rows
            if any(ZERO_WIDTH in cell for row in rows[1:] for cell in row):
                assert ZERO_WIDTH_NOTE in after, rows
        assert not re.search(r"\b1 (poems|images|pairs|raters|ratings|generators|answers)\b", md)
