"""Human pairs and what they measure: which of two illustrations of one poem people prefer, and how evaluators,
people and generators fare on those choices.

- `pair_table`: from a built dataset's config and split, every pair of images of one poem whose human quality
  differs by at least a margin (one twentieth by default), with the human winner (`agreement.human_pairs`);
- `evaluator_choices`: an evaluator's choice on each pair, from a pointwise scores file (`tpb score`: its higher
  quality wins, equal scores count one half) or a pairwise one (`tpb compare`: its verdict, a tie one half);
- `human_ceiling`: a rater's choice against the other raters' on the pairs with an image rated more than once: one
  rating of each image (a single rater's view) against the mean of each image's remaining ratings (an image rated
  once keeps its one rating on both sides), every combination weighted equally within a pair — how far one
  person's choice follows the others', the most an evaluator can be expected to reach;
- `literal_bias`: SemJudge's iconicity test on poems. A pair is "literal wins" when its human winner's Phase-1
  recognizability exceeds the loser's by at least the margin, "evocative wins" when it falls short by as much.
  Δ = accuracy on literal-wins pairs − accuracy on evocative-wins pairs, a one-sided 95 % bootstrap lower bound
  (poems resampled), Cohen's d of the per-pair credit, and a one-sided permutation p-value (the labels permuted
  within poems; exact enumeration when there are no more arrangements than permutations asked for). A positive,
  significant Δ: the evaluator rewards literal depiction;
- `bradley_terry` (`generator_strengths` on human pairs): generator strengths from pair outcomes (ties as half a win each way), with bootstrap
  intervals over poems, and the win-rate matrix.
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from dataclasses import dataclass
from itertools import combinations, product
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy.special import expit

from ..dataset.reading import dataset_rows
from ..errors import Notice
from ..judging.pairwise import pair_choices, pair_id, position_bias
from ..judging.results import ResultsFile
from ..numeric import counted, fmt, fmt_ci
from .agree import rating_table
from .noise_floor import RatingTable
from .agreement import (DEFAULT_BOOTSTRAP, DEFAULT_MARGIN, HumanPairs, bootstrap_draws, human_pairs, pair_credit,
                        per_unit_sums, percentile_interval, pointwise_choices)

DEFAULT_PERMUTATIONS = 10_000
BT_BOOTSTRAP = 1_000  # Bradley–Terry is refitted per resample
BT_ITERATIONS = 100  # Newton steps; a strictly concave fit converges in a handful
BT_TOLERANCE = 1e-9  # the largest change of a strength (log scale) at which the fit has converged


@dataclass
class PairTable:
    """The human pairs of one config and split, over its images."""

    image_ids: list[str]
    poem_ids: list[str]  # per image
    generators: list[str]  # per image
    quality: np.ndarray  # (N,) human quality
    recognizability: np.ndarray  # (N,) Phase-1 recognizability (NaN: no answer)
    poems: list[str]  # the poems in index order
    pairs: HumanPairs
    margin: float

    @property
    def pair_ids(self) -> list[str]:
        return [pair_id(self.image_ids[a], self.image_ids[b]) for a, b in zip(self.pairs.x, self.pairs.y)]

    def id_pairs(self) -> list[tuple[str, str]]:
        """The pairs as (x, y) image ids, for `tpb compare`."""
        return [(self.image_ids[a], self.image_ids[b]) for a, b in zip(self.pairs.x, self.pairs.y)]


def pair_table(dataset: str | Path, split: str = "test", config: str = "images",
               margin: float = DEFAULT_MARGIN) -> PairTable:
    """The human pairs (on quality) of a built dataset's config and split."""
    return pair_table_of(list(dataset_rows(dataset, config, split, PAIR_COLUMNS)), margin)


PAIR_COLUMNS = ["image_id", "poem_id", "generator", "quality", "recognizability"]


def pair_table_of(rows: list[dict], margin: float = DEFAULT_MARGIN) -> PairTable:
    """The human pairs (on quality) of image rows (PAIR_COLUMNS)."""
    poems = sorted({r["poem_id"] for r in rows})
    index = {p: i for i, p in enumerate(poems)}
    poem_of = np.array([index[r["poem_id"]] for r in rows], dtype=int)
    quality = np.array([np.nan if r["quality"] is None else r["quality"] for r in rows], dtype=float)
    recognizability = np.array([np.nan if r["recognizability"] is None else r["recognizability"] for r in rows],
                               dtype=float)
    return PairTable([r["image_id"] for r in rows], [r["poem_id"] for r in rows], [r["generator"] for r in rows],
                     quality, recognizability, poems, human_pairs(quality, poem_of, margin), margin)


def evaluator_choices(table: PairTable, scores: ResultsFile | str | Path) -> tuple[str, str, np.ndarray]:
    """(evaluator, model, choices per pair: 1 = x, 0 = y, 0.5 = tie, NaN = none) from a `tpb score` or a
    `tpb compare` file (or its path)."""
    results = ResultsFile.of(scores)
    records = results.records
    if not results.pointwise:
        by_id = pair_choices(records)
        choices = np.full(len(table.pairs), np.nan)
        for k, (i, (x, _)) in enumerate(zip(table.pair_ids, table.id_pairs())):
            if by_id.get(i) is not None:  # a verdict is about the record's x, which need not be the table's
                choices[k] = by_id[i] if records[i]["x"] == x else 1.0 - by_id[i]
        return results.name, results.model, choices
    quality = np.array([np.nan if records.get(i, {}).get("quality") is None else records[i]["quality"]
                        for i in table.image_ids])
    return results.name, results.model, pointwise_choices(quality, table.pairs)


def _accuracy(credit: np.ndarray, poem: np.ndarray, n_poems: int, n_bootstrap: int, seed: int) -> dict:
    judged = np.isfinite(credit)
    sums, counts = per_unit_sums(credit, poem, n_poems), per_unit_sums(judged.astype(float), poem, n_poems)

    def ratios(w: np.ndarray) -> dict[str, np.ndarray]:
        with np.errstate(invalid="ignore", divide="ignore"):
            return {"accuracy": (w @ sums) / (w @ counts)}

    estimate = float(np.nanmean(credit)) if judged.any() else None
    ci = (percentile_interval(bootstrap_draws(ratios, n_poems, n_bootstrap, seed)["accuracy"])
          if n_bootstrap > 0 and judged.any() else None)
    return {"pairs": len(credit), "judged": int(judged.sum()), "accuracy": estimate, "accuracy_ci": ci}


def pairwise_accuracy(table: PairTable, choices: np.ndarray, n_bootstrap: int = DEFAULT_BOOTSTRAP,
                      seed: int = 0) -> dict:
    """The share of human pairs where the choice is the human winner (ties one half), with its 95 % interval."""
    return _accuracy(pair_credit(choices, table.pairs), table.pairs.poem, len(table.poems), n_bootstrap, seed)


def human_ceiling(dataset: str | Path, table: PairTable, split: str = "test", config: str = "images",
                  n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> dict:
    """A rater's choice against the other raters' on the human pairs with an image rated two or more times."""
    return human_ceiling_of(rating_table(dataset, split, config), table, n_bootstrap, seed)


def human_ceiling_of(ratings: RatingTable, table: PairTable, n_bootstrap: int = DEFAULT_BOOTSTRAP,
                     seed: int = 0) -> dict:
    by_image: dict[str, list[float]] = defaultdict(list)
    for image, q in zip(ratings.units, ratings.quality()):
        if math.isfinite(q):
            by_image[image].append(float(q))
    credits, poems = [], []
    for a, b, p in zip(table.pairs.x, table.pairs.y, table.pairs.poem):
        rx, ry = by_image.get(table.image_ids[a], []), by_image.get(table.image_ids[b], [])
        if not rx or not ry or (len(rx) < 2 and len(ry) < 2):
            continue
        credits.append(np.mean([_agree(rx[i], ry[j], _rest_mean(rx, i), _rest_mean(ry, j))
                                for i, j in product(range(len(rx)), range(len(ry)))]))
        poems.append(p)
    return _accuracy(np.array(credits, dtype=float), np.array(poems, dtype=int), len(table.poems), n_bootstrap, seed)


def _rest_mean(values: list[float], left_out: int) -> float:
    """The mean of the other ratings; an image rated once has only its one rating, shared by both sides."""
    rest = values[:left_out] + values[left_out + 1:]
    return float(np.mean(rest or values))


def _agree(one_x: float, one_y: float, rest_x: float, rest_y: float) -> float:
    """1 when one rater's choice is the rest's, 0 when opposite, 0.5 when either is a tie."""
    mine, theirs = np.sign(one_x - one_y), np.sign(rest_x - rest_y)
    return 0.5 if mine == 0 or theirs == 0 else float(mine == theirs)


# --- the literal-bias test ------------------------------------------------------------------------------------------


def literal_labels(table: PairTable) -> np.ndarray:
    """Per pair: +1 "literal wins" (the human winner is more recognizable by at least the margin), -1 "evocative
    wins" (less recognizable by at least the margin), 0 neither (or a Phase-1 answer missing)."""
    pairs, rec = table.pairs, table.recognizability
    winner = np.where(pairs.x_wins, pairs.x, pairs.y)
    loser = np.where(pairs.x_wins, pairs.y, pairs.x)
    diff = rec[winner] - rec[loser]
    eps = 1e-9
    with np.errstate(invalid="ignore"):
        return np.where(diff >= table.margin - eps, 1, np.where(diff <= -table.margin + eps, -1, 0))


def _delta(credit: np.ndarray, labels: np.ndarray) -> float:
    literal, evocative = credit[labels == 1], credit[labels == -1]
    if not len(literal) or not len(evocative):
        return float("nan")
    return float(literal.mean() - evocative.mean())


def cohens_d(a: np.ndarray, b: np.ndarray) -> float | None:
    """(mean a − mean b) / the pooled standard deviation; None where undefined."""
    if len(a) < 2 or len(b) < 2:
        return None
    pooled = math.sqrt(((len(a) - 1) * a.var(ddof=1) + (len(b) - 1) * b.var(ddof=1)) / (len(a) + len(b) - 2))
    return float((a.mean() - b.mean()) / pooled) if pooled > 0 else None


def arrangements(labels: np.ndarray, poem: np.ndarray) -> int:
    """How many distinct within-poem rearrangements of the labels there are (a product of binomials)."""
    total = 1
    for p in np.unique(poem):
        _, counts = np.unique(labels[poem == p], return_counts=True)
        total *= math.factorial(int(counts.sum())) // math.prod(math.factorial(int(c)) for c in counts)
    return total


def permutation_p(credit: np.ndarray, labels: np.ndarray, poem: np.ndarray,
                  n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = 0) -> tuple[float | None, str]:
    """One-sided p of Δ ≥ the observed Δ when the labels carry no information within poems: (p, method). Exact
    (the share of all distinct within-poem arrangements) when there are at most `n_permutations` of them;
    otherwise Monte Carlo, (1 + #{Δ* ≥ Δ}) / (1 + n), with a seeded generator."""
    observed = _delta(credit, labels)
    if not math.isfinite(observed):
        return None, "none"
    eps = 1e-12
    if arrangements(labels, poem) <= n_permutations:
        groups = [np.flatnonzero(poem == p) for p in np.unique(poem)]
        # the labels are ±1, so an arrangement of a poem's labels is the set of its pairs labelled literal
        options = [list(combinations(g.tolist(), int((labels[g] == 1).sum()))) for g in groups]
        hits = total = 0
        for choice in product(*options):
            permuted = np.full_like(labels, -1)
            for literal_pairs in choice:
                permuted[list(literal_pairs)] = 1
            hits += _delta(credit, permuted) >= observed - eps
            total += 1
        return hits / total, "exact"
    order = np.argsort(poem, kind="stable")
    credit, labels, poem = credit[order], labels[order], poem[order]
    rng = np.random.default_rng(seed)
    literal = (labels == 1).astype(float)
    evocative = (labels == -1).astype(float)
    n_lit, n_evo = literal.sum(), evocative.sum()
    hits = 0
    for start in range(0, n_permutations, 1000):
        b = min(1000, n_permutations - start)
        shuffle = np.argsort(poem[None, :] + rng.random((b, len(poem))), axis=1)  # a permutation within each poem
        deltas = literal[shuffle] @ credit / n_lit - evocative[shuffle] @ credit / n_evo
        hits += int((deltas >= observed - eps).sum())
    return (1 + hits) / (1 + n_permutations), "monte carlo"


def literal_bias(table: PairTable, choices: np.ndarray, n_bootstrap: int = DEFAULT_BOOTSTRAP,
                 n_permutations: int = DEFAULT_PERMUTATIONS, seed: int = 0) -> dict:
    """SemJudge's iconicity test for one evaluator's choices on the human pairs (see the module's docstring)."""
    credit = pair_credit(choices, table.pairs)
    labels = literal_labels(table)
    keep = np.isfinite(credit) & (labels != 0)
    credit, labels, poem = credit[keep], labels[keep], table.pairs.poem[keep]
    literal, evocative = credit[labels == 1], credit[labels == -1]
    n_poems = len(table.poems)
    delta = _delta(credit, labels)
    lower = None
    if n_bootstrap > 0 and math.isfinite(delta):
        lit_sums = per_unit_sums(np.where(labels == 1, credit, 0.0), poem, n_poems)
        lit_counts = per_unit_sums((labels == 1).astype(float), poem, n_poems)
        evo_sums = per_unit_sums(np.where(labels == -1, credit, 0.0), poem, n_poems)
        evo_counts = per_unit_sums((labels == -1).astype(float), poem, n_poems)

        def ratios(w: np.ndarray) -> dict[str, np.ndarray]:
            with np.errstate(invalid="ignore", divide="ignore"):
                return {"delta": (w @ lit_sums) / (w @ lit_counts) - (w @ evo_sums) / (w @ evo_counts)}

        draws = bootstrap_draws(ratios, n_poems, n_bootstrap, seed)["delta"]
        lower = float(np.percentile(draws, 5.0)) if len(draws) else None
    p, method = permutation_p(credit, labels, poem, n_permutations, seed)
    return {
        "literal_pairs": len(literal), "evocative_pairs": len(evocative),
        "accuracy_literal": float(literal.mean()) if len(literal) else None,
        "accuracy_evocative": float(evocative.mean()) if len(evocative) else None,
        "delta": delta if math.isfinite(delta) else None, "delta_ci": None if lower is None else [lower, None],
        "cohens_d": cohens_d(literal, evocative), "p_value": p, "p_method": method,
        "permutations": n_permutations, "bootstrap": n_bootstrap, "seed": seed, "margin": table.margin,
    }


# --- generators: Bradley–Terry and win rates ------------------------------------------------------------------------


def _bt_fit(wins: np.ndarray, iterations: int | None = None) -> tuple[np.ndarray, bool]:
    """Bradley–Terry strengths (log scale, mean 0) from a matrix of wins (ties already split in halves), and whether
    the fit converged; NaN for a generator with no comparisons.

    Each generator with comparisons also plays one pseudo-game against a virtual opponent of strength 0, won half and
    lost half: a prior under which every strength is finite (a generator that won all of its few pairs is strong,
    not infinitely so) and which pulls a generator with few comparisons toward the middle. The log-likelihood is then
    strictly concave; Newton's method with step halving maximises it, converged once a step moves no strength by
    more than BT_TOLERANCE."""
    played = (wins + wins.T).sum(1) > 0
    out = np.full(len(wins), np.nan)
    if not played.any():
        return out, True
    w = wins[np.ix_(played, played)]
    games = w + w.T

    def log_likelihood(theta: np.ndarray) -> float:
        return float(-(w * np.logaddexp(0, theta[None, :] - theta[:, None])).sum()
                     + (0.5 * theta - np.logaddexp(0, theta)).sum())

    theta, converged = np.zeros(len(w)), False
    for _ in range(BT_ITERATIONS if iterations is None else iterations):
        pi = expit(theta[:, None] - theta[None, :])  # P(row beats column)
        virtual = expit(theta)  # P(beating the virtual opponent)
        gradient = w.sum(1) - (games * pi).sum(1) + 0.5 - virtual
        c = games * pi * (1 - pi)
        hessian = c - np.diag(c.sum(1) + virtual * (1 - virtual))  # negative definite
        step = np.linalg.solve(hessian, -gradient)
        if np.max(np.abs(step)) < BT_TOLERANCE:
            converged = True
            break
        now, size = log_likelihood(theta), 1.0
        while log_likelihood(theta + size * step) < now and size > 1e-6:
            size /= 2
        theta = theta + size * step
    out[played] = theta - theta.mean()
    return out, converged


def bradley_terry(generator_x: Sequence[str], generator_y: Sequence[str], choices: np.ndarray, poem: np.ndarray,
                  n_poems: int, n_bootstrap: int = BT_BOOTSTRAP, seed: int = 0) -> dict:
    """Per generator, a Bradley–Terry strength (log scale, mean 0; one pseudo-game, half won and half lost, against
    a virtual opponent keeps every strength finite: `_bt_fit`) with a 95 % interval (poems resampled, refitted each
    time), and the win-rate matrix: the share of their pairs that the row's generator won (ties one half). One pair
    per entry: its two images' generators, the choice (1: x, 0: y, 0.5: tie, NaN: none) and its poem's index. A fit
    that does not converge is a warning."""
    generators = sorted(set(generator_x) | set(generator_y))
    g_index = {g: i for i, g in enumerate(generators)}
    gx = np.array([g_index[g] for g in generator_x], dtype=int)
    gy = np.array([g_index[g] for g in generator_y], dtype=int)
    ok = np.isfinite(choices)
    gx, gy, c, poem = gx[ok], gy[ok], choices[ok], np.asarray(poem)[ok]
    n = len(generators)

    def wins_of(weights: np.ndarray) -> np.ndarray:  # weights per pair
        wins = np.zeros((n, n))
        np.add.at(wins, (gx, gy), weights * c)
        np.add.at(wins, (gy, gx), weights * (1 - c))
        return wins

    wins = wins_of(np.ones(len(c)))
    strength, converged = _bt_fit(wins)
    flags = [converged]
    intervals: list = [None] * n
    if n_bootstrap > 0 and len(c):
        rng = np.random.default_rng(seed)
        fits = [_bt_fit(wins_of(np.bincount(rng.integers(0, n_poems, n_poems), minlength=n_poems)[poem]
                                .astype(float))) for _ in range(n_bootstrap)]
        flags += [done for _, done in fits]
        intervals = [percentile_interval(col[np.isfinite(col)]) for col in np.array([f for f, _ in fits]).T]
    if not all(flags):
        warnings.warn(f"Bradley–Terry: {flags.count(False)} of {len(flags)} fits did not converge in {BT_ITERATIONS} "
                      "Newton steps; their strengths are the last step's", Notice, stacklevel=2)
    games = wins + wins.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rate = np.where(games > 0, wins / games, np.nan)
    return {
        "generators": generators,
        "strength": [None if not math.isfinite(s) else float(s) for s in strength],
        "strength_ci": intervals,
        "win_rate": [[None if not math.isfinite(v) else float(v) for v in row] for row in rate],
        "pairs": [[int(v) for v in row] for row in games.round()],
        "judged_pairs": int(ok.sum()), "bootstrap": n_bootstrap, "seed": seed,
    }


def generator_strengths(table: PairTable, choices: np.ndarray, n_bootstrap: int = BT_BOOTSTRAP, seed: int = 0) -> dict:
    """`bradley_terry` over a table's human pairs, from any choices on them (the human winners, an evaluator's)."""
    return bradley_terry([table.generators[a] for a in table.pairs.x], [table.generators[b] for b in table.pairs.y],
                         choices, table.pairs.poem, len(table.poems), n_bootstrap, seed)


# --- tpb agree ------------------------------------------------------------------------------------------------------


def pair_agreement(dataset: str | Path, scores: ResultsFile | str | Path, split: str = "test", config: str = "images",
                   margin: float = DEFAULT_MARGIN, n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0,
                   with_literal_bias: bool = False) -> dict:
    """An evaluator's pairwise accuracy on a split's human pairs beside the human ceiling, and with
    `with_literal_bias` the literal-bias test; for a pairwise judge also its position bias. `scores`: a results file
    of either kind (or its path)."""
    results = ResultsFile.of(scores)
    table = pair_table(dataset, split, config, margin)
    evaluator, model, choices = evaluator_choices(table, results)
    result = {"evaluator": evaluator, "model": model, "margin": margin, "human_pairs": len(table.pairs),
              "poems": len(table.poems), "accuracy": pairwise_accuracy(table, choices, n_bootstrap, seed),
              "human_ceiling": human_ceiling(dataset, table, split, config, n_bootstrap, seed)}
    if not results.pointwise:
        final = results.records
        result["position_bias"] = position_bias(final[i] for i in table.pair_ids if i in final)
    if with_literal_bias:
        result["literal_bias"] = literal_bias(table, choices, n_bootstrap, seed=seed)
    return result


def format_pairs(result: dict) -> str:
    """The pairwise part of `tpb agree`'s table."""
    acc, ceiling = result["accuracy"], result["human_ceiling"]
    lines = [f"Pairwise, on {counted(result['human_pairs'], 'human pair')} of "
             f"{counted(result['poems'], 'poem')} (human quality apart by at "
             f"least {result['margin']:g}; equal scores or a tie count one half):",
             f"  accuracy {fmt(acc['accuracy'])}  {fmt_ci(acc['accuracy_ci'])}  ({acc['judged']} judged)   human ceiling "
             f"{fmt(ceiling['accuracy'])}  {fmt_ci(ceiling['accuracy_ci'])}  "
             f"({counted(ceiling['judged'], 'pair')} of multi-rated "
             "images: one rater against the rest)"]
    if "position_bias" in result:
        bias = result["position_bias"]
        lines.append(f"  position bias: {fmt(bias['first_position_share'])} of "
                     f"{counted(bias['answers'], 'answer')} chose the "
                     f"first image (0.5: none); {fmt(bias['consistent_share'])} of "
                     f"{counted(bias['pairs'], 'pair')} answered the "
                     "same in both orders")
    if "literal_bias" in result:
        lb = result["literal_bias"]
        low = lb["delta_ci"][0] if lb["delta_ci"] else None
        lines += ["", "Literal bias (the winner more recognizable in Phase 1 by at least the margin, or less):",
                  f"  {'literal-wins':>13}{'evocative-wins':>16}{'Δ':>8}{'95% lower':>11}{'d':>8}{'p':>9}",
                  f"  {lb['literal_pairs']:>13}{lb['evocative_pairs']:>16}{fmt(lb['delta']):>8}{fmt(low):>11}"
                  f"{fmt(lb['cohens_d'], 2):>8}{fmt(lb['p_value'], 4):>9}",
                  f"  accuracy {fmt(lb['accuracy_literal'])} on literal-wins, {fmt(lb['accuracy_evocative'])} on "
                  f"evocative-wins; one-sided: bootstrap over poems ({lb['bootstrap']}), permutation p "
                  f"({lb['p_method']}, {lb['permutations']} within-poem permutations, seed {lb['seed']}). A positive, "
                  "significant Δ: the evaluator rewards literal depiction."]
    return "\n".join(lines)


__all__ = ["PairTable", "pair_table", "evaluator_choices", "pairwise_accuracy", "human_ceiling", "literal_labels",
           "literal_bias", "permutation_p", "cohens_d", "bradley_terry", "generator_strengths", "pair_agreement",
           "format_pairs"]
