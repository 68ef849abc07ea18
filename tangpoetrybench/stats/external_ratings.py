"""Multi-rater human ratings of other text-to-image benchmarks, as `RatingTable`s for the noise floor.

These are a worked example of what a human noise floor looks like on data nobody here produced:
- GenAI-Bench (Li et al. 2024; t2v_metrics, Apache-2.0): `{id: {prompt, models: {model: [r1, r2, r3]}}}`,
  1–5 alignment ratings, three raters per image;
- DSG, TIFA160 split (Cho et al. 2024, Apache-2.0): CSV `t2i_model, item_id, worker_id, answer`, 1–5 Likert.
A 1–5 rating r becomes (r − 1) / 4 in [0, 1]; one level is then 0.25.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from .noise_floor import RatingTable

KEY = "alignment"
LEVEL = 0.25


def _table(units: list[str], poems: list[str], raters: list[str], ratings: list[float]) -> RatingTable:
    return RatingTable(units, poems, raters, (KEY,), np.array([LEVEL]), (np.array(ratings, float)[:, None] - 1) / 4)


def read_genai_bench(path: Path | str) -> RatingTable:
    """The rater of an image is its position in the list (GenAI-Bench does not name its raters)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    units, poems, raters, ratings = [], [], [], []
    for pid, entry in data.items():
        for model, scores in entry["models"].items():
            for k, r in enumerate(scores):
                units.append(f"{model}/{pid}")
                poems.append(pid)
                raters.append(f"rater{k}")
                ratings.append(float(r))
    return _table(units, poems, raters, ratings)


def read_dsg(path: Path | str) -> RatingTable:
    units, poems, raters, ratings = [], [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            units.append(f"{row['t2i_model']}/{row['item_id']}")
            poems.append(row["item_id"])
            raters.append(row["worker_id"])
            ratings.append(float(row["answer"]))
    return _table(units, poems, raters, ratings)
