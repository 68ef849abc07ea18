"""Simulated evaluators for a built synthetic release: a known truth for the pairwise statistics and for
calibration (synthetic).

The scalar ones give one number per image, from the built dataset's own columns:

    score = human quality + literal_weight · (recognizability − 0.5) + N(0, noise²)

- `literal` (weight 0.3) prefers recognizable images over and above what people prefer: on the full-size
  synthetic release the literal-bias test must find a positive Δ (p < 0.05);
- `follower` (weight 0) follows human quality with noise only: the test must find none (p > 0.05).

An image without a Phase-1 answer counts as 0.5 recognizable. The records have the form `tpb score` writes (a scalar
metric's task, `scalar`: no per-dimension scores), with the evaluator named `synthetic-<kind>` and `synthetic: true`
in its settings, so they are never mistaken for a model's.

`simulated_readout_scores` is a rubric judge with a probability readout whose error has a known, image-dependent
spread that its readout reports (`synthetic-readout`; see its docstring): the known truth of the calibration tests.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping

import numpy as np

from ..reading import dataset_rows
from ...files import write_file
from ...rubric import Rubric, rubric_for_tradition

KINDS = {"literal": 0.3, "follower": 0.0}  # kind → literal_weight
NOISE = 0.05


def simulated_scores(dataset: str | Path, kind: str, split: str = "test", config: str = "images",
                     noise: float = NOISE, seed: int = 0) -> list[dict]:
    """One `tpb score`-style record per image of the config's split."""
    if kind not in KINDS:
        raise ValueError(f"unknown simulated evaluator {kind!r} (known: {', '.join(KINDS)})")
    rows = list(dataset_rows(dataset, config, split, ["image_id", "quality", "recognizability"]))
    rng = np.random.default_rng(seed)
    weight = KINDS[kind]
    records = []
    for row in rows:
        rec = 0.5 if row["recognizability"] is None else row["recognizability"]
        value = None if row["quality"] is None else float(row["quality"] + weight * (rec - 0.5) + rng.normal(0, noise))
        records.append({"image_id": row["image_id"], "evaluator": f"synthetic-{kind}", "task": "scalar",
                        "model": "synthetic", "scores": {}, "quality": value, "raw_output": None,
                        "parse_status": "ok" if value is not None else "failed", "error": None, "seconds": 0.0,
                        "settings": {"synthetic": True, "literal_weight": weight, "noise": noise, "seed": seed}})
    return records


def write_simulated_scores(dataset: str | Path, kind: str, out: str | Path, **kwargs) -> Path:
    """`simulated_scores` as a JSON Lines file, ready for `tpb agree --literal-bias`."""
    return write_records(simulated_scores(dataset, kind, **kwargs), out)


def write_records(records: list[dict], out: str | Path) -> Path:
    return write_file(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


SPREAD = (0.02, 0.2)  # the range of the per-image spread σ (drawn log-uniformly)
DIMENSION_SPREAD = 1.5  # a dimension's belief spread is this many σ
UNRATED_QUALITY = 0.5  # the stand-in truth of an image without human scores


def simulated_readout_scores(dataset: str | Path, split: str = "test", config: str = "images", **kwargs) -> list[dict]:
    """One `tpb score --readout expected`-style record per image of the config's split, from a simulated judge
    whose error is known (`simulated_readout`; keyword arguments go to it)."""
    rubric = rubric_for_tradition(next(iter(dataset_rows(dataset, config, split, ["tradition"])))["tradition"])
    rows = list(dataset_rows(dataset, config, split, ["image_id", "generator", "quality", *rubric.keys]))
    return simulated_readout(rows, rubric, **kwargs)


def simulated_readout(rows: list[dict], rubric: Rubric, seed: int = 0, spread: tuple[float, float] = SPREAD,
                      overconfidence: float = 1.0, shift: Mapping[str, float] | None = None) -> list[dict]:
    """Records of a simulated rubric judge with a probability readout, whose error is known (synthetic), for image
    rows (image_id, generator, quality and every dimension). Per image, from its own random stream (seed and image
    id, so the draws of two splits are independent):

    - a spread σ, log-uniform in `spread`; the readout reports it as `quality_sd`;
    - quality = human quality + shift[generator] + σ·z, z ~ N(0, 1), cut to [0, 1] as every rubric score is: its
      error is σ·z (plus the generator's shift, which the readout does not report) but where the cut shortens it —
      images are drawn alike, so their residuals stay exchangeable and the conformal guarantee holds as it is;
    - per dimension, a belief centre c ~ N(position of the people's anchor, (1.5 σ)²) + the shift, and the
      distribution p(a) ∝ π(a)·exp(−(position(a) − c)² / (2 (1.5 σ)²)), π the anchors' shares among the split's
      rated images: exactly the chance that a is the people's anchor given c, so calibrated by construction;
      `overconfidence` k reports p^k renormalised instead (k > 1: over-confident; temperature scaling should find
      T = k). An anchor's position is its score; null's is one anchor step below 0. The score is the expected
      score, null where null is the most likely anchor, as the real readout has it.

    The people's anchor is the one nearest the human score (ties: the higher), or null where the image was rated
    and the dimension excluded; an unrated image's is drawn from π."""
    keys = list(rubric.keys)
    low, high = spread
    shift = dict(shift or {})
    anchors = {k: _anchors(rubric, k) for k in keys}
    prior = {k: _anchor_shares(rubric, rows, k, anchors[k][0]) for k in keys}
    records = []
    for row in rows:
        rng = np.random.default_rng([seed, int.from_bytes(hashlib.sha256(row["image_id"].encode()).digest()[:8],
                                                          "little")])
        sigma = float(np.exp(rng.uniform(np.log(low), np.log(high))))
        bias = shift.get(row["generator"], 0.0)
        truth = UNRATED_QUALITY if row["quality"] is None else row["quality"]
        quality = float(np.clip(truth + bias + sigma * rng.normal(), 0.0, 1.0))
        dims = {}
        for k in keys:
            texts, positions = anchors[k]
            label = _people_anchor(rubric, row, k, texts)
            label = int(rng.choice(len(texts), p=prior[k])) if label is None else label
            tau = DIMENSION_SPREAD * sigma
            centre = positions[label] + bias + tau * rng.normal()
            logits = overconfidence * (np.log(prior[k]) - (positions - centre) ** 2 / (2 * tau ** 2))
            p = np.exp(logits - logits.max())
            dims[k] = _readout(texts, p / p.sum())
        readout = {"dimensions": {k: {"distribution": d["distribution"], "confidence": d["confidence"]}
                                  for k, d in dims.items()},
                   "quality_confidence": round(float(np.mean([d["confidence"] for d in dims.values()])), 6),
                   "quality_sd": round(sigma, 6)}
        records.append({"image_id": row["image_id"], "evaluator": "synthetic-readout", "task": "scores",
                        "model": "synthetic", "scores": {k: d["score"] for k, d in dims.items()},
                        "quality": round(quality, 6),
                        "raw_output": None, "parse_status": "ok", "error": None, "seconds": 0.0,
                        "settings": {"synthetic": True, "readout": "expected", "spread": [low, high],
                                     "overconfidence": overconfidence, "shift": shift, "seed": seed,
                                     "rubric": rubric.fingerprint},
                        "readout": readout})
    return records


def _anchors(rubric: Rubric, key: str) -> tuple[list[str], np.ndarray]:
    """A dimension's anchors as the answer writes them (best first, then null where it can be excluded) and their
    positions on the synthetic judge's line."""
    dim = rubric.dimension(key)
    scores = list(dim.scores)
    texts = [_text(s) for s in scores]
    positions = scores[:]
    if any(o.excluded for o in dim.options):
        texts.append("null")
        positions.append(min(scores) - rubric.anchor_step(key))
    return texts, np.array(positions, dtype=float)


def _people_anchor(rubric: Rubric, row: dict, key: str, texts: list[str]) -> int | None:
    """The index of the people's anchor of a rated image (None for an unrated one)."""
    if row["quality"] is None:
        return None
    value = row[key]
    if value is None:
        return texts.index("null") if "null" in texts else None
    return texts.index(_text(rubric.dimension(key).nearest_score(value)))


def _text(score: float) -> str:
    return json.dumps(round(float(score), 2))


def _anchor_shares(rubric: Rubric, rows: list[dict], key: str, texts: list[str]) -> np.ndarray:
    """The shares of the people's anchors among the rated images (one added to each, so none is zero)."""
    counts = np.ones(len(texts))
    for row in rows:
        label = _people_anchor(rubric, row, key, texts)
        if label is not None:
            counts[label] += 1
    return counts / counts.sum()


def _readout(texts: list[str], p: np.ndarray) -> dict:
    """A dimension's readout from its distribution: the expected score (None where null is the most likely), the
    confidence 1 − entropy / log(anchors), as `judging.readout` has them."""
    best = int(np.argmax(p))
    scored = np.array([t != "null" for t in texts])
    values = np.array([0.0 if t == "null" else json.loads(t) for t in texts])
    score = None if not scored[best] else round(float((p * values)[scored].sum() / p[scored].sum()), 6)
    entropy = -float(np.sum(p[p > 0] * np.log(p[p > 0])))
    return {"distribution": {t: round(float(x), 6) for t, x in zip(texts, p)}, "score": score,
            "confidence": round(min(1.0, max(0.0, 1.0 - entropy / np.log(len(texts)))), 6)}
