"""Build -> load_dataset round trips, the split by poem, determinism, atomic writing, the card."""

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import yaml
from PIL import Image

from conftest import SHARED, load, rating, write_release
from tangpoetrybench.dataset.builder import build_dataset
from tangpoetrybench.dataset.synthetic import write_demo_release
from tangpoetrybench.files import atomic_folder
from tangpoetrybench.poems import convert_chinese_poetry, read_poems, sample_poems, strip_variant_notes

ROOT = Path(__file__).resolve().parents[1]
from tangpoetrybench.dataset.splits import default_splits

CONFIGS = {"images": ("train", "validation", "test"), "ratings": ("train", "validation", "test"),
           "poems": ("train", "validation", "test"), "song_ci": ("test",), "unseen_generator": ("test",)}


def tree_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_every_config_loads_offline_with_images(demo_built, tmp_path):
    for config, splits in CONFIGS.items():
        ds = load(demo_built, config, tmp_path / "cache")
        assert tuple(ds) == splits, config
        for split in splits:
            assert len(ds[split]) > 0
        if config in ("images", "song_ci", "unseen_generator"):
            row = ds[splits[0]][0]
            assert isinstance(row["image"], Image.Image) and row["image"].size == (512, 512)
            assert isinstance(ds[splits[0]].features["image"], datasets.Image)
    default = datasets.load_dataset(str(demo_built), cache_dir=str(tmp_path / "cache"))
    assert set(default) == {"train", "validation", "test"} and "image" in default["train"].features


def test_rows_match_the_aggregation(demo_raw, demo_built, tmp_path):
    from tangpoetrybench.dataset.aggregate import aggregate
    from tangpoetrybench.dataset.qc import run_qc
    from tangpoetrybench.dataset.raw_release import read_release

    release = read_release(demo_raw)
    scores = aggregate(release, run_qc(release).kept)
    images = load(demo_built, "images", tmp_path / "cache")
    unseen = load(demo_built, "unseen_generator", tmp_path / "cache")["test"]
    song = load(demo_built, "song_ci", tmp_path / "cache")["test"]
    n = 0
    for part in [images[s] for s in images] + [unseen, song]:
        for row in part.remove_columns("image"):
            s = scores[row["image_id"]]
            assert row["quality"] == s.quality and row["n_ratings"] == s.n_ratings
            assert all(row[k] == v for k, v in s.scores.items())
            n += 1
    assert n == len(release.images)
    assert set(unseen["generator"]) == {"painter_e"} and set(song["tradition"]) == {"song_ci"}
    ratings = load(demo_built, "ratings", tmp_path / "cache")
    assert sum(len(ratings[s]) for s in ratings) == len(run_qc(release).kept)
    r = ratings["train"][0]
    assert r["overall_impression"] == release.rubric(r["poem_id"]).score("overall_impression", r["overall_impression_option"])


def test_split_by_poem(demo_built, tmp_path):
    poems_by_split = {}
    for config in ("images", "ratings", "poems"):
        ds = load(demo_built, config, tmp_path / "cache")
        ids = {s: set(ds[s]["poem_id"]) for s in ds}
        assert not ids["train"] & ids["test"] and not ids["train"] & ids["validation"] and not ids["validation"] & ids["test"]
        poems_by_split[config] = ids
    tang = {s: {p for p in ids if p.startswith("tang")} for s, ids in poems_by_split["poems"].items()}
    assert {s: set(ids) for s, ids in poems_by_split["images"].items()} == tang


def test_default_split_shares():
    ids = [f"tang300-{i:03d}" for i in range(1, 321)]
    splits = default_splits(ids)
    assert [sum(v == s for v in splits.values()) for s in ("test", "validation", "train")] == [64, 32, 224]
    assert splits == default_splits(list(reversed(ids)))  # order of input does not matter
    assert splits != default_splits(ids, seed=1)


def test_given_splits_are_kept(tmp_path):
    poems = [{"poem_id": f"p{i}", "title": "t", "author": "a", "text": "x", "tradition": "tang",
              "split": "train" if i < 3 else "test"} for i in range(1, 5)]
    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "g1", "p1")], poems=poems,
                        images=["g1/p1", "g1/p2", "g1/p3", "g1/p4"])
    out = build_dataset(raw, tmp_path / "ds", progress=False)
    assert out.rows["images"] == {"train": 2, "test": 2}


def test_demo_release_is_deterministic(demo_raw, tmp_path):
    """The same seed gives the same bytes, in this process and in two others with other string-hash seeds (the
    order of a set of strings changes between processes)."""
    again = write_demo_release(tmp_path / "again", sample_poems(), seed=0, progress=False)
    assert tree_digest(again) == tree_digest(demo_raw)
    for hash_seed in ("1", "2"):
        subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "demo-release", str(tmp_path / hash_seed),
                        "--quiet"], check=True, env={**os.environ, "PYTHONHASHSEED": hash_seed})
        assert tree_digest(tmp_path / hash_seed) == tree_digest(demo_raw)
    other = write_demo_release(tmp_path / "other", sample_poems(), n_poems=6, seed=1, progress=False)
    assert (other / "ratings.csv").read_bytes() != (demo_raw / "ratings.csv").read_bytes()
    assert json.loads((other / "release.json").read_text())["synthetic"] is True


def test_build_is_deterministic(demo_raw, demo_built, tmp_path):
    again = build_dataset(demo_raw, tmp_path / "ds", progress=False).out
    assert tree_digest(again) == tree_digest(demo_built)


def test_rebuild_in_place_is_never_served_from_cache(tmp_path):
    """datasets caches local folders by name and card: the content fingerprint in the card keeps builds apart."""
    cache = tmp_path / "cache"
    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "g1", "p1", "aaaaaaaaaa")])
    build_dataset(raw, tmp_path / "ds", progress=False)
    first = load(tmp_path / "ds", "ratings", cache)
    assert first["test" if "test" in first else "train"][0]["overall_impression"] == 1.0
    raw = write_release(tmp_path / "raw", [rating("r1", "u1", "g1", "p1", "aaaaaaaaae")])
    build_dataset(raw, tmp_path / "ds", overwrite=True, progress=False)
    second = load(tmp_path / "ds", "ratings", cache)
    assert second["test" if "test" in second else "train"][0]["overall_impression"] == 0.0


def test_failed_write_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with atomic_folder(tmp_path / "out") as tmp:
            (tmp / "half.parquet").write_text("x")
            raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []


def test_card_metadata(demo_built):
    text = (demo_built / "README.md").read_text(encoding="utf-8")
    meta = yaml.safe_load(text.split("---")[1])
    assert [c["config_name"] for c in meta["configs"]] == list(CONFIGS)
    assert meta["configs"][0]["default"] is True
    assert meta["license"] == "mit" and meta["language"] == ["zh", "en"] and meta["size_categories"] == "n<1K"
    assert "text-to-image" in meta["task_categories"] and "synthetic" in meta["tags"]
    assert re.fullmatch(r"Tang poems, seen generators \(build [0-9a-f]{16}\)", meta["configs"][0]["description"])
    info = {i["config_name"]: i for i in meta["dataset_info"]}
    assert info["images"]["features"][0] == {"name": "image", "dtype": "image"}
    assert "**Synthetic data.**" in text and "@article{hu2026tangpoetrybench" in text
    assert "| Synthetic painter A (`painter_a`) | 10 | 1 | 3 | 14 |" in text
    assert "kept" in text and "qc_report.json" in text


def test_main_job_commands(tmp_path):
    """The README's main job, through the installed console script."""
    tpb = [sys.executable, "-m", "tangpoetrybench.cli"]
    raw, ds = tmp_path / "sample" / "raw", tmp_path / "sample" / "dataset"
    subprocess.run(tpb + ["demo-release", str(raw), "--quiet"], check=True)
    done = subprocess.run(tpb + ["build", str(raw), str(ds), "--quiet"], check=True, capture_output=True, text=True)
    assert "images            train 40  validation 4  test 12" in done.stdout
    assert (ds / "README.md").is_file() and (ds / "qc_report.json").is_file()
    bad = subprocess.run(tpb + ["build", str(tmp_path / "nowhere"), str(tmp_path / "x")], capture_output=True, text=True)
    assert bad.returncode == 2 and "not a folder" in bad.stderr and not (tmp_path / "x").exists()


def test_bundled_poems():
    poems = sample_poems()
    titles = {p.title for p in poems}
    assert {"出塞·秦时明月汉时关", "登乐游原", "枫桥夜泊", "宿建德江", "月夜忆舍弟", "集灵台·其二", "卜算子·咏梅"} <= titles
    assert all("一作" not in p.text for p in poems)
    assert strip_variant_notes("戍鼓断人行，边秋一雁声。(边秋 一作:秋边)") == "戍鼓断人行，边秋一雁声。"


@pytest.mark.skipif(not (SHARED / "data" / "poems").is_dir(), reason="../shared/data/poems is absent")
def test_convert_the_shared_poems(tmp_path):
    from tangpoetrybench.cli import main

    out = tmp_path / "poems.jsonl"
    assert main(["convert-poems", str(SHARED / "data/poems/tang300.jsonl"),
                 str(SHARED / "data/poems/songci_busuanzi.jsonl"), str(out)]) == 0
    poems = read_poems(out)
    tang = [p for p in poems if p.tradition == "tang"]
    assert len(tang) == 320 and len(poems) == 320 + 243
    assert len({p.poem_id for p in poems}) == len(poems)
    assert all("一作" not in p.text for p in poems)
    by_id = {p.poem_id: p for p in poems}
    assert by_id["tang300-068"].title == "枫桥夜泊" and by_id["tang300-068"].text.startswith("月落乌啼霜满天")
    assert sample_poems()[2] == by_id["tang300-068"]
    assert convert_chinese_poetry(SHARED / "data/poems/tang300.jsonl")[0].poem_id == "tang300-001"


def test_demo_on_more_poems_than_given_fails_clearly(tmp_path):
    with pytest.raises(ValueError, match="has 16 poems"):
        write_demo_release(tmp_path / "x", sample_poems(), n_poems=17, progress=False)
    assert not (tmp_path / "x").exists()

