"""Bad raw releases: every problem is reported with file, line and field, the CLI exits non-zero, and
nothing is written. A BOM or CRLF line ends are accepted."""

import json

import pytest
from PIL import Image

from conftest import HEADER, rating, write_release
from tangpoetrybench.cli import main
from tangpoetrybench.errors import DataError
from tangpoetrybench.dataset.raw_release import read_release

GOOD = [rating("r1", "u1", "g1", "p1"), rating("r2", "u2", "g2", "p2", "abbaeaabdb", choice="p3")]


def problems_of(raw, **kwargs):
    with pytest.raises(DataError) as err:
        read_release(raw, **kwargs)
    return err.value.problems


def assert_refused(raw, tmp_path, capsys, *needles):
    """The CLI refuses the release with an error naming each needle, and leaves no output behind."""
    out = tmp_path / "out"
    assert main(["build", str(raw), str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    for needle in needles:
        assert needle in err, err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]


def test_good_release_reads(tmp_path):
    release = read_release(write_release(tmp_path / "raw", GOOD))
    assert len(release.ratings) == 2 and len(release.images) == 13
    assert release.generators["gx"].unseen and not release.generators["g1"].unseen


def test_truncated_image(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD)
    path = raw / "images/g1/p3.png"
    Image.effect_noise((256, 256), 64).convert("RGB").save(path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    assert_refused(raw, tmp_path, capsys, "images/g1/p3.png: unreadable image")


def test_not_an_image(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD)
    (raw / "images/g1/p3.png").write_text("hello")
    (raw / "images/g1/notes.txt").write_text("hello")
    assert_refused(raw, tmp_path, capsys, "images/g1/p3.png: unreadable image", "images/g1/notes.txt: not an image file")


@pytest.mark.parametrize("size,needle", [((8000, 8000), "over the limit"), ((20000, 10000), "decompression bomb")])
def test_decompression_bomb(tmp_path, capsys, size, needle):
    raw = write_release(tmp_path / "raw", GOOD)
    Image.new("1", size).save(raw / "images/g1/p3.png")  # a few KB on disk, tens of millions of pixels
    assert (raw / "images/g1/p3.png").stat().st_size < 100_000
    assert_refused(raw, tmp_path, capsys, "images/g1/p3.png", needle)


def test_pixel_limit_is_a_parameter(tmp_path):
    raw = write_release(tmp_path / "raw", GOOD)
    (problem,) = problems_of(raw, max_image_pixels=1000)[:1]
    assert "over the limit of 1,000" in problem.message


def test_unknown_option_letter(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD + [rating("r3", "u3", "g1", "p2", "aaaaazaaaa")])
    (p,) = problems_of(raw)
    assert (p.file, p.line, p.field) == ("ratings.csv", 4, "cultural_coherence")
    assert_refused(raw, tmp_path, capsys, "ratings.csv:4: cultural_coherence: unknown option 'z'")


def test_unknown_generator(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD + [rating("r3", "u3", "g9", "p2")])
    (raw / "images/g7").mkdir()
    Image.new("RGB", (8, 8)).save(raw / "images/g7/p1.png")
    assert_refused(raw, tmp_path, capsys, "ratings.csv:4: generator: unknown generator 'g9'",
                   "images/g7: unknown generator 'g7'")


def test_rated_image_without_file(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD)
    (raw / "images/g2/p2.png").unlink()
    assert_refused(raw, tmp_path, capsys, "ratings.csv:3: poem_id: no image file for 'g2/p2'")


def test_poem_without_text(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD)
    lines = (raw / "poems.jsonl").read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[2])
    row["text"] = "  "
    lines[2] = json.dumps(row, ensure_ascii=False)
    (raw / "poems.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_refused(raw, tmp_path, capsys, "poems.jsonl:3: text: required")


def test_bom_and_crlf_are_accepted(tmp_path):
    raw = write_release(tmp_path / "raw", GOOD, labels=["g1,p1,0,none"])
    for name in ("ratings.csv", "text_labels.csv", "poems.jsonl"):
        text = (raw / name).read_text(encoding="utf-8")
        (raw / name).write_bytes("\ufeff".encode() + text.replace("\n", "\r\n").encode())
    release = read_release(raw)
    assert [r.rating_id for r in release.ratings] == ["r1", "r2"]
    assert release.ratings[0].answers["overall_impression"] == "a" and release.text_labels["g1/p1"].text_issue == 0
    assert release.poems["p1"].text == "床前明月光，疑是地上霜。\n举头望明月，低头思故乡。"


@pytest.mark.parametrize("content,needle", [(HEADER + "\n", "no ratings"), ("", "empty file")])
def test_empty_ratings(tmp_path, capsys, content, needle):
    raw = write_release(tmp_path / "raw", GOOD)
    (raw / "ratings.csv").write_text(content)
    assert_refused(raw, tmp_path, capsys, f"ratings.csv: {needle}")


def test_many_problems_are_reported_together(tmp_path):
    raw = write_release(tmp_path / "raw", GOOD + [
        rating("r1", "u3", "g1", "p3"),                                   # duplicate rating_id
        rating("r4", "u3", "g1", "p4", choice="s1"),                      # choice not among candidates
        rating("r5", "u3", "g1", "p2", candidates="p2|p3|p4|s1"),         # fine
        rating("r6", "u3", "g1", "p1", candidates="p2|p3|p4|s1", choice="p2"),  # own poem not a candidate
        rating("r7", "u3", "g1", "p1", group="student"),
        rating("r8", "u3", "g1", "p1", seconds=-3),
        rating("r9", "u3", "g1", "p1", candidates="p1|p2|p3"),
        rating("r10", "", "g1", "p1"),
    ], labels=["g1,p1,2,none", "g1,p2,1,none", "g1,p3,0,smudge", "g1,p1,0,none", "g9,p1,0,none"])
    found = {(p.file, p.line, p.field) for p in problems_of(raw)}
    assert found == {
        ("ratings.csv", 4, "rating_id"), ("ratings.csv", 5, "phase1_choice"), ("ratings.csv", 7, "phase1_candidates"),
        ("ratings.csv", 8, "rater_group"), ("ratings.csv", 9, "seconds"), ("ratings.csv", 10, "phase1_candidates"),
        ("ratings.csv", 11, "rater_id"),
        ("text_labels.csv", 2, "text_issue"), ("text_labels.csv", 3, "issue_type"), ("text_labels.csv", 4, "issue_type"),
        ("text_labels.csv", 6, "generator"),
    }


def test_relabelled_image_is_a_duplicate(tmp_path):
    raw = write_release(tmp_path / "raw", GOOD, labels=["g1,p1,0,none", "g1,p1,1,leakage"])
    (p,) = problems_of(raw)
    assert (p.file, p.line) == ("text_labels.csv", 3) and "already labelled on line 2" in p.message


def test_poem_in_two_splits(tmp_path, capsys):
    poems = [dict(p, split="train") for p in
             [{"poem_id": "p1", "title": "t", "author": "a", "text": "x", "tradition": "tang"}]]
    poems.append(dict(poems[0], split="test"))
    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "g1", "p1", candidates="", choice="")], poems=poems,
                        images=["g1/p1"])
    assert_refused(raw, tmp_path, capsys, "poems.jsonl:2: poem_id: poem 'p1' already on line 1 (a poem in two splits)")


def test_bad_header_and_missing_files(tmp_path):
    raw = write_release(tmp_path / "raw", GOOD)
    text = (raw / "ratings.csv").read_text().replace("seconds,", "secs,", 1)
    (raw / "ratings.csv").write_text(text)
    (raw / "poems.jsonl").unlink()
    messages = [str(p) for p in problems_of(raw)]
    assert "ratings.csv:1: header: missing seconds; unknown secs" in messages
    assert "poems.jsonl: missing" in messages


def test_image_of_unknown_poem_and_wrong_field(tmp_path):
    raw = write_release(tmp_path / "raw", GOOD)
    Image.new("RGB", (8, 8)).save(raw / "images/g1/p99.png")
    with open(raw / "poems.jsonl", "a", encoding="utf-8") as f:
        f.write('{"poem_id": "p5", "title": "t", "author": "a", "text": "x", "tradition": "yuan", "colour": 1}\n')
    messages = {str(p) for p in problems_of(raw)}
    assert messages == {"images/g1/p99.png: no poem 'p99' in poems.jsonl",
                        "poems.jsonl:6: colour: unknown field",
                        "poems.jsonl:6: tradition: 'yuan' is not one of tang, song_ci (a tradition that is not bundled "
                        "brings its rubric: rubrics/yuan.yaml)"}


def test_existing_output_is_not_replaced_without_overwrite(tmp_path, capsys):
    raw = write_release(tmp_path / "raw", GOOD)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["build", str(raw), str(out), "--quiet"]) == 2
    assert "exists" in capsys.readouterr().err and (out / "keep.txt").read_text() == "mine"
    assert main(["build", str(raw), str(out), "--quiet", "--overwrite"]) == 0
    assert not (out / "keep.txt").exists() and (out / "README.md").is_file()
