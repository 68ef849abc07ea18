"""`tpb demo-release`: a synthetic raw release in the SPEC §2 layout, labelled synthetic, for any rubric.

The poem texts are real; everything else is simulated with planted structure, so the tools have
something to find. The structure follows the rubric's roles (docs/rubrics.md), so a rubric of any dimensions gets
one:
- four seen painters of different quality (A ≥ B ≈ C > D, D far behind) and one unseen painter E,
  which paints only the test poems; a painter's level on each dimension comes from its role (`Painter`);
- poem difficulty that moves the depicting and evoking dimensions and the overall one (not the surface dimensions),
  and the overall dimension driven by the depicting and evoking ones: the depict-to-evoke gap;
- with an adjudicated dimension, C paints literally (most recognizable) and leaks the poem's text and D writes fake
  characters (both drawn with an installed Chinese font, so an OCR can read them; without one, as stroke patterns,
  and the release says so), and text labels adjudicate them;
- about 18 % of images rated more than once, excluded options where a dimension does not apply to a poem, the
  face-avoidance option, Phase-1 candidates and answers (some missing), experts and crowd workers;
- three raters whom QC must drop (a straight-liner, a Phase-1 guesser, a speeder) and a few ratings that break the
  rubric's first consistency rule.
The main tradition's poems (the most numerous) get every painter; each poem of another tradition gets one painter.
Same seed, same poems, same font -> a byte-identical release.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
from tqdm.auto import tqdm

from ...errors import Notice
from ...files import atomic_folder, ensure_free, write_csv
from ...numeric import counted
from ...fonts import cjk_font
from ...poems import Poem, write_poems
from ..raw_release import RATING_COLUMNS, TEXT_LABEL_COLUMNS, main_tradition
from ...rubric import Dimension, Rubric, is_bundled, rubric_for_tradition
from ..splits import default_splits
from .painting import Style, paint

# How strongly a poem's difficulty moves a dimension, by its role: abstraction hurts meaning, not the surface.
DIFFICULTY_WEIGHT = {"depict": 1.0, "evoke": 0.7, "overall": 0.8, "surface": 0.1}
# How far the overall dimension follows a rating's offsets on the depicting and evoking dimensions.
OVERALL_DRIVE = {"depict": 0.5, "evoke": 0.4}
# The share of poems each dimension with a not-applicable option applies to, in rubric order (the paper's pooled
# applicability of scene, cultural coherence and emotion); further ones take the last.
APPLICABLE = (0.95, 0.92, 0.81)


@dataclass(frozen=True)
class Painter:
    """A simulated generator. Its mean score on a dimension comes from the dimension's role: `surface` for the
    dimensions with none (in rubric order, the list repeated for a longer rubric), `depict`, `evoke` and `overall`;
    the adjudicated dimension's comes from the text-issue rates."""

    key: str
    display: str
    style: Style
    surface: tuple[float, ...]
    depict: float
    evoke: float
    overall: float
    recognizability: float
    leakage: float  # share of images that leak the poem's text
    fake: float  # share of images with fake characters
    face_avoidance: float  # share of applicable answers of the face-avoidance dimension that avoid the face
    extension: str = ".png"
    unseen: bool = False

    def level(self, rubric: Rubric) -> dict[str, float]:
        """The mean score of each simulated dimension of `rubric` (all but the adjudicated one), in rubric order."""
        simulated = [k for k in rubric.keys if k != rubric.adjudicated_dimension]
        surface = [k for k in simulated if role(rubric, k) == "surface"]
        by_role = {"depict": self.depict, "evoke": self.evoke, "overall": self.overall}
        return {k: self.surface[surface.index(k) % len(self.surface)] if k in surface else by_role[role(rubric, k)]
                for k in simulated}


def role(rubric: Rubric, key: str) -> str:
    """A dimension's part in the simulation: depict, evoke, overall or surface."""
    if key in rubric.depict:
        return "depict"
    if key in rubric.evoke:
        return "evoke"
    return "overall" if key == rubric.overall else "surface"


PAINTERS = (
    Painter("painter_a", "Synthetic painter A", Style((96, 104, 110), 0.85, 4.0, 2.0, 1.0, 0.9),
            (0.97, 0.94, 0.91, 0.95, 0.96, 0.96), 0.87, 0.80, 0.76, 0.80, 0.006, 0.0, 0.20),
    Painter("painter_b", "Synthetic painter B", Style((70, 118, 112), 0.75, 3.0, 2.0, 1.15, 0.8),
            (0.965, 0.87, 0.88, 0.94, 0.95, 0.92), 0.84, 0.82, 0.73, 0.79, 0.0, 0.0, 0.15, extension=".jpg"),
    Painter("painter_c", "Synthetic painter C", Style((104, 96, 92), 0.9, 2.0, 3.0, 1.1, 1.0),
            (0.97, 0.90, 0.85, 0.94, 0.94, 0.91), 0.86, 0.81, 0.74, 0.87, 0.11, 0.025, 0.20),
    Painter("painter_d", "Synthetic painter D", Style((120, 70, 150), 0.6, 1.0, 14.0, 1.6, 0.5),
            (0.94, 0.69, 0.81, 0.78, 0.81, 0.69), 0.64, 0.60, 0.51, 0.71, 0.006, 0.22, 0.40),
    Painter("painter_e", "Synthetic painter E (unseen)", Style((60, 60, 66), 1.0, 2.5, 4.0, 0.9, 0.7),
            (0.96, 0.85, 0.84, 0.90, 0.90, 0.85), 0.78, 0.72, 0.66, 0.78, 0.03, 0.05, 0.25, extension=".webp",
            unseen=True),
)
N_EXPERTS = 5
EXPERT_SHARE = 0.43
EXTRA_RATING_SHARE = 0.18  # images rated more than once
OPTION_SPREAD = 0.12  # how far from the latent score a rater's option may land


@dataclass
class _Image:
    painter: Painter
    poem: Poem
    glyphs: str | None  # None | "leakage" | "fake_characters"
    seed: int
    ratings: list[dict] = field(default_factory=list)

    @property
    def path(self) -> str:
        return f"images/{self.painter.key}/{self.poem.poem_id}{self.painter.extension}"


def write_demo_release(
    out: Path | str,
    poems: list[Poem],
    n_poems: int | None = None,
    seed: int = 0,
    size: int = 512,
    overwrite: bool = False,
    progress: bool = True,
    rubrics: Mapping[str, Rubric] | None = None,
) -> Path:
    """Write a synthetic raw release for the first `n_poems` of `poems` (all by default) into `out`. `rubrics`: the
    rubric of each tradition of the poems that is not bundled (written into the release's rubrics/ folder)."""
    out = Path(out)
    ensure_free(out, overwrite)
    if n_poems is not None:
        if not 1 <= n_poems <= len(poems):
            raise ValueError(f"--poems {n_poems}: the poem source has {counted(len(poems), 'poem')}")
        poems = poems[:n_poems]
    try:
        by_tradition = {t: rubric_for_tradition(t, rubrics) for t in dict.fromkeys(p.tradition for p in poems)}
    except KeyError as exc:
        raise ValueError(exc.args[0]) from None
    main = by_tradition[main_tradition(poems)]
    other = next((r for r in by_tradition.values() if r.keys != main.keys), None)
    if other is not None:
        raise ValueError(f"the rubrics {main.name} and {other.name} rate different dimensions, and one release has one "
                         "set of rating columns: write a release per tradition (a poems file each)")
    labelled = any(r.adjudicated_dimension for r in by_tradition.values())
    if labelled and cjk_font() is None:
        warnings.warn("no Chinese font is installed, so the planted text is drawn as stroke patterns an OCR cannot "
                      "read (install fonts-noto-cjk to draw real characters)", Notice, stacklevel=2)
    rng = np.random.default_rng(seed)
    images = _plan_images(poems, by_tradition, rng, seed)
    ratings = _simulate_ratings(images, poems, by_tradition, rng)
    with atomic_folder(out) as tmp:
        _write_images(images, tmp, size, progress)
        write_poems(poems, tmp / "poems.jsonl")
        (tmp / "release.json").write_text(json.dumps(_release_json(main, seed, labelled), ensure_ascii=False, indent=1)
                                          + "\n", encoding="utf-8")
        write_csv(tmp / "ratings.csv", RATING_COLUMNS + main.keys, ratings)
        if labelled:
            write_csv(tmp / "text_labels.csv", TEXT_LABEL_COLUMNS, [
                {"generator": im.painter.key, "poem_id": im.poem.poem_id, "text_issue": int(im.glyphs is not None),
                 "issue_type": im.glyphs or "none"}
                for im in images if not im.painter.unseen and by_tradition[im.poem.tradition].adjudicated_dimension
            ])
        for tradition, rubric in by_tradition.items():
            if not is_bundled(rubric):
                (tmp / "rubrics").mkdir(exist_ok=True)
                (tmp / "rubrics" / f"{tradition}.yaml").write_text(rubric.yaml_text, encoding="utf-8")
    return out


def glyph_note() -> str:
    """How the planted text is drawn (in the release's description, and said when there is no font)."""
    font = cjk_font()
    if font is None:
        return ("Its planted text is drawn as stroke patterns: no Chinese font was installed "
                "(install fonts-noto-cjk to draw real characters an OCR can read).")
    return f"Its planted text is drawn with the font {font.name}."


def _release_json(main: Rubric, seed: int, labelled: bool) -> dict:
    return {
        "name": f"{main.display['en']} demo",  # the tradition's name: "Tang poetry demo", "Haiku demo"
        "version": f"demo-seed{seed}",
        "synthetic": True,
        "license": "mit",
        "description": (
            "A synthetic release made by `tpb demo-release` for trying the tools: real poem texts, "
            "procedurally painted images and simulated ratings with planted structure. "
            f"Seed {seed}. {glyph_note() + ' ' if labelled else ''}It says nothing about any real text-to-image "
            "model or rater."
        ),
        "generators": {p.key: {"display": p.display, "unseen": p.unseen} for p in PAINTERS},
    }


def _image_seed(seed: int, painter: str, poem_id: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{painter}:{poem_id}".encode()).digest()[:8], "little")


def _plan_images(poems: list[Poem], rubrics: Mapping[str, Rubric], rng: np.random.Generator,
                 seed: int) -> list[_Image]:
    seen = [p for p in PAINTERS if not p.unseen]
    main_poems = [p for p in poems if p.tradition == main_tradition(poems)]
    test = {pid for pid, split in default_splits([p.poem_id for p in main_poems]).items() if split == "test"}
    images = []
    for poem in main_poems:
        painters = seen + [p for p in PAINTERS if p.unseen and poem.poem_id in test]
        images += [_Image(p, poem, None, _image_seed(seed, p.key, poem.poem_id)) for p in painters]
    for i, poem in enumerate(p for p in poems if p.tradition != main_poems[0].tradition):
        painter = seen[i % len(seen)]  # as the paper's Song Ci, each poem of another tradition has a single generator
        images.append(_Image(painter, poem, None, _image_seed(seed, painter.key, poem.poem_id)))
    for im in images:
        if not rubrics[im.poem.tradition].adjudicated_dimension:
            continue  # no text is planted where no label would adjudicate it
        u = rng.random()
        im.glyphs = "leakage" if u < im.painter.leakage else "fake_characters" if u < im.painter.leakage + im.painter.fake else None
    return images


def _simulate_ratings(images: list[_Image], poems: list[Poem], rubrics: Mapping[str, Rubric],
                      rng: np.random.Generator) -> list[dict]:
    difficulty = {p.poem_id: rng.normal(0, 0.12) for p in poems}
    applies = {p.poem_id: {d.key: rng.random() < APPLICABLE[min(i, len(APPLICABLE) - 1)]
                           for i, d in enumerate(excludable(rubrics[p.tradition]))} for p in poems}
    n_crowd = max(8, len(images) // 5)
    raters = [(f"expert-{i + 1:02d}", "expert") for i in range(N_EXPERTS)]
    raters += [(f"crowd-{i + 1:04d}", "crowd") for i in range(n_crowd)]
    bias = {r: rng.normal(0, 0.04) for r, _ in raters}

    rows: list[dict] = []
    for im in images:
        n = 1 + (rng.random() < EXTRA_RATING_SHARE) * int(rng.integers(1, 3))
        chosen: set[str] = set()
        image_effect = rng.normal(0, 0.06)
        for _ in range(n):
            while True:
                rater, group = raters[int(rng.integers(0, N_EXPERTS))] if rng.random() < EXPERT_SHARE else \
                    raters[N_EXPERTS + int(rng.integers(0, n_crowd))]
                if rater not in chosen:
                    break
            chosen.add(rater)
            rows.append(_rate(im, rubrics[im.poem.tradition], rater, group, bias[rater] + image_effect, difficulty,
                              applies, poems, rng))
    # Raters QC must drop, each with enough ratings for its rule to apply (all on top of the regular ones).
    for rater, n in (("crowd-straightliner", 6), ("crowd-guesser", 6), ("crowd-speeder", 5)):
        for idx in rng.choice(len(images), size=min(n, len(images)), replace=False):
            rubric = rubrics[images[idx].poem.tradition]
            row = _rate(images[idx], rubric, rater, "crowd", 0.0, difficulty, applies, poems, rng)
            if rater == "crowd-straightliner":
                row.update({d.key: d.options[0].letter for d in rubric.dimensions})
            elif rater == "crowd-guesser" and row["phase1_candidates"]:
                wrong = [c for c in row["phase1_candidates"].split("|") if c != images[idx].poem.poem_id]
                row["phase1_choice"] = wrong[int(rng.integers(0, len(wrong)))]
            elif rater == "crowd-speeder":
                row["seconds"] = f"{rng.uniform(5, 15):.1f}"
            rows.append(row)
    order = rng.permutation(len(rows))
    rows = [rows[i] for i in order]
    for i, row in enumerate(rows):
        row["rating_id"] = f"r{i + 1:05d}"
    return rows


def excludable(rubric: Rubric) -> list[Dimension]:
    """The dimensions with a not-applicable option, in rubric order."""
    return [d for d in rubric.dimensions if any(o.excluded for o in d.options)]


def _rate(
    im: _Image, rubric: Rubric, rater: str, group: str, offset: float, difficulty: dict[str, float],
    applies: dict[str, dict[str, bool]], poems: list[Poem], rng: np.random.Generator,
) -> dict:
    painter, poem = im.painter, im.poem
    level = painter.level(rubric)
    noise = 0.07 if group == "expert" else 0.11
    latent = {
        k: level[k] - DIFFICULTY_WEIGHT[role(rubric, k)] * difficulty[poem.poem_id] + offset + rng.normal(0, noise)
        for k in level
    }

    def drift(keys: tuple[str, ...]) -> float:
        """This rating's mean offset from the painter's level on `keys` (0 for none)."""
        return sum(latent[k] - level[k] for k in keys) / len(keys) if keys else 0.0

    if rubric.overall is not None:
        latent[rubric.overall] += OVERALL_DRIVE["depict"] * drift(rubric.depict) \
            + OVERALL_DRIVE["evoke"] * drift(rubric.evoke)
    answers = {k: _option(rubric, k, v, rng) for k, v in latent.items()}
    if rubric.adjudicated_dimension is not None:
        dim = rubric.dimension(rubric.adjudicated_dimension)
        flagged = im.glyphs is not None
        answers[dim.key] = _worst(dim) if rng.random() < (0.65 if flagged else 0.03) else _best(dim)
    applicable = applies[poem.poem_id]
    face_key, face_letter = rubric.face_avoidance or (None, None)
    for dim in rubric.dimensions:
        not_applicable = next((o.letter for o in dim.options if o.excluded), None)
        if dim.key == face_key:  # no face to carry the feeling; where none is expected, now and then a jarring one
            if not_applicable and not applicable[dim.key]:
                answers[dim.key] = _worst(dim) if rng.random() < 0.05 else not_applicable
            elif rng.random() < painter.face_avoidance:
                answers[dim.key] = face_letter
        elif not_applicable and not applicable[dim.key] and rng.random() < 0.9:
            answers[dim.key] = not_applicable
    if rubric.consistency and rng.random() < 0.01:  # a self-contradicting rating, for the consistency rule
        when, forbid = rubric.consistency[0]
        answers.update({**when, **forbid})

    candidates, choice = _phase1(im, group, drift(rubric.depict), poems, rng)
    seconds = rng.uniform(8, 19) if rng.random() < 0.02 else float(np.exp(rng.normal(4.4, 0.45)))
    return {
        "rating_id": "", "rater_id": rater, "rater_group": group, "generator": painter.key,
        "poem_id": poem.poem_id, "seconds": f"{seconds:.1f}", "phase1_candidates": "|".join(candidates),
        "phase1_choice": choice, **{k: answers[k] for k in rubric.keys},
    }


def _best(dim: Dimension) -> str:
    """The first of the options with the highest score."""
    return max(dim.options, key=lambda o: -1 if o.excluded else o.score).letter


def _worst(dim: Dimension) -> str:
    """The last of the options with the lowest score (not an excluded one)."""
    low = min(o.score for o in dim.options if not o.excluded)
    return [o.letter for o in dim.options if o.score == low][-1]


def _option(rubric: Rubric, key: str, value: float, rng: np.random.Generator) -> str:
    """An option whose score lies near `value`: closer options are likelier."""
    options = [o for o in rubric.dimension(key).options if not o.excluded]
    scores = np.array([o.score for o in options])
    weights = np.exp(-((scores - np.clip(value, 0, 1)) ** 2) / (2 * OPTION_SPREAD**2))
    return options[int(rng.choice(len(options), p=weights / weights.sum()))].letter


def _phase1(im: _Image, group: str, core_offset: float, poems: list[Poem], rng: np.random.Generator):
    """Four candidates (the poem and three others, of the same tradition where there are enough) and a choice, likelier
    right where the rating's depicting dimensions drift up (`core_offset`)."""
    pool = [p.poem_id for p in poems if p.tradition == im.poem.tradition and p.poem_id != im.poem.poem_id]
    if len(pool) < 3:
        pool = [p.poem_id for p in poems if p.poem_id != im.poem.poem_id]
    if len(pool) < 3:
        return [], ""
    distractors = [pool[i] for i in rng.choice(len(pool), size=3, replace=False)]
    candidates = [im.poem.poem_id] + distractors
    candidates = [candidates[i] for i in rng.permutation(4)]
    if rng.random() < 0.06:
        return candidates, ""  # no Phase-1 answer
    p_correct = np.clip(im.painter.recognizability + 0.4 * core_offset + (0.06 if group == "expert" else -0.03),
                        0.05, 0.98)
    choice = im.poem.poem_id if rng.random() < p_correct else distractors[int(rng.integers(0, 3))]
    return candidates, choice


def _write_images(images: list[_Image], folder: Path, size: int, progress: bool) -> None:
    for painter in {im.painter.key for im in images}:
        (folder / "images" / painter).mkdir(parents=True)

    def work(im: _Image) -> None:
        picture = paint(im.poem.text, im.painter.style, np.random.default_rng(im.seed), size=size, glyphs=im.glyphs)
        kwargs = {".jpg": {"quality": 90}, ".webp": {"quality": 85}}.get(im.painter.extension, {})
        picture.save(folder / im.path, **kwargs)

    with ThreadPoolExecutor(max_workers=4) as pool:
        list(tqdm(pool.map(work, images), total=len(images), desc="Painting", unit="image", disable=not progress))
