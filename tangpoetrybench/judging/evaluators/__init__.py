"""The evaluators' records and base class (`base`: `ScoringItem`, `EvalResult`, `Evaluator`), and the evaluators that
are models of their own rather than a task asked of a backend: CLIPScore, BLIPScore and VQAScore (the scalar
baselines). PAE, the served judge, recognition and SemJudge are tasks joined to backends (`judging.judge`); every
evaluator is built by name through the registry (`judging.registry.load_evaluator`, re-exported here).

    >>> from tangpoetrybench.judging.evaluators import load_evaluator
    >>> clip = load_evaluator("clipscore", model="OFA-Sys/chinese-clip-vit-base-patch16")
    >>> results = clip(images=[img], poems=[{"title": "静夜思", "author": "李白", "text": "床前明月光，..."}])

Models load once, when the evaluator is built; each call scores a batch.
"""

from __future__ import annotations

from ..registry import evaluator_names, load_evaluator
from .base import EvalResult, Evaluator, ScoringItem

__all__ = ["EvalResult", "Evaluator", "ScoringItem", "evaluator_names", "load_evaluator"]
