"""The recognizability judge in the report and the leaderboard: its agreement with the human Phase-1 track (report),
and each generator's judged recognizability with its interval (leaderboard), new generators included."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..judging.results import ResultsFile
from ..numeric import counted, fmt_interval
from ..stats.agreement import resample_weights
from ..stats.recognition import judge_share, recognition_agreement, recognition_data_of, recognition_rows

RANDOM_NOTE = "**Random weights.** These answers come from a tiny test model: they check the pipeline and measure nothing."


def recognition_results(rows: list[dict], scores: Sequence[ResultsFile], n_bootstrap: int,
                        seed: int) -> tuple[dict[str, dict], list[ResultsFile]]:
    """The agreement with the human Phase-1 track of each results file among `scores` whose records are compared
    with it (the letter task's: recognize, or a plugin's) (`rows`: the report's split's image rows), by file stem;
    and the other files (for Table 4)."""
    results, rest = {}, []
    for scored in scores:
        if scored.record_type.compared_with != "recognizability":
            rest.append(scored)
            continue
        result = recognition_agreement(recognition_data_of(rows, scored.records), n_bootstrap, seed)
        results[scored.path.stem] = {**result, "scores": str(scored.path), "model": scored.model,
                                     "settings": scored.settings, "random_weights": scored.random_weights}
    return results, rest


def lay_out_recognition(rep: Any, results: dict[str, dict], split: str) -> None:
    """The report's table for each recognize results file."""
    for result in results.values():
        rep.heading(f"Recognizability — {result['model']} against the human Phase-1 track ({split} split)")
        if result["random_weights"]:
            rep.text(RANDOM_NOTE)
        rep.text(f"The judge saw each image with four candidate poems in {result['settings'].get('orders')} orders; "
                 "its figure per image is the share of orders it answered right (chance 25 %), the people's the share "
                 "of their Phase-1 answers that were right. Majority: both above one half, or both below (images at "
                 f"exactly one half left out). {counted(result['n_images'], 'image')} of "
                 f"{counted(result['n_poems'], 'poem')}; intervals "
                 "resample poems.")
        rep.table(["Statistic", "Value", "95 % interval (poems resampled)"], recognition_rows(result))


def board_recognizability(board: list[dict], rows: list[dict], files: Sequence[ResultsFile], poems: list[str],
                          n_bootstrap: int, seed: int) -> dict | None:
    """Each generator's judged recognizability over the leaderboard's poems, with its interval (the same resamples
    of poems as the ranking), beside the human one where people rated it (`rows`: the leaderboard's human rows).
    Adds `recognizability` to the board's rows; returns what the table says of the judge (None without files)."""
    if not files:
        return None
    records: dict[str, dict] = {}
    for scored in files:
        if scored.record_type.compared_with != "recognizability":
            raise ValueError(f"{scored.path} holds {scored.name}'s {scored.task} records: --recognize takes the "
                             "letter task's results (tpb score --evaluator recognize)")
        records.update(scored.records)
    human = {r["image_id"]: r["recognizability"] for r in rows}
    index = {p: i for i, p in enumerate(poems)}
    weights = (resample_weights(np.random.default_rng(seed), len(poems), n_bootstrap) if n_bootstrap > 0
               else np.zeros((0, len(poems))))
    judged_images = {}
    for row in board:
        g = row["generator"]
        judged = share_by_poem({p: judge_share(records.get(f"{g}/{p}")) for p in poems}, index)
        people = share_by_poem({p: np.nan if human.get(f"{g}/{p}") is None else human[f"{g}/{p}"] for p in poems},
                               index)
        row["recognizability"] = {"judge": estimate(judged, weights), "human": estimate(people, weights)}
        judged_images[g] = int(judged[1].sum())
    first = next(iter(records.values()))
    return {"model": first.get("model"), "orders": first["settings"].get("orders"), "poems": len(poems),
            "random_weights": any(r.get("random_weights") for r in records.values()), "judged_images": judged_images}


def lay_out_recognizability(rep: Any, board: list[dict], judge: dict | None) -> None:
    if judge is None:
        return
    rows = [[r["generator"], cell(r["recognizability"]["judge"]), cell(r["recognizability"]["human"]),
             str(judge["judged_images"][r["generator"]])] for r in board]
    rep.heading("Recognizability (×100): the judge's share of candidate orders answered right; chance 25")
    if judge["random_weights"]:
        rep.text(RANDOM_NOTE)
    rep.text(f"Judge `{judge['model']}`, candidates in {judge['orders']} orders, on the leaderboard's "
             f"{counted(judge['poems'], 'poem')}; human: the dataset's Phase-1 share where people rated the image. "
             "Intervals: the ranking's resamples of poems.")
    rep.table(["Generator", "Judge recognizability [95 % CI]", "Human recognizability [95 % CI]", "Judged images"], rows)


def share_by_poem(values: dict[str, float], index: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """(sums, counts) over poems of the finite values."""
    sums, counts = np.zeros(len(index)), np.zeros(len(index))
    for p, v in values.items():
        if np.isfinite(v):
            sums[index[p]] += v
            counts[index[p]] += 1
    return sums, counts


def estimate(sums_counts: tuple[np.ndarray, np.ndarray], weights: np.ndarray) -> dict:
    """The mean over poems and its 95 % interval over the resamples (`weights`, B × P)."""
    sums, counts = sums_counts
    if counts.sum() == 0:
        return {"value": None, "ci": None, "images": 0}
    boot = np.array([])
    if len(weights):
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (weights @ sums) / (weights @ counts)
        boot = boot[np.isfinite(boot)]
    ci = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))] if len(boot) else None
    return {"value": float(sums.sum() / counts.sum()), "ci": ci, "images": int(counts.sum())}


def cell(e: dict) -> str:
    if e["value"] is None:
        return "—"
    return f"{100 * e['value']:.1f}" + (f" {fmt_interval(e['ci'], 1, scale=100)}" if e["ci"] else "")
