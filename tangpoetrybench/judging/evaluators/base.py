"""What every evaluator takes and gives (docs/scoring.md), and the one-call scoring API.

    >>> from tangpoetrybench.judging.evaluators import load_evaluator
    >>> pae = load_evaluator("pae", model="Qwen/Qwen3-VL-8B-Instruct", adapter="path/to/adapter")
    >>> [result] = pae(images=[Image.open("moon.png")], poems=[{"title": "静夜思", "author": "李白", "text": "..."}])
    >>> result.scores, result.quality

Scoring a batch is two steps, so that data-loader workers can do the first while the model does the second:
`prepare` (CPU only: resize, prompt, processor) and `run` (the model). `score` does both. Nothing one item does
stops its batch: an item that fails on its own is a failed result whose `error_kind` says why —

- `input`: the image could not be read, or the processor refused it (an extreme aspect ratio, say);
- `model`: the model raised on this item alone;
- `transient`: out of memory, a timeout, a lost connection — worth trying again (a resumed run does);
- `parse`: the model answered, but not in a form the parser can read.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from PIL import Image

from ...errors import ImageError, RunStopped
from ...files import DEFAULT_MAX_IMAGE_PIXELS, open_image
from ...poems import Poem, content_id
from ...rubric import BUILTIN, DEFAULT_TRADITION, Rubric, rubric_for_tradition
from ..records import EvalResult, LetterResult, ScalarResult, ScoresResult, TextResult

__all__ = ["EvalResult", "Evaluator", "LetterResult", "Prepared", "ScalarResult", "ScoresResult", "ScoringItem",
           "TextResult", "checked_item", "rgb_item"]

TRANSIENT = "transient"


@dataclass
class ScoringItem:
    """One image to score against its poem. `image` is None when it could not be read (`error` says why).
    `rubric` overrides the evaluator's (e.g. a rubric file a user uploaded)."""

    image_id: str
    image: Image.Image | None
    poem: Poem
    error: str | None = None
    rubric: Rubric | None = None

    @property
    def problem(self) -> str | None:
        """Why it cannot be asked (its image could not be read), or None."""
        return None if self.image is not None else self.error or "no image"


@dataclass
class Prepared:
    """A batch made ready for the model: every item in order, the model inputs of those whose preparation
    worked, and why the others failed (position in `items` → error)."""

    items: list
    inputs: Any
    errors: dict[int, str]
    seconds: float = 0.0  # CPU time it took

    @property
    def ready(self) -> list[int]:
        """The positions of the items that were prepared."""
        return [i for i in range(len(self.items)) if i not in self.errors]

    def pin_memory(self) -> "Prepared":
        """Page-locked input tensors, for an asynchronous copy to the GPU (`DataLoader(pin_memory=True)`)."""
        if isinstance(self.inputs, Mapping):
            for key, value in self.inputs.items():
                if isinstance(value, torch.Tensor):
                    self.inputs[key] = value.pin_memory()
        return self


def as_poem(poem: Poem | Mapping[str, str]) -> Poem:
    """A `Poem`, or one from a mapping with its text (title, author, tradition, poem_id optional). A mapping without
    an id is named by its content (`poems.content_id`): images of one poem name it alike, wherever they stand."""
    if isinstance(poem, Poem):
        return poem
    title, author = poem.get("title", ""), poem.get("author", "")
    return Poem(poem_id=str(poem.get("poem_id") or content_id(title, author, poem["text"])), title=title,
                author=author, text=poem["text"], tradition=poem.get("tradition", DEFAULT_TRADITION))


def describe(exc: BaseException) -> str:
    """One line: the exception's type and the first line of its message."""
    message = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {message[0][:500]}" if message else type(exc).__name__


def error_kind(exc: BaseException) -> str:
    """`transient` for what may pass on a retry (memory, time, network), else `model`."""
    if isinstance(exc, (torch.OutOfMemoryError, TimeoutError, ConnectionError)) or "out of memory" in str(exc).lower():
        return TRANSIENT
    return "model"


class Evaluator(ABC):
    """Scores batches of images against poems. Subclasses load their model once, in `__init__`, and implement
    `_prepare` (CPU only; it must not touch the model) and `_run`."""

    name: str
    record_type: type[EvalResult] | None = None  # what it answers (`records`: ScoresResult, ScalarResult, ...)
    model_name: str = ""
    random_weights: bool | None = False  # None: a served model, whose weights nobody can vouch for
    uses_rubric: bool = False  # the answer depends on the rubric (PAE), so results record its fingerprint
    min_batch_size: int = 1  # an engine that schedules its own batches wants many requests at once
    device: torch.device | None = None
    _model_attributes: tuple[str, ...] = ("model",)  # left out of a pickled copy (a data-loader worker's)
    worker_start_method: str | None = None  # how data-loader workers start (None: the platform's default)

    def __init__(self, rubric: Rubric | str | None = None):
        # None: each poem's own tradition picks the rubric (tang or song_ci)
        self.rubric = rubric_for_tradition(rubric) if isinstance(rubric, str) else rubric

    def __getstate__(self) -> dict:
        """A pickled evaluator keeps what `prepare` needs and leaves the model behind."""
        return {k: v for k, v in self.__dict__.items() if k not in self._model_attributes}

    def rubric_for(self, item: ScoringItem) -> Rubric:
        return item.rubric or self.rubric or rubric_for_tradition(item.poem.tradition)

    def settings(self) -> dict[str, Any]:
        """What, besides the model, changes an answer (recorded with every result, checked on resume)."""
        return {}

    def rubric_fingerprints(self) -> set[str]:
        """The rubrics this evaluator can score under (without per-item overrides)."""
        if not self.uses_rubric:
            return set()
        return {self.rubric.fingerprint} if self.rubric else {rubric_for_tradition(t).fingerprint for t in BUILTIN}

    def prepare(self, items: Sequence[ScoringItem]) -> Prepared:
        """Model inputs for a batch, on the CPU. An item that cannot be prepared is set aside with its error (by its
        place in the batch: items need no ids of their own, and two may share one)."""
        start = time.perf_counter()
        errors = {i: it.problem for i, it in enumerate(items) if it.problem is not None}
        ready = [i for i in range(len(items)) if i not in errors]
        try:
            inputs = self._prepare([items[i] for i in ready]) if ready else None
        except Exception:
            for i in ready:
                try:
                    self._prepare([items[i]])
                except Exception as exc:
                    errors[i] = describe(exc)
            ready = [i for i in ready if i not in errors]
            try:
                inputs = self._prepare([items[i] for i in ready]) if ready else None
            except Exception as exc:  # they fail only together: none of them is scored, each says why
                errors.update({i: describe(exc) for i in ready})
                inputs = None
        return Prepared(list(items), inputs, errors, time.perf_counter() - start)

    def run(self, batch: Prepared) -> list:
        """Records for a prepared batch, in order. If the batch fails as a whole, each item is tried alone."""
        start = time.perf_counter()
        positions = batch.ready
        ready = [batch.items[i] for i in positions]
        try:
            outputs = self._run(batch.inputs, ready) if ready else []
        except RunStopped:
            raise
        except Exception as exc:
            self._free_memory()
            outputs = [self._run_alone(it) for it in ready] if len(ready) > 1 else [self.failure(ready[0], exc)]
        per_item = (batch.seconds + time.perf_counter() - start) / max(len(batch.items), 1)
        done = dict(zip(positions, outputs))
        results = []
        for i, it in enumerate(batch.items):
            result = done[i] if i in done else self.failed(it, batch.errors[i], "input")
            if isinstance(result, EvalResult):  # an image's record says how long it took
                result.seconds = round(per_item, 4)
            results.append(result)
        return results

    def score(self, items: Sequence[ScoringItem]) -> list[EvalResult]:
        """Score one batch: `run(prepare(items))`. Never raises for what one item does."""
        return self.run(self.prepare(items))

    def _run_alone(self, item: ScoringItem) -> EvalResult:
        try:
            [result] = self._run(self._prepare([item]), [item])
            return result
        except RunStopped:
            raise
        except Exception as exc:
            self._free_memory()
            return self.failure(item, exc)

    def _free_memory(self) -> None:
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.empty_cache()

    @abstractmethod
    def _prepare(self, items: Sequence[ScoringItem]) -> Any:
        """CPU inputs for items that all have an image, in one batch, in order."""

    @abstractmethod
    def _run(self, inputs: Any, items: Sequence[ScoringItem]) -> list[EvalResult]:
        """Run the model on prepared inputs; one result per item, in order."""

    def result(self, item: ScoringItem, scores: dict, quality: float | None, raw: str | None, status: str,
               error: str | None, kind: str | None = None) -> EvalResult:
        """An item's record of this evaluator's `record_type` (docs/plugins.md): `scores` the rubric's scores by key
        ({} for a scalar metric), `quality` their mean or the one number, `raw` what the model said, `status` ok |
        repaired | failed, `error` why it failed or what was repaired, `kind` why a failure happened (input, model,
        transient; a failed status without one is `parse`). The evaluator's name, model, settings (with the item's
        rubric where the answer depends on it) and weights come from the evaluator; the time from `run`."""
        if self.record_type is None:
            raise TypeError(f"{type(self).__name__} does not say what it answers: give it a record_type (ScoresResult, "
                            "TextResult, LetterResult or ScalarResult), or load it by name (load_evaluator)")
        settings = self.settings()
        if self.uses_rubric:
            settings["rubric"] = self.rubric_for(item).fingerprint
        if kind is None and status == "failed":
            kind = "parse"
        return self.record_type(image_id=item.image_id, evaluator=self.name, scores=scores, quality=quality,
                                raw_output=raw, parse_status=status, error=error, seconds=0.0, model=self.model_name,
                                error_kind=kind, settings=settings, random_weights=bool(self.random_weights))

    def failed(self, item, error: str | None, kind: str | None):
        """The record of an item that was never answered (`kind`: input, model, transient)."""
        return self.result(item, {}, None, None, "failed", error, kind=kind)

    def failure(self, item, exc: BaseException):
        return self.failed(item, describe(exc), error_kind(exc))

    def __call__(self, images: Sequence[Image.Image], poems: Sequence[Poem | Mapping[str, str]],
                 batch_size: int = 8, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> list[EvalResult]:
        """Score images against poems (dicts with title, author, text, optional tradition), batch by batch. An image
        over `max_image_pixels` is refused from its header before it is decoded (`files.open_image`): a failed
        result of kind `input`, as `tpb score` records it."""
        if len(images) != len(poems):
            raise ValueError(f"{len(images)} images but {len(poems)} poems")
        items = [checked_item(str(i), img, as_poem(p), max_image_pixels)
                 for i, (img, p) in enumerate(zip(images, poems))]
        return [r for start in range(0, len(items), batch_size) for r in self.score(items[start:start + batch_size])]


def checked_item(image_id: str, image: Image.Image, poem: Poem, max_pixels: int) -> ScoringItem:
    """An item of an image a caller hands over (perhaps not yet decoded): its size checked against the pixel limit
    before it is decoded, the one way every image is read (`files.open_image`), then as `rgb_item`."""
    try:
        image = open_image(image, max_pixels)
    except ImageError as exc:
        return ScoringItem(image_id, None, poem, str(exc))
    return rgb_item(image_id, image, poem)


def rgb_item(image_id: str, image: Image.Image, poem: Poem) -> ScoringItem:
    """An item with its image decoded and in RGB; an image that cannot be read is the item's error, not an exception."""
    try:
        image.load()
        return ScoringItem(image_id, image.convert("RGB"), poem)
    except Exception as exc:
        return ScoringItem(image_id, None, poem, f"unreadable image: {exc}")
