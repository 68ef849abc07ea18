"""Selective judging with a guarantee (`tpb calibrate --epsilon E --delta D`): the threshold on the judge's spread
beyond which it abstains, chosen on the calibration poems so that the error of the scores it keeps on a new poem is
at most ε with probability at least 1 − δ — and, on held-out images, whether that still holds.

The rule: keep a quality score whose readout spread σ (`quality_sd`) is at most t; its quality interval (normalised:
2 q̂ (σ + floor) wide before it is cut to [0, 1]) is then at most 2 q̂ (t + floor) wide. The thresholds tried,
`GRID`, are fixed before any data are seen: 0.01·√2^k for k = 0 … 12 (0.01 to 0.64) and "every score". They lie on
the spread, not on the interval's width, because q̂ is fitted on the same calibration poems: a grid of widths would
be a grid of spreads chosen by the data.

The error, per poem (the unit that is exchangeable: each weighs one, as in the conformal quantile): `mae`, the mean
|human − score| over the poem's kept images; `pairwise`, the share of wrong orders over its pairs of kept images
whose human quality differs by at least `DEFAULT_MARGIN` (equal scores half wrong). R(t) is its expectation over a
new poem on which something is kept.

Learn then Test (Angelopoulos, Bates, Candès, Jordan & Lei 2021): for each t, the null hypothesis R(t) > ε, tested
with the Hoeffding–Bentkus p-value over the n(t) calibration poems on which something is kept (given n(t), those
poems are independent draws of such poems, so the p-value is valid given n(t), hence valid); every hypothesis with
p ≤ δ / |GRID| is rejected (Bonferroni: the chance that any rejected t has R(t) > ε is at most δ), and the threshold
is the largest rejected t (the most kept). None rejected: the target is refused, with the smallest ε (to a
thousandth) that these poems certify at this δ.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import special, stats

from .agreement import (DEFAULT_MARGIN, bootstrap_draws, human_pairs, pair_credit, percentile_interval,
                        pointwise_choices)
from ..judging.abstention import EPSILON_STEP, GRID, METHOD, Abstention, SelectiveOptions, keeps
from ..numeric import counted, fmt, fmt_ci

TARGET_WORDS = {"mae": "the mean |human − score| of the kept quality scores",
                "pairwise": "the share of wrong orders among pairs of kept images"}
BISECTIONS = 60
EPS = 1e-9


class Uncertifiable(ValueError):
    """The calibration poems certify no threshold at the target asked for."""

    def __init__(self, options: SelectiveOptions, smallest: float | None, poems: int):
        self.smallest = smallest
        can = (f"the smallest ε they certify at δ = {options.delta:g} is {smallest:g}" if smallest is not None else
               "they certify none below 1 (too few scored poems): calibrate on more poems")
        super().__init__(f"{counted(poems, 'calibration poem')} certify no threshold at ε = {options.epsilon:g}, "
                         f"δ = {options.delta:g} for {TARGET_WORDS[options.abstain_on]}: {can}")


# --- the errors, per poem ---

def kept(pred: np.ndarray, spread: np.ndarray, max_spread: float | None) -> np.ndarray:
    """The images whose score the judge keeps: scored, and kept by the threshold (`Abstention.keeps`)."""
    return np.isfinite(pred) & keeps(np.asarray(spread, dtype=float), max_spread)


def poem_losses(pred: np.ndarray, human: np.ndarray, spread: np.ndarray, poem_of: np.ndarray, target: str,
                max_spread: float | None) -> tuple[np.ndarray, np.ndarray]:
    """(the poems on which something is kept, their errors in [0, 1]): `mae` over a poem's kept images with a human
    score, `pairwise` over its pairs of them (see the module's docstring)."""
    k = np.isfinite(human) & kept(pred, spread, max_spread)
    n_poems = int(poem_of.max()) + 1 if len(poem_of) else 0
    if target == "mae":
        errors, unit = np.abs(pred - human)[k], poem_of[k]
    else:
        pairs = human_pairs(np.where(k, human, np.nan), poem_of, DEFAULT_MARGIN)
        errors, unit = 1.0 - pair_credit(pointwise_choices(pred, pairs), pairs), pairs.poem
    counts = np.bincount(unit, minlength=n_poems)
    sums = np.bincount(unit, errors, minlength=n_poems)
    poems = np.flatnonzero(counts)
    return poems, sums[poems] / counts[poems]


# --- the test ---

def kl(a: float, b: float) -> float:
    """The Kullback–Leibler divergence of Bernoulli(a) from Bernoulli(b)."""
    return float(special.xlogy(a, a / b) + special.xlogy(1 - a, (1 - a) / (1 - b)))


def hb_p_value(risk: float, n: int, epsilon: float) -> float:
    """The Hoeffding–Bentkus p-value of the null R > ε from n losses in [0, 1] with mean `risk` (Bates, Angelopoulos,
    Lei, Malik & Jordan 2021): min(exp(−n·kl(min(risk, ε), ε)), e·P(Binomial(n, ε) ≤ ⌈n·risk⌉)); 1 without
    losses."""
    if n == 0:
        return 1.0
    hoeffding = math.exp(-n * kl(min(risk, epsilon), epsilon))
    bentkus = math.e * stats.binom.cdf(math.ceil(n * risk - EPS), n, epsilon)
    return float(min(1.0, hoeffding, bentkus))


def p_values(losses: Sequence[np.ndarray], epsilon: float) -> list[float]:
    """Per threshold, the p-value of R > ε from its poems' losses."""
    return [hb_p_value(float(found.mean()) if len(found) else 1.0, len(found), epsilon) for found in losses]


def smallest_epsilon(losses: Sequence[np.ndarray], level: float) -> float | None:
    """The smallest ε, to a thousandth, at which one of the thresholds' losses is certified (p ≤ `level`); None where
    none is below 1. The p-value falls as ε grows, so bisection finds each threshold's; the thousandth is then the
    first that certifies."""
    best = None
    for found in losses:
        n, risk = len(found), float(np.mean(found)) if len(found) else 1.0
        high = 1 - EPS
        if n == 0 or hb_p_value(risk, n, high) > level:
            continue
        low = risk
        for _ in range(BISECTIONS):
            middle = (low + high) / 2
            low, high = (low, middle) if hb_p_value(risk, n, middle) <= level else (middle, high)
        best = high if best is None else min(best, high)
    if best is None:
        return None
    scale = round(1 / EPSILON_STEP)
    k = math.floor(best * scale)
    return next((e for e in (k / scale, (k + 1) / scale) if 0 < e < 1 and min(p_values(losses, e)) <= level), None)


def fit_abstention(pred: np.ndarray, human: np.ndarray, spread: np.ndarray, poem_of: np.ndarray,
                   options: SelectiveOptions) -> Abstention:
    """The threshold (see the module's docstring) from the calibration pairs: each image's quality score (NaN: none),
    human quality (NaN: not a calibration pair), readout spread (NaN: none) and poem index. `Uncertifiable` where
    no threshold is certified."""
    options.check()
    level = options.delta / len(GRID)
    losses = [poem_losses(pred, human, spread, poem_of, options.abstain_on, t)[1] for t in GRID]
    found = p_values(losses, options.epsilon)
    smallest = smallest_epsilon(losses, level)
    passed = [i for i, p in enumerate(found) if p <= level]
    if not passed:
        raise Uncertifiable(options, smallest, len(np.unique(poem_of[np.isfinite(human)])))
    i = passed[-1]
    rated = np.isfinite(human)
    share = float(np.mean(kept(pred, spread, GRID[i])[rated])) if rated.any() else 0.0
    return Abstention(target=options.abstain_on, epsilon=options.epsilon, delta=options.delta, max_spread=GRID[i],
                      method=METHOD, grid=list(GRID), p_value=found[i], risk=_round(losses[i].mean()),
                      n_poems=len(losses[i]), kept=_round(share), smallest_epsilon=smallest)


def _round(x: float) -> float:
    return round(float(x), 6)


# --- on held-out images ---

def kept_error(abstention: Abstention, pred: np.ndarray, human: np.ndarray, spread: np.ndarray, poem_of: np.ndarray,
               n_bootstrap: int = 0, seed: int = 0) -> dict:
    """How the threshold fares on these images: the share of the images with a human score that it keeps, and the
    error the guarantee bounds (per poem, averaged over the poems on which something is kept) with a bootstrap
    interval over poems; `holds` unless that interval lies wholly above ε (without an interval: unless the error
    does)."""
    rated = np.isfinite(human)
    keep = kept(pred, spread, abstention.max_spread) & rated
    poems, losses = poem_losses(pred, human, spread, poem_of, abstention.target, abstention.max_spread)
    out = {"target": abstention.target, "epsilon": abstention.epsilon, "delta": abstention.delta,
           "max_spread": abstention.max_spread, "images": int(rated.sum()), "kept_images": int(keep.sum()),
           "kept_share": float(keep.sum() / rated.sum()) if rated.any() else None, "poems": len(poems),
           "error": float(losses.mean()) if len(losses) else None}
    if n_bootstrap > 0 and len(poems):
        def error(weights: np.ndarray) -> dict[str, np.ndarray]:
            w = weights[:, poems]
            with np.errstate(invalid="ignore", divide="ignore"):
                return {"error": (w @ losses) / w.sum(axis=1)}

        out["error_ci"] = percentile_interval(bootstrap_draws(error, int(poem_of.max()) + 1, n_bootstrap, seed)["error"])
    bound = (out.get("error_ci") or [out["error"]])[0]
    out["holds"] = bound is None or bound <= abstention.epsilon + EPS
    return out


# --- laying out ---

def threshold_words(abstention: Abstention, max_width: float | None) -> str:
    """"keep a quality score whose readout spread is at most 0.057 (an interval at most 0.31 wide)"."""
    if abstention.max_spread is None:
        return "keep every score"
    width = f" (its interval at most {fmt(max_width)} wide before the cut to [0, 1])" if max_width is not None else ""
    return f"keep a quality score whose readout spread (quality_sd) is at most {fmt(abstention.max_spread)}{width}"


def fit_words(abstention: Abstention, max_width: float | None) -> str:
    """What `tpb calibrate` says of the threshold it fitted (in-sample figures)."""
    return (f"Selective judging: {threshold_words(abstention, max_width)}, abstain on the rest. With probability ≥ "
            f"{1 - abstention.delta:g} (δ = {abstention.delta:g}), on a new poem {TARGET_WORDS[abstention.target]} "
            f"is ≤ ε = {abstention.epsilon:g} in expectation (Learn then Test over {abstention.n_poems} poems, p = "
            f"{abstention.p_value:.3g} ≤ δ / {len(abstention.grid)}). In-sample: {100 * abstention.kept:.0f} % of the "
            f"images kept, error {fmt(abstention.risk)} per poem; the smallest ε these poems certify at this δ: "
            f"{abstention.smallest_epsilon:g}.")


def held_out_words(found: dict) -> list[str]:
    """`tpb agree`'s lines on the threshold over held-out images."""
    ci = f" {fmt_ci(found['error_ci'])}" if found.get("error_ci") else ""
    return [f"selective judging at ε = {found['epsilon']:g} ({found['target']}): the judge keeps "
            f"{found['kept_images']} of {found['images']} images"
            + (f" ({100 * found['kept_share']:.0f} %)" if found["kept_share"] is not None else "")
            + f"; its error there per poem {fmt(found['error'])}{ci} over {counted(found['poems'], 'poem')}"]


def abstention_sentence(found: dict | None, where: str) -> str | None:
    """What to say when the kept error on these images lies above ε."""
    if not found or found["holds"]:
        return None
    basis = "its 95 % interval lies above it" if found.get("error_ci") else "no interval was computed"
    return (f"The judge's kept error on {where} is {fmt(found['error'])}, above the certified ε = "
            f"{found['epsilon']:g} ({basis}): these images are not like the calibration poems — a shift (another "
            "generator, tradition or kind of image) — so the selective-judging guarantee does not hold here.")
