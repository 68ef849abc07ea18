"""The dataset card (`README.md` of a built dataset): YAML metadata that `load_dataset` reads, and a
description generated from the data, filled into `templates/dataset_card.md`."""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING

from huggingface_hub import DatasetCard, DatasetCardData

from .. import __version__
from ..numeric import counted
from ..rubric import is_bundled
from .aggregate import ImageScores
from .features import POEM_FEATURES, image_features, rating_features
from .raw_release import IMAGES_CONFIG, POEMS_CONFIG, RATINGS_CONFIG, UNSEEN_CONFIG

if TYPE_CHECKING:
    from .raw_release import Release

CITATION = """@article{hu2026tangpoetrybench,
  title   = {TangPoetryBench: A Multi-Dimensional Benchmark and Rubric-Conditioned Evaluator
             for Poetry-to-Image Generation},
  author  = {Hu, Haoqi and Luo, Tongji and Zhang, Li and Zhou, Boning},
  journal = {arXiv preprint arXiv:2608.11452},
  year    = {2026}
}"""
ARXIV = "2608.11452"
DATASET_PLACEHOLDER = "path/to/this/folder"


def config_descriptions(release: "Release") -> dict[str, str]:
    """What each config holds, in a few words (the card's table and each config's description)."""
    main = release.main_rubric.short_name
    return {IMAGES_CONFIG: f"{main} poems, seen generators", RATINGS_CONFIG: "kept ratings", POEMS_CONFIG: "poems",
            **{t: f"{r.short_name} (test only)" for t, r in release.rubrics.items() if t != release.main_tradition},
            UNSEEN_CONFIG: "held-out generators (test only)"}


def size_category(n: int) -> str:
    for limit, name in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return name
    return "n>1M"


def render_card(
    release: "Release",
    scores: dict[str, ImageScores],
    qc: dict,
    rows: dict[str, dict[str, int]],
    sizes: dict[str, dict[str, int]],
    tables: dict[str, dict[str, list[dict]]],
    fingerprint: str,
    download_sizes: dict[str, dict[str, int]],
) -> str:
    """`sizes` are each split's Arrow bytes, `download_sizes` its Parquet files' bytes."""
    rubric = release.main_rubric
    descriptions = config_descriptions(release)
    features = {"ratings": rating_features(rubric), "poems": POEM_FEATURES}
    configs, infos = [], []
    for cfg, by_split in rows.items():
        configs.append({
            "config_name": cfg,
            # The fingerprint must sit where datasets' cache key looks (config parameters, not free YAML
            # keys), so that a folder rebuilt in place is never served from an older build's cache.
            "description": f"{descriptions[cfg]} (build {fingerprint})",
            **({"default": True} if cfg == "images" else {}),
            "data_files": [{"split": split, "path": f"data/{cfg}/{split}-*.parquet"} for split in by_split],
        })
        infos.append({
            "config_name": cfg,
            "features": features.get(cfg, image_features(rubric))._to_yaml_list(),
            "splits": [{"name": split, "num_bytes": sizes[cfg][split], "num_examples": n}
                       for split, n in by_split.items()],
            "dataset_size": sum(sizes[cfg].values()),
            "download_size": sum(download_sizes[cfg].values()),
        })
    synthetic = release.synthetic
    license_id = release.metadata.get("license", "unknown")  # never a licence the release did not state
    card_data = DatasetCardData(
        pretty_name=_pretty_name(release),
        language=languages(release),
        license=license_id,
        **{k: release.metadata[k] for k in ("license_name", "license_link") if k in release.metadata},
        task_categories=["text-to-image", "image-text-to-text"],
        tags=["poetry", *language_tags(release), "evaluation", "human-ratings", "benchmark"]
        + (["synthetic"] if synthetic else []),
        size_categories=size_category(len(scores)),
        configs=configs,
        dataset_info=infos,
    )
    images_rows = tables.get("images", {})
    splits = list(images_rows)
    generator_rows = []
    for key, gen in release.generators.items():
        counts = [sum(r["generator"] == key for r in images_rows[s]) for s in splits]
        if sum(counts):
            generator_rows.append({"key": key, "display": gen.display, "unseen": gen.unseen,
                                   "counts": counts, "total": sum(counts)})
    qc_config = qc["config"]
    template = resources.files("tangpoetrybench") / "templates" / "dataset_card.md"
    card = DatasetCard.from_template(
        card_data,
        template_str=template.read_text(encoding="utf-8"),
        pretty_name=_pretty_name(release),
        synthetic=synthetic,
        description=release.metadata.get("description", ""),
        repo_hint=DATASET_PLACEHOLDER,  # `tpb publish` writes the repo id here
        arxiv=ARXIV,
        config_rows=[{"config": c, "what": descriptions[c], "split": s, "rows": n}
                     for c, by_split in rows.items() for s, n in by_split.items()],
        rubric=rubric, n_dimensions=len(rubric.keys),
        face=_face(rubric), test_configs=[(t, r) for t, r in release.rubrics.items() if t != release.main_tradition],
        splits=splits,
        generator_rows=generator_rows,
        poem_counts=", ".join(counted(sum(p.tradition == t for p in release.poems.values()), f"{r.short_name} poem")
                              for t, r in release.rubrics.items()),
        n_images=len(scores),
        n_rated=sum(s.n_ratings > 0 for s in scores.values()),
        n_multi=sum(s.multi_rated for s in scores.values()),
        n_text_issue=sum(s.text_issue == 1 for s in scores.values()),
        qc=qc,
        qc_enabled=any(v not in (None, False) for v in qc_config.values()),
        qc_settings=", ".join(f"`{k}`={v}" for k, v in qc_config.items()),
        qc_by_rule=", ".join(f"{rule}: {n}" for rule, n in qc["by_rule"].items()),
        license_text=_license_text(release, license_id),
        citation=release.metadata.get("citation", CITATION),
        version=__version__,
        fingerprint=fingerprint,
    )
    return str(card)


def languages(release: "Release") -> list[str]:
    """The card's languages: each tradition's own, then English."""
    return list(dict.fromkeys([*(r.own_language for r in release.rubrics.values()), "en"]))


def language_tags(release: "Release") -> list[str]:
    """`chinese`, `japanese`: the English names of the traditions' own languages, as tags."""
    return list(dict.fromkeys(r.languages[r.own_language].lower() for r in release.rubrics.values()
                              if r.own_language != "en"))


def _face(rubric) -> dict | None:
    """The face-avoidance role in words, for the card's scoring rules."""
    if rubric.face_avoidance is None:
        return None
    key, letter = rubric.face_avoidance
    dim = rubric.dimension(key)
    return {"dimension": dim.name["en"].lower(), "option": dim.option(letter).label["en"]}


def _pretty_name(release: "Release") -> str:
    name = release.name
    return f"{name} (synthetic)" if release.synthetic and "synthetic" not in name.lower() else name


def _license_text(release: "Release", license_id: str) -> str:
    if release.synthetic and all(is_bundled(r) for r in release.rubrics.values()):
        return (f"`{license_id}`. Poem texts come from the chinese-poetry corpus (MIT, © 2016 JackeyGao); "
                "the images and ratings are synthetic, made by tangpoetrybench.")
    if release.synthetic:
        return f"`{license_id}`. The images and ratings are synthetic, made by tangpoetrybench."
    return f"`{license_id}`."
