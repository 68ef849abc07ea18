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

A call never hangs and never dies on one bad request: a served judge's call has a total deadline (`deadline`, over
every request and retry of the call), and an image that could not be scored (a failed request, the deadline, an
answer that did not read) gets what `on_failure` says — by default the mean reward of the images of its prompt that
were scored (its advantage under Flow-GRPO's per-prompt standardisation is then zero: it pushes the policy nowhere),
or a fixed value, NaN (for a trainer that masks it), or an exception ("raise"). `info["status"]` says, per image,
which (`ok`, `repaired`; `filled`, `nan`) and `info["error"]` why.
"""

from __future__ import annotations

import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from PIL import Image

from .judging.calibrated import Calibrated, interval_info, load_calibration
from .judging.evaluators import load_evaluator
from .judging.evaluators.base import EvalResult, Evaluator, as_poem
from .poems import Poem

ON_FAILURE = ("mean", "raise", "nan")  # or a number: the reward of an image that could not be scored
DEFAULT_DEADLINE = 300.0  # seconds a served judge's reward call may take, every request and retry included


class RewardFailed(RuntimeError):
    """Some images of a reward call could not be scored and the caller asked for an exception (`on_failure="raise"`)."""


@dataclass
class Scalar:
    """How a result becomes one float. `weights` (dimension → weight; None: quality, every dimension alike) makes
    it the weighted mean of the dimensions that apply; `confidence_weighted` multiplies each weight by the
    dimension's confidence (readout only); `gates` (dimension → floor) gives `missing` wherever that dimension's
    score is below its floor; `missing` is also the reward of an image scored with every dimension excluded. (An image
    that could not be scored at all gets the reward's `on_failure`.)"""

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


def as_images(images: Any) -> list[Image.Image]:
    """PIL images from what a trainer holds: PIL images, a float tensor (N, C, H, W) in [0, 1] (Flow-GRPO's), or
    uint8 arrays (N, H, W, C)."""
    if isinstance(images, torch.Tensor):
        arrays = (images.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).cpu().numpy()
        return [Image.fromarray(a) for a in arrays]
    if isinstance(images, np.ndarray):
        return [Image.fromarray(a) for a in images]
    return [im if isinstance(im, Image.Image) else Image.fromarray(np.asarray(im)) for im in images]


class PAEReward:
    """The reward callable (built by `load_reward`). `on_failure` and `deadline`: see the module's docstring."""

    def __init__(self, evaluator: Evaluator, poems: Mapping[str, Poem] | Sequence[Poem] = (),
                 scalar: Scalar | None = None, batch_size: int = 16, on_failure: str | float = "mean",
                 deadline: float | None = None):
        if not (on_failure in ON_FAILURE or isinstance(on_failure, (int, float)) and not isinstance(on_failure, bool)):
            raise ValueError(f"on_failure must be {', '.join(map(repr, ON_FAILURE))} or a number, not {on_failure!r}")
        backend = getattr(evaluator, "backend", None)
        if deadline is not None and not hasattr(backend, "within"):
            raise ValueError("deadline= applies to a served judge (base_url=...): a local model's batch is not cut "
                             "short")
        self.evaluator = evaluator
        self.poems = dict(poems) if isinstance(poems, Mapping) else {p.poem_id: p for p in poems}
        self.scalar = scalar or Scalar()
        self.batch_size, self.on_failure, self.deadline = batch_size, on_failure, deadline

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

    def results(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Mapping] | None = None
                ) -> tuple[list[Poem], list[EvalResult]]:
        """Each image's poem and result, the call held to the deadline."""
        images = as_images(images)
        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} images but {len(prompts)} prompts")
        metadata = metadata if metadata is not None else [None] * len(images)
        poems = [self.poem(p, m, i) for i, (p, m) in enumerate(zip(prompts, metadata))]
        bound = self.evaluator.backend.within(self.deadline) if self.deadline is not None else nullcontext()
        with bound:
            return poems, self.evaluator(images, poems, batch_size=self.batch_size)

    def rewards(self, poems: Sequence[Poem], results: Sequence[EvalResult]) -> tuple[np.ndarray, list[str]]:
        """Each image's reward and status: the scalar of a scored image; `on_failure` for one that was not."""
        failed = [i for i, r in enumerate(results) if r.parse_status == "failed"]
        if failed and self.on_failure == "raise":
            raise RewardFailed(f"{len(failed)} of the {len(results)} images could not be scored: " + "; ".join(
                f"image {i}: {results[i].error}" for i in failed[:5]) + ("; ..." if len(failed) > 5 else ""))
        rewards = np.array([math.nan if i in failed else self.scalar(r) for i, r in enumerate(results)],
                           dtype=np.float64)
        status = [r.parse_status if r.parse_status != "failed" else "nan" if self.on_failure == "nan" else "filled"
                  for r in results]
        if self.on_failure == "mean":
            scored = ~np.isnan(rewards)
            overall = float(rewards[scored].mean()) if scored.any() else self.scalar.missing
            for i in failed:
                same = scored & np.array([p.poem_id == poems[i].poem_id for p in poems])
                rewards[i] = float(rewards[same].mean()) if same.any() else overall
        elif self.on_failure != "nan":
            rewards[failed] = float(self.on_failure)
        return rewards, status

    def __call__(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Mapping] | None = None
                 ) -> tuple[np.ndarray, dict[str, Any]]:
        """Flow-GRPO's reward signature: (scores, info). `info` has per-dimension score and confidence vectors (NaN
        where a dimension does not apply or no confidence is known), quality, its confidence and sd, and each
        image's status and error (see the module's docstring)."""
        poems, results = self.results(images, prompts, metadata)
        rewards, status = self.rewards(poems, results)
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
                "status": status, "error": [r.error if r.parse_status == "failed" else None for r in results],
                **interval_info(results)}
        return rewards, info

    def trl(self, prompts: Sequence[Any] | None = None, completions: Any = None, **kwargs) -> list[float]:
        """A TRL-style reward function: `completions` are the generated images, the poems come from a `poem_id` or
        `poem` column (kwargs, one value per completion) or else from `prompts`."""
        n = len(completions)
        columns = {k: kwargs[k] for k in ("poem_id", "poem") if kwargs.get(k) is not None}
        metadata = [{k: v[i] for k, v in columns.items()} for i in range(n)]
        scores, _ = self(completions, prompts if prompts is not None else [None] * n, metadata)
        return scores.tolist()


def load_reward(model: str | None = None, adapter: str | None = None, *,
                base_url: str | Sequence[str] | None = None, poems: Mapping[str, Poem] | Sequence[Poem] = (),
                scalar: Scalar | None = None, readout: str = "expected", batch_size: int = 16,
                calibration: str | Path | None = None, on_failure: str | float = "mean",
                deadline: float | None = None, **kwargs) -> PAEReward:
    """The reward, its judge loaded once. Without `base_url`: a local PAE (`model`, `adapter`, and `device`,
    `quantize`, `max_pixels`, `rubric` in kwargs). With `base_url` (one server, a comma list or a list of them: a
    fleet, each request to the replica with the fewest in flight): the served judge (`model` is the name the servers
    know; `api_key_env`, `concurrency`, `timeout`, `retries`, ... in kwargs), its readout from the servers' logprobs,
    each call within `deadline` seconds (default 300). `on_failure`: what an image that could not be scored gets
    (see the module's docstring). `calibration` (a `tpb calibrate` file for this judge as set up here) adds each
    image's intervals to `info` (docs/calibration.md)."""
    if base_url:
        evaluator = load_evaluator("api", model=model, base_url=base_url, readout=readout, **kwargs)
        deadline = DEFAULT_DEADLINE if deadline is None else deadline
    else:
        evaluator = load_evaluator("pae", model=model, adapter=adapter, readout=readout, **kwargs)
    if calibration is not None:
        evaluator = Calibrated(evaluator, load_calibration(calibration))
    return PAEReward(evaluator, poems, scalar, batch_size, on_failure, deadline)
