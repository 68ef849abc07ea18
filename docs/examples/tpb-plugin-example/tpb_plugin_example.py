"""An example evaluator plugin for TangPoetryBench: the mean brightness of an image, in [0, 1].

It measures nothing about how an image illustrates a poem; it shows the protocol (docs/plugins.md):

- a factory, named by an entry point in the group `tangpoetrybench.evaluators` of this distribution's
  pyproject.toml, called with the options a user gave that its signature names (here `max_pixels`);
- its `tasks` attribute: what it answers (`scalar`: one number per image, like CLIPScore), whose record type its
  evaluator declares (`record_type = ScalarResult`: every record it writes says `"task": "scalar"`);
- it returns an `Evaluator`: `_prepare` (CPU only, in data-loader workers) and `_run` (the model), one record per
  item (`self.result(...)`); `settings()` what a resumed run must match.
"""

from __future__ import annotations

from typing import Sequence

from PIL import ImageStat

from tangpoetrybench.judging.evaluators.base import Evaluator, ScalarResult, ScoringItem
from tangpoetrybench.models import DEFAULT_MAX_PIXELS, fit_pixels


class Brightness(Evaluator):
    name = "brightness"
    record_type = ScalarResult

    def __init__(self, max_pixels: int = DEFAULT_MAX_PIXELS):
        super().__init__()
        self.model_name, self.max_pixels = "mean-pixel", max_pixels

    def settings(self) -> dict:
        return {"max_pixels": self.max_pixels}

    def _prepare(self, items: Sequence[ScoringItem]) -> list[float]:
        return [ImageStat.Stat(fit_pixels(item.image, self.max_pixels).convert("L")).mean[0] / 255 for item in items]

    def _run(self, inputs: list[float], items: Sequence[ScoringItem]) -> list[ScalarResult]:
        return [self.result(item, {}, round(value, 6), None, "ok", None) for item, value in zip(items, inputs)]


def brightness(max_pixels: int | None = None) -> Brightness:
    """The factory the entry point names: `tpb score --evaluator brightness [--max-pixels N]`."""
    return Brightness(**({"max_pixels": max_pixels} if max_pixels else {}))


brightness.tasks = ("scalar",)
