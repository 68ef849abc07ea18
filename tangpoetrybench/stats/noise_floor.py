"""The human noise floor (docs/statistics.md): how much people disagree with each other on multi-rated images.

No evaluator can be expected to agree with one person better than people agree among themselves, so
every agreement figure is reported beside these:
- `loo_deviation`: per dimension, the mean |one rater − mean of the other raters| over the raters of images
  rated at least twice (leave one rater out: directly comparable to an evaluator's MAE);
- `within_one_level`: per dimension, the share of pairs of raters of the same image, both judging the
  dimension applicable, whose scores differ by at most one anchor step (paper, Table 5); on a two-level
  dimension (text integrity) it is exact agreement — `agreement.anchor_tolerance`, the evaluator's own rule;
- `krippendorff_alpha`: per dimension, Krippendorff's α on the interval scale (the `krippendorff` package);
- `rater_vs_rest_tau`: per poem, Kendall τ-b between one rater's quality scores of the poem's images and the
  mean of the other raters' — the human counterpart of the evaluator's per-poem τ.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from itertools import combinations

import krippendorff
import numpy as np
from scipy import stats

from .agreement import EPS, anchor_tolerance


@dataclass
class RatingTable:
    """One row per rating: the rated unit (image), its poem (prompt), the rater, and scores (NaN: excluded)."""

    units: list[str]
    poems: list[str]
    raters: list[str]
    keys: tuple[str, ...]
    anchors: np.ndarray  # (D,)
    scores: np.ndarray  # (R, D)
    dropped: list[str] = field(default_factory=list)  # images the reader left out, each with why

    def quality(self) -> np.ndarray:
        """Each rating's mean over its non-null dimensions."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a rating with every dimension excluded: NaN
            return np.nanmean(self.scores, axis=1)


MIN_MULTI_RATED = 5  # fewer multi-rated images make no floor: one image's two raters agreeing says nothing


def noise_floor(table: RatingTable) -> dict:
    by_unit: dict[str, list[int]] = defaultdict(list)
    for i, unit in enumerate(table.units):
        by_unit[unit].append(i)
    multi = {u: rows for u, rows in by_unit.items() if len(rows) >= 2}
    per_dim = {}
    for j, key in enumerate(table.keys):
        tolerance = anchor_tolerance(table.anchors[j])
        deviations, pairs, agree = [], 0, 0
        columns: list[list[float]] = []
        for rows in multi.values():
            values = [table.scores[r, j] for r in rows if np.isfinite(table.scores[r, j])]
            if len(values) < 2:
                continue
            total = sum(values)
            deviations += [abs(v - (total - v) / (len(values) - 1)) for v in values]
            for a, b in combinations(values, 2):
                pairs += 1
                agree += bool(abs(a - b) <= tolerance + EPS)
            columns.append(values)
        per_dim[key] = {
            "n_images": len(columns),
            "n_deviations": len(deviations),
            "n_pairs": pairs,
            "loo_deviation": float(np.mean(deviations)) if deviations else None,
            "within_one_level": agree / pairs if pairs else None,
            "krippendorff_alpha": _alpha(columns),
        }
    tau, n_tau = rater_vs_rest_tau(table.units, table.poems, table.raters, table.quality())
    return {
        "n_ratings": len(table.units),
        "n_images": len(by_unit),
        "n_multi_rated_images": len(multi),
        "enough": len(multi) >= MIN_MULTI_RATED,
        "per_dimension": per_dim,
        "rater_vs_rest_tau": tau,
        "rater_vs_rest_tau_cases": n_tau,
    }


def floor_summary(nf: dict) -> dict[str, float | None]:
    """The noise floor beside an evaluator's overall statistics, pooled over dimensions the way they are (every
    rater deviation, every pair of raters, not a mean of per-dimension figures): leave-one-out deviation (beside
    MAE), within-one-level agreement (beside within one anchor) and the rater-vs-rest τ (beside per-poem τ); all
    None with fewer than MIN_MULTI_RATED multi-rated images."""
    if not nf.get("enough", True):
        return {"mae": None, "within_one_anchor": None, "kendall_tau": None}
    dims = list(nf["per_dimension"].values())
    return {"mae": _pooled(dims, "loo_deviation", "n_deviations"),
            "within_one_anchor": _pooled(dims, "within_one_level", "n_pairs"),
            "kendall_tau": nf["rater_vs_rest_tau"]}


def _pooled(dims: list[dict], stat: str, count: str) -> float | None:
    total = sum(d[count] for d in dims if d[stat] is not None)
    return sum(d[stat] * d[count] for d in dims if d[stat] is not None) / total if total else None


def _alpha(columns: list[list[float]]) -> float | None:
    """Krippendorff's interval α; units are columns, a row per rating position (α ignores rater identity)."""
    values = [v for col in columns for v in col]
    if len(columns) < 1 or len(set(values)) < 2:
        return None
    data = np.full((max(len(c) for c in columns), len(columns)), np.nan)
    for u, col in enumerate(columns):
        data[: len(col), u] = col
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement="interval"))


def rater_vs_rest_tau(units: list[str], poems: list[str], raters: list[str], values: np.ndarray) -> tuple[float | None, int]:
    """Mean over (poem, rater) of τ-b between the rater's values and the mean of the other raters on the same
    images of that poem; only where the rater rated at least two such images and neither side is all tied."""
    cells: dict[tuple[str, str], list[float]] = defaultdict(list)  # (unit, rater) -> values
    poem_of: dict[str, str] = {}
    for unit, poem, rater, v in zip(units, poems, raters, values):
        if np.isfinite(v):
            cells[(unit, rater)].append(float(v))
            poem_of[unit] = poem
    by_unit: dict[str, dict[str, float]] = defaultdict(dict)
    for (unit, rater), vs in cells.items():
        by_unit[unit][rater] = float(np.mean(vs))
    series: dict[tuple[str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    for unit, by_rater in by_unit.items():
        if len(by_rater) < 2:
            continue
        for rater, v in by_rater.items():
            others = [w for r, w in by_rater.items() if r != rater]
            mine, rest = series[(poem_of[unit], rater)]
            mine.append(v)
            rest.append(float(np.mean(others)))
    taus = [stats.kendalltau(x, y, variant="b").statistic for x, y in series.values()
            if len(x) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0]
    return (float(np.mean(taus)) if taus else None), len(taus)
