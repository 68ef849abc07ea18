"""Simulated evaluators for a built synthetic release: a known truth for the pairwise statistics (synthetic).

Each gives one number per image, from the built dataset's own columns:

    score = human quality + literal_weight · (recognizability − 0.5) + N(0, noise²)

- `literal` (weight 0.3) prefers recognizable images over and above what people prefer: on the full-size
  synthetic release the literal-bias test must find a positive Δ (p < 0.05);
- `follower` (weight 0) follows human quality with noise only: the test must find none (p > 0.05).

An image without a Phase-1 answer counts as 0.5 recognizable. The records have the form `tpb score` writes (a scalar
metric's: no per-dimension scores), with the evaluator named `synthetic-<kind>` and `synthetic: true` in its
settings, so they are never mistaken for a model's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..reading import dataset_rows

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
        records.append({"image_id": row["image_id"], "evaluator": f"synthetic-{kind}", "model": "synthetic",
                        "scores": {}, "quality": value, "raw_output": None,
                        "parse_status": "ok" if value is not None else "failed", "error": None, "seconds": 0.0,
                        "settings": {"synthetic": True, "literal_weight": weight, "noise": noise, "seed": seed}})
    return records


def write_simulated_scores(dataset: str | Path, kind: str, out: str | Path, **kwargs) -> Path:
    """`simulated_scores` as a JSON Lines file, ready for `tpb agree --literal-bias`."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in simulated_scores(dataset, kind, **kwargs)),
                   encoding="utf-8")
    return out
