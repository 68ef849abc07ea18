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
answer that did not read) gets what `on_failure` says — by default the mean reward of the call's scored images of
its poem (one poem however it is given: a poem without an id is known by its content, `as_poem`), so its own reward
sits at its group's mean: PAE's part of its centred reward is zero. Under
Flow-GRPO's per-prompt standardisation its advantage is then zero only where PAE is the sole reward and the call
holds the prompt's whole group; in a weighted sum with other scorers it is what those scorers give it. Or a fixed
value, NaN (for a trainer that masks it), or an exception ("raise"). `info["status"]` says, per image,
which (`ok`, `repaired`; `filled`, `nan`) and `info["error"]` why.

With a calibration that holds a selective-judging threshold (`tpb calibrate --epsilon`), `abstain` makes the judge
abstain where it is unsure (`Calibration.abstains`): such an image's score is not used, and the image gets what
`abstain` says — its poem's mean as for a failure, NaN, a number, or the scalar of its intervals' lower bounds.
`info["abstained"]` says which, `info["abstained_share"]` how many, a call where the judge abstains on most of a
poem's images warns once, and `trl` logs the share per step. `scale="percentile"` gives the reward as its percentile
among the people's scores of the calibration images, in [0, 1] (docs/reward.md).
"""

from __future__ import annotations

import logging
import math
import os
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch
from PIL import Image

from .errors import ImageError
from .files import DEFAULT_MAX_IMAGE_PIXELS, open_image
from .judging.calibrated import SCORE_RANGE, Calibrated, interval_info, load_calibration
from .judging.evaluators import load_evaluator
from .judging.evaluators.base import EvalResult, Evaluator, as_poem
from .judging.results import weights_word
from .judging.tasks.scores import readout_fallback
from .poems import Poem
from .rubric import Rubric, rubric_for_tradition
from .stats.agree import RANDOM_WEIGHTS_NOTE

logger = logging.getLogger(__name__)
SLACK = 1e-5  # a float image may overshoot [0, 1] by rounding (a VAE's decode): that much is clipped, not refused

ON_FAILURE = ("mean", "raise", "nan")  # or a number: the reward of an image that could not be scored
ABSTAIN = ("mean", "nan", "lower")  # or a number, or True (as on_failure): the reward of an image abstained on
SCALES = ("score", "percentile")
ABSTAINED_METRIC = "pae/abstained"  # what `trl` logs through TRL's log_metric: the share abstained per call
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

    def __post_init__(self) -> None:
        """Weights are finite and at least 0, some above 0: a weighted mean of scores on [0, 1] then stays on [0, 1]
        (a negative weight would take it outside, where the reward's documented scale no longer holds)."""
        weights = self.weights or {}
        bad = {k: w for k, w in weights.items()
               if isinstance(w, bool) or not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0}
        if bad or (weights and not any(w > 0 for w in weights.values())):
            shown = ", ".join(f"{k!r}: {w!r}" for k, w in (bad or weights).items())
            raise ValueError(f"Scalar weights: {shown}: each weight must be a finite number of at least 0, and some "
                             "above 0, so that the reward stays a weighted mean on [0, 1]")

    def check(self, rubric: Rubric) -> None:
        """Refuse weights or gates that name no dimension of `rubric`: a misspelt key would otherwise weigh nothing
        and gate nothing, and every image would get the same reward."""
        for what, keys in (("weights", self.weights or {}), ("gates", self.gates)):
            unknown = [k for k in keys if k not in rubric.keys]
            if unknown:
                raise ValueError(f"Scalar {what}: {', '.join(map(repr, unknown))} "
                                 f"{'is not a dimension' if len(unknown) == 1 else 'are not dimensions'} of the "
                                 f"{rubric.name} rubric; its dimensions are {', '.join(rubric.keys)}")

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


def check_images(images: Any) -> None:
    """Refuse, each with one sentence, what `as_images` cannot turn into the pictures a generator meant: a tensor or
    array with a channel count other than 3, values that are not finite (NaN, infinity), floats outside [0, 1] (a
    [-1, 1] sampler output: give `(images + 1) / 2`). PIL images carry their own mode and pass."""
    if isinstance(images, (torch.Tensor, np.ndarray)) and images.ndim != 4:
        layout = "(N, C, H, W)" if isinstance(images, torch.Tensor) else "(N, H, W, C)"
        raise ValueError(f"the images are one {type(images).__name__} of shape {tuple(images.shape)}: give them as "
                         f"{layout}")
    for i, image in enumerate(images):
        if isinstance(image, (Image.Image, str, bytes, os.PathLike)):  # a file: checked when it is opened
            continue
        channels_first = isinstance(image, torch.Tensor)
        tensor = image.detach() if channels_first else torch.as_tensor(np.asarray(image))
        if tensor.ndim != 3 or tensor.shape[0 if channels_first else -1] != 3:
            raise ValueError(f"image {i} has shape {tuple(tensor.shape)}: the reward takes RGB images, 3 channels "
                             f"({'C, H, W' if channels_first else 'H, W, C'})")
        if not tensor.is_floating_point():
            continue
        finite = torch.isfinite(tensor)
        if not finite.all():
            raise ValueError(f"image {i} holds {int((~finite).sum())} values that are NaN or infinite: the reward "
                             "takes finite values in [0, 1]")
        low, high = float(tensor.min()), float(tensor.max())
        if low < -SLACK or high > 1 + SLACK:
            raise ValueError(f"image {i} has values in [{low:.3g}, {high:.3g}]: the reward takes floats in [0, 1] "
                             "(for a sampler's [-1, 1] output, give (images + 1) / 2)")


def as_images(images: Any, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> list[Image.Image]:
    """PIL images from what a trainer holds: PIL images, image files (paths or their bytes), a float tensor
    (N, C, H, W) in [0, 1] (Flow-GRPO's) or a uint8 one, or arrays (N, H, W, C), uint8 or floats in [0, 1] — checked
    first (`check_images`). Each passes `files.open_image`: one over `max_pixels` (checked before a file is decoded)
    is refused, naming its place in the batch."""
    check_images(images)
    if isinstance(images, (torch.Tensor, np.ndarray)):
        images = list(images)
    found = [im if isinstance(im, (Image.Image, str, bytes, os.PathLike)) else _pil(im) for im in images]
    out = []
    for i, image in enumerate(found):
        try:
            out.append(open_image(image, max_pixels))
        except ImageError as exc:
            raise type(exc)(f"image {i}: {exc}") from None
    return out


def _pil(array: torch.Tensor | np.ndarray) -> Image.Image:
    """One checked image as PIL: a tensor (C, H, W) or an array (H, W, C), floats in [0, 1] or uint8."""
    tensor = array.detach().cpu().permute(1, 2, 0) if isinstance(array, torch.Tensor) else torch.as_tensor(array)
    if tensor.is_floating_point():
        tensor = (tensor.float().clamp(0, 1) * 255).round()
    return Image.fromarray(tensor.to(torch.uint8).numpy())


def as_poems(poems: Mapping[str, Poem] | Iterable[Poem | Mapping]) -> dict[str, Poem]:
    """The poems a reward knows, by id: `Poem`s, rows with a poem's fields (those of `load_dataset(..., "poems")`),
    a `datasets.Dataset` of them, or a `DatasetDict` (every split)."""
    if isinstance(poems, Mapping) and all(isinstance(p, Poem) for p in poems.values()):
        return dict(poems)
    rows = [row for split in poems.values() for row in split] if isinstance(poems, Mapping) else list(poems)
    known = {}
    for i, row in enumerate(rows):
        if not isinstance(row, Poem) and not (isinstance(row, Mapping) and row.get("poem_id") and row.get("text")):
            raise ValueError(f"poems[{i}] is not a poem: give Poems, or rows with poem_id, title, author, text and "
                             "tradition (a dataset's poems config)")
        poem = as_poem(row)
        known[poem.poem_id] = poem
    return known


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def same_poem(poems: Sequence[Poem], i: int) -> np.ndarray:
    """The call's images in image i's group: those of its poem (what a `mean` fill averages over)."""
    return np.array([p.poem_id == poems[i].poem_id for p in poems])


def lowered(result: EvalResult) -> EvalResult:
    """The result with quality and each dimension at its interval's lower bound (the score range's bottom where it
    has none): what `abstain="lower"` gives to the scalar."""
    block = result.calibrated or {}

    def bound(interval: list[float] | None, score: float | None) -> float | None:
        return None if score is None else interval[0] if interval else SCORE_RANGE[0]

    return replace(result, quality=bound(block.get("quality"), result.quality),
                   scores={k: bound(block.get("scores", {}).get(k), v) for k, v in result.scores.items()})


class PAEReward:
    """The reward callable (built by `load_reward`). `on_failure`, `deadline`, `abstain` and `scale`: see the
    module's docstring."""

    def __init__(self, evaluator: Evaluator, poems: Mapping[str, Poem] | Iterable[Poem | Mapping] = (),
                 scalar: Scalar | None = None, batch_size: int = 16, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
                 on_failure: str | float = "mean", deadline: float | None = None,
                 abstain: str | float | bool | None = None, scale: str = "score"):
        if not (on_failure in ON_FAILURE or is_number(on_failure)):
            raise ValueError(f"on_failure must be {', '.join(map(repr, ON_FAILURE))} or a number, not {on_failure!r}")
        self.calibration = getattr(evaluator, "calibration", None)
        self.abstain = self.abstain_choice(abstain, on_failure)
        if scale not in SCALES:
            raise ValueError(f"scale must be {' or '.join(map(repr, SCALES))}, not {scale!r}")
        if scale == "percentile" and (self.calibration is None or self.calibration.human_quality is None):
            raise ValueError("scale='percentile' reads the people's scores of a calibration's images: give "
                             "calibration= a file made by this version of tpb calibrate (format /3)")
        self.scale = scale
        backend = getattr(evaluator, "backend", None)
        if deadline is not None and not hasattr(backend, "within"):
            raise ValueError("deadline= applies to a served judge (base_url=...): a local model's batch is not cut "
                             "short")
        self.evaluator = evaluator
        self.poems = as_poems(poems)
        self.scalar = scalar or Scalar()
        self.batch_size, self.on_failure, self.deadline = batch_size, on_failure, deadline
        self.max_image_pixels = max_image_pixels
        self.checked: set[str] = set()  # the rubrics (by fingerprint) the scalar was checked against
        self.told: set[str] = set()  # what was said once: the random-weights note, the readout's fallback
        if getattr(evaluator, "rubric", None) is not None:
            self.check_scalar(evaluator.rubric)

    def abstain_choice(self, abstain: Any, on_failure: str | float) -> str | float | None:
        """What an image abstained on gets (None: the judge never abstains), checked against the calibration."""
        if abstain is None or abstain is False:
            return None
        if abstain is True:
            if on_failure == "raise":
                raise ValueError("abstain=True treats an abstention as on_failure says, and on_failure='raise' would "
                                 "end the call: choose abstain='mean', 'nan', 'lower' or a number")
            abstain = on_failure
        if not (abstain in ABSTAIN or is_number(abstain)):
            raise ValueError(f"abstain must be True, {', '.join(map(repr, ABSTAIN))} or a number, not {abstain!r}")
        if self.calibration is None or self.calibration.abstention is None:
            raise ValueError("abstain= needs calibration= a file with a selective-judging threshold: make one with "
                             "tpb calibrate ... --epsilon E --delta D (docs/calibration.md)")
        return abstain

    def check_scalar(self, rubric: Rubric) -> None:
        if rubric.fingerprint not in self.checked:
            self.scalar.check(rubric)
            self.checked.add(rubric.fingerprint)

    def tell_once(self, what: str, message: str) -> None:
        if what not in self.told:
            self.told.add(what)
            logger.warning(message)

    def poem(self, prompt: Any, meta: Mapping[str, Any] | None, index: int) -> Poem:
        """The poem an image illustrates: metadata's `poem` or `poem_id`, else the prompt itself (a poem, a mapping
        with its text, or a poem id of the poems this reward was given)."""
        meta = meta or {}
        poem_id = meta.get("poem_id")
        if meta.get("poem") is None and poem_id is not None and poem_id not in self.poems:
            raise ValueError(f"image {index}: its metadata poem_id {poem_id!r} is not one of the {len(self.poems)} "
                             "poems this reward knows (give the poems with poems=..., e.g. the dataset's poems config)")
        for candidate in (meta.get("poem"), poem_id, prompt):
            if isinstance(candidate, (Poem, Mapping)):
                return as_poem(candidate)
            if isinstance(candidate, str) and candidate in self.poems:
                return self.poems[candidate]
        raise ValueError(f"image {index}: its prompt {str(prompt)[:60]!r} is neither a poem nor the id of one of "
                         f"the {len(self.poems)} poems this reward knows (give metadata 'poem_id', or poems=...)")

    def results(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Mapping] | None = None
                ) -> tuple[list[Poem], list[EvalResult]]:
        """Each image's poem and result, the call held to the deadline."""
        images = as_images(images, self.max_image_pixels)
        if len(images) != len(prompts):
            raise ValueError(f"{len(images)} images but {len(prompts)} prompts")
        metadata = metadata if metadata is not None else [None] * len(images)
        poems = [self.poem(p, m, i) for i, (p, m) in enumerate(zip(prompts, metadata))]
        if getattr(self.evaluator, "rubric", None) is None:  # each poem's tradition picks its rubric
            for poem in poems:
                self.check_scalar(rubric_for_tradition(poem.tradition))
        bound = self.evaluator.backend.within(self.deadline) if self.deadline is not None else nullcontext()
        with bound:
            return poems, self.evaluator(images, poems, batch_size=self.batch_size)

    def scaled(self, value: float) -> float:
        """A scalar's value on the reward's scale: itself, or its percentile among the people's scores."""
        return self.calibration.percentile(value) if self.scale == "percentile" else value

    def value(self, result: EvalResult) -> float:
        return self.scaled(self.scalar(result))

    def abstains(self, result: EvalResult) -> bool:
        """Whether the judge abstains on a result, where it may (`Calibration.abstains_on`, as `tpb score --abstain`
        marks it: a result the calibration could not be applied to, another rubric's, is abstained on too)."""
        return self.abstain is not None and self.calibration.abstains_on(result)

    def rewards(self, poems: Sequence[Poem], results: Sequence[EvalResult]
                ) -> tuple[np.ndarray, list[str], np.ndarray]:
        """Each image's reward, status and whether the judge abstained on it: the scalar of a kept image (on the
        reward's scale); `on_failure` for one that could not be scored, `abstain` for one abstained on."""
        failed = [i for i, r in enumerate(results) if r.parse_status == "failed"]
        if failed and self.on_failure == "raise":
            raise RewardFailed(f"{len(failed)} of the {len(results)} images could not be scored: " + "; ".join(
                f"image {i}: {results[i].error}" for i in failed[:5]) + ("; ..." if len(failed) > 5 else ""))
        abstained = np.array([self.abstains(r) for r in results], dtype=bool)
        rewards = np.array([math.nan if i in failed else self.value(r) for i, r in enumerate(results)],
                           dtype=np.float64)
        status = [r.parse_status if r.parse_status != "failed" else "nan" if self.on_failure == "nan" else "filled"
                  for r in results]
        kept = ~np.isnan(rewards) & ~abstained  # what a mean fill averages
        if self.abstain == "lower":
            for i in np.flatnonzero(abstained):
                rewards[i] = self.value(lowered(results[i]))
        elif self.abstain is not None:
            self.fill(rewards, np.flatnonzero(abstained), self.abstain, kept, poems)
        self.fill(rewards, failed, self.on_failure, kept, poems)
        return rewards, status, abstained

    def fill(self, rewards: np.ndarray, which: Sequence[int], how: str | float, kept: np.ndarray,
             poems: Sequence[Poem]) -> None:
        """Give the images `which` what `how` says: the mean reward of the kept images of their poem, else of all the
        kept images, else the scalar's `missing`; NaN; or a number."""
        if how == "mean":
            overall = float(rewards[kept].mean()) if kept.any() else self.scaled(self.scalar.missing)
            for i in which:
                same = kept & same_poem(poems, i)
                rewards[i] = float(rewards[same].mean()) if same.any() else overall
        else:
            rewards[list(which)] = math.nan if how == "nan" else float(how)

    def tell_abstained(self, poems: Sequence[Poem], abstained: np.ndarray) -> None:
        """Warn once where the judge abstained on most images of a group (a poem's)."""
        groups = {p.poem_id: i for i, p in enumerate(poems)}
        most = [poem for poem, i in groups.items() if abstained[same_poem(poems, i)].mean() > 0.5]
        if most:
            self.tell_once("abstained", f"the judge abstained on most images of {len(most)} of the call's "
                                        f"{len(groups)} poems (e.g. {most[0]}): their rewards are abstain="
                                        f"{self.abstain!r}'s, not the judge's; info['abstained'] says which "
                                        "(said once)")

    def __call__(self, images: Any, prompts: Sequence[Any], metadata: Sequence[Mapping] | None = None
                 ) -> tuple[np.ndarray, dict[str, Any]]:
        """Flow-GRPO's reward signature: (scores, info). `info` has per-dimension score and confidence vectors (NaN
        where a dimension does not apply or no confidence is known), quality, its confidence and sd, each image's
        status and error (see the module's docstring), whether a random-weight test model judged (`random_weights`:
        True, False, or "unknown" for a served model) and, per image, why an answer asked for the readout was decoded
        instead (`readout_fallback`, None where it was not). The random-weights note and a fallback are also said
        once, as a warning."""
        poems, results = self.results(images, prompts, metadata)
        rewards, status, abstained = self.rewards(poems, results)
        if self.abstain is not None:
            self.tell_abstained(poems, abstained)
        fallbacks = [readout_fallback(r.to_json()) for r in results]
        weights = weights_word(getattr(self.evaluator, "random_weights", False))
        if weights is True:
            self.tell_once("random_weights", RANDOM_WEIGHTS_NOTE)
        if any(fallbacks):
            why = next(f for f in fallbacks if f)
            self.tell_once("readout", f"the readout fell back to decoding for {sum(map(bool, fallbacks))} of "
                                      f"{len(results)} images ({why}): their scores have no confidences; "
                                      "info['readout_fallback'] says which (said once)")
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
                "random_weights": weights, "readout_fallback": fallbacks, **interval_info(results)}
        if self.abstain is not None:
            info.update(abstained=abstained, abstained_share=float(abstained.mean()) if len(abstained) else 0.0)
        return rewards, info

    def trl(self, prompts: Sequence[Any] | None = None, completions: Any = None, **kwargs) -> list[float]:
        """A TRL-style reward function: `completions` are the generated images, the poems come from a `poem_id` or
        `poem` column (kwargs, one value per completion) or else from `prompts`. Where the judge may abstain and the
        trainer passes TRL's `log_metric` and `log_extra`, the share abstained is logged as `pae/abstained` and each
        completion's as the column `pae_abstained`."""
        n = len(completions)
        columns = {k: kwargs[k] for k in ("poem_id", "poem") if kwargs.get(k) is not None}
        metadata = [{k: v[i] for k, v in columns.items()} for i in range(n)]
        scores, info = self(completions, prompts if prompts is not None else [None] * n, metadata)
        if "abstained" in info:
            if callable(kwargs.get("log_metric")):
                kwargs["log_metric"](ABSTAINED_METRIC, info["abstained_share"])
            if callable(kwargs.get("log_extra")):
                kwargs["log_extra"]("pae_abstained", info["abstained"].tolist())
        return scores.tolist()


def load_reward(model: str | None = None, adapter: str | None = None, *,
                base_url: str | Sequence[str] | None = None, poems: Mapping[str, Poem] | Iterable[Poem | Mapping] = (),
                scalar: Scalar | None = None, readout: str = "expected", batch_size: int = 16,
                calibration: str | Path | None = None, on_failure: str | float = "mean",
                deadline: float | None = None, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
                abstain: str | float | bool | None = None, scale: str = "score", **kwargs) -> PAEReward:
    """The reward, its judge loaded once. Without `base_url`: a local PAE (`model`, `adapter`, and `device`,
    `quantize`, `max_pixels`, `rubric` in kwargs). With `base_url` (one server, a comma list or a list of them: a
    fleet, each request to the replica with the fewest in flight): the served judge (`model` is the name the servers
    know; `api_key_env`, `concurrency`, `timeout`, `retries`, ... in kwargs), its readout from the servers' logprobs,
    each call within `deadline` seconds (default 300). `poems`: what metadata's `poem_id` names (`as_poems`);
    `scalar`: how a result becomes the reward, checked against the rubric. `on_failure`: what an image that could not
    be scored gets (see the module's docstring). `calibration` (a `tpb calibrate` file for this judge as set up here)
    adds each image's intervals to `info` (docs/calibration.md); with a selective-judging threshold in it,
    `abstain` (True: as `on_failure` says; "mean", "nan", "lower" or a number) makes the judge abstain where it is
    unsure, and `scale="percentile"` gives each reward as its percentile among the people's scores of the calibration
    images. Images over `max_image_pixels` are refused (`as_images`)."""
    if base_url:
        evaluator = load_evaluator("api", model=model, base_url=base_url, readout=readout, **kwargs)
        deadline = DEFAULT_DEADLINE if deadline is None else deadline
    else:
        evaluator = load_evaluator("pae", model=model, adapter=adapter, readout=readout, **kwargs)
    if calibration is not None:
        evaluator = Calibrated(evaluator, load_calibration(calibration))
    return PAEReward(evaluator, poems, scalar, batch_size, max_image_pixels, on_failure, deadline, abstain, scale)
