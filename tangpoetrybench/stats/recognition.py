"""A recognizability judge (`tpb score --evaluator recognize`) against the human Phase-1 track of a built dataset.

Per image, the human figure is the dataset's `recognizability` (the share of its kept ratings whose Phase-1 choice
was the right poem) and the judge's is the share of candidate orders it answered right. Over the images that have
both:

- `mae`: the mean |judge − human|;
- `kendall_tau`: per poem, τ-b between the judge's and the human figures of the poem's images (its generators),
  averaged over the poems where it is defined (`kendall_tau_poems`);
- `majority_accuracy`: how often the judge and the people agree on whether the image is recognised, each by its
  majority — a share above one half. Images where either share is exactly one half are left out
  (`majority_images` counts the rest). People and the judge may have been shown different distractors, so the
  majority is of right and wrong answers, not of the poems chosen;
- `judge_mean`, `human_mean`: the mean shares (chance is 0.25).

95 % intervals resample poems (10,000 times, seed 0 by default), every statistic a ratio of per-poem sums.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from scipy import stats

from ..dataset.reading import dataset_rows
from ..judging.results import ResultsFile
from ..numeric import counted, fmt, fmt_ci
from .agreement import DEFAULT_BOOTSTRAP, resample_weights

STATS = ("mae", "kendall_tau", "majority_accuracy", "judge_mean", "human_mean")
LABELS = {"mae": "MAE per image", "kendall_tau": "Kendall τ per poem, mean",
          "majority_accuracy": "Accuracy against the majority", "judge_mean": "Judge's mean recognizability",
          "human_mean": "Human mean recognizability"}


@dataclass
class RecognitionData:
    image_ids: list[str]
    poem_ids: list[str]
    human: np.ndarray  # (N,) NaN: no human Phase-1 answer
    judge: np.ndarray  # (N,) NaN: no judge result


def judge_share(record: dict | None) -> float:
    """A recognize record's share of orders answered right; NaN where it has none."""
    value = ((record or {}).get("scores") or {}).get("recognizability")
    return np.nan if value is None else float(value)


def recognition_data(dataset: str | Path, results: ResultsFile, split: str = "test",
                     config: str = "images") -> RecognitionData:
    return recognition_data_of(list(dataset_rows(dataset, config, split, ["image_id", "poem_id", "recognizability"])),
                               results.records)


def recognition_data_of(rows: list[dict], records: dict[str, dict]) -> RecognitionData:
    """Image rows (image_id, poem_id, recognizability) beside a recognize judge's records."""
    return RecognitionData(
        [r["image_id"] for r in rows], [r["poem_id"] for r in rows],
        np.array([np.nan if r["recognizability"] is None else r["recognizability"] for r in rows], dtype=float),
        np.array([judge_share(records.get(r["image_id"])) for r in rows], dtype=float))


def _per_poem_sums(data: RecognitionData) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Poems, and (P, S) sums and counts per statistic: |error|, τ, majority agreement, judge and human shares."""
    poems = sorted(set(data.poem_ids))
    index = {p: i for i, p in enumerate(poems)}
    sums, counts = np.zeros((len(poems), len(STATS))), np.zeros((len(poems), len(STATS)))
    both = np.isfinite(data.human) & np.isfinite(data.judge)
    for i in np.flatnonzero(both):
        p, h, j = index[data.poem_ids[i]], data.human[i], data.judge[i]
        sums[p, 0] += abs(j - h)
        counts[p, 0] += 1
        if h != 0.5 and j != 0.5:
            sums[p, 2] += float((h > 0.5) == (j > 0.5))
            counts[p, 2] += 1
        sums[p, 3] += j
        sums[p, 4] += h
        counts[p, 3] += 1
        counts[p, 4] += 1
    for p, poem in enumerate(poems):
        mine = [i for i in np.flatnonzero(both) if data.poem_ids[i] == poem]
        if len(mine) >= 2:
            tau = stats.kendalltau(data.judge[mine], data.human[mine]).statistic
            if np.isfinite(tau):
                sums[p, 1], counts[p, 1] = tau, 1
    return poems, sums, counts


def recognition_agreement(data: RecognitionData, n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0) -> dict:
    """The statistics of the module's docstring, with `<stat>_ci` intervals over poems."""
    poems, sums, counts = _per_poem_sums(data)
    with np.errstate(invalid="ignore", divide="ignore"):
        value = sums.sum(0) / counts.sum(0)
    both = np.isfinite(data.human) & np.isfinite(data.judge)
    out: dict = {"n_images": int(both.sum()), "n_poems": len({data.poem_ids[i] for i in np.flatnonzero(both)}),
                 "judge_missing": int((np.isfinite(data.human) & ~np.isfinite(data.judge)).sum()),
                 "kendall_tau_poems": int(counts[:, 1].sum()), "majority_images": int(counts[:, 2].sum()),
                 "chance": 0.25}
    for s, name in enumerate(STATS):
        out[name] = float(value[s]) if np.isfinite(value[s]) else None
    out["bootstrap"] = {"resamples": n_bootstrap, "seed": seed, "unit": "poem"}
    if n_bootstrap > 0 and poems:
        w = resample_weights(np.random.default_rng(seed), len(poems), n_bootstrap)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot = (w @ sums) / (w @ counts)
        for s, name in enumerate(STATS):
            finite = boot[:, s][np.isfinite(boot[:, s])]
            out[f"{name}_ci"] = ([float(np.percentile(finite, 2.5)), float(np.percentile(finite, 97.5))]
                                 if out[name] is not None and len(finite) else None)
    return out


def agree_recognition(dataset: str | Path, scores: ResultsFile | Path | str, split: str = "test",
                      n_bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0, config: str = "images") -> dict:
    """`tpb agree` for a recognize results file (or its path)."""
    results = ResultsFile.of(scores)
    if results.record_type.compared_with != "recognizability":
        raise ValueError(f"{results.path} holds {results.name}'s {results.task} records, not a letter task's "
                         "(recognize results)")
    data = recognition_data(dataset, results, split, config)
    if not np.isfinite(data.judge).any():
        raise ValueError(f"{results.path} has no recognizability for any image of {dataset} ({config}, {split})")
    return {"evaluator": results.name, "model": results.model, "dataset": str(dataset), "config": config,
            "split": split, "scores": str(results.path), "settings": results.settings,
            "random_weights": results.random_weights, "parse_status": results.status_counts(data.image_ids),
            "recognition": recognition_agreement(data, n_bootstrap, seed)}


def recognition_rows(r: dict) -> list[list[str]]:
    """(statistic, value, interval) rows, for the terminal and the report."""
    rows = []
    for name in STATS:
        label = LABELS[name] + (f" ({counted(r['kendall_tau_poems'], 'poem')})" if name == "kendall_tau" else "") \
            + (f" ({counted(r['majority_images'], 'image')})" if name == "majority_accuracy" else "")
        rows.append([label, fmt(r[name]), fmt_ci(r.get(f"{name}_ci"))])
    return rows


def format_recognition(result: dict, note: Sequence[str] = ()) -> str:
    r = result["recognition"]
    lines = list(note)
    lines += [f"Recognizability of {result['model']} (orders: {result['settings'].get('orders')}) against the human "
              f"Phase-1 track — {result['config']}, {result['split']} split, {counted(r['n_images'], 'image')}, "
              f"{counted(r['n_poems'], 'poem')}; chance 0.25",
              f"answers: {result['parse_status']['ok']} ok, {result['parse_status']['repaired']} repaired, "
              f"{result['parse_status']['failed']} failed; {r['judge_missing']} human-rated images without a judge "
              "share",
              f"95% intervals: bootstrap over poems, {r['bootstrap']['resamples']} resamples, seed "
              f"{r['bootstrap']['seed']}", "", f"{'statistic':<44}{'value':<8}95% CI"]
    lines += [f"{a:<44}{b:<8}{c}" for a, b, c in recognition_rows(r)]
    return "\n".join(lines)
