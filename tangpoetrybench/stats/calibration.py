"""Conformal calibration of a judge against people (`tpb calibrate`), and how its intervals fare on held-out images
(`tpb agree --calibration`, the report's calibration table, the leaderboard's coverage).

Fitting, on a calibration split (validation: poem-disjoint from test), for quality and for each dimension:

- split-conformal quantiles of the absolute residual |human − score| (plain) and, where the readout gives a spread,
  of the residual over the spread plus a floor (normalised, or adaptive: narrow where the judge is sure). The
  quantile weighs poems, not images: each of the K calibration poems weighs one, shared by its pairs, and it is the
  smallest residual whose weight reaches (1 − α)(K + 1) (hierarchical split conformal, Lee, Barber & Willett 2023,
  after Dunn, Wasserman & Ramdas 2022): coverage ≥ 1 − α over a new poem and one of its images, whatever the
  poems' sizes (docs/calibration.md). A pair the judge gave no score counts as an infinite residual: a miss;
- conformal prediction sets over each dimension's anchors: the same quantile of 1 − p(the people's anchor);
- a temperature per dimension, the one that minimises the negative log-likelihood of the people's anchors;
- the people's quality distribution (each poem weighing one), for percentile rewards; and, asked for (`--epsilon`),
  a selective-judging threshold with a guarantee (`stats.selective`).

Evaluating, on held-out images: coverage of the intervals and sets as the guarantee counts it (the mean over poems of
the share of a poem's pairs covered), with bootstrap intervals over poems; mean width,
also as a share of the score range; expected calibration error (ECE) and the reliability diagram of the most likely
anchor's probability, before and after the temperature; the risk–coverage curve of selective judging (the
images with the widest intervals left to people first); and, with a threshold, the error of the scores it keeps.

The people's anchor of a dimension is the anchor nearest the human score (a mean of raters may lie between two;
ties go to the higher), or null where the image was rated and the dimension excluded.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from scipy import optimize, special, stats

from .agreement import AgreementData, bootstrap_draws, per_unit_sums, percentile_interval
from ..judging.abstention import SelectiveOptions
from .selective import abstention_sentence, fit_abstention, fit_words, held_out_words, kept_error
from ..dataset.reading import dataset_fingerprint
from ..judging.calibrated import (ANSWER_FACTS, CALIBRATION_SETTING, PROB_FLOOR, SCORE_RANGE, SERVED_MODEL,
                                  SPREAD_FLOOR, Calibration, Target, spread_of)
from ..judging.prompt import format_value
from ..judging.readout import anchors
from ..files import write_file
from ..numeric import counted, fmt, fmt_ci
from ..rubric import Rubric

DEFAULT_ALPHA = 0.1
ECE_BINS = 10
TEMPERATURE_BOUNDS = (0.05, 20.0)
ABSTAIN_SHARES = tuple(i / 10 for i in range(10))  # 0 %, 10 %, ... 90 % of the images left to people
RANGE_WIDTH = SCORE_RANGE[1] - SCORE_RANGE[0]
EPS = 1e-9


# --- the conformal quantile ---

class TooFew(ValueError):
    """Pairs of fewer calibration poems than α needs (the quantile would lie past the last pair)."""

    def __init__(self, n: int, poems: int, alpha: float):
        self.n, self.poems, self.needed = n, poems, needed(alpha)
        super().__init__(f"{counted(n, 'calibration image')} of {counted(poems, 'poem')}, but α = {alpha:g} needs "
                         f"images of at least {self.needed} poems")


def needed(alpha: float) -> int:
    """K, the fewest calibration poems whose whole weight reaches (1 − α)(K + 1): ⌈(1 − α) / α⌉."""
    return max(1, math.ceil((1 - alpha) / alpha - EPS))


def conformal_quantile(scores: Sequence[float], alpha: float, poem_of: Sequence[int] | None = None) -> float:
    """The smallest score t whose weight reaches (1 − α)(K + 1): Σ_{scores ≤ t} 1/n_poem ≥ (1 − α)(K + 1), each of
    the K poems weighing one, shared by its n_poem scores (a new poem's weight, the + 1, lies at +∞). Without
    `poem_of` each score is a poem of its own: the k-th smallest, k = ⌈(1 − α)(n + 1)⌉. Infinite scores (misses)
    allowed."""
    scores = np.asarray(scores, dtype=float)
    poem_of = np.arange(len(scores)) if poem_of is None else np.asarray(poem_of, dtype=int)
    sizes = np.bincount(poem_of)
    poems = int(np.count_nonzero(sizes))
    order = np.argsort(scores, kind="stable")
    reached = np.flatnonzero(np.cumsum(1.0 / sizes[poem_of[order]]) >= (1 - alpha) * (poems + 1) - EPS)
    if not len(reached):
        raise TooFew(len(scores), poems, alpha)
    return float(scores[order[reached[0]]])


def poem_index(poem_ids: Sequence[str]) -> np.ndarray:
    """Each image's poem as an index into the sorted poem ids (the bootstrap's units)."""
    poems = {p: i for i, p in enumerate(sorted(set(poem_ids)))}
    return np.array([poems[p] for p in poem_ids], dtype=int)


def poems_in(poem_of: np.ndarray) -> int:
    """K: the poems with at least one pair."""
    return len(np.unique(poem_of))


# --- temperature and reliability ---

def fit_temperature(probs: np.ndarray, labels: np.ndarray) -> float | None:
    """argmin over T of Σ −log p_T(label), p_T ∝ max(p, PROB_FLOOR)^(1/T), on log T within TEMPERATURE_BOUNDS;
    None without pairs."""
    if len(labels) == 0:
        return None
    logs = np.log(np.maximum(probs, PROB_FLOOR))
    rows = np.arange(len(labels))

    def nll(log_t: float) -> float:
        z = logs / math.exp(log_t)
        return float(np.sum(special.logsumexp(z, axis=1) - z[rows, labels]))

    low, high = (math.log(b) for b in TEMPERATURE_BOUNDS)
    return float(math.exp(optimize.minimize_scalar(nll, bounds=(low, high), method="bounded",
                                                   options={"xatol": 1e-7}).x))


def reliability(confidence: np.ndarray, correct: np.ndarray, bins: int = ECE_BINS) -> dict:
    """ECE and the reliability diagram's bins: equal-width bins over [0, 1] (a confidence on a boundary goes to the
    bin below it, 0 to the first); ECE = Σ (n_b / N)·|accuracy_b − mean confidence_b|."""
    confidence, correct = np.asarray(confidence, float), np.asarray(correct, float)
    index = np.clip(np.ceil(confidence * bins - EPS).astype(int) - 1, 0, bins - 1)
    table, ece = [], 0.0
    for b in range(bins):
        inside = index == b
        n = int(inside.sum())
        row = {"low": b / bins, "high": (b + 1) / bins, "n": n, "confidence": None, "accuracy": None}
        if n:
            row.update(confidence=float(confidence[inside].mean()), accuracy=float(correct[inside].mean()))
            ece += n / len(confidence) * abs(row["accuracy"] - row["confidence"])
        table.append(row)
    return {"n": len(confidence), "ece": float(ece) if len(confidence) else None, "bins": table}


# --- a results file beside the human scores ---

@dataclass
class Judged:
    """A results file's records aligned with a split's images and their human scores."""

    data: AgreementData
    records: list[dict | None]  # by image, in data's order; None: no result for the image
    rubric: Rubric
    where: str  # the results file

    @property
    def poem_of(self) -> np.ndarray:
        return poem_index(self.data.poem_ids)

    @property
    def rated(self) -> np.ndarray:
        return np.isfinite(self.data.human_quality)

    def unrated(self) -> list[str]:
        """Images with a result but no human score: reported, and left out of every figure."""
        return [i for i, r, ok in zip(self.data.image_ids, self.records, self.rated) if r is not None and not ok]

    def missing(self) -> list[str]:
        return [i for i, r in zip(self.data.image_ids, self.records) if r is None]

    def readouts(self) -> list[dict]:
        return [(r or {}).get("readout") or {} for r in self.records]

    def quality_spread(self) -> np.ndarray:
        return np.array([np.nan if r.get("quality_sd") is None else r["quality_sd"] for r in self.readouts()])

    def dimension_spread(self, key: str) -> np.ndarray:
        spreads = [spread_of(r.get("dimensions", {}).get(key)) for r in self.readouts()]
        return np.array([np.nan if s is None else s for s in spreads])

    def anchor_texts(self, key: str) -> list[str]:
        return [a.text for a in anchors(self.rubric, key)]

    def probabilities(self, key: str) -> np.ndarray:
        """(N, anchors) of each image's recorded distribution; a row of NaN where there is none."""
        texts = self.anchor_texts(key)
        rows = []
        for readout in self.readouts():
            dist = readout.get("dimensions", {}).get(key, {}).get("distribution")
            rows.append([dist.get(t, 0.0) for t in texts] if dist else [np.nan] * len(texts))
        return np.array(rows, dtype=float).reshape(len(rows), len(texts))

    def labels(self, key: str) -> np.ndarray:
        """Each image's people's anchor (its index), −1 where there is none (unrated, or excluded on a dimension
        that cannot be)."""
        texts, j, dim = self.anchor_texts(key), self.data.keys.index(key), self.rubric.dimension(key)
        out = np.full(len(self.records), -1)
        for i, (value, rated) in enumerate(zip(self.data.human[:, j], self.rated)):
            text = format_value(dim.nearest_score(value)) if np.isfinite(value) else "null" if rated else None
            out[i] = texts.index(text) if text in texts else -1
        return out


def one_way(records: dict[str, dict], where: Path | str) -> dict[str, Any]:
    """The evaluator, model and settings every record shares (a calibration is of one judge set up one way). A
    served judge's records say which replica answered each and how (`calibrated.ANSWER_FACTS`): left out. The model
    the servers said they served must be one, where the records name it: a fleet of identical replicas calibrates,
    one that mixes models is refused, naming them and the servers that answered each."""
    made, served = None, {}
    for image_id, record in records.items():
        settings = record.get("settings") or {}
        if settings.get(SERVED_MODEL) is not None:
            served.setdefault(settings[SERVED_MODEL], set()).add(settings.get("server"))
        this = {"evaluator": record.get("evaluator", "?"), "model": record.get("model", ""),
                "settings": {k: v for k, v in settings.items()
                             if k not in (CALIBRATION_SETTING, SERVED_MODEL, *ANSWER_FACTS)}}
        if made is None:
            made = this
        elif this != made:
            raise ValueError(f"{where}: {image_id} was made otherwise than the file's first result (another "
                             "evaluator, model or setting): calibrate one judge's results, made one way")
    if len(served) > 1:
        named = ", ".join(f"{model!r}" + (f" (at {', '.join(sorted(hosts))})" if (hosts := servers - {None}) else "")
                          for model, servers in sorted(served.items()))
        raise ValueError(f"{where}: the results were answered by more than one model: {named}; calibrate one "
                         "judge's results, each model's apart")
    if made is not None and served:
        made["settings"][SERVED_MODEL] = next(iter(served))
    return made


# --- fitting ---

def _residuals(pred: np.ndarray, human: np.ndarray, spread: np.ndarray, floor: float):
    """(plain, normalised or None): |human − score|, and over spread + floor where every scored pair has a spread;
    infinite where there is no score."""
    scored = np.isfinite(pred)
    with np.errstate(invalid="ignore"):
        plain = np.where(scored, np.abs(pred - human), np.inf)
        if not np.isfinite(spread[scored & np.isfinite(human)]).all():
            return plain, None
        return plain, np.where(scored, plain / (spread + floor), np.inf)


def fit_target(pred: np.ndarray, human: np.ndarray, spread: np.ndarray, poem_of: np.ndarray, alpha: float,
               floor: float = SPREAD_FLOOR, required: bool = False) -> Target:
    """One score's quantiles over the pairs with a human score. Too few pairs: an error where `required`
    (quality), else a target without intervals (a dimension the people rarely judged applicable)."""
    ok = np.isfinite(human)
    n, poems = int(ok.sum()), poems_in(poem_of[ok])
    plain, normalised = _residuals(pred, human, spread, floor)
    try:
        q_plain = min(conformal_quantile(plain[ok], alpha, poem_of[ok]), RANGE_WIDTH)
    except TooFew:
        if required:
            raise
        return Target(n, poems, None)
    q_normalised = (None if normalised is None else
                    min(conformal_quantile(normalised[ok], alpha, poem_of[ok]), RANGE_WIDTH / floor))
    return Target(n, poems, q_plain, q_normalised)


def fit_sets(target: Target, probs: np.ndarray, labels: np.ndarray, poem_of: np.ndarray, alpha: float) -> Target:
    """A dimension's prediction-set threshold and temperature, where the results have distributions."""
    has_label, has_dist = labels >= 0, np.isfinite(probs).all(axis=1)
    if not has_dist.any():
        return target
    rows = np.flatnonzero(has_label)
    scores = np.where(has_dist[rows], 1.0 - probs[rows, labels[rows]], np.inf) if len(rows) else np.zeros(0)
    try:
        threshold = min(conformal_quantile(scores, alpha, poem_of[rows]), 1.0)
    except TooFew:
        threshold = None
    fit = has_label & has_dist
    return replace(target, set_n=len(rows), set_threshold=threshold,
                   temperature=fit_temperature(probs[fit], labels[fit]))


def people_distribution(human: np.ndarray, poem_of: np.ndarray) -> list[list[float]]:
    """The people's quality over the pairs with one, each of the K poems weighing 1/K, shared by its pairs: the
    distinct values, rising, each with its weight (what `Calibration.percentile` reads)."""
    ok = np.isfinite(human)
    sizes = np.bincount(poem_of[ok])
    weights = 1.0 / (sizes[poem_of[ok]] * np.count_nonzero(sizes))
    values, index = np.unique(np.round(human[ok], 6), return_inverse=True)
    return [[float(v), round(float(w), 6)] for v, w in zip(values, np.bincount(index, weights))]


def fit(judged: Judged, made: dict[str, Any], identity: dict[str, Any], alpha: float = DEFAULT_ALPHA,
        floor: float = SPREAD_FLOOR, selective: SelectiveOptions | None = None) -> Calibration:
    """The calibration of a judge from its results on the calibration images (`judged`); with `selective.epsilon`,
    its selective-judging threshold too (`stats.selective`: refused where the poems cannot certify it)."""
    if not 0 < alpha < 1:
        raise ValueError(f"α must lie strictly between 0 and 1, not {alpha}")
    data, poem_of, rated = judged.data, judged.poem_of, judged.rated
    keep = rated & np.array([r is not None for r in judged.records])  # the images the calibration is fitted on
    human_quality = np.where(keep, data.human_quality, np.nan)
    try:
        quality = fit_target(data.pred_quality, human_quality, judged.quality_spread(), poem_of, alpha, floor,
                             required=True)
    except TooFew as exc:
        raise ValueError(f"{judged.where}: quality: {exc}: calibrate on more poems, or with a larger α") from None
    dimensions = {}
    for j, key in enumerate(data.keys):
        target = fit_target(data.pred[:, j], np.where(keep, data.human[:, j], np.nan), judged.dimension_spread(key),
                            poem_of, alpha, floor)
        labels = np.where(keep, judged.labels(key), -1)
        dimensions[key] = fit_sets(target, judged.probabilities(key), labels, poem_of, alpha)
    records = [r for r in judged.records if r is not None]
    calibration = Calibration(
        alpha=alpha, evaluator=made["evaluator"], model=made["model"], settings=made["settings"], dataset=identity,
        poems=sorted({p for p, k in zip(data.poem_ids, keep) if k}), n_images=int(keep.sum()), quality=quality,
        dimensions=dimensions, spread_floor=floor, random_weights=any(r.get("random_weights") for r in records),
        synthetic=bool(made["settings"].get("synthetic")), human_quality=people_distribution(human_quality, poem_of))
    if selective is not None and selective.epsilon is not None:
        calibration.abstention = fit_abstention(data.pred_quality, human_quality, judged.quality_spread(), poem_of,
                                                selective)
    found = evaluate(calibration, judged, n_bootstrap=0)
    calibration.diagnostics = {k: found[k] for k in ("quality", "per_dimension", "reliability", "unrated", "missing")}
    return calibration


# --- evaluating ---

def evaluate(calibration: Calibration, judged: Judged, n_bootstrap: int = 0, seed: int = 0) -> dict:
    """How the calibration's intervals, sets and confidences fare on `judged`'s images (see the module's
    docstring). An image without a result counts as a miss; one without a human score is left out and listed."""
    data, poem_of = judged.data, judged.poem_of
    n_poems = int(poem_of.max()) + 1 if len(poem_of) else 0
    blocks = [None if r is None else calibration.apply(r.get("scores") or {}, r.get("quality"), r.get("readout"))
              for r in judged.records]
    rated = judged.rated
    targets = {"quality": (data.human_quality, [b and b["quality"] for b in blocks], calibration.quality)}
    for j, key in enumerate(data.keys):
        targets[key] = (data.human[:, j], [b and b["scores"].get(key) for b in blocks], calibration.dimensions[key])
    sums, found = {}, {}
    for name, (human, intervals, target) in targets.items():
        ok = rated & np.isfinite(human)
        covered, widths = covered_by(intervals, human, ok)
        sums[name] = hits_by_poem(covered, ok, poem_of, n_poems)
        width = float(widths.mean()) if len(widths) else None
        found[name] = {"n_pairs": int(ok.sum()), "coverage": poem_coverage(*sums[name]), "mean_width": width,
                       "width_share": None if width is None else width / RANGE_WIDTH, "method": target.method,
                       "intervals": target.q_plain is not None}
    before, after = [], []  # (confidence, correct) of every dimension's most likely anchor
    for key in data.keys:
        target = calibration.dimensions[key]
        probs, labels = judged.probabilities(key), np.where(rated, judged.labels(key), -1)
        rows = np.flatnonzero((labels >= 0) & np.isfinite(probs).all(axis=1))
        correct = probs[rows].argmax(axis=1) == labels[rows]
        if target.set_threshold is not None:
            texts = judged.anchor_texts(key)
            ok = labels >= 0
            covered = np.array([bool(ok[i] and b and texts[labels[i]] in b.get("sets", {}).get(key, []))
                                for i, b in enumerate(blocks)])
            sizes = [len(blocks[i]["sets"][key]) for i in np.flatnonzero(ok) if blocks[i] and key in blocks[i]["sets"]]
            sums[f"{key}/set"] = hits_by_poem(covered, ok, poem_of, n_poems)
            found[key].update(set_pairs=int(ok.sum()), set_coverage=poem_coverage(*sums[f"{key}/set"]),
                              mean_set_size=float(np.mean(sizes)) if sizes else None)
        if len(rows):
            confident = np.array([blocks[i]["confidence"][key] for i in rows]) if target.temperature else None
            found[key].update(temperature=target.temperature,
                              ece_before=reliability(probs[rows].max(axis=1), correct)["ece"],
                              ece_after=None if confident is None else reliability(confident, correct)["ece"])
            before.append((probs[rows].max(axis=1), correct))
            if confident is not None:
                after.append((confident, correct))
    if n_bootstrap > 0 and n_poems:
        def ratios(weights: np.ndarray) -> dict[str, np.ndarray]:
            return {k: poem_coverage(hit, total, weights) for k, (hit, total) in sums.items()}

        draws = bootstrap_draws(ratios, n_poems, n_bootstrap, seed)
        for k, values in draws.items():
            name, _, kind = k.partition("/")
            found[name][f"{kind}_coverage_ci" if kind else "coverage_ci"] = percentile_interval(values)
    quality = found.pop("quality")
    level = calibration.level
    quality["holds"] = holds(quality["coverage"], quality.get("coverage_ci"), level)
    return {"alpha": calibration.alpha, "level": level, "calibration": calibration.fingerprint,
            "calibrated_on": calibration.on, "n_images": len(data.image_ids), "n_poems": n_poems,
            "bootstrap": {"resamples": n_bootstrap, "seed": seed, "unit": "poem"},
            "missing": judged.missing(), "unrated": judged.unrated(), "quality": quality, "per_dimension": found,
            "reliability": {"before": reliability(*_pooled(before)), "after": reliability(*_pooled(after))},
            "risk_coverage": risk_coverage(data.pred_quality, data.human_quality,
                                           [b and b["quality"] for b in blocks]),
            "abstention": calibration.abstention and kept_error(
                calibration.abstention, data.pred_quality, data.human_quality, judged.quality_spread(), poem_of,
                n_bootstrap, seed)}


def covered_by(intervals: Sequence[list[float] | None], human: np.ndarray, ok: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """(whether each pair's interval holds its human score, the widths of the intervals of the `ok` pairs); a pair
    without an interval is not covered."""
    low = np.array([np.nan if iv is None else iv[0] for iv in intervals], dtype=float)
    high = np.array([np.nan if iv is None else iv[1] for iv in intervals], dtype=float)
    with np.errstate(invalid="ignore"):
        covered = ok & (low - EPS <= human) & (human <= high + EPS)
    return covered, (high - low)[ok & np.isfinite(low)]


def hits_by_poem(covered: np.ndarray, ok: np.ndarray, poem_of: np.ndarray, n_poems: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per poem, the covered pairs and the pairs counted: what the coverage's bootstrap resamples."""
    return per_unit_sums(covered.astype(float), poem_of, n_poems), per_unit_sums(ok.astype(float), poem_of, n_poems)


def poem_coverage(hit: np.ndarray, total: np.ndarray, weights: np.ndarray | None = None):
    """Coverage as the guarantee counts it, over a poem and then one of its pairs: the mean over the poems with a
    pair of the share of their pairs covered (None without one). With `weights` (B, poems), the bootstrap's
    resamples: one coverage per resample (NaN where a resample holds no pair)."""
    counted = total > 0
    share = np.divide(hit, total, out=np.zeros(len(hit)), where=counted)
    if weights is None:
        return float(share.sum() / counted.sum()) if counted.any() else None
    with np.errstate(invalid="ignore", divide="ignore"):
        return (weights @ share) / (weights @ counted)


def carried_coverage(records: Sequence[dict], human: np.ndarray, poem_ids: Sequence[str], n_bootstrap: int = 0,
                     seed: int = 0) -> dict | None:
    """The coverage of the quality intervals that calibrated records carry (`tpb score --calibration`) over the
    images with a human quality (per poem, as `poem_coverage` counts it), with a bootstrap interval over poems; None
    where no record carries one."""
    blocks = [(r or {}).get("calibrated") or {} for r in records]
    if not any(b.get("quality") for b in blocks):
        return None
    poem_of, n_poems = poem_index(poem_ids), len(set(poem_ids))
    ok = np.isfinite(human)
    covered, widths = covered_by([b.get("quality") for b in blocks], human, ok)
    hit, total = hits_by_poem(covered, ok, poem_of, n_poems)
    alpha = next(b["alpha"] for b in blocks if "alpha" in b)
    out = {"level": 1 - alpha, "calibration": sorted({b["calibration"] for b in blocks if "calibration" in b}),
           "n_images": int(ok.sum()), "coverage": poem_coverage(hit, total),
           "mean_width": float(widths.mean()) if len(widths) else None}
    if n_bootstrap > 0 and n_poems:
        draws = bootstrap_draws(lambda w: {"c": poem_coverage(hit, total, w)}, n_poems, n_bootstrap, seed)
        out["coverage_ci"] = percentile_interval(draws["c"])
    out["holds"] = holds(out["coverage"], out.get("coverage_ci"), out["level"])
    return out


def holds(coverage: float | None, ci: list[float] | None, level: float) -> bool:
    """Whether a coverage is consistent with the promised level: its interval reaches it (without an interval, the
    coverage itself does)."""
    return coverage is not None and (ci[1] if ci else coverage) >= level - EPS


def _pooled(pairs: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not pairs:
        return np.zeros(0), np.zeros(0)
    return np.concatenate([c for c, _ in pairs]), np.concatenate([k for _, k in pairs])


def risk_coverage(pred: np.ndarray, human: np.ndarray, intervals: list[list[float] | None],
                  shares: Sequence[float] = ABSTAIN_SHARES) -> list[dict]:
    """Selective judging: for each share of the rated images left to people (the widest quality intervals first,
    an image without an interval before all), the judge's agreement on the images it keeps: MAE, within 0.05 and
    Spearman ρ of quality, and the intervals' coverage."""
    rated = np.flatnonzero(np.isfinite(human))
    width = np.array([RANGE_WIDTH + 1 if intervals[i] is None else intervals[i][1] - intervals[i][0] for i in rated])
    order = rated[np.argsort(-width, kind="stable")]
    rows = []
    for share in shares:
        kept = order[int(round(share * len(order))):]
        scored = kept[np.isfinite(pred[kept])]
        err = np.abs(pred[scored] - human[scored])
        inside, _ = covered_by([intervals[i] for i in kept], human[kept], np.ones(len(kept), dtype=bool))
        rho = (stats.spearmanr(pred[scored], human[scored]).statistic
               if len(scored) > 2 and np.ptp(pred[scored]) > 0 and np.ptp(human[scored]) > 0 else None)
        rows.append({"abstain": share, "kept": len(kept), "mae": float(err.mean()) if len(err) else None,
                     "within_0.05": float(np.mean(err <= 0.05 + EPS)) if len(err) else None,
                     "spearman": None if rho is None else float(rho),
                     "coverage": float(np.mean(inside)) if len(kept) else None})
    return rows


def evaluate_records(calibration: Calibration, judged: Judged, records: dict[str, dict], dataset: str | Path,
                     n_bootstrap: int = 0, seed: int = 0) -> dict:
    """`evaluate` after the checks an evaluation needs: every result made the way the calibration's were, the same
    dataset build, and none of the calibration's poems (that would be in-sample)."""
    for record in records.values():
        calibration.check_record(record, judged.where)
    built, fitted = dataset_fingerprint(dataset), calibration.dataset.get("fingerprint")
    if built and fitted and built != fitted:
        raise ValueError(f"the calibration was fitted on dataset build {fitted}, but {dataset} is build {built}: "
                         "whether their poems overlap cannot be told; calibrate on this build")
    shared = sorted(set(judged.data.poem_ids) & set(calibration.poems))
    if shared:
        raise ValueError(f"{judged.where}: {counted(len(shared), 'poem')} of these images ({', '.join(shared[:5])}"
                         f"{', ...' if len(shared) > 5 else ''}) were calibrated on ({calibration.on}): coverage there "
                         "would be in-sample; evaluate on a poem-disjoint split (test)")
    return evaluate(calibration, judged, n_bootstrap, seed)


# --- selective judging: the images to send to people ---

def widest(calibration: Calibration, records: dict[str, dict], k: int, where: Path | str) -> list[dict]:
    """The k images whose quality intervals are widest (an image without one, a failed answer, first), each with
    its poem id (the last part of its image id), quality, interval and width."""
    if k < 1:
        raise ValueError(f"--select {k}: give a number of images ≥ 1")
    rows = []
    for image_id, record in records.items():
        calibration.check_record(record, str(where))
        block = calibration.apply(record.get("scores") or {}, record.get("quality"), record.get("readout"))
        interval = block and block["quality"]
        rows.append({"image_id": image_id, "poem_id": image_id.rsplit("/", 1)[-1], "quality": record.get("quality"),
                     "interval": interval,
                     "width": RANGE_WIDTH if interval is None else round(interval[1] - interval[0], 6)})
    return sorted(rows, key=lambda r: (r["interval"] is not None, -r["width"], r["image_id"]))[:k]


def write_selection(rows: list[dict], path: Path | str) -> Path:
    """The images to send to people, in the forms a rating workflow takes as its priority list: JSON Lines (a
    `.jsonl` file: image_id, poem_id, quality, interval, width) or a plain file of image ids, one per line."""
    path = Path(path)
    lines = [json.dumps(r, ensure_ascii=False) if path.suffix == ".jsonl" else r["image_id"] for r in rows]
    return write_file(path, "".join(line + "\n" for line in lines))


# --- laying out ---

def coverage_words(found: dict) -> str:
    """"0.912 [0.871, 0.948]": a coverage with its interval where there is one."""
    ci = found.get("coverage_ci")
    return fmt(found.get("coverage")) + (f" {fmt_ci(ci)}" if ci else "")


def percent(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.0f} %"


def shift_sentence(result: dict, where: str) -> str | None:
    """What to say when coverage on these images falls below the promised level."""
    q = result["quality"]
    if q["holds"] or q["coverage"] is None:
        return None
    basis = "its 95 % interval lies below it" if q.get("coverage_ci") else "no interval was computed"
    return (f"Coverage drops on {where}: {fmt(q['coverage'])}, below the promised {percent(result['level'])} "
            f"({basis}). These images are not exchangeable with the calibration images ({result['calibrated_on']}) — "
            "a shift (another generator, tradition or kind of image) — so the guarantee does not hold here.")


def format_evaluation(result: dict, agreement: dict | None = None, where: str = "these images") -> str:
    """The calibration section of `tpb agree`: coverage, width, sets, ECE, ranking beside absolute agreement, and the
    risk–coverage curve."""
    q, level = result["quality"], result["level"]
    lines = [f"Calibrated intervals at {percent(level)} (α = {result['alpha']:g}), fitted on {result['calibrated_on']} "
             f"(calibration {result['calibration']}); coverage intervals: bootstrap over poems"]
    if result["missing"]:
        lines.append(f"{counted(len(result['missing']), 'image')} without a result: counted as misses")
    if result["unrated"]:
        shown = ", ".join(result["unrated"][:5]) + (", ..." if len(result["unrated"]) > 5 else "")
        lines.append(f"{counted(len(result['unrated']), 'image')} with a result but no human score, left out: {shown}")
    lines += ["", f"{'score':<22}{'pairs':>6}  {'coverage   [95% CI]':<26}{'mean width':>11}{'of range':>9}"
                  f"{'method':>12}{'set cov.':>10}{'set size':>9}{'ECE → after T':>17}{'T':>7}"]
    for name, found in [("quality", q), *result["per_dimension"].items()]:
        if not found["intervals"]:
            lines.append(f"{name:<22}{found['n_pairs']:>6}  too few calibration pairs for α: no interval")
            continue
        ece = (f"{fmt(found.get('ece_before'))} → {fmt(found.get('ece_after'))}" if "ece_before" in found else "")
        share = percent(found["width_share"])
        lines.append(f"{name:<22}{found['n_pairs']:>6}  {coverage_words(found):<26}{fmt(found['mean_width']):>11}"
                     f"{share:>9}{found['method']:>12}{fmt(found.get('set_coverage')):>10}"
                     f"{fmt(found.get('mean_set_size'), 2):>9}{ece:>17}{fmt(found.get('temperature'), 2):>7}")
    before, after = result["reliability"]["before"], result["reliability"]["after"]
    if before["n"]:
        scaled_ece = f", after temperature scaling {fmt(after['ece'])}" if after["n"] else ""
        lines += ["", f"confidence of the most likely anchor, pooled over dimensions "
                      f"({counted(before['n'], 'pair')}): ECE "
                      f"{fmt(before['ece'])}{scaled_ece}"]
        lines += [f"  {'bin':<12}{'pairs':>6}{'confidence':>12}{'accuracy':>10}" + ("   after T: pairs, conf., acc."
                                                                                   if after["n"] else "")]
        for b, a in zip(before["bins"], after["bins"] if after["n"] else [None] * len(before["bins"])):
            if b["n"] or (a and a["n"]):
                tail = f"   {a['n']:>5}{fmt(a['confidence']):>7}{fmt(a['accuracy']):>7}" if a else ""
                lines.append(f"  {b['low']:.1f}–{b['high']:.1f}{'':<5}{b['n']:>6}{fmt(b['confidence']):>12}"
                             f"{fmt(b['accuracy']):>10}{tail}")
    if agreement is not None:
        lines += ["", "can it rank, can it score? (quality)",
                  f"  ranking:  Kendall τ per poem {fmt(agreement.get('kendall_tau'))}, pairwise accuracy "
                  f"{fmt(agreement.get('pairwise_accuracy'))}, Spearman ρ {fmt(agreement.get('spearman'))}",
                  f"  absolute: CCC {fmt(agreement.get('ccc'))}, MAE over all (image, dimension) pairs "
                  f"{fmt(agreement.get('mae'))}; a {percent(level)} interval is {fmt(q['mean_width'])} wide on "
                  f"average ({percent(q['width_share'])} of the score range)"]
    lines += ["", "selective judging: the widest intervals left to people first; the judge's quality on the images "
                  "it keeps",
              f"  {'left to people':<16}{'kept':>6}{'MAE':>8}{'within 0.05':>13}{'Spearman':>10}{'coverage':>10}"]
    for row in result["risk_coverage"]:
        lines.append(f"  {row['abstain']:<16.0%}{row['kept']:>6}{fmt(row['mae']):>8}{fmt(row['within_0.05']):>13}"
                     f"{fmt(row['spearman']):>10}{fmt(row['coverage']):>10}")
    if result.get("abstention"):
        lines += ["", *held_out_words(result["abstention"])]
    for sentence in (shift_sentence(result, where), abstention_sentence(result.get("abstention"), where)):
        if sentence:
            lines += ["", "WARNING: " + sentence]
    return "\n".join(lines)


def format_fit(calibration: Calibration, warnings: Sequence[str] = ()) -> str:
    """What `tpb calibrate` prints: what was fitted, on what, and how it fares on the calibration images
    themselves (in-sample: the held-out figures come from `tpb agree --calibration`)."""
    d = calibration.diagnostics
    lines = [f"WARNING: {w}" for w in warnings]
    if calibration.random_weights:
        lines.append("NOTE: random weights (a tiny test model): these intervals test the pipeline and measure nothing.")
    if calibration.synthetic:
        lines.append("NOTE: a synthetic judge's results: these intervals test the method, not a model.")
    lines += [f"Calibration {calibration.fingerprint} of {calibration.evaluator} ({calibration.model}) at "
              f"{percent(calibration.level)} (α = {calibration.alpha:g}) on {calibration.on}: "
              f"{counted(calibration.n_images, 'image')} of {counted(len(calibration.poems), 'poem')}"]
    if d.get("missing"):
        lines.append(f"{counted(len(d['missing']), 'image')} of the split without a result: left out")
    if d.get("unrated"):
        lines.append(f"{counted(len(d['unrated']), 'image')} without a human score: left out "
                     f"({', '.join(d['unrated'][:5])}{', ...' if len(d['unrated']) > 5 else ''})")
    lines += ["", f"{'score':<22}{'pairs':>6}{'poems':>6}{'method':>12}{'q':>9}{'width (in-sample)':>19}"
                  f"{'set q':>8}{'T':>7}{'ECE → after T (in-sample)':>28}"]
    for name, target in [("quality", calibration.quality), *calibration.dimensions.items()]:
        found = d["quality"] if name == "quality" else d["per_dimension"][name]
        if target.q_plain is None:
            why = (f"too few poems for α (needs {needed(calibration.alpha)})" if target.n else
                   "no calibration image with a human score")
            lines.append(f"{name:<22}{target.n:>6}{target.n_poems:>6}  {why}: no interval")
            continue
        q = target.q_normalised if target.q_normalised is not None else target.q_plain
        ece = f"{fmt(found.get('ece_before'))} → {fmt(found.get('ece_after'))}" if "ece_before" in found else ""
        lines.append(f"{name:<22}{target.n:>6}{target.n_poems:>6}{target.method:>12}{fmt(q):>9}"
                     f"{fmt(found['mean_width']):>19}{fmt(target.set_threshold):>8}{fmt(target.temperature, 2):>7}"
                     f"{ece:>28}")
    if calibration.abstention is not None:
        lines += ["", fit_words(calibration.abstention, calibration.max_width())]
    return "\n".join(lines)
