"""The logic of the `evaluate` module `metric/pae` (the module itself stays thin).

Two uses of one module:
- agreement (the default configuration, loads no model): `compute(predictions=..., references=...,
  poem_ids=...)`, lists per image of the ten scores (None: not applicable) → SPEC §7 statistics with
  `<stat>_ci` intervals. A scalar metric's prediction is a one-element list.
- scoring (`config_name` "pae", "clipscore", "blipscore" or "vqascore"): `compute(images=..., poems=...)`,
  poems as {"title", "author", "text"} → per-image scores, quality, parse status and raw answers.
"""

from __future__ import annotations

import datasets

from .agreement import DEFAULT_BOOTSTRAP, AgreementData, agreement
from .evaluators import EVALUATORS, Evaluator, load_evaluator
from .rubric import rubric_for_tradition

AGREEMENT_CONFIGS = ("default", "agreement")
CONFIGS = AGREEMENT_CONFIGS + EVALUATORS

DESCRIPTION = """\
PAE (PoemAutoEvaluator) scores how well an image illustrates a classical Chinese poem on the ten dimensions
of the TangPoetryBench rubric, and this module also measures how well any evaluator agrees with human
ratings, with bootstrap confidence intervals over poems. Scoring configurations: "pae" (Qwen3-VL with the
PAE LoRA adapter; without an adapter, the zero-shot open baseline), "clipscore", "blipscore", "vqascore".
The default configuration computes agreement and loads no model.
"""

KWARGS_DESCRIPTION = """
Agreement (default configuration):
    predictions: list of per-image predictions, each a list of the ten dimension scores in rubric order
        (None where not applicable or not given), or a one-element list [score] for a scalar metric.
    references: list of per-image human scores, each a list of the ten dimension scores (None: not applicable).
    poem_ids: list of the poem of each image (intervals resample poems; τ is computed within poems).
    reference_quality (optional, at compute): the human quality per image (a built dataset's `quality`
        column, null where QC kept no rating); default: the mean of the non-null reference scores.
Scoring ("pae", "clipscore", "blipscore", "vqascore"):
    images: list of PIL images.
    poems: list of {"title": str, "author": str, "text": str} (lines joined by "\\n").
Returns:
    agreement: coverage, mae, within_0.05, within_one_anchor, kendall_tau, spearman, each with `<stat>_ci`
        ([2.5th, 97.5th] percentile over 10,000 poem resamples), per_dimension, and the counts.
    scoring: scores (list of dicts), quality (list), parse_status (list), raw_output (list), error (list).
Examples:
    >>> import evaluate
    >>> pae = evaluate.load("metric/pae")
    >>> pae.compute(predictions=[[1, .5, .67, 1, None, 1, .5, .67, .67, .75]],
    ...             references=[[1, .5, .67, 1, None, 1, 1, .67, .33, .75]], poem_ids=["tang300-068"])
"""

CITATION = """\
@article{hu2026tangpoetrybench,
  title   = {TangPoetryBench: A Multi-Dimensional Benchmark and Rubric-Conditioned Evaluator
             for Poetry-to-Image Generation},
  author  = {Hu, Haoqi and Luo, Tongji and Zhang, Li and Zhou, Boning},
  journal = {arXiv preprint arXiv:2608.11452},
  year    = {2026}
}
"""


def features(config_name: str) -> datasets.Features:
    if config_name not in CONFIGS:
        raise ValueError(f"unknown configuration {config_name!r} (known: {', '.join(CONFIGS)})")
    if config_name in AGREEMENT_CONFIGS:
        return datasets.Features({
            "predictions": datasets.List(datasets.Value("float64")),
            "references": datasets.List(datasets.Value("float64")),
            "poem_ids": datasets.Value("string"),
        })
    return datasets.Features({
        "images": datasets.Image(),
        "poems": {"title": datasets.Value("string"), "author": datasets.Value("string"), "text": datasets.Value("string")},
    })


def compute_agreement(predictions, references, poem_ids, rubric: str = "tang", n_bootstrap: int = DEFAULT_BOOTSTRAP,
                      seed: int = 0, reference_quality=None) -> dict:
    preds = [p[0] if p is not None and len(p) == 1 else p for p in predictions]
    data = AgreementData.from_lists(preds, references, poem_ids, rubric_for_tradition(rubric),
                                    reference_quality=reference_quality)
    return agreement(data, n_bootstrap=n_bootstrap, seed=seed)


def compute_scores(evaluator: Evaluator, images, poems, batch_size: int = 8) -> dict:
    results = evaluator(images, poems, batch_size=batch_size)
    return {
        "scores": [r.scores for r in results],
        "quality": [r.quality for r in results],
        "parse_status": [r.parse_status for r in results],
        "raw_output": [r.raw_output for r in results],
        "error": [r.error for r in results],
        "random_weights": evaluator.random_weights,
    }


def build_evaluator(config_name: str, model: str | None, adapter: str | None, backend: str, device: str | None,
                    rubric: str) -> Evaluator | None:
    """The model of a scoring configuration (loaded once per module instance); None for agreement."""
    if config_name in AGREEMENT_CONFIGS:
        return None
    extra = {"device": device} if device else {}
    if config_name == "pae":
        extra["rubric"] = rubric
    return load_evaluator(config_name, model=model, adapter=adapter, backend=backend, **extra)
