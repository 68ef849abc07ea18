"""Multi-rater human ratings of other text-to-image benchmarks, as `RatingTable`s for the noise floor.

These are a worked example of what a human noise floor looks like on data nobody here produced:
- GenAI-Bench (Li et al. 2024; t2v_metrics, Apache-2.0): `{id: {prompt, models: {model: [r1, r2, r3]}}}`,
  1–5 alignment ratings, three raters per image;
- DSG, TIFA160 split (Cho et al. 2024, Apache-2.0): CSV `t2i_model, item_id, worker_id, answer`, 1–5 Likert.
A 1–5 rating r becomes (r − 1) / 4 in [0, 1]; one level is then 0.25.

A rating that is not a whole number from 1 to 5 is corrupt (GenAI-Bench holds `[5, 41, 4]` and `[3, 3, 33]`):
mapped, it would be a score of 10 on a 0–1 scale. With `out_of_scale="drop"` (the default) the image holding it is
left out with all its ratings, counted in the table's `dropped` and named in a warning; with "refuse" the reader
raises, naming the file, the image and the rating.
"""

from __future__ import annotations

import csv
import json
import logging
from pathlib import Path

import numpy as np

from .noise_floor import RatingTable

logger = logging.getLogger(__name__)

KEY = "alignment"
LEVEL = 0.25
SCALE = (1, 5)
OUT_OF_SCALE = ("drop", "refuse")


def _table(path: Path | str, units: list[str], poems: list[str], raters: list[str], ratings: list[float],
           out_of_scale: str) -> RatingTable:
    """The ratings as a table on [0, 1], without the images holding a rating outside the 1–5 scale (or an error)."""
    if out_of_scale not in OUT_OF_SCALE:
        raise ValueError(f"out_of_scale must be one of {OUT_OF_SCALE}, not {out_of_scale!r}")
    bad: dict[str, list[float]] = {}
    for unit, r in zip(units, ratings):
        if not (r.is_integer() and SCALE[0] <= r <= SCALE[1]):
            bad.setdefault(unit, []).append(r)
    dropped = [f"{unit}: {', '.join(f'{r:g}' for r in rs)} outside {SCALE[0]}–{SCALE[1]}" for unit, rs in bad.items()]
    if bad and out_of_scale == "refuse":
        raise ValueError(f"{path}: ratings outside the {SCALE[0]}–{SCALE[1]} scale: " + "; ".join(dropped))
    if bad:
        logger.warning("%s: dropped %d image(s) holding a rating outside the %d–%d scale: %s", path, len(bad),
                       *SCALE, "; ".join(dropped))
    keep = [i for i, unit in enumerate(units) if unit not in bad]
    scores = (np.array([ratings[i] for i in keep], float).reshape(-1, 1) - 1) / 4
    return RatingTable([units[i] for i in keep], [poems[i] for i in keep], [raters[i] for i in keep], (KEY,),
                       np.array([LEVEL]), scores, dropped)


def read_genai_bench(path: Path | str, out_of_scale: str = "drop") -> RatingTable:
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
    return _table(path, units, poems, raters, ratings, out_of_scale)


def read_dsg(path: Path | str, out_of_scale: str = "drop") -> RatingTable:
    units, poems, raters, ratings = [], [], [], []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            units.append(f"{row['t2i_model']}/{row['item_id']}")
            poems.append(row["item_id"])
            raters.append(row["worker_id"])
            ratings.append(float(row["answer"]))
    return _table(path, units, poems, raters, ratings, out_of_scale)
