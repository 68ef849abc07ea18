"""Hostile input (issue 35's security review): one test per finding, each named for it, with real files and symbolic
links in a temporary folder. Each failed before its fix. The findings about the served judge's HTTP client (3, 4, 5,
9, 10, 12) are tested beside that client; docs/security.md lists every promise with its test."""

import json
import os
import re
import shutil
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from PIL import Image

from conftest import POEMS, rating, write_release
from test_leaderboard import files, record, write  # noqa: F401 (a fixture)
from tangpoetrybench.cli import main
from tangpoetrybench.dataset.raw_release import read_release
from tangpoetrybench.errors import DataError, Problem
from tangpoetrybench.hub.space import UPLOADED, UserError, choose_rubric
from tangpoetrybench.judging.ocr.labels import DRAFT_NAME, EVIDENCE_NAME, draft_text_labels
from tangpoetrybench.judging.pairwise import dataset_pairs
from tangpoetrybench.judging.scoring import DatasetSource, FolderSource
from tangpoetrybench.poems import parse_poems
from tangpoetrybench.reporting.report import Report, write_report
from tangpoetrybench.reward import as_images
from tangpoetrybench.rubric import load_rubric, parse_rubric

RUBRIC_DIR = Path(__file__).resolve().parents[1] / "tangpoetrybench" / "rubrics"
GOOD = [rating("r1", "u1", "g1", "p1"), rating("r2", "u2", "g2", "p2")]
BOUND = 2000  # the longest a message quoting hostile data may be (a problem's line is cut at 1,000 characters)


def laughs(levels: int, last: str = "display") -> str:
    """A rubric of nested aliases: each level nine times the one before (the "billion laughs")."""
    text = 'name: tang\ntradition: tang\nl0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n'
    for i in range(1, levels + 1):
        text += f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]\n"
    return text + f"{last}: *l{levels}\ndimensions: []\n"


def ocr_records(release, issue: str = "none") -> list[dict]:
    """text-ocr results of every image of a release, as `tpb score --evaluator text-ocr` writes them."""
    evidence = {"issue_type": issue, "verdict": "clean" if issue == "none" else "leaked_poem_text", "matched": "",
                "regions": []}
    return [{"image_id": i, "evaluator": "text-ocr", "parse_status": "ok", "evidence": evidence, "scores": {}}
            for i in sorted(release.images)]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def bomb(path, size=(8000, 8000)):
    """A PNG of 64 million pixels in a few KB."""
    Image.new("1", size).save(path)
    assert path.stat().st_size < 100_000
    return path


# 1. A rubric of nested aliases took the Space down (a 34.7 MB error message).

def test_item1_a_billion_laughs_rubric_is_refused_with_a_bounded_message(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(laughs(6), encoding="utf-8")  # 9^6 × 9 strings once expanded: megabytes of repr
    with pytest.raises(DataError) as err:
        load_rubric(path)
    message = str(err.value)
    assert "anchors and aliases" in message and len(message) < BOUND
    assert err.value.problems[0].line == 3  # the first anchor


def test_item1_every_message_that_quotes_user_data_is_bounded():
    huge = "x" * 1_000_000
    assert len(str(Problem("ratings.csv", f"unknown generator {huge!r}", line=2, field="generator"))) < BOUND
    assert len(str(DataError([Problem("f", huge)] * 60))) < 50 * BOUND  # 50 problems shown, then a count
    text = (RUBRIC_DIR / "tang.yaml").read_text(encoding="utf-8").replace("version: 1", f"version: {huge}")
    with pytest.raises(DataError, match="version: expected an integer, got 'xxx") as err:
        parse_rubric(text)  # a value the rubric's checks quote: elided, never formatted whole
    assert len(str(err.value)) < BOUND


def test_item1_a_deeply_nested_rubric_or_a_huge_number_is_refused_naming_the_file(tmp_path, capsys):
    """40 KB of `[[[...]]]` exhausted Python's recursion limit, and a 100,000-digit `version:` raised a ValueError:
    neither was a DataError, so `tpb demo-release --rubric` showed a traceback or a message naming no file."""
    deep = tmp_path / "deep.yaml"
    deep.write_text("name: x\ntradition: x\nl: " + "[" * 20_000 + "]" * 20_000 + "\n", encoding="utf-8")
    number = tmp_path / "number.yaml"
    number.write_text((RUBRIC_DIR / "tang.yaml").read_text(encoding="utf-8").replace("version: 1",
                                                                                    "version: " + "9" * 100_000),
                      encoding="utf-8")
    for path, why in ((deep, "nested more than 16 levels deep"), (number, "a value that cannot be read")):
        with pytest.raises(DataError, match=why) as err:
            load_rubric(path)
        assert err.value.problems[0].file == str(path) and len(str(err.value)) < BOUND
        assert main(["demo-release", str(tmp_path / "out"), "--rubric", str(path), "--quiet"]) == 2
        shown = capsys.readouterr().err
        assert str(path) in shown and why in shown and "Traceback" not in shown and not (tmp_path / "out").exists()
    assert load_rubric(RUBRIC_DIR / "tang.yaml").keys == load_rubric("tang").keys  # six levels deep: read


def test_item1_the_space_refuses_an_aliased_or_oversized_rubric_upload(tmp_path):
    aliased = tmp_path / "laughs.yaml"
    aliased.write_text(laughs(6), encoding="utf-8")
    with pytest.raises(UserError, match="anchors and aliases") as err:
        choose_rubric(UPLOADED, str(aliased))
    assert len(str(err.value)) < BOUND
    big = tmp_path / "big.yaml"  # a valid rubric, padded with a comment past the bound (256 KiB)
    big.write_text((RUBRIC_DIR / "tang.yaml").read_text(encoding="utf-8") + "#" * 300_000 + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="a rubric file may have at most 262,144"):
        choose_rubric(UPLOADED, str(big))


# 2. A planted symbolic link made `tpb build --text-labels-from` write outside the release.

@pytest.mark.parametrize("planted", [DRAFT_NAME, EVIDENCE_NAME])
def test_item2_a_planted_link_never_receives_the_text_label_draft(tmp_path, capsys, planted):
    raw = write_release(tmp_path / "raw", GOOD)
    ocr = write_jsonl(tmp_path / "ocr.jsonl", ocr_records(read_release(raw)))
    outside = tmp_path / "home" / ".ssh" / "authorized_keys"
    outside.parent.mkdir(parents=True)
    (raw / planted).symlink_to(outside)  # dangling: the draft would create it
    assert main(["build", str(raw), "--text-labels-from", str(ocr)]) == 2
    assert "symbolic link" in capsys.readouterr().err and not outside.exists()
    outside.write_text("ssh-ed25519 AAAA... me\n")  # an existing target is not replaced, even with --overwrite
    with pytest.raises(ValueError, match=f"{planted} is a symbolic link"):
        draft_text_labels(raw, ocr, overwrite=True)
    assert outside.read_text() == "ssh-ed25519 AAAA... me\n" and (raw / planted).is_symlink()


def test_item2_the_report_never_writes_through_a_link(tmp_path):
    out = tmp_path / "report"
    out.mkdir()
    target = tmp_path / "elsewhere.html"
    target.write_text("kept")
    (out / "report.html").symlink_to(target)
    with pytest.raises(ValueError, match="report.html is a symbolic link"):
        write_report(Report(), out)
    assert target.read_text() == "kept"
    other = tmp_path / "other"
    other.mkdir()
    (other / "figures").symlink_to(tmp_path, target_is_directory=True)  # a linked folder below OUT
    rep = Report()
    rep.figures["radar.png"] = b"\x89PNG"
    with pytest.raises(ValueError, match="figures is a symbolic link"):
        write_report(rep, other)
    assert not (tmp_path / "radar.png").exists()


def test_item2_generate_never_writes_through_a_link_in_its_output(tiny_models, tmp_path):
    from tangpoetrybench.generation.diffusers_generate import generate_images

    poems = write_jsonl(tmp_path / "poems.jsonl", POEMS[:1])
    out, outside = tmp_path / "raw", tmp_path / "outside"
    outside.mkdir()
    out.mkdir()
    # the temporary names an earlier version wrote through, and a linked generator folder
    (out / f".generation.json.{os.getpid()}.tmp").symlink_to(outside / "manifest")
    (out / f".poems.jsonl.{os.getpid()}.tmp").symlink_to(outside / "poems")
    (out / "images").mkdir()
    (out / "images" / "tiny").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="tiny is a symbolic link"):
        generate_images(str(tiny_models["text-to-image"]), poems, out, "tiny", steps=2, height=64, width=64,
                        guidance_scale=1.0, progress=False)
    assert sorted(p.name for p in outside.iterdir()) == []
    assert json.loads((out / "generation.json").read_text(encoding="utf-8"))["generators"]["tiny"]


def campaign_with_one_rating(raw, db):
    """A rating campaign over `raw` (candidates from `choose_distractors`) with one image rated by one rater."""
    from test_annotation import Clock, rate_one
    from tangpoetrybench.annotation.assignment import Plan
    from tangpoetrybench.annotation.campaign import load_campaign
    from tangpoetrybench.annotation.store import Store
    from tangpoetrybench.dataset.distractors import choose_distractors, write_candidates
    from tangpoetrybench.hub.annotation_space import annotation_app
    from tangpoetrybench.poems import read_poems

    poems = read_poems(raw / "poems.jsonl")
    write_candidates(choose_distractors(poems), poems, raw / "candidates.jsonl", {"similarity": "test"})
    app = annotation_app(load_campaign(raw), Store(db), Plan())
    app.protocol.clock = clock = Clock()
    rate_one(app.protocol, clock, app.protocol.store.invite("ann", "crowd", "en", 0.0), "aaaaaaaaaa")
    return app.protocol.store


def test_item2_the_annotation_export_never_writes_through_a_link(tmp_path, capsys):
    """The export wrote a guessable temporary file (`.NAME.PID.partial`) with write_text, through a link planted
    there; it now writes with the project's own writers, whole and never through a link."""
    import os

    from tangpoetrybench.annotation.export import export_release, write_campaign_files

    raw = write_release(tmp_path / "raw", [])
    store = campaign_with_one_rating(raw, tmp_path / "c.sqlite")
    outside = tmp_path / "outside"
    outside.mkdir()
    annotations = f"annotations-{store.campaign_id()}.jsonl"
    for name in ("ratings.csv", annotations):  # the temporary names the export used to write
        (raw / f".{name}.{os.getpid()}.partial").symlink_to(outside / name)
    export_release(store, raw)
    assert sorted(outside.iterdir()) == [] and (raw / annotations).is_file() and not (raw / annotations).is_symlink()
    assert len(read_release(raw).ratings) == 1
    (raw / annotations).unlink()
    (raw / annotations).symlink_to(outside / "planted")  # a link at the target itself is refused by name
    with pytest.raises(ValueError, match=f"{annotations} is a symbolic link"):
        export_release(store, raw)
    assert main(["annotate", "export", str(tmp_path / "c.sqlite"), str(raw)]) == 2
    assert "is a symbolic link" in capsys.readouterr().err and not (outside / "planted").exists()
    space = tmp_path / "space-export"  # the Space's folder for its CommitScheduler: the same writers
    space.mkdir()
    (space / "ratings.csv").symlink_to(outside / "ratings.csv")
    with pytest.raises(ValueError, match="ratings.csv is a symbolic link"):
        write_campaign_files(store, space)
    assert sorted(outside.iterdir()) == []
    backup = tmp_path / "backup.sqlite"  # the campaign's backup: the same way
    backup.symlink_to(outside / "db")
    with pytest.raises(FileExistsError):
        store.backup(backup, overwrite=True)
    assert not (outside / "db").exists()


def test_item13_the_annotation_export_quotes_cells_and_the_release_reads_them_back(tmp_path):
    from tangpoetrybench.annotation.export import export_release, write_campaign_files

    generators = {"=2+5": {"display": "formula"}}
    raw = write_release(tmp_path / "raw", [], generators=generators, images=["=2+5/p1"])
    store = campaign_with_one_rating(raw, tmp_path / "c.sqlite")
    path, mine, _ = export_release(store, raw)
    [header, line] = path.read_text(encoding="utf-8").splitlines()
    assert line.split(",")[3] == "'=2+5" and not any(cell.startswith(("=", "+", "-", "@")) for cell in line.split(","))
    assert [r.generator for r in read_release(raw).ratings] == ["=2+5"]
    [space_ratings, _] = write_campaign_files(store, tmp_path / "space")
    assert space_ratings.read_text(encoding="utf-8").splitlines()[1].split(",")[3] == "'=2+5"


# 6. Symbolic links inside images/ pulled files from outside the release into the Parquet.

def test_item6_links_that_leave_the_release_are_refused_by_name(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD)
    secret = tmp_path / "secret"
    secret.mkdir()
    Image.new("RGB", (8, 8), "red").save(secret / "p1.png")
    (raw / "images" / "g1" / "p3.png").unlink()
    (raw / "images" / "g1" / "p3.png").symlink_to(secret / "p1.png")  # one image
    shutil.rmtree(raw / "images" / "gx")
    (raw / "images" / "gx").symlink_to(secret, target_is_directory=True)  # a whole generator folder
    (raw / "images" / "g2" / "p4.png").unlink()
    (raw / "images" / "g2" / "p4.png").symlink_to(raw / "images" / "g2" / "p3.png")  # inside: fine
    with pytest.raises(DataError) as err:
        read_release(raw)
    refused = {p.file for p in err.value.problems if "outside the release" in p.message}
    assert refused == {"images/g1/p3.png", "images/gx"}
    assert main(["build", str(raw), str(tmp_path / "out"), "--quiet"]) == 2
    assert "images/gx: a symbolic link to" in capsys.readouterr().err and not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", ["poems.jsonl", "ratings.csv", "release.json", "text_labels.csv"])
def test_item6_links_at_the_top_of_the_release_that_leave_it_are_refused(tmp_path, capsys, name):
    """poems.jsonl, ratings.csv, release.json and text_labels.csv linked to a file outside the release were read and
    published as the release's own."""
    raw = write_release(tmp_path / "raw", GOOD, labels=["g1,p1,0,none"])
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    shutil.move(raw / name, outside / name)
    (raw / name).symlink_to(outside / name)
    with pytest.raises(DataError) as err:
        read_release(raw)
    assert [(p.file, "outside the release" in p.message) for p in err.value.problems] == [(name, True)]
    assert main(["build", str(raw), str(tmp_path / "out"), "--quiet"]) == 2
    assert f"{name}: a symbolic link to" in capsys.readouterr().err and not (tmp_path / "out").exists()
    inside = raw / "kept"
    inside.mkdir()
    (raw / name).unlink()
    shutil.move(outside / name, inside / name)
    (raw / name).symlink_to(inside / name)  # a link that stays inside the release is fine
    assert read_release(raw).ratings


def test_item6_the_campaigns_candidates_file_may_not_link_out_of_the_release(tmp_path):
    from tangpoetrybench.annotation.campaign import load_campaign
    from tangpoetrybench.dataset.distractors import choose_distractors, write_candidates
    from tangpoetrybench.poems import read_poems

    raw = write_release(tmp_path / "raw", [])
    poems = read_poems(raw / "poems.jsonl")
    write_candidates(choose_distractors(poems), poems, tmp_path / "candidates.jsonl", {"similarity": "test"})
    (raw / "candidates.jsonl").symlink_to(tmp_path / "candidates.jsonl")
    with pytest.raises(DataError, match="candidates.jsonl: a symbolic link to .*outside the release"):
        load_campaign(raw)
    assert load_campaign(raw, candidates=tmp_path / "candidates.jsonl").candidates  # named on purpose: read


def test_item6_tpb_score_refuses_links_that_leave_the_images_folder(demo_raw, tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    shutil.copy(demo_raw / "images/painter_a/tang300-013.png", folder / "tang300-013.png")
    (folder / "tang300-068.png").symlink_to(demo_raw / "images/painter_b/tang300-068.png")
    (folder / "gen").symlink_to(demo_raw / "images/painter_c", target_is_directory=True)
    with pytest.raises(DataError) as err:
        FolderSource(folder, demo_raw / "poems.jsonl")
    assert sorted(p.file for p in err.value.problems) == ["gen", "tang300-068.png"]
    assert all("outside" in p.message for p in err.value.problems)


# 7. `tpb score` had no pixel limit before decoding; compare, the Space and the reward neither, through one function.

def test_item7_images_are_refused_from_their_header_before_decoding(tmp_path):
    from tangpoetrybench.errors import ImageError, ImageTooLarge
    from tangpoetrybench.files import open_image

    path = bomb(tmp_path / "bomb.png")
    with pytest.raises(ImageTooLarge, match="8000x8000 pixels is over the limit of 50,000,000"):
        open_image(path)
    # Decoding this one would fail (its data is cut off): refused as too large, it was never decoded.
    cut = tmp_path / "cut.png"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ImageTooLarge):
        open_image(cut)
    with pytest.raises(ImageError, match="unreadable image"):
        open_image(cut, max_pixels=10**9)
    assert open_image(path, max_pixels=64_000_000).size == (8000, 8000)  # the limit is a setting


def test_item7_scoring_records_an_image_over_the_limit_as_an_input_failure(tiny_models, demo_raw, tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    shutil.copy(demo_raw / "images/painter_a/tang300-013.png", folder / "tang300-013.png")
    bomb(folder / "tang300-068.png")
    [bad] = [it.load() for it in FolderSource(folder, demo_raw / "poems.jsonl") if "068" in it.image_id]
    assert bad.image is None and "over the limit of 50,000,000" in bad.error
    out = tmp_path / "s.jsonl"
    assert main(["score", "--images", str(folder), "--poems", str(demo_raw / "poems.jsonl"), "--evaluator",
                 "clipscore", "--model", str(tiny_models["clip"]), "--max-image-pixels", "1000000", "--out", str(out),
                 "--quiet"]) == 0
    good, refused = map(json.loads, out.read_text(encoding="utf-8").splitlines())
    assert good["parse_status"] == "ok" and refused["error_kind"] == "input"
    assert "over the limit of 1,000,000 pixels" in refused["error"]


def test_item7_compare_and_the_reward_check_the_same_limit(demo_built, tmp_path):
    pairs, load = dataset_pairs(demo_built, "images", "test", max_image_pixels=100)
    with pytest.raises(ValueError, match="over the limit of 100 pixels"):
        load(pairs[0].x)
    path = bomb(tmp_path / "bomb.png")
    with pytest.raises(ValueError, match="image 1: 8000x8000 pixels"):
        as_images([Image.new("RGB", (8, 8)), str(path)])
    with pytest.raises(ValueError, match="image 0: 8x8 pixels is over the limit of 10 "):
        as_images([Image.new("RGB", (8, 8))], max_pixels=10)


def test_item7_the_python_api_and_the_rating_app_check_the_same_limit(tmp_path):
    """`Evaluator.__call__` (the one-call Python API) and the rating app's image decoded images with no pixel check:
    both now go through `files.open_image`, the API recording an input failure as `tpb score` does."""
    from dataclasses import replace

    from tangpoetrybench.annotation.protocol import Protocol
    from tangpoetrybench.errors import ImageTooLarge
    from tangpoetrybench.judging.evaluators import load_evaluator

    judge = load_evaluator("api", model="pae", base_url="http://127.0.0.1:9/v1", retries=0)  # never reached
    poem = {"title": "静夜思", "author": "李白", "text": "床前明月光"}
    [refused] = judge([Image.open(bomb(tmp_path / "bomb.png"))], [poem])
    assert refused.error_kind == "input" and "8000x8000 pixels is over the limit of 50,000,000" in refused.error
    [small] = judge([Image.new("RGB", (64, 64))], [poem], max_image_pixels=100)
    assert small.error_kind == "input" and "over the limit of 100 pixels" in small.error

    raw = write_release(tmp_path / "raw", [])
    store = campaign_with_one_rating(raw, tmp_path / "c.sqlite")  # one image rated; the next one is opened below
    from tangpoetrybench.annotation.campaign import load_campaign

    campaign = replace(load_campaign(raw), max_image_pixels=64 * 64 - 1)
    token = store.invite("bo", "crowd", "en", 0.0)
    with pytest.raises(ImageTooLarge, match="64x64 pixels is over the limit of 4,095 pixels"):
        Protocol(campaign, store).open(token)


# 8. Eval Results could be written one level above --eval-results DIR.

def test_item8_eval_results_refuse_a_generator_name_that_leaves_the_folder(demo_built, files, tmp_path,  # noqa: F811
                                                                          capsys):
    rated, _ = files
    records = [json.loads(line) for line in rated.read_text(encoding="utf-8").splitlines()]
    evil = write(tmp_path / "evil.jsonl", [record("../" + r["image_id"].split("/", 1)[1], r["scores"])
                                           for r in records if r["image_id"].startswith("painter_a/")])
    results = tmp_path / "results"
    assert main(["leaderboard", "--dataset", str(demo_built), "--scores", str(rated), str(evil), "--out",
                 str(tmp_path / "board"), "--bootstrap", "0", "--eval-results", str(results)]) == 2
    assert "a generator (from the scores files' image ids) '..': use letters" in capsys.readouterr().err
    assert not (tmp_path / ".eval_results").exists() and not results.exists()


# 11. A dataset row with no bytes and an absolute path made `tpb score` open any local file.

def planted_rows(demo_built, tmp_path, paths: list[str]):
    """A copy of the built dataset whose first test images have no bytes, only the `paths` given."""
    copy = tmp_path / "ds"
    shutil.copytree(demo_built, copy)
    [parquet] = sorted((copy / "data" / "images").glob("test-*.parquet"))
    table = pq.read_table(parquet)
    rows = table.to_pylist()
    for row, path in zip(rows, paths):
        row["image"] = {"bytes": None, "path": path}
    pq.write_table(table.from_pylist(rows, schema=table.schema), parquet)
    return copy, [r["image_id"] for r in rows[:len(paths)]]


def test_item11_a_dataset_image_path_must_stay_inside_the_dataset(demo_built, tmp_path):
    outside = tmp_path / "private.png"
    Image.new("RGB", (16, 16), "green").save(outside)
    copy, planted = planted_rows(demo_built, tmp_path, [str(outside), "../private.png", "images/inside.png"])
    (copy / "images").mkdir()
    Image.new("RGB", (16, 16), "blue").save(copy / "images" / "inside.png")
    items = {it.image_id: it.load() for it in DatasetSource(copy, "images", "test")}
    for image_id in planted[:2]:
        assert items[image_id].image is None and "outside" in items[image_id].error, items[image_id].error
    assert items[planted[2]].image.size == (16, 16)  # a path inside the dataset's folder is read
    pairs, load = dataset_pairs(copy, "images", "test", selected=[(planted[0], planted[2])])
    with pytest.raises(ValueError, match="outside"):
        load(planted[0])
    assert load(planted[2]).size == (16, 16)


# 13. Spreadsheet formula injection: a generator named `=2+5` went verbatim into text_labels.draft.csv.

def test_item13_csv_cells_a_spreadsheet_would_run_are_quoted_and_read_back(tmp_path):
    generators = {"=2+5": {"display": "formula"}, "g2": {"display": "G2"}}
    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "=2+5", "p1")], generators=generators,
                        images=["=2+5/p1", "g2/p1"])
    ocr = write_jsonl(tmp_path / "ocr.jsonl", ocr_records(read_release(raw), issue="leakage"))
    draft = draft_text_labels(raw, ocr).draft
    lines = draft.read_text(encoding="utf-8").splitlines()
    assert lines[1] == "'=2+5,p1,1,leakage" and not any(line.startswith(("=", "+", "-", "@")) for line in lines)
    draft.rename(raw / "text_labels.csv")  # adjudicated as is: the release reads the generator's own name back
    assert read_release(raw).text_labels["=2+5/p1"].generator == "=2+5"
    from tangpoetrybench.files import quote_cell, unquote_cell, write_csv

    cells = ["=HYPERLINK(1)", "+1+1", "-2+3", "@SUM(A1)", "\tx", "-0.5", "+3", "plain", 7]
    assert [quote_cell(c) for c in cells] == ["'=HYPERLINK(1)", "'+1+1", "'-2+3", "'@SUM(A1)", "'\tx", "-0.5", "+3",
                                              "plain", 7]
    assert [unquote_cell(quote_cell(c)) for c in cells[:-1]] == cells[:-1]
    write_csv(tmp_path / "x.csv", ["a"], [{"a": "=1"}])
    assert (tmp_path / "x.csv").read_text(encoding="utf-8") == "a\n'=1\n"


# 14. The id patterns let a final newline through (`$` matches before it).

def test_item14_ids_with_a_trailing_newline_are_refused(tmp_path, tiny_models):
    from tangpoetrybench.generation.diffusers_generate import generate_images

    path = write_jsonl(tmp_path / "poems.jsonl", [{**POEMS[0], "poem_id": "tang300-999\n"}])
    _, problems = parse_poems(path)
    assert [(p.line, p.field) for p in problems] == [(1, "poem_id")]
    good = write_jsonl(tmp_path / "good.jsonl", POEMS[:1])
    with pytest.raises(ValueError, match="--generator 'tiny\\\\n': use letters"):
        generate_images(str(tiny_models["text-to-image"]), good, tmp_path / "out", "tiny\n", progress=False)
    assert not (tmp_path / "out").exists()
    from tangpoetrybench.poems import check_generator, is_name

    assert is_name("tang300-999") and not is_name("tang300-999\n") and not is_name("..")
    with pytest.raises(ValueError, match="a scores file's generator '..': use letters"):
        check_generator("..", "a scores file's generator")


def test_no_code_from_outside_runs(tiny_models, tmp_path):
    """No `trust_remote_code` anywhere in the package, and an adapter with pickled weights only is refused before
    anything is loaded from it."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    from tangpoetrybench.judging.evaluators import load_evaluator

    package = Path(__file__).resolve().parents[1] / "tangpoetrybench"
    enabled = re.compile(r"trust_remote_code\s*=\s*" + "True")  # split, so this file does not match itself
    assert not [p for p in package.rglob("*.py") if enabled.search(p.read_text(encoding="utf-8"))]
    torch.manual_seed(0)
    lora = get_peft_model(AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"]),
                          LoraConfig(r=2, target_modules=["q_proj"], exclude_modules=r".*\.visual\..*"))
    lora.save_pretrained(tmp_path / "pickled", safe_serialization=False)
    assert (tmp_path / "pickled" / "adapter_model.bin").is_file()
    with pytest.raises(ValueError, match="holds pickled weights only .adapter_model.bin., which are never loaded"):
        load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(tmp_path / "pickled"))


# --- issue 45: the new surfaces ---------------------------------------------------------------------------------------

def test_ray_addresses_obey_the_offline_policy_of_base_urls(tmp_path, monkeypatch, capsys):
    """`tpb score --engine ray --address` with HF_HUB_OFFLINE=1: a public address (host:port, ray://, or what
    RAY_ADDRESS names for `auto`) is refused before Ray starts, by the one policy a served judge's --base-url obeys
    (`files.check_offline`, the same message); a loopback or private cluster, `local` and none pass; online, any
    address. Before the fix the run went to any address. Nothing here connects anywhere."""
    from huggingface_hub import constants

    from tangpoetrybench.judging.backends.served import ServedBackend
    from tangpoetrybench.judging.ray_scoring import RayEngine

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    for address in ("8.8.8.8:6379", "ray://8.8.8.8:10001", "[2001:4860:4860::8888]:6379"):
        with pytest.raises(ValueError, match=f"HF_HUB_OFFLINE is set and {re.escape(address)} is not a loopback or "
                                             "private address: score on a Ray cluster of this machine or network"):
            RayEngine(address=address)
    monkeypatch.setenv("RAY_ADDRESS", "8.8.8.8:6379")
    with pytest.raises(ValueError, match="8.8.8.8:6379 is not a loopback or private address"):
        RayEngine(address="auto")
    monkeypatch.delenv("RAY_ADDRESS")
    for address in (None, "local", "auto", "127.0.0.1:6379", "ray://10.1.2.3:10001", "192.168.0.7:6379"):
        assert RayEngine(address=address).address == address  # constructed: nothing is started
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set and https://8.8.8.8/v1 is not a loopback or private "
                                         "address: judge with"):
        ServedBackend("pae", base_url="https://8.8.8.8/v1")  # the same policy, the same words
    (tmp_path / "images").mkdir()
    Image.new("RGB", (32, 32), "white").save(tmp_path / "images" / "p1.png")
    (tmp_path / "poems.jsonl").write_text(json.dumps(POEMS[0], ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["score", "--engine", "ray", "--address", "8.8.8.8:6379", "--images", str(tmp_path / "images"),
                 "--poems", str(tmp_path / "poems.jsonl"), "--evaluator", "clipscore", "--out",
                 str(tmp_path / "out.jsonl"), "--quiet"]) == 2
    assert "8.8.8.8:6379 is not a loopback or private address" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl").exists()
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert RayEngine(address="8.8.8.8:6379").address == "8.8.8.8:6379"  # online: asked for, allowed
