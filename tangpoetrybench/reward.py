"""PAE as a reward for reinforcement learning of image generators (Flow-GRPO, DanceGRPO, a TRL-style loop).

    >>> from tangpoetrybench.reward import load_reward
    >>> reward = load_reward(model="Qwen/Qwen3-VL-8B-Instruct", adapter="path/to/pae")   # loaded once
    >>> scores, info = reward(images, prompts, metadata)        # Flow-GRPO's signature
    >>> trainer = GRPOTrainer(..., reward_funcs=[reward.trl])   # TRL's: (prompts, completions, **kwargs)

The judge is built once (a local PAE on its device, or a served one through the `api` evaluator) and scores each
call's images in batches. By default it uses the probability readout (`judging.readout`): continuous expected
scores with a confidence per dimension, deterministic, never a failed parse. The scalar is chosen by `Scalar`:
quality (the mean of the dimensions) by default, or any weighted mean of dimensions, optionally weighted by the
readout's confidences, with gates that zero the reward where a dimension falls below a floor (see docs/reward.md
for the dimensions a generator can game).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from PIL import Image

from .errors import ImageError
from .files import DEFAULT_MAX_IMAGE_PIXELS, open_image
from .judging.calibrated import Calibrated, interval_info, load_calibration
from .judging.evaluators import load_evaluator
from .judging.evaluators.base import EvalResult, Evaluator, as_poem
from .poems import Poem


@dataclass
class Scalar:
    """How a result becomes one float. `weights` (dimension → weight; None: quality, every dimension alike) makes
    it the weighted mean of the dimensions that apply; `confidence_weighted` multiplies each weight by the
    dimension's confidence (readout only); `gates` (dimension → floor) gives `missing` wherever that dimension's
    score is below its floor; `missing` is also the reward of an image without a score."""

    weights: Mapping[str, float] | None = None
    confidence_weighted: bool = False
    gates: Mapping[str, float] = field(default_factory=dict)
    missing: float = 0.0

    def __call__(self, result: EvalResult) -> float:
        scores = result.scores
        gated = any(scores.get(k) is not None and scores[k] < floor for k, floor in self.gates.items())
        if result.quality is None or gated:  # a dimension that does not apply passes its gate
            return self.missing
        if self.weights is None and not self.confidence_weighted:
            return result.quality
        confidence = {k: d["confidence"] for k, d in (result.readout or {}).get("dimensions", {}).items()}
        if self.confidence_weighted and not confidence:
            raise ValueError("confidence weighting needs the readout's confidences (readout='expected')")
        pairs = [(w * (confidence[k] if self.confidence_weighted else 1.0), scores[k])
                 for k, w in (self.weights or dict.fromkeys(scores, 1.0)).items() if scores.get(k) is not None]
        total = sum(w for w, _ in pairs)
        return sum(w * s for w, s in pairs) / total if total > 0 else self.missing


def as_images(images: Any, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> list[Image.Image]:
    """PIL images from what a trainer holds: PIL images, image files (paths or their bytes), a float tensor
    (N, C, H, W) in [0, 1] (Flow-GRPO's), or uint8 arrays (N, H, W, C). Each passes `files.open_image`: one over
    `max_pixels` (checked before a file is decoded) is refused, naming its place in the batch."""
    if isinstance(images, torch.Tensor):
        arrays = (images.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
        found = [Image.fromarray(a) for a in arrays]
    elif isinstance(images, np.ndarray):
        found = [Image.fromarray(a) for a in images]
    else:
        found = [im if isinstance(im, (Image.Image, str, bytes, os.PathLike)) else Image.fromarray(np.asarray(im))
                 for im in images]
    out = []
    for i, image in enumerate(found):
        try:
            out.append(open_image(image, max_pixels))
        except ImageError as exc:
            raise type(exc)(f"image {i}: {exc}") from None
    return out


class PAEReward:
    """The reward callable (built by `load_reward`)."""

    def __init__(self, evaluator: Evaluator, poems: Mapping[str, Poem] | Sequence[Poem] = (),
                 scalar: Scalar | None = None, batch_size: int = 16, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
        self.evaluator = evaluator
        self.poems = dict(poems) if isinstance(poems, Mapping) else {p.poem_id: p for p in poems}
        self.scalar = scalar or Scalar()
        self.batch_size = batch_size
        self.max_image_pixels = max_image_pixels

    def poem(self, prompt: Any, meta: Mapping[str, Any] | None, index: int) -> Poem:
        """The poem an image illustrates: metadata's `poem` or `poem_id`, else the prompt itself (a poem, a mapping
        with its text, or a poem id of the poems this reward was given)."""
        meta = meta or {}
        for candidate in (meta.get("poem"), meta.get("poem_id"), prompt):
            if isinstance(candidate, (Poem, Mapping)):
                return as_poem(candidate, index)
            if isinstance(candidate, str) and candidate in self.poems:
                return self.poems[candidate]
        raise ValueError(f"image {index}: its prompt {str(prompt)[:60]!r} is neither a poem nor the id of one of "
                         f"the {len(self.poems)} poems this reward knows (give metadata 'poem_id', or poems=...)")

    def results(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Mapping] | None = None) -> list[EvalResult]:
        images = as_images(images, self.max_image_pixels)
        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} images but {len(prompts)} prompts")
        metadata = metadata if metadata is not None else [None] * len(images)
        poems = [self.poem(p, m, i) for i, (p, m) in enumerate(zip(prompts, metadata))]
        return self.evaluator(images, poems, batch_size=self.batch_size)

    def __call__(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Mapping] | None = None
                 ) -> tuple[np.ndarray, dict[str, Any]]:
        """Flow-GRPO's reward signature: (scores, info). `info` has per-dimension score and confidence vectors (NaN
        where a dimension does not apply or no confidence is known), quality, its confidence and sd, and each
        image's parse status."""
        results = self.results(images, prompts, metadata)
        keys = list(dict.fromkeys(k for r in results for k in r.scores))
        nan = math.nan

        def vector(values) -> np.ndarray:
            return np.array([nan if v is None else v for v in values], dtype=np.float64)

        def dims(r: EvalResult) -> dict:
            return (r.readout or {}).get("dimensions", {})

        info = {"scores": {k: vector(r.scores.get(k) for r in results) for k in keys},
                "confidence": {k: vector(dims(r).get(k, {}).get("confidence") for r in results) for k in keys},
                "quality": vector(r.quality for r in results),
                "quality_confidence": vector((r.readout or {}).get("quality_confidence") for r in results),
                "quality_sd": vector((r.readout or {}).get("quality_sd") for r in results),
                "status": [r.parse_status for r in results], **interval_info(results)}
        return np.array([self.scalar(r) for r in results], dtype=np.float64), info

    def trl(self, prompts: Sequence[Any] | None = None, completions: Any = None, **kwargs) -> list[float]:
        """A TRL-style reward function: `completions` are the generated images, the poems come from a `poem_id` or
        `poem` column (kwargs, one value per completion) or else from `prompts`."""
        n = len(completions)
        columns = {k: kwargs[k] for k in ("poem_id", "poem") if kwargs.get(k) is not None}
        metadata = [{k: v[i] for k, v in columns.items()} for i in range(n)]
        scores, _ = self(completions, prompts if prompts is not None else [None] * n, metadata)
        return scores.tolist()


def load_reward(model: str | None = None, adapter: str | None = None, *, base_url: str | None = None,
                poems: Mapping[str, Poem] | Sequence[Poem] = (), scalar: Scalar | None = None,
                readout: str = "expected", batch_size: int = 16, calibration: str | Path | None = None,
                max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS, **kwargs) -> PAEReward:
    """The reward, its judge loaded once. Without `base_url`: a local PAE (`model`, `adapter`, and `device`,
    `quantize`, `max_pixels`, `rubric` in kwargs). With `base_url`: the served judge (`model` is the name the server
    knows; `api_key_env`, `concurrency`, ... in kwargs), its readout from the server's logprobs. `calibration` (a
    `tpb calibrate` file for this judge as set up here) adds each image's intervals to `info` (docs/calibration.md).
    Images over `max_image_pixels` are refused (`as_images`)."""
    if base_url:
        evaluator = load_evaluator("api", model=model, base_url=base_url, readout=readout, **kwargs)
    else:
        evaluator = load_evaluator("pae", model=model, adapter=adapter, readout=readout, **kwargs)
    if calibration is not None:
        evaluator = Calibrated(evaluator, load_calibration(calibration))
    return PAEReward(evaluator, poems, scalar, batch_size, max_image_pixels)
