"""Raw release -> the published dataset (SPEC §5): Parquet shards with embedded images, a card, a QC report.

    OUT/
      README.md                  dataset card with the `configs:` block (load_dataset needs no script)
      qc_report.json
      data/<config>/<split>-00000-of-00001.parquet
      rubrics/<tradition>.yaml   the rubric of every tradition in it, as written: the dataset carries its rubric

`build_dataset` validates everything first, writes into a temporary sibling folder and renames it to OUT
only when every file is written, so a failed build leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import datasets
from tqdm.auto import tqdm

from .aggregate import ImageScores, aggregate
from .dataset_card import render_card
from ..errors import DataError, Problem
from ..files import atomic_folder, ensure_free
from ..poems import Poem
from .features import POEM_FEATURES, image_features, rating_features
from .qc import QCConfig, QCResult, run_qc
from .raw_release import (DEFAULT_MAX_IMAGE_PIXELS, FIXED_CONFIGS, IMAGES_CONFIG, UNSEEN_CONFIG, Release,
                          main_tradition, read_release)
from .splits import default_splits

SPLIT_ORDER = ("train", "validation", "test")
MAX_SHARD_BYTES = 500 * 2**20
# Bytes of image files per Parquet row group: readers (streaming, the dataset viewer) take a group at a time, and
# 100 rows (datasets' default for images) of 1024² PNGs would be 130 MB.
ROW_GROUP_BYTES = 64 * 2**20


@dataclass
class BuildSummary:
    out: Path
    rows: dict[str, dict[str, int]]  # config -> split -> number of rows
    qc: dict
    fingerprint: str


def build_dataset(
    raw: Path | str,
    out: Path | str,
    qc: QCConfig | None = QCConfig(),
    overwrite: bool = False,
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
    progress: bool = True,
) -> BuildSummary:
    """Validate, QC (None: no QC), aggregate and write the dataset folder `out`."""
    out = Path(out)
    ensure_free(out, overwrite)
    release = read_release(raw, max_image_pixels=max_image_pixels)
    qc_result = run_qc(release, qc if qc is not None else QCConfig.off())
    scores = aggregate(release, qc_result.kept)
    tables = _tables(release, scores, qc_result)
    with atomic_folder(out) as tmp:
        files, sizes = _write_parquet(release, tables, tmp, progress)
        (tmp / "qc_report.json").write_text(
            json.dumps({"qc_enabled": qc is not None, **qc_result.report}, ensure_ascii=False, indent=1) + "\n",
            encoding="utf-8",
        )
        fingerprint = _fingerprint(tmp, files + ["qc_report.json"])
        _write_rubrics(release, tmp)
        rows = {cfg: {split: len(r) for split, r in by_split.items()} for cfg, by_split in tables.items()}
        downloads: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        for rel in files:  # data/<config>/<split>-NNNNN-of-NNNNN.parquet
            _, cfg, name = rel.split("/")
            downloads[cfg][name.split("-")[0]] += (tmp / rel).stat().st_size
        card = render_card(release, scores, qc_result.report, rows, sizes, tables, fingerprint, downloads)
        (tmp / "README.md").write_text(card, encoding="utf-8")
    return BuildSummary(out=out, rows=rows, qc=qc_result.report, fingerprint=fingerprint)


def configs(release: Release) -> tuple[str, ...]:
    """The configs a release builds into: the fixed ones, and a test-only config per tradition but the main one."""
    first, last = FIXED_CONFIGS[:-1], FIXED_CONFIGS[-1:]  # images, ratings, poems ... unseen_generator
    return first + tuple(t for t in release.rubrics if t != release.main_tradition) + last


def image_config(release: Release, generator: str, poem_id: str) -> str:
    """Which config an image belongs to: a tradition's own config for a tradition other than the main one (Song Ci),
    then unseen generators, else `images`."""
    tradition = release.poems[poem_id].tradition
    if tradition != release.main_tradition:
        return tradition
    if release.generators[generator].unseen:
        return UNSEEN_CONFIG
    return IMAGES_CONFIG


def poem_splits(poems: Mapping[str, Poem], main: str | None = None,
                names: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each poem's split (poems by id, a release's): as given in poems.jsonl, else the default split of the main
    tradition's poems (`main`; default: the tradition of most poems); the poems of every other tradition (Song Ci):
    test. `names`: each tradition's short name, for the message. `tpb generate --split` picks poems by the same
    rule."""
    main = main or main_tradition(poems.values())
    names = names or {}
    ours = [p.poem_id for p in poems.values() if p.tradition == main]
    given = all(p.split is not None for p in poems.values())
    splits = {pid: poems[pid].split for pid in ours} if given else default_splits(ours)
    others = [p for p in poems.values() if p.tradition != main]
    problems = [
        Problem("poems.jsonl", f"{names.get(p.tradition, p.tradition)} poems form the test-only config "
                f"{p.tradition}, got split {p.split!r}", field=f"{p.poem_id}.split")
        for p in others if p.split not in (None, "test")
    ]
    if problems:
        raise DataError(problems)
    return {**splits, **{p.poem_id: "test" for p in others}}


def _tables(release: Release, scores: dict[str, ImageScores], qc: QCResult) -> dict[str, dict[str, list[dict]]]:
    """Rows of every config and split, in a fixed order (poem, then generator)."""
    splits = poem_splits(release.poems, release.main_tradition,
                         {t: r.short_name for t, r in release.rubrics.items()})
    tables: dict[str, dict[str, list[dict]]] = {cfg: defaultdict(list) for cfg in configs(release)}
    placed: dict[str, tuple[str, str]] = {}
    columns = image_features(release.main_rubric)  # the rubric's roles decide which label columns there are
    for image_id in sorted(scores, key=lambda i: (scores[i].poem_id, scores[i].generator)):
        s = scores[image_id]
        poem = release.poems[s.poem_id]
        cfg = image_config(release, s.generator, s.poem_id)
        split = splits[s.poem_id] if cfg == "images" else "test"
        placed[image_id] = (cfg, split)
        path = release.images[image_id].path
        row = {
            "image": {"path": f"{s.generator}/{path.name}", "bytes": None, "_file": path},
            "image_id": image_id, "poem_id": s.poem_id, "generator": s.generator,
            "title": poem.title, "author": poem.author, "poem": poem.text, "tradition": poem.tradition,
            **s.scores,
            "quality": s.quality, "recognizability": s.recognizability, "text_issue": s.text_issue,
            "text_issue_type": s.text_issue_type, "text_label_source": s.text_label_source,
            "n_ratings": s.n_ratings, "multi_rated": s.multi_rated, "face_avoidance": s.face_avoidance,
        }
        tables[cfg][split].append({k: v for k, v in row.items() if k in columns})
    for r in sorted(qc.kept, key=lambda r: (r.poem_id, r.generator, r.rating_id)):
        rubric = release.rubric(r.poem_id)
        cfg, split = placed[r.image_id]
        tables["ratings"][split].append({
            "rating_id": r.rating_id, "rater_id": r.rater_id, "rater_group": r.rater_group,
            "image_id": r.image_id, "image_config": cfg, "generator": r.generator, "poem_id": r.poem_id,
            "seconds": r.seconds, "phase1_candidates": list(r.phase1_candidates),
            "phase1_choice": r.phase1_choice, "phase1_correct": r.phase1_correct,
            **{f"{k}_option": r.answers[k] for k in release.keys},
            **{k: rubric.score(k, r.answers[k]) for k in release.keys},
        })
    for pid in sorted(release.poems):
        p = release.poems[pid]
        tables["poems"][splits[pid]].append({
            "poem_id": p.poem_id, "title": p.title, "author": p.author, "text": p.text,
            "tradition": p.tradition, "form": p.form, "tune": p.tune,
        })
    return {cfg: {s: by_split[s] for s in SPLIT_ORDER if by_split.get(s)} for cfg, by_split in tables.items()
            if any(by_split.values())}


def _features(release: Release, config: str) -> datasets.Features:
    """Every tradition of a release rates the same dimensions: the main rubric's dimensions are the columns."""
    rubric = release.main_rubric
    if config == "ratings":
        return rating_features(rubric)
    if config == "poems":
        return POEM_FEATURES
    return image_features(rubric)


def _shards(rows: list[dict]) -> list[list[dict]]:
    """Cut image rows into shards of at most MAX_SHARD_BYTES of image files."""
    shards: list[list[dict]] = [[]]
    size = 0
    for row in rows:
        n = row["image"]["_file"].stat().st_size if "image" in row else 0
        if shards[-1] and size + n > MAX_SHARD_BYTES:
            shards.append([])
            size = 0
        shards[-1].append(row)
        size += n
    return shards


def _rows_per_group(rows: list[dict]) -> int | None:
    """Rows per Parquet row group so that a group holds at most ROW_GROUP_BYTES of images (None: no images)."""
    sizes = [row["image"]["_file"].stat().st_size for row in rows if "image" in row]
    return max(1, ROW_GROUP_BYTES // max(sizes)) if sizes else None


def _write_parquet(
    release: Release, tables: dict[str, dict[str, list[dict]]], folder: Path, progress: bool
) -> tuple[list[str], dict[str, dict[str, int]]]:
    """Write every config and split; returns the files written and each split's size in bytes (Arrow)."""
    files: list[str] = []
    sizes: dict[str, dict[str, int]] = defaultdict(dict)
    total = sum(len(rows) for cfg in tables.values() for rows in cfg.values())
    bars_were_on = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # one bar of our own instead of one per file
    try:
        with tqdm(total=total, desc="Writing Parquet", unit="row", disable=not progress) as bar:
            for cfg, by_split in tables.items():
                features = _features(release, cfg)
                for split, rows in by_split.items():
                    shards = _shards(rows)
                    sizes[cfg][split] = 0
                    for i, shard in enumerate(shards):
                        rel = f"data/{cfg}/{split}-{i:05d}-of-{len(shards):05d}.parquet"
                        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
                        columns = {name: [_embed(row[name]) if name == "image" else row[name] for row in shard]
                                   for name in features}
                        ds = datasets.Dataset.from_dict(columns, features=features)
                        ds.to_parquet(str(folder / rel), batch_size=_rows_per_group(shard))
                        sizes[cfg][split] += ds.data.nbytes
                        files.append(rel)
                        bar.update(len(shard))
    finally:
        if bars_were_on:
            datasets.enable_progress_bars()
    return files, dict(sizes)


def _write_rubrics(release: Release, folder: Path) -> None:
    """OUT/rubrics/<tradition>.yaml: each rubric as its file says it, so that a copy of the dataset, or one pulled from
    the Hub, scores and reports with the rubric it was rated on (`reading.dataset_rubrics`)."""
    (folder / "rubrics").mkdir()
    for tradition, rubric in release.rubrics.items():
        (folder / "rubrics" / f"{tradition}.yaml").write_text(rubric.yaml_text, encoding="utf-8")


def _embed(image: dict) -> dict:
    return {"path": image["path"], "bytes": image["_file"].read_bytes()}


def _fingerprint(folder: Path, files: list[str]) -> str:
    """A content hash of the written files; in the card so `load_dataset`'s cache never serves an older build."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode())
        file_digest = hashlib.sha256()  # hashlib.file_digest is Python 3.11+; Spaces default to 3.10
        with open(folder / rel, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                file_digest.update(block)
        digest.update(file_digest.digest())
    return digest.hexdigest()[:16]
