"""The evaluator base class and the evaluators that are models of their own rather than a task asked of a backend.

    base        `ScoringItem`, `Evaluator` (batching, failures one item at a time, `result`: a record of the
                evaluator's record type, `judging.records`) and the one-call scoring API
    clipscore   CLIPScore (CLIP or Chinese-CLIP), and the base of the image-text metrics
    blipscore   BLIPScore: BLIP's image-text matching probability
    vqascore    VQAScore: the probability that Qwen3-VL answers yes to a question about the poem

PAE, the served judge and recognition are tasks joined to backends (`judging.judge`); SemJudge is a driver of its own
over the same `ask` (`judging.semjudge`). Every evaluator is built by name through the registry
(`judging.registry.load_evaluator`, re-exported here).

    >>> from tangpoetrybench.judging.evaluators import load_evaluator
    >>> clip = load_evaluator("clipscore", model="OFA-Sys/chinese-clip-vit-base-patch16")
    >>> results = clip(images=[img], poems=[{"title": "静夜思", "author": "李白", "text": "床前明月光，..."}])

Models load once, when the evaluator is built; each call scores a batch.
"""

from __future__ import annotations

from ..registry import evaluator_names, load_evaluator
from .base import EvalResult, Evaluator, ScoringItem

__all__ = ["EvalResult", "Evaluator", "ScoringItem", "evaluator_names", "load_evaluator"]
