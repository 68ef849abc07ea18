"""Agreement of an evaluator with human scores (docs/statistics.md), with bootstrap confidence intervals over poems.

Over the (image, dimension) pairs whose human score is non-null:
- coverage: share of pairs with a non-null prediction;
- mae, within_0.05, within_one_anchor (|pred − human| ≤ the dimension's anchor step + 0.01; on a two-level
  dimension, text integrity, exact agreement, ≤ 0.01): over pairs where both are non-null, pooled over every
  (image, dimension) pair overall, and per dimension;
- kendall_tau: per poem, τ-b between predicted and human quality of the poem's images, averaged over the
  poems where it is defined (`kendall_tau_poems` says how many); spearman: over all images;
- ccc: Lin's concordance correlation of predicted and human quality over images, 2·cov / (var_p + var_h + (μp − μh)²)
  (agreement in value, not only in order; for the rubric's scores only, not a scalar metric's);
- pairwise_accuracy: over the human pairs (two images of one poem whose human quality differs by at least `margin`,
  one twentieth by default), the share where the evaluator's higher score is the human winner (equal scores count
  one half), over the pairs where it scored both images; per dimension the same with the dimension's scores, and
  per dimension spearman and ccc too.

Intervals resample poems with replacement (10,000 times, seed 0 by default) and report the 2.5th and 97.5th
percentiles as `<stat>_ci`; without poem ids, images are resampled and τ is undefined. Every statistic is a
sum over poems, so a resample is a matrix product: the whole bootstrap is vectorised (Spearman with ranks
weighted by how often each poem was drawn).

This module needs only numpy, scipy and `numeric.py`: the published `evaluate` module carries both files as
they are (`tpb publish`), so the statistics have one source.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats

from ..numeric import DEFAULT_BOOTSTRAP, DEFAULT_MARGIN, whole_mean

ANCHOR_SLACK = 0.01
CLOSE = 0.05
EPS = 1e-9  # float slack for the threshold comparisons
CHUNK = 500  # resamples per block of the vectorised bootstrap (bounds memory)
# The overall statistics in the order tables print them, with their names for people.
STAT_LABELS = {"coverage": "Coverage", "mae": "Mean absolute error", "within_0.05": "Within 0.05",
               "within_one_anchor": "Within one anchor step", "kendall_tau": "Kendall τ per poem, mean",
               "spearman": "Spearman ρ over images", "ccc": "Lin's concordance (CCC) over images",
               "pairwise_accuracy": "Pairwise accuracy on human pairs"}


def anchor_tolerance(step: float) -> float:
    """How far apart two scores may be and still count as "within one anchor": the dimension's anchor step, plus
    0.01 for scores written with two decimals (0.67). On a two-level dimension (step 1: text integrity) one step
    would admit every answer, so there the figure is exact agreement. The noise floor uses the same rule."""
    return (0.0 if step >= 1.0 else step) + ANCHOR_SLACK


@dataclass(frozen=True)
class RubricScale:
    """What the statistics need of a rubric: its dimensions in order, their anchor steps, and which always apply."""

    keys: tuple[str, ...]
    anchor_steps: tuple[float, ...]
    always_applies: tuple[bool, ...]

    @classmethod
    def of(cls, rubric) -> "RubricScale":
        """From a `tangpoetrybench.rubric.Rubric` (or a RubricScale, returned as it is)."""
        if isinstance(rubric, RubricScale):
            return rubric
        dims = [rubric.dimension(k) for k in rubric.keys]
        return cls(tuple(rubric.keys), tuple(d.anchor_step for d in dims),
                   tuple(not any(o.score is None for o in d.options) for d in dims))


@dataclass
class AgreementData:
    """Aligned arrays over images: NaN marks a null score. `pred` is all-NaN for scalar metrics."""

    image_ids: list[str]
    poem_ids: list[str]
    keys: tuple[str, ...]
    anchors: np.ndarray  # (D,)
    human: np.ndarray  # (N, D)
    pred: np.ndarray  # (N, D)
    human_quality: np.ndarray  # (N,)
    pred_quality: np.ndarray  # (N,)
    scalar: bool = False  # a scalar metric: only the ranking statistics apply
    by_poem: bool = True  # False without poem ids: each image is its own unit and τ is undefined

    @classmethod
    def from_lists(cls, predictions: Sequence, references: Sequence, poem_ids: Sequence[str] | None, rubric,
                   image_ids: Sequence[str] | None = None,
                   reference_quality: Sequence[float | None] | None = None) -> "AgreementData":
        """Lists per image: a reference is the ten human scores (None: not applicable); a prediction is the ten
        predicted scores, or one number for a scalar metric, or None when the evaluator gave nothing. A prediction's
        quality is the parser's rule (`numeric.whole_mean`): null unless every always-applicable dimension has a
        score. `rubric` is a `Rubric` or a `RubricScale`. `reference_quality` is the dataset's `quality` column;
        without it, the mean of the non-null reference scores (which differs from the aggregation of
        docs/dataset.md only for an image whose ratings QC dropped entirely). Without `poem_ids`, every image is its
        own unit."""
        scale = RubricScale.of(rubric)
        n, keys = len(references), scale.keys
        by_poem = poem_ids is not None
        poem_ids = poem_ids if by_poem else [f"image {i}" for i in range(n)]
        if not (len(predictions) == n == len(poem_ids)):
            raise ValueError(f"{len(predictions)} predictions, {n} references and {len(poem_ids)} poem_ids: "
                             "they must be the same length")
        human = _matrix(references, len(keys), "references")
        pred_quality = np.full(n, np.nan)
        pred = np.full((n, len(keys)), np.nan)
        for i, p in enumerate(predictions):
            if p is None or isinstance(p, (int, float)):
                pred_quality[i] = np.nan if p is None else float(p)
            else:
                pred[i] = _row(p, len(keys), f"predictions[{i}]")
                quality = whole_mean(list(p), scale.always_applies)
                pred_quality[i] = np.nan if quality is None else quality
        if reference_quality is not None and len(reference_quality) != n:
            raise ValueError(f"{len(reference_quality)} reference_quality values for {n} references")
        human_quality = (np.array([np.nan if q is None else float(q) for q in reference_quality])
                         if reference_quality is not None else np.array([_nanmean(row) for row in human]))
        # A scalar metric gave a number somewhere; an evaluator that gave nothing at all has ten-score coverage 0.
        scalar = (any(isinstance(p, (int, float)) for p in predictions)
                  and all(p is None or isinstance(p, (int, float)) for p in predictions))
        return cls(list(image_ids or map(str, range(n))), [str(p) for p in poem_ids], keys,
                   np.array(scale.anchor_steps), human, pred, human_quality, pred_quality, scalar, by_poem)


def _row(values, width: int, where: str) -> np.ndarray:
    if len(values) != width:
        raise ValueError(f"{where}: expected {width} scores, got {len(values)}")
    return np.array([np.nan if v is None else float(v) for v in values])


def _matrix(rows, width: int, where: str) -> np.ndarray:
    return np.array([_row(r, width, f"{where}[{i}]") for i, r in enumerate(rows)]).reshape(len(rows), width)


def _nanmean(row: np.ndarray) -> float:
    return float(np.nanmean(row)) if np.isfinite(row).any() else np.nan


def _float(x) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


def per_poem_tau(data: AgreementData) -> tuple[np.ndarray, list[str]]:
    """τ-b of predicted vs human quality within each poem; NaN where undefined (fewer than two images with
    both, or all tied on either side)."""
    poems = sorted(set(data.poem_ids))
    index = {p: i for i, p in enumerate(poems)}
    taus = np.full(len(poems), np.nan)
    groups: dict[int, list[int]] = {}
    for i, p in enumerate(data.poem_ids):
        groups.setdefault(index[p], []).append(i)
    for p, rows in groups.items():
        rows = [r for r in rows if np.isfinite(data.human_quality[r]) and np.isfinite(data.pred_quality[r])]
        if len(rows) >= 2:
            h, q = data.human_quality[rows], data.pred_quality[rows]
            if np.ptp(h) > 0 and np.ptp(q) > 0:
                taus[p] = stats.kendalltau(q, h, variant="b").statistic
    return taus, poems


@dataclass(frozen=True)
class HumanPairs:
    """Pairs of images of one poem whose human values differ by at least a margin: row indices `x` < `y` (into the
    image arrays), the poem's index, and whether x is the human winner."""

    x: np.ndarray
    y: np.ndarray
    poem: np.ndarray
    x_wins: np.ndarray

    def __len__(self) -> int:
        return len(self.x)


def human_pairs(values: np.ndarray, poem_of: np.ndarray, margin: float = DEFAULT_MARGIN) -> HumanPairs:
    """Every pair of images of one poem (both with a value) whose values differ by at least `margin`."""
    xs, ys = [], []
    for p in np.unique(poem_of):
        rows = np.flatnonzero((poem_of == p) & np.isfinite(values))
        i, j = np.triu_indices(len(rows), k=1)
        keep = np.abs(values[rows[i]] - values[rows[j]]) >= margin - EPS
        xs.append(rows[i][keep])
        ys.append(rows[j][keep])
    x = np.concatenate(xs).astype(int) if xs else np.zeros(0, int)
    y = np.concatenate(ys).astype(int) if ys else np.zeros(0, int)
    return HumanPairs(x, y, poem_of[x], values[x] > values[y])


def pointwise_choices(pred: np.ndarray, pairs: HumanPairs) -> np.ndarray:
    """A pointwise evaluator's choice per pair: 1 where it scores x higher, 0 where y, 0.5 for equal scores, NaN
    where it has no score for either image."""
    px, py = pred[pairs.x], pred[pairs.y]
    with np.errstate(invalid="ignore"):
        choice = np.where(px > py, 1.0, np.where(px < py, 0.0, 0.5))
    return np.where(np.isfinite(px) & np.isfinite(py), choice, np.nan)


def pair_credit(choices: np.ndarray, pairs: HumanPairs) -> np.ndarray:
    """1 where a choice is the human winner, 0 where it is the loser, 0.5 for a tie, NaN where there is no choice."""
    return np.where(pairs.x_wins, choices, 1.0 - choices)


def per_unit_sums(values: np.ndarray, unit_of: np.ndarray, n_units: int) -> np.ndarray:
    """(n_units,) sums of `values` by unit, NaN counted as 0."""
    out = np.zeros(n_units)
    np.add.at(out, unit_of, np.nan_to_num(values))
    return out


def bootstrap_draws(ratios: Callable[[np.ndarray], dict[str, np.ndarray]], n_units: int, n_bootstrap: int,
                    seed: int) -> dict[str, np.ndarray]:
    """Each statistic of `ratios(weights)` over `n_bootstrap` resamples of units (poems) with replacement, in blocks
    of CHUNK; non-finite values (a resample with nothing to measure) are left out."""
    rng = np.random.default_rng(seed)
    blocks: dict[str, list[np.ndarray]] = {}
    for start in range(0, n_bootstrap, CHUNK):
        b = min(CHUNK, n_bootstrap - start)
        for k, v in ratios(resample_weights(rng, n_units, b)).items():
            blocks.setdefault(k, []).append(v)
    return {k: (lambda v: v[np.isfinite(v)])(np.concatenate(parts)) for k, parts in blocks.items()}


def percentile_interval(values: np.ndarray, low: float = 2.5, high: float = 97.5) -> list[float] | None:
    return [float(np.percentile(values, low)), float(np.percentile(values, high))] if len(values) else None


def _weighted_ccc(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Lin's concordance correlation of x and y for each row of weights w (B, N), with population moments."""
    if len(x) < 2:
        return np.full(w.shape[0], np.nan)
    total = w.sum(axis=1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        mx, my = (w * x).sum(1, keepdims=True) / total, (w * y).sum(1, keepdims=True) / total
        vx, vy = (w * (x - mx) ** 2).sum(1) / total[:, 0], (w * (y - my) ** 2).sum(1) / total[:, 0]
        cov = (w * (x - mx) * (y - my)).sum(1) / total[:, 0]
        denominator = vx + vy + (mx[:, 0] - my[:, 0]) ** 2
        return np.where(denominator > 0, 2 * cov / denominator, np.nan)


def agreement(data: AgreementData, n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0,
              margin: float = DEFAULT_MARGIN) -> dict:
    """Every §7 statistic with its interval, overall and per dimension. n_bootstrap=0: no intervals."""
    poems = sorted(set(data.poem_ids))
    index = {p: i for i, p in enumerate(poems)}
    poem_of = np.array([index[p] for p in data.poem_ids], dtype=int)
    n_poems, n_dims = len(poems), len(data.keys)

    has_h = np.isfinite(data.human)
    both = has_h & np.isfinite(data.pred)
    err = np.where(both, np.abs(data.pred - data.human), 0.0)
    close = both & (err <= CLOSE + EPS)
    anchor = both & (err <= np.array([anchor_tolerance(a) for a in data.anchors])[None, :] + EPS)

    def per_poem(values: np.ndarray) -> np.ndarray:  # (N, D) -> (P, D) sums
        out = np.zeros((n_poems, n_dims))
        np.add.at(out, poem_of, values)
        return out

    sums = {name: per_poem(v.astype(float)) for name, v in
            (("human", has_h), ("both", both), ("err", err), ("close", close), ("anchor", anchor))}
    taus, _ = per_poem_tau(data)
    tau_ok = np.isfinite(taus)
    q_ok = np.isfinite(data.human_quality) & np.isfinite(data.pred_quality)
    # Pairwise accuracy: per target (quality, then each dimension), the per-poem sums of credit and of judged pairs.
    targets = [("quality", data.human_quality, data.pred_quality)]
    if not data.scalar:
        targets += [(key, data.human[:, j], data.pred[:, j]) for j, key in enumerate(data.keys)]
    pair_sums, pair_counts = {}, {}
    for name, human_values, pred_values in targets:
        pairs = human_pairs(human_values, poem_of, margin)
        credit = pair_credit(pointwise_choices(pred_values, pairs), pairs)
        pair_sums[name] = (per_unit_sums(credit, pairs.poem, n_poems),
                           per_unit_sums(np.isfinite(credit).astype(float), pairs.poem, n_poems))
        pair_counts[name] = (len(pairs), int(np.isfinite(credit).sum()))
    dim_ok = np.isfinite(data.human) & np.isfinite(data.pred)

    def ratios(weights: np.ndarray) -> dict[str, np.ndarray]:
        """Statistics for poem weights (B, P): how often each poem is drawn (all ones: the estimate)."""
        s = {k: weights @ v for k, v in sums.items()}  # (B, D)
        tot = {k: v.sum(axis=1) for k, v in s.items()}
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {
                "coverage": tot["both"] / tot["human"],
                "mae": tot["err"] / tot["both"],
                "within_0.05": tot["close"] / tot["both"],
                "within_one_anchor": tot["anchor"] / tot["both"],
                "kendall_tau": (weights @ np.where(tau_ok, taus, 0.0)) / (weights @ tau_ok.astype(float)),
                "spearman": _weighted_spearman(data.pred_quality[q_ok], data.human_quality[q_ok],
                                               weights[:, poem_of[q_ok]]),
                "ccc": _weighted_ccc(data.pred_quality[q_ok], data.human_quality[q_ok], weights[:, poem_of[q_ok]]),
                "pairwise_accuracy": (weights @ pair_sums["quality"][0]) / (weights @ pair_sums["quality"][1]),
            }
            for j, key in enumerate(data.keys):
                if data.scalar:
                    break
                ok = dim_ok[:, j]
                out[f"{key}/spearman"] = _weighted_spearman(data.pred[ok, j], data.human[ok, j], weights[:, poem_of[ok]])
                out[f"{key}/ccc"] = _weighted_ccc(data.pred[ok, j], data.human[ok, j], weights[:, poem_of[ok]])
                out[f"{key}/pairwise_accuracy"] = (weights @ pair_sums[key][0]) / (weights @ pair_sums[key][1])
                out[f"{key}/coverage"] = s["both"][:, j] / s["human"][:, j]
                out[f"{key}/mae"] = s["err"][:, j] / s["both"][:, j]
                out[f"{key}/within_0.05"] = s["close"][:, j] / s["both"][:, j]
                out[f"{key}/within_one_anchor"] = s["anchor"][:, j] / s["both"][:, j]
        return out

    estimate = {k: _float(v[0]) for k, v in ratios(np.ones((1, n_poems))).items()}
    intervals: dict[str, list] = {}
    if n_bootstrap > 0 and n_poems > 0:
        intervals = {k: percentile_interval(v) for k, v in bootstrap_draws(ratios, n_poems, n_bootstrap, seed).items()}

    scalar = data.scalar
    result: dict = {
        "n_images": len(data.image_ids), "n_poems": n_poems,
        "n_pairs": int(has_h.sum()), "n_scored_pairs": int(both.sum()),
        "kendall_tau_poems": int(tau_ok.sum()), "spearman_images": int(q_ok.sum()),
        "margin": margin, "n_human_pairs": pair_counts["quality"][0], "n_judged_pairs": pair_counts["quality"][1],
        "bootstrap": {"resamples": n_bootstrap, "seed": seed, "unit": "poem" if data.by_poem else "image",
                      "percentiles": [2.5, 97.5]},
    }
    overall = ("coverage", "mae", "within_0.05", "within_one_anchor", "kendall_tau", "spearman", "ccc",
               "pairwise_accuracy")
    for stat in overall:
        if scalar and stat not in ("kendall_tau", "spearman", "pairwise_accuracy"):
            continue  # a scalar metric has no per-dimension scores
        result[stat] = estimate[stat]
        if n_bootstrap > 0:
            result[f"{stat}_ci"] = intervals.get(stat)
    if not scalar:
        result["per_dimension"] = {
            key: {
                "n_pairs": int(has_h[:, j].sum()), "n_scored_pairs": int(both[:, j].sum()),
                **{stat: estimate[f"{key}/{stat}"] for stat in ("coverage", "mae", "within_0.05", "within_one_anchor")},
                **({f"{stat}_ci": intervals.get(f"{key}/{stat}") for stat in ("mae", "within_0.05")}
                   if n_bootstrap > 0 else {}),
                "n_human_pairs": pair_counts[key][0], "n_judged_pairs": pair_counts[key][1],
                **{stat: estimate[f"{key}/{stat}"] for stat in ("spearman", "ccc", "pairwise_accuracy")},
                **({f"{stat}_ci": intervals.get(f"{key}/{stat}") for stat in ("spearman", "ccc", "pairwise_accuracy")}
                   if n_bootstrap > 0 else {}),
            }
            for j, key in enumerate(data.keys)
        }
    return result


def resample_weights(rng: np.random.Generator, n_units: int, n: int) -> np.ndarray:
    """(n, n_units): how often each unit (poem) is drawn in each of `n` resamples with replacement."""
    draws = rng.integers(0, n_units, size=(n, n_units))
    weights = np.zeros((n, n_units))
    np.add.at(weights, (np.repeat(np.arange(n), n_units), draws.ravel()), 1.0)
    return weights


def _weighted_spearman(x: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Spearman ρ of x and y for each row of weights w (B, N): item i counted w[b, i] times (mid-ranks for ties)."""
    if len(x) < 2:
        return np.full(w.shape[0], np.nan)
    rx, ry = _weighted_ranks(x, w), _weighted_ranks(y, w)
    total = w.sum(axis=1, keepdims=True)
    mx, my = (w * rx).sum(1, keepdims=True) / total, (w * ry).sum(1, keepdims=True) / total
    cov = (w * (rx - mx) * (ry - my)).sum(1)
    var = np.sqrt((w * (rx - mx) ** 2).sum(1) * (w * (ry - my) ** 2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(var > 0, cov / var, np.nan)


def _weighted_ranks(values: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Mid-ranks of values when item i appears w[b, i] times, for each row b."""
    _, group = np.unique(values, return_inverse=True)  # tie groups, in increasing order of value
    onehot = np.zeros((len(values), group.max() + 1))
    onehot[np.arange(len(values)), group] = 1.0
    gw = w @ onehot  # (B, groups): how many items of each tie group
    before = np.cumsum(gw, axis=1) - gw
    return (before + (gw + 1) / 2)[:, group]
