"""Per-image aggregation of the ratings QC kept (SPEC §3).

- A dimension's score is the mean over the raters whose option is not excluded; null if none.
- The adjudicated dimension (text integrity) is 1 − text_issue where text_labels.csv has the image
  ("adjudicated"), else the mean survey score ("survey").
- quality is the mean of the non-null dimension scores; null when no rating was kept.
- recognizability is the share of correct Phase-1 answers among the ratings that have one (a missing
  answer is not a wrong one); null when none has.
- face_avoidance is the share of applicable ratings of the rubric's emotion dimension that chose its
  "expected but not visible" option.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from ..numeric import mean_or_none as mean
from .raw_release import Rating, Release


@dataclass
class ImageScores:
    image_id: str
    generator: str
    poem_id: str
    scores: dict[str, float | None]
    quality: float | None
    recognizability: float | None
    text_issue: int | None
    text_issue_type: str | None
    text_label_source: str | None  # "adjudicated" | "survey" | None (neither a label nor a rating)
    n_ratings: int
    face_avoidance: float | None

    @property
    def multi_rated(self) -> bool:
        return self.n_ratings >= 2


def aggregate(release: Release, kept: list[Rating]) -> dict[str, ImageScores]:
    """Scores of every image in the release (rated or not), by image_id."""
    by_image: dict[str, list[Rating]] = defaultdict(list)
    for r in kept:
        by_image[r.image_id].append(r)
    return {image_id: aggregate_image(release, image_id, by_image.get(image_id, []))
            for image_id in sorted(release.images)}


def aggregate_image(release: Release, image_id: str, ratings: list[Rating]) -> ImageScores:
    image = release.images[image_id]
    rubric = release.rubric(image.poem_id)
    scores: dict[str, float | None] = {}
    for key in rubric.keys:
        dim = rubric.dimension(key)
        scores[key] = mean([s for r in ratings if (s := dim.option(r.answers[key]).score) is not None])

    label = release.text_labels.get(image_id)
    source = None
    if rubric.adjudicated_dimension is not None:
        if label is not None:
            scores[rubric.adjudicated_dimension] = 1.0 - label.text_issue
            source = "adjudicated"
        elif scores[rubric.adjudicated_dimension] is not None:
            source = "survey"

    rated = [s for s in scores.values() if s is not None]
    answered = [r.phase1_correct for r in ratings if r.phase1_correct is not None]
    face = None
    if rubric.face_avoidance is not None:
        key, letter = rubric.face_avoidance
        applicable = [r.answers[key] for r in ratings if not rubric.dimension(key).option(r.answers[key]).excluded]
        face = mean([float(a == letter) for a in applicable])
    return ImageScores(
        image_id=image_id, generator=image.generator, poem_id=image.poem_id, scores=scores,
        quality=mean(rated) if ratings else None,
        recognizability=mean([float(c) for c in answered]),
        text_issue=None if label is None else label.text_issue,
        text_issue_type=None if label is None else label.issue_type,
        text_label_source=source, n_ratings=len(ratings), face_avoidance=face,
    )
