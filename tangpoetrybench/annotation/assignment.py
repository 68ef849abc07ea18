"""Which image a rater gets next, and in which order they see its four candidates.

The rule (`next_image`), for one rater, over every assignment so far:
- an image goes to `overlap` raters: it is open while fewer than that hold it (a rating done, or an assignment taken
  less than `hold_s` ago and not given up);
- never twice to one rater, and never an image of a poem the rater has already been given: once a poem is revealed,
  their Phase-1 answer on another image of it would test their memory, not the image;
- the images of the priority list first, in its order (e.g. the judge's least certain images);
- then balanced across generators: the generator this rater has seen least, then the one with the fewest ratings
  taken overall, then the image nearest its `overlap` (images are finished before others are started);
- ties broken by a draw from the seed and the image.

The candidates are shown in an order drawn from the seed, the rater and the image: fixed for that rater, whenever they
return, and different between raters.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..dataset.raw_release import ImageFile
from ..errors import DataError, Problem
from .store import Assignment, NewAssignment

DEFAULT_HOLD_S = 3600.0  # an image taken and not rated within this long is offered to someone else


@dataclass(frozen=True)
class Plan:
    """How images are handed out: scheduling only, so it may change between two starts of a campaign."""

    overlap: int = 1
    priority: tuple[str, ...] = ()  # image ids, first first
    hold_s: float = DEFAULT_HOLD_S
    seed: int = 0

    def __post_init__(self):
        if self.overlap < 1:
            raise ValueError(f"--overlap must be at least 1, got {self.overlap}")


def _draw(seed: int, *parts: str) -> np.random.Generator:
    return np.random.default_rng([seed, *(zlib.crc32(p.encode("utf-8")) for p in parts)])


def shown_order(candidates: Sequence[str], seed: int, rater: str, image_id: str) -> tuple[str, ...]:
    """The four candidates in the order this rater sees them for this image."""
    order = _draw(seed, "candidates", rater, image_id).permutation(len(candidates))
    return tuple(candidates[i] for i in order)


def holding(assignments: Sequence[Assignment], now: float, hold_s: float) -> list[Assignment]:
    """The assignments that hold a place: rated, or taken less than `hold_s` ago."""
    return [a for a in assignments if a.done or now - a.assigned_at < hold_s]


def next_image(rater: str, images: Mapping[str, ImageFile], candidates: Mapping[str, Sequence[str]],
               assignments: Sequence[Assignment], plan: Plan, now: float) -> NewAssignment | None:
    """The image `rater` rates next (see the module's docstring), or None when nothing is left for them."""
    mine = [a for a in assignments if a.rater == rater]
    seen_images = {a.image_id for a in mine}
    seen_poems = {a.poem_id for a in mine}
    held = holding(assignments, now, plan.hold_s)
    per_image = Counter(a.image_id for a in held)
    per_generator = Counter(a.generator for a in held)
    mine_per_generator = Counter(a.generator for a in mine)
    rank = {image_id: i for i, image_id in enumerate(plan.priority)}
    open_images = [img for image_id, img in images.items() if image_id not in seen_images
                   and img.poem_id not in seen_poems and per_image[image_id] < plan.overlap]
    if not open_images:
        return None

    def key(img: ImageFile) -> tuple:
        return (rank.get(img.image_id, len(rank)), mine_per_generator[img.generator], per_generator[img.generator],
                -per_image[img.image_id], float(_draw(plan.seed, "tie", img.image_id).random()), img.image_id)

    best = min(open_images, key=key)
    return NewAssignment(best.image_id, best.poem_id, best.generator,
                         shown_order(candidates[best.poem_id], plan.seed, rater, best.image_id))


def read_priority(path: Path | str, images: Mapping[str, ImageFile]) -> tuple[str, ...]:
    """A priority list: a plain file of image ids (`generator/poem_id`), one a line, or a JSON Lines file whose
    records have `image_id` (a `tpb score` results file, sorted by how unsure the judge is). Every line that names
    no image of the release is an error naming its line; an image listed twice keeps its first place."""
    path = Path(path)
    problems, order = [], []
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(Problem(str(path), f"cannot read: {exc}")) from None
    for lineno, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        if text.startswith("{"):
            try:
                image_id = json.loads(text)["image_id"]
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                problems.append(Problem(str(path), f"not a JSON record with an image_id ({type(exc).__name__})",
                                        line=lineno))
                continue
        else:
            image_id = text
        if not isinstance(image_id, str) or image_id not in images:
            problems.append(Problem(str(path), f"no image {image_id!r} in the release (expected generator/poem_id)",
                                    line=lineno, field="image_id"))
        elif image_id not in order:
            order.append(image_id)
    if problems:
        raise DataError(problems)
    return tuple(order)
