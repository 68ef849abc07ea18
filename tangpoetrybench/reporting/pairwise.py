"""The report's and the leaderboard's pairwise tables: computed by `stats.pairs`, laid out here.

- `report_pairwise`: beside Table 4, pairwise accuracy on the split's human pairs for every evaluator (pointwise
  `tpb score` files and pairwise `tpb compare` files alike) with the human ceiling, SRCC and CCC over images, the
  literal-bias test (Table 4L) and generator strengths (Bradley–Terry) with the win-rate matrix (Table 6);
- `leaderboard_pairwise`: generator strengths and the win-rate heat map from the evaluator's choices on every pair
  of images of one poem, for every generator on the leaderboard.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from ..numeric import counted, fmt, fmt_interval
from ..stats.agreement import DEFAULT_BOOTSTRAP, HumanPairs, pointwise_choices
from ..stats.noise_floor import RatingTable
from ..judging.results import ResultsFile
from ..stats.pairs import (BT_BOOTSTRAP, PairTable, bradley_terry, evaluator_choices, generator_strengths,
                           human_ceiling_of, literal_bias, pairwise_accuracy)
from .plots import heatmap


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)


def compute_pairwise(table: PairTable, ratings: RatingTable, scores: Sequence[ResultsFile], split: str = "test",
                     n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> dict:
    """Every pairwise figure of the report, as numbers: per evaluator accuracy and literal bias, the human ceiling
    (from the split's `ratings`), and generator strengths from the human winners and each evaluator's choices."""
    bt_resamples = min(n_bootstrap, BT_BOOTSTRAP)
    out = {"split": split, "margin": table.margin, "human_pairs": len(table.pairs), "poems": len(table.poems),
           "human_ceiling": human_ceiling_of(ratings, table, n_bootstrap, seed),
           "generators": {"human": generator_strengths(table, table.pairs.x_wins.astype(float), bt_resamples, seed)},
           "evaluators": {}}
    for scored in scores:
        _, model, choices = evaluator_choices(table, scored)
        evaluator = scored.label
        if evaluator in out["evaluators"]:
            evaluator = f"{evaluator} ({scored.path.stem})"
        out["evaluators"][evaluator] = {
            "model": model, "scores": str(scored.path), "pairwise_judge": not scored.pointwise,
            "accuracy": pairwise_accuracy(table, choices, n_bootstrap, seed),
            "literal_bias": literal_bias(table, choices, n_bootstrap, seed=seed)}
        out["generators"][evaluator] = generator_strengths(table, choices, bt_resamples, seed)
    return out


def lay_out_pairwise(rep, numbers: dict | None, table4: dict) -> None:
    """The pairwise tables of a report (`reporting.report.Report`) from `compute_pairwise`'s numbers, beside Table 4
    (`table4`: evaluator → its agreement); nothing without them."""
    if numbers is None:
        return
    split = numbers["split"]
    ceiling = numbers["human_ceiling"]
    rep.heading(f"Table 4P — pairwise accuracy on human pairs ({split} split)")
    rep.text(f"{counted(numbers['human_pairs'], 'human pair')}: two images of one poem whose human quality "
             f"differs by at least "
             f"{numbers['margin']:g}. A pointwise evaluator chooses its higher score (equal scores count one half); a "
             "pairwise judge is asked both orders, and opposite answers are a tie. SRCC and CCC (Lin's concordance, "
             "agreement in value) over images, from Table 4. 95 % intervals: poems resampled. The human ceiling: one "
             "rater's choice against the other raters' on the pairs with an image rated more than once.")
    rows = []
    for evaluator, e in numbers["evaluators"].items():
        acc, pointwise = e["accuracy"], table4.get(evaluator, {})
        rows.append([evaluator, f"{acc['judged']}/{acc['pairs']}", fmt(acc["accuracy"]),
                     fmt_interval(acc["accuracy_ci"]), fmt(pointwise.get("spearman")),
                     fmt_interval(pointwise.get("spearman_ci")), fmt(pointwise.get("ccc")),
                     fmt_interval(pointwise.get("ccc_ci"))])
    rows.append(["Human ceiling", f"{ceiling['judged']}", fmt(ceiling["accuracy"]), fmt_interval(ceiling["accuracy_ci"]),
                 "—", "—", "—", "—"])  # people's pairs only: no correlation over images
    rep.table(["Evaluator", "Pairs judged", "Accuracy", "95 % interval", "SRCC", "95 % interval", "CCC",
               "95 % interval"], rows)

    rep.heading(f"Table 4L — literal bias ({split} split)")
    rep.text("Literal-wins: the human winner's Phase-1 recognizability exceeds the loser's by at least the margin; "
             "evocative-wins: it falls short by as much. Δ = accuracy on literal-wins − accuracy on evocative-wins, "
             "with its one-sided 95 % lower bound (poems resampled), Cohen's d of the per-pair credit and a one-sided "
             "permutation p (labels permuted within poems). A positive, significant Δ means the evaluator rewards "
             "literal depiction.")
    rep.table(["Evaluator", "Literal-wins", "Evocative-wins", "Δ", "95 % lower bound", "d", "p"],
              [[evaluator, str(lb["literal_pairs"]), str(lb["evocative_pairs"]), fmt(lb["delta"]),
                fmt(lb["delta_ci"][0] if lb["delta_ci"] else None), fmt(lb["cohens_d"], 2), fmt(lb["p_value"], 4)]
               for evaluator, lb in ((k, v["literal_bias"]) for k, v in numbers["evaluators"].items())])
    generator_tables(rep, numbers["generators"], f"Table 6 — generator strengths from pairs ({split} split)")


def generator_tables(rep, strengths: dict[str, dict], title: str) -> None:
    """Bradley–Terry strengths per generator (one column per source of choices) and a win-rate heat map each."""
    sources = list(strengths)
    generators = sorted({g for bt in strengths.values() for g in bt["generators"]})
    rep.heading(title)
    rep.text("Bradley–Terry strength on the log scale (mean 0 over the generators; a difference of 1 means odds of "
             "e ≈ 2.7 to 1 of winning a pair), fitted to the choices of each source, with 95 % intervals (poems "
             "resampled, refitted each time). Win rate: the share of their pairs the row's generator won.")
    rows = []
    for g in generators:
        cells = []
        for bt in strengths.values():
            if g in bt["generators"]:
                i = bt["generators"].index(g)
                cells.append(f"{fmt(bt['strength'][i], 2)} {fmt_interval(bt['strength_ci'][i], 2)}")
            else:
                cells.append("—")
        rows.append([g, *cells])
    rep.table(["Generator", *sources], rows)
    for source, bt in strengths.items():
        rep.figure(f"win_rate_{_name(source)}.png", heatmap(bt["win_rate"], bt["generators"], f"Win rates: {source}"),
                   f"Win rates from {source}'s choices ({counted(bt['judged_pairs'], 'pair')}).")


def leaderboard_strengths(records: dict[str, dict], image_ids: Sequence[str], n_bootstrap: int = DEFAULT_BOOTSTRAP,
                          seed: int = 0) -> dict | None:
    """Generator strengths and win rates from an evaluator's quality on every pair of images (`<generator>/<poem>`)
    of one poem."""
    ids = [i for i in image_ids if "/" in i]
    poems = sorted({i.split("/", 1)[1] for i in ids})
    index = {p: k for k, p in enumerate(poems)}
    poem_of = np.array([index[i.split("/", 1)[1]] for i in ids], dtype=int)
    quality = np.array([np.nan if records[i].get("quality") is None else records[i]["quality"] for i in ids])
    x, y = np.triu_indices(len(ids), k=1)
    same = poem_of[x] == poem_of[y]
    x, y = x[same], y[same]
    if not len(x):  # one generator, or no poem with two: nothing to compare
        return None
    choices = pointwise_choices(quality, HumanPairs(x, y, poem_of[x], np.zeros(len(x), dtype=bool)))
    bt = bradley_terry([ids[a].split("/", 1)[0] for a in x], [ids[b].split("/", 1)[0] for b in y], choices,
                       poem_of[x], len(poems), min(n_bootstrap, BT_BOOTSTRAP), seed)
    return bt


def lay_out_strengths(rep, bt: dict | None, evaluator: str) -> None:
    if bt is None:
        return
    generator_tables(rep, {evaluator: bt}, "Generator strengths from pairs")
