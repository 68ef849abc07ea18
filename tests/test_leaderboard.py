"""`tpb leaderboard` and the Space's Leaderboard tab. The fast tests use SYNTHETIC PAE results written here (the
human scores plus a planted offset per generator, and a new generator the people never rated), so every number
can be checked against a direct computation; the slow test runs the whole loop with the tiny models."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from conftest import launched_space
from tangpoetrybench.cli import main
from tangpoetrybench.dataset.reading import dataset_rows
from tangpoetrybench.reporting.leaderboard import build_leaderboard, leaderboard_rows, write_leaderboard
from tangpoetrybench.rubric import rubric_for_tradition
from tangpoetrybench.hub.space import LeaderboardView, UserError, leaderboard_view

KEYS = list(rubric_for_tradition("tang").keys)
SETTINGS = {"backend": "transformers", "max_pixels": 1048576, "max_new_tokens": 256, "parser": 2, "rubric": "tang@x"}
OFFSET = {"painter_a": 0.0, "painter_b": -0.02, "painter_c": -0.3, "painter_d": -0.05, "painter_e": -0.1}


def record(image_id: str, scores: dict, **settings) -> dict:
    present = [v for v in scores.values() if v is not None]
    return {"image_id": image_id, "evaluator": "pae", "task": "scores", "model": "synthetic", "scores": scores,
            "quality": sum(present) / len(present) if present else None, "raw_output": "", "parse_status": "ok",
            "error": None, "seconds": 0.0, "settings": {**SETTINGS, **settings}}


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def human(demo_built) -> list[dict]:
    return [r for config in ("images", "unseen_generator") for r in dataset_rows(demo_built, config, "test",
                                                                               ["image_id", "poem_id", "generator",
                                                                                "quality", *KEYS])]


@pytest.fixture(scope="module")
def files(demo_built, tmp_path_factory):
    """Synthetic PAE results: one file for the human-rated generators, one for a new generator."""
    folder = tmp_path_factory.mktemp("scores")
    rated = [record(r["image_id"], {k: None if r[k] is None else float(np.clip(r[k] + OFFSET[r["generator"]], 0, 1))
                                    for k in KEYS}) for r in human(demo_built)]
    poems = sorted({r["poem_id"] for r in human(demo_built)})
    new = [record(f"newgen/{p}", {k: 0.8 + 0.05 * i for k in KEYS}) for i, p in enumerate(poems)]
    return write(folder / "rated.jsonl", rated), write(folder / "new.jsonl", new)


@pytest.fixture(scope="module")
def board(demo_built, files, tmp_path_factory):
    out = tmp_path_factory.mktemp("board")
    write_leaderboard(build_leaderboard(demo_built, list(files), n_bootstrap=500), out)
    return out


def test_numbers_equal_direct_computations(demo_built, files, board):
    numbers = json.loads((board / "leaderboard.json").read_text(encoding="utf-8"),
                         parse_constant=lambda c: pytest.fail(f"{c} in the JSON"))
    rows = {r["generator"]: r for r in numbers["leaderboard"]}
    assert sorted(rows) == ["newgen", "painter_a", "painter_b", "painter_c", "painter_d", "painter_e"]
    assert rows["newgen"]["human"] is None and not rows["newgen"]["human_rated"]
    people = human(demo_built)
    pae = {json.loads(line)["image_id"]: json.loads(line) for f in files for line in f.read_text().splitlines()}
    for g, row in rows.items():
        mine = [r for r in pae.values() if r["image_id"].startswith(g + "/")]
        assert row["judge"]["quality"] == pytest.approx(np.mean([r["quality"] for r in mine]))
        assert row["judge"]["core_imagery"] == pytest.approx(np.mean([r["scores"]["core_imagery"] for r in mine]))
        low, high = row["judge"]["quality_ci"]
        assert low <= row["judge"]["quality"] + 1e-9 and row["judge"]["quality"] <= high + 1e-9
        assert 0.0 <= row["rank_stability"] <= 1.0
        if g != "newgen":
            qualities = [r["quality"] for r in people if r["generator"] == g and r["quality"] is not None]
            assert row["human"]["quality"] == pytest.approx(np.mean(qualities))
    order = sorted(rows, key=lambda g: -rows[g]["judge"]["quality"])
    assert [rows[g]["rank"] for g in order] == list(range(1, 7))
    agree = numbers["agreement_with_humans"]
    rated = agree["generators"]
    assert rated == ["painter_a", "painter_b", "painter_c", "painter_d", "painter_e"]
    pq, hq = [agree["judge_quality"][g] for g in rated], [agree["human_quality"][g] for g in rated]
    assert agree["kendall_tau"] == pytest.approx(stats.kendalltau(pq, hq).statistic)
    assert agree["spearman"] == pytest.approx(stats.spearmanr(pq, hq).statistic)
    assert agree["kendall_tau"] < 1  # painter_c's planted offset moves it down PAE's ranking
    assert 0 <= agree["same_order_share"] <= 1 and agree["per_image"]["n_images"] == 15
    assert numbers["settings"] == {k: v for k, v in SETTINGS.items()} and numbers["evaluator"] == "pae"


def test_outputs_say_which_numbers_are_human(board):
    md = (board / "leaderboard.md").read_text(encoding="utf-8")
    assert "**PAE** columns are the evaluator's estimates; **human** columns are the means of the dataset's human" in md
    assert "| 1 | painter_a |" in md or "| 1 | newgen |" in md
    assert "not rated" in md and "Synthetic data" in md and "Kendall τ-b" in md
    html = (board / "leaderboard.html").read_text(encoding="utf-8")
    assert "<title>TangPoetryBench leaderboard</title>" in html and html.count("data:image/png;base64") == 3
    assert sorted(p.name for p in (board / "figures").iterdir()) == ["radar_human.png", "radar_pae.png", "win_rate_pae.png"]
    assert "Generator strengths from pairs" in md and "Bradley–Terry" in md


def test_refusals(demo_built, files, tmp_path, capsys):
    rated, new = files
    records = [json.loads(line) for line in new.read_text().splitlines()]
    other = write(tmp_path / "other.jsonl", [record(r["image_id"], r["scores"], max_new_tokens=64) for r in records])
    with pytest.raises(ValueError, match="scored with max_new_tokens 64 but .* with 256: a leaderboard compares"):
        build_leaderboard(demo_built, [rated, other], n_bootstrap=0)
    with pytest.raises(ValueError, match="is scored in both"):
        build_leaderboard(demo_built, [rated, new, new], n_bootstrap=0)
    clip = write(tmp_path / "clip.jsonl", [dict(records[0], evaluator="clipscore", task="scalar", scores={})])
    with pytest.raises(ValueError, match="holds clipscore's scalar records: the leaderboard ranks a rubric judge's "
                                         "scores, so score every generator with one \\(tpb score --evaluator pae "
                                         "or api"):
        build_leaderboard(demo_built, [clip], n_bootstrap=0)
    fleet = [dict(r, evaluator="api", settings={**r["settings"], "server": f"http://127.0.0.1:800{i % 2}/v1",
                                                "served_model": "m"}) for i, r in enumerate(records)]
    mixed = write(tmp_path / "mixed.jsonl", fleet[:-1] + [dict(fleet[-1], settings={**fleet[-1]["settings"],
                                                                                  "served_model": "other"})])
    with pytest.raises(ValueError, match="scored with served_model 'other' but .* with 'm'"):
        build_leaderboard(demo_built, [mixed], n_bootstrap=0)
    elsewhere = write(tmp_path / "elsewhere.jsonl", [record("newgen/not-a-test-poem", records[0]["scores"])])
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(rated), str(elsewhere),
                 "--out", str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert "no poem of" in err and "has a result for every generator" in err and not (tmp_path / "b").exists()


def test_a_served_judges_results_rank_labelled_by_what_they_are(demo_built, files, tmp_path):
    """A fleet's records (each naming the replica that answered) rank like PAE's, labelled by the evaluator, its model
    and the servers: nothing says PAE. (Before, the leaderboard took only results named pae.)"""
    served = []
    for path in files:
        records = [json.loads(line) for line in path.read_text().splitlines()]
        served.append(write(tmp_path / path.name, [
            dict(r, evaluator="api", random_weights="unknown",
                 settings={**r["settings"], "server": f"http://127.0.0.1:800{i % 2}/v1", "served_model": "m"})
            for i, r in enumerate(records)]))
    out = tmp_path / "board"
    write_leaderboard(build_leaderboard(demo_built, served, n_bootstrap=20), out)
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "one evaluator, `api` (`synthetic` at http://127.0.0.1:8000/v1, http://127.0.0.1:8001/v1, settings" in md
    assert "**api** columns are the evaluator's estimates" in md and "| api quality [95 % CI] |" in md
    assert "PAE" not in md and (out / "figures" / "radar_api.png").is_file()
    numbers = json.loads((out / "leaderboard.json").read_text(encoding="utf-8"))
    assert numbers["evaluator"] == "api" and all("judge" in row for row in numbers["leaderboard"])


def test_the_board_says_what_it_left_out_and_why(demo_built, files, board, tmp_path):
    """A new generator's images of poems outside the split, or that another generator lacks, are counted and said;
    a board that leaves nothing out says nothing of it, and no table cites a file users do not have."""
    rated, new = files
    records = [json.loads(line) for line in new.read_text().splitlines()]
    train = [r["poem_id"] for r in dataset_rows(demo_built, "poems", "train")][:2]
    extra = write(tmp_path / "extra.jsonl", [record(f"newgen/{p}", records[0]["scores"]) for p in train]
                  + [record(f"newgen2/{records[0]['image_id'].split('/')[1]}", records[0]["scores"]),
                     record(f"newgen2/{records[1]['image_id'].split('/')[1]}", records[0]["scores"])])
    data = build_leaderboard(demo_built, [rated, new, extra], n_bootstrap=0)
    left = data.numbers["left_out"]
    assert data.numbers["poems"] == 2  # the poems newgen2 has too
    assert left["newgen"] == {"outside_split": 2, "missing_elsewhere": len(records) - 2}
    md = write_leaderboard(data, tmp_path / "board") / "leaderboard.md"
    text = md.read_text(encoding="utf-8")
    assert "**Left out.** newgen: 2 images of poems with no human-rated image in the `test` split" in text
    assert "of poems that another generator has no result for" in text and "tpb generate --split test" in text
    board_md = (board / "leaderboard.md").read_text(encoding="utf-8")
    assert "Left out" not in board_md and "left_out" not in json.loads((board / "leaderboard.json").read_text())
    assert "SPEC" not in board_md and "Per-image statistic (docs/statistics.md)" in board_md


def test_space_tab(board, tmp_path):
    view = leaderboard_view(board / "leaderboard.json")
    numbers = json.loads((board / "leaderboard.json").read_text(encoding="utf-8"))
    assert view.rows == leaderboard_rows(numbers["leaderboard"], "PAE") and len(view.rows) == 6
    assert "PAE columns are estimates; human columns are people's ratings" in view.summary and view.figure.axes
    assert leaderboard_view(None).rows == [] and "tpb leaderboard" in leaderboard_view(None).summary
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(UserError, match="cannot be read"):
        leaderboard_view(tmp_path / "broken.json")
    assert isinstance(view, LeaderboardView)


def test_space_tab_over_gradio_client(board, tiny_models):
    from gradio_client import Client

    env = {"PAE_MODEL": str(tiny_models["qwen3-vl"]), "CLIP_MODEL": str(tiny_models["clip"]),
           "BLIP_MODEL": str(tiny_models["blip"]), "PAE_LEADERBOARD": str(board / "leaderboard.json")}
    with launched_space(env, "space_app_leaderboard") as (_, url):
        summary, table, plot = Client(url, verbose=False).predict(api_name="/leaderboard")
    assert "PAE columns are estimates" in summary and len(table["data"]) == 6 and plot["type"] == "matplotlib"
    assert table["headers"][:2] == ["rank", "generator"]


@pytest.mark.slow
def test_the_whole_loop_on_the_cpu(demo_built, tiny_models, tmp_path, capsys):
    """Tiny pipeline → tpb generate (the test poems, two real processes under torchrun) → tpb score --images → tiny PAE on the dataset → tpb leaderboard
    with the sample's human-rated generators. Random weights: the tiny PAE's answers do not parse, so its estimates
    are empty; this checks that the pieces fit, not any number."""
    poems = tmp_path / "test_poems.jsonl"
    rows = list(dataset_rows(demo_built, "poems", "test"))
    poems.write_text("".join(json.dumps({k: r[k] for k in ("poem_id", "title", "author", "text", "tradition")},
                                        ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    raw = tmp_path / "raw"
    generate = ["generate", "--pipeline", str(tiny_models["text-to-image"]), "--poems", str(poems), "--out", str(raw),
                "--generator", "tinysd", "--steps", "2", "--height", "64", "--width", "64", "--quiet"]
    launch = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
              "tangpoetrybench.cli"]
    one_thread = {**os.environ, "OMP_NUM_THREADS": "1"}  # the same thread count in every run: the same float sums
    done = subprocess.run(launch + generate, capture_output=True, text=True, env=one_thread)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "process 0 of 2" in done.stderr and "process 1 of 2" in done.stderr
    assert sorted(p.stem for p in (raw / "images" / "tinysd").iterdir()) == sorted(r["poem_id"] for r in rows)
    # the images two processes made are the ones one process makes
    first = tmp_path / "first.jsonl"
    first.write_text(poems.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", *generate[:3], "--poems", str(first), "--out",
                    str(tmp_path / "alone"), *generate[7:]], check=True, capture_output=True, env=one_thread)
    [alone] = (tmp_path / "alone" / "images" / "tinysd").iterdir()
    assert alone.read_bytes() == (raw / "images" / "tinysd" / alone.name).read_bytes()
    common = ["--evaluator", "pae", "--model", str(tiny_models["qwen3-vl"]), "--max-new-tokens", "16", "--quiet"]
    assert main(["score", "--images", str(raw / "images"), "--poems", str(raw / "poems.jsonl"), *common,
                 "--out", str(tmp_path / "new.jsonl")]) == 0
    assert main(["score", "--dataset", str(demo_built), *common, "--out", str(tmp_path / "rated.jsonl")]) == 0
    capsys.readouterr()
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(tmp_path / "rated.jsonl"),
                 str(tmp_path / "new.jsonl"), "--out", str(tmp_path / "board"), "--bootstrap", "200"]) == 0
    numbers = json.loads((tmp_path / "board" / "leaderboard.json").read_text(encoding="utf-8"))
    assert numbers["random_weights"] and {r["generator"] for r in numbers["leaderboard"]} == {
        "painter_a", "painter_b", "painter_c", "painter_d", "tinysd"}
    tang = sum(r["tradition"] == "tang" for r in rows)  # the Song Ci poems are generated and scored, not ranked
    assert tang and [r["images"] for r in numbers["leaderboard"]] == [tang] * 5
    assert "Random weights." in (tmp_path / "board" / "leaderboard.md").read_text(encoding="utf-8")


def test_tied_generators_share_a_rank(demo_built, files, tmp_path):
    """Two generators with the same scores on the same poems get the same rank, and the next one skips a rank."""
    rated, new = files
    records = [json.loads(line) for line in new.read_text().splitlines()]
    twin = write(tmp_path / "twin.jsonl", [dict(r, image_id=r["image_id"].replace("newgen/", "newtwin/"))
                                           for r in records])
    board = build_leaderboard(demo_built, [rated, new, twin], n_bootstrap=50).numbers["leaderboard"]
    ranks = {r["generator"]: r["rank"] for r in board}
    assert ranks["newgen"] == ranks["newtwin"] == 1 and sorted(ranks.values())[:3] == [1, 1, 3], ranks


def test_a_judge_that_gives_every_image_one_score_is_no_correlation_and_no_warning(demo_built, tmp_path):
    """A random-weight judge answers every image alike: the rank agreement with people is undefined (None), said
    without scipy's ConstantInputWarning leaking onto the console."""
    import warnings

    flat = write(tmp_path / "flat.jsonl", [record(r["image_id"], {k: 0.5 for k in KEYS}) for r in human(demo_built)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        numbers = build_leaderboard(demo_built, [flat], n_bootstrap=20).numbers
    assert numbers["agreement_with_humans"]["spearman"] is None


def test_a_generator_keeps_its_colour_in_both_radars(demo_built, files):
    """The human radar leaves the unrated generator out; every other generator keeps the PAE radar's colour."""
    from matplotlib.figure import Figure

    import tangpoetrybench.reporting.leaderboard as lb

    drawn: dict[str, dict[str, str]] = {}
    real = lb.radar

    def recording(profiles, rubric, title="", **kwargs) -> Figure:
        figure = real(profiles, rubric, title, **kwargs)
        drawn[title.split(" (")[0]] = {line.get_label(): line.get_color() for line in figure.axes[0].get_lines()
                                       if not line.get_label().startswith("_")}
        return figure

    lb.radar = recording
    try:
        lb.build_leaderboard(demo_built, list(files), n_bootstrap=0)
    finally:
        lb.radar = real
    pae, human = drawn["PAE estimates"], drawn["Human scores"]
    assert set(human) < set(pae) and all(pae[g] == human[g] for g in human), (pae, human)
    assert len(set(pae.values())) == len(pae)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("chromium"), reason="Debian's chromium is not installed")
def test_the_html_fits_1400_px(board):
    """In a real browser 1,400 px wide, no table (six generators' Table 2 layout included) runs off the page."""
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), headless=True,
                                    args=["--no-sandbox", "--disable-gpu", "--no-first-run",
                                          "--disable-background-networking", "--disable-component-update"])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto((board / "leaderboard.html").as_uri())
            rights = page.eval_on_selector_all("table", "ts => ts.map(t => t.getBoundingClientRect().right)")
            assert rights and max(rights) <= 1400, rights
            assert page.evaluate("document.documentElement.scrollWidth") <= 1400
        finally:
            browser.close()


@pytest.mark.slow
def test_the_commands_tpb_generate_prints_next_make_a_board(tiny_models, tiny_pae, demo_built, demo_raw, tmp_path,
                                                            capsys):
    """`tpb generate`'s "Next:" lines, filled in with the rated scores' model and adapter, are accepted by the
    leaderboard as they stand (they name --model, --adapter and --constrained, which it checks)."""
    import shlex

    out = tmp_path / "new"
    assert main(["generate", "--pipeline", str(tiny_models["text-to-image"]), "--poems", str(demo_raw / "poems.jsonl"),
                 "--out", str(out), "--generator", "tinysd", "--split", "test", "--steps", "1", "--height", "64",
                 "--width", "64", "--quiet"]) == 0
    printed = capsys.readouterr().out
    score, board = [shlex.split(line.strip())[1:] for line in printed.splitlines() if line.startswith("  tpb ")]
    fill = {"MODEL": str(tiny_models["qwen3-vl"]), "ADAPTER": str(tiny_pae), "DATASET": str(demo_built),
            "RATED.jsonl": str(tmp_path / "rated.jsonl"), "board": str(tmp_path / "board")}
    score, board = [[fill.get(word, word) for word in command] for command in (score, board)]
    assert main([*score, "--quiet"]) == 0
    options = score[score.index("--evaluator"):score.index("--out")]  # the rated images, scored the same way
    assert main(["score", "--dataset", str(demo_built), *options, "--out", str(tmp_path / "rated.jsonl"), "--quiet"]) == 0
    assert main([*board, "--bootstrap", "100"]) == 0
    numbers = json.loads((tmp_path / "board" / "leaderboard.json").read_text(encoding="utf-8"))
    assert "tinysd" in {r["generator"] for r in numbers["leaderboard"]}
    assert set(numbers.get("left_out", {})) <= {"tinysd"}  # at most its Song Ci poems, which the board does not rank
