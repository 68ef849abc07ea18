"""What every evaluator takes and gives (SPEC §6), and the one-call scoring API.

    >>> from tangpoetrybench.evaluators import load_evaluator
    >>> pae = load_evaluator("pae", model="Qwen/Qwen3-VL-8B-Instruct", adapter="path/to/adapter")
    >>> [result] = pae(images=[Image.open("moon.png")], poems=[{"title": "静夜思", "author": "李白", "text": "..."}])
    >>> result.scores, result.quality
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping, Sequence

from PIL import Image

from ..poems import Poem
from ..rubric import Rubric, rubric_for_tradition


@dataclass
class ScoringItem:
    """One image to score against its poem. `image` is None when it could not be read (`error` says why).
    `rubric` overrides the evaluator's (e.g. a rubric file a user uploaded)."""

    image_id: str
    image: Image.Image | None
    poem: Poem
    error: str | None = None
    rubric: Rubric | None = None


@dataclass
class EvalResult:
    image_id: str
    evaluator: str
    scores: dict[str, float | None]  # the rubric's keys; empty for scalar metrics
    quality: float | None  # mean of the non-null scores, or the scalar metric
    raw_output: str | None
    parse_status: str  # ok | repaired | failed
    error: str | None
    seconds: float
    model: str = ""
    random_weights: bool = field(default=False)  # True: a plumbing check, not a quality measurement

    def to_json(self) -> dict[str, Any]:
        record = asdict(self)
        if not self.random_weights:
            record.pop("random_weights")
        return record


def as_poem(poem: Poem | Mapping[str, str], index: int) -> Poem:
    if isinstance(poem, Poem):
        return poem
    return Poem(poem_id=str(poem.get("poem_id", f"poem-{index}")), title=poem.get("title", ""),
                author=poem.get("author", ""), text=poem["text"], tradition=poem.get("tradition", "tang"))


class Evaluator(ABC):
    """Scores batches of images against poems. Subclasses load their model once, in `__init__`."""

    name: str
    model_name: str = ""
    random_weights: bool = False

    def __init__(self, rubric: Rubric | str | None = None):
        # None: each poem's own tradition picks the rubric (tang or song_ci)
        self.rubric = rubric_for_tradition(rubric) if isinstance(rubric, str) else rubric

    def rubric_for(self, item: ScoringItem) -> Rubric:
        return item.rubric or self.rubric or rubric_for_tradition(item.poem.tradition)

    def score(self, items: Sequence[ScoringItem]) -> list[EvalResult]:
        """Score one batch. An item whose image could not be read, or that makes the model fail on its own (an
        extreme aspect ratio, say), gets a failed result; if every item fails alone, the error is raised."""
        start = time.perf_counter()
        good = [it for it in items if it.image is not None]
        try:
            outputs = self._score(good) if good else []
        except Exception:
            outputs = self._score_one_by_one(good)
        per_item = (time.perf_counter() - start) / max(len(items), 1)
        by_id = {r.image_id: r for r in outputs}
        results = []
        for it in items:
            result = by_id.get(it.image_id) if it.image is not None else None
            if result is None:
                result = self.result(it, {}, None, None, "failed", it.error or "no image")
            result.seconds = round(per_item, 4)
            results.append(result)
        return results

    def _score_one_by_one(self, items: Sequence[ScoringItem]) -> list[EvalResult]:
        results, errors = [], []
        for it in items:
            try:
                results += self._score([it])
            except Exception as exc:
                errors.append(exc)
                results.append(self.result(it, {}, None, None, "failed", f"{type(exc).__name__}: {exc}"))
        if errors and len(errors) == len(items):
            raise errors[0]  # not one item's problem: stop rather than record every image as failed
        return results

    @abstractmethod
    def _score(self, items: Sequence[ScoringItem]) -> list[EvalResult]:
        """Score items that all have an image, in one batch, in order."""

    def result(self, item: ScoringItem, scores: dict, quality: float | None, raw: str | None, status: str,
               error: str | None, seconds: float = 0.0) -> EvalResult:
        return EvalResult(image_id=item.image_id, evaluator=self.name, scores=scores, quality=quality,
                          raw_output=raw, parse_status=status, error=error, seconds=round(seconds, 4),
                          model=self.model_name, random_weights=self.random_weights)

    def __call__(self, images: Sequence[Image.Image], poems: Sequence[Poem | Mapping[str, str]],
                 batch_size: int = 8) -> list[EvalResult]:
        """Score images against poems (dicts with title, author, text, optional tradition), batch by batch."""
        if len(images) != len(poems):
            raise ValueError(f"{len(images)} images but {len(poems)} poems")
        items = [ScoringItem(str(i), img.convert("RGB"), as_poem(p, i)) for i, (img, p) in enumerate(zip(images, poems))]
        return [r for start in range(0, len(items), batch_size) for r in self.score(items[start:start + batch_size])]
