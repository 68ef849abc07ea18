"""The paper's §4 findings, computed from a built dataset's `images` and `ratings` rows exactly as the report's text
defines them (the report states each reading; `tests/test_findings.py` recomputes every one independently).

Scope: the `images` config (the main tradition's poems, seen generators), all splits; ratings are the kept ratings of
those images. The findings that rest on a rubric role take the role's dimension: `overall` (what drives the holistic
judgment, poem difficulty), `depict` and `evoke` (the depict-to-evoke gap) and `face_avoidance`; a report on a rubric
without the role leaves the finding out.
Every function is deterministic: groups are visited in sorted order, never in set order.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np
from scipy import stats

from ..numeric import mean_or_none
from ..poems import han_count
from ..rubric import Rubric

HIGH_QUALITY = 0.9
LEAKAGE = "leakage"

def spearman(x: Sequence[float | None], y: Sequence[float | None]) -> tuple[float | None, int]:
    """Spearman ρ over the pairs where both are present, and their number; None under 3 pairs or a constant side."""
    pairs = [(a, b) for a, b in zip(x, y) if a is not None and b is not None]
    if len(pairs) < 3:
        return None, len(pairs)
    a, b = zip(*pairs)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None, len(pairs)
    return float(stats.spearmanr(a, b).statistic), len(pairs)


def strength(rho: float | None) -> str:
    """A word for |ρ|: negligible < 0.1 ≤ weak < 0.3 ≤ moderate < 0.5 ≤ strong."""
    if rho is None:
        return "undefined"
    r = abs(rho)
    return "negligible" if r < 0.1 else "weak" if r < 0.3 else "moderate" if r < 0.5 else "strong"


def length_unit(language: str) -> str:
    """What `poem_length` counts, in words."""
    return "Han characters, every CJK ideograph block" if language == "zh" else \
        "letters and characters, without punctuation or spaces"


def poem_length(text: str, language: str) -> int:
    """A poem's length: its Han characters for a Chinese poem (every CJK ideograph block), else its letters and
    characters (`str.isalpha`: kana, kanji, Latin or Arabic letters alike), punctuation and spaces left out."""
    return han_count(text) if language == "zh" else sum(c.isalpha() for c in text)


def drivers(rows: list[dict], keys: Iterable[str], overall: str) -> dict[str, dict]:
    """Per dimension, Spearman ρ with the overall dimension over images."""
    out = {}
    for k in keys:
        if k != overall:
            rho, n = spearman([r[k] for r in rows], [r[overall] for r in rows])
            out[k] = {"rho": rho, "images": n}
    return out


def _by(rows: Iterable[dict], field: str) -> dict[str, list[dict]]:
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        groups[r[field]].append(r)
    return {key: groups[key] for key in sorted(groups)}


def difficulty(rows: list[dict], keys: Iterable[str], overall: str, language: str = "zh") -> dict:
    """Poem difficulty = mean of the overall dimension over the poem's images. The hardest (easiest) quartile: the
    ⌊n/4⌋ lowest (highest) poems and every poem tied with the last one in; the gap per dimension (the overall one left
    out: it defines the quartiles) is the mean over the quartile's poems of each poem's mean over its images. Length
    is `poem_length` in the poems' `language`."""
    by_poem = _by(rows, "poem_id")
    level = {p: mean_or_none([r[overall] for r in rs]) for p, rs in by_poem.items()}
    level = {p: v for p, v in level.items() if v is not None}
    length = {p: poem_length(by_poem[p][0]["poem"], language) for p in level}
    rho, n = spearman([level[p] for p in level], [length[p] for p in level])
    values = sorted(level.values())
    q = len(values) // 4
    hard = sorted(p for p, v in level.items() if q and v <= values[q - 1])
    easy = sorted(p for p, v in level.items() if q and v >= values[-q])

    def quartile_mean(poems: list[str], key: str) -> float | None:
        return mean_or_none([mean_or_none([r[key] for r in by_poem[p]]) for p in poems])

    gap = {}
    for k in keys:
        if k != overall:
            e, h = quartile_mean(easy, k), quartile_mean(hard, k)
            gap[k] = None if e is None or h is None else e - h
    return {"min": min(values, default=None), "max": max(values, default=None), "spearman_with_length": rho,
            "poems": n, "quartile_size": q, "hard_poems": len(hard), "easy_poems": len(easy),
            "easy_minus_hard_gap": gap}


def recognizability(rows: list[dict], generators: list[str], overall: str | None) -> dict:
    """ρ of recognizability with quality and with the overall dimension (where the rubric has one) over images; the
    mean recognizability of highly rated images (quality ≥ 0.9) that have a Phase-1 answer, and their count; per
    generator, the mean recognizability with and without the images whose adjudicated text issue is leakage."""
    rho_q, n_q = spearman([r["recognizability"] for r in rows], [r["quality"] for r in rows])
    with_overall = {}
    if overall is not None:
        rho_o, n_o = spearman([r["recognizability"] for r in rows], [r[overall] for r in rows])
        with_overall = {"spearman_with_overall": rho_o, "spearman_with_overall_images": n_o}
    high = [r["recognizability"] for r in rows
            if r["quality"] is not None and r["quality"] >= HIGH_QUALITY and r["recognizability"] is not None]
    per_generator = {}
    for g in generators:
        mine = [r for r in rows if r["generator"] == g and r["recognizability"] is not None]
        clean = [r for r in mine if r.get("text_issue_type") != LEAKAGE]  # no label column: no leakage label
        per_generator[g] = {"mean": mean_or_none([r["recognizability"] for r in mine]), "images": len(mine),
                            "mean_without_leakage": mean_or_none([r["recognizability"] for r in clean]),
                            "leakage_images_left_out": len(mine) - len(clean)}
    return {"spearman_with_quality": rho_q, "spearman_with_quality_images": n_q, **with_overall,
            "mean_of_highly_rated": mean_or_none(high), "highly_rated_images": len(high),
            "by_generator": per_generator}


def applicability(ratings: list[dict], rubric: Rubric) -> dict[str, dict]:
    """For each dimension with a not-applicable option: the share of kept ratings, pooled over generators, that judged
    it applicable."""
    out = {}
    for dim in rubric.dimensions:
        if any(o.excluded for o in dim.options):
            answered = [r[f"{dim.key}_option"] for r in ratings if r[f"{dim.key}_option"] is not None]
            applicable = sum(not dim.option(a).excluded for a in answered)
            out[dim.key] = {"share": applicable / len(answered) if answered else None, "ratings": len(answered)}
    return out


def emotion(ratings: list[dict], generators: list[str], rubric: Rubric) -> dict:
    """Face avoidance pooled over ratings: per generator, the share of its applicable ratings of the rubric's
    face-avoidance dimension that chose its face-avoidance option (an emotion "expected but not
    visible"); and, pooled over generators, the share of each option among applicable ratings (the failure
    breakdown)."""
    key, face_option = rubric.face_avoidance
    dim = rubric.dimension(key)
    applicable = [r for r in ratings if r[f"{key}_option"] is not None and not dim.option(r[f"{key}_option"]).excluded]
    face = {}
    for g in generators:
        mine = [r[f"{key}_option"] for r in applicable if r["generator"] == g]
        face[g] = {"rate": mine.count(face_option) / len(mine) if mine else None, "ratings": len(mine)}
    options = [r[f"{key}_option"] for r in applicable]
    breakdown = {o.letter: {"share": options.count(o.letter) / len(options) if options else None, "score": o.score}
                 for o in dim.options if not o.excluded}
    return {"dimension": key, "face_option": face_option, "face_avoidance": face, "option_shares": breakdown,
            "applicable_ratings": len(options)}


def ranking_stability(rows: list[dict], generators: list[str], n_bootstrap: int, rng: np.random.Generator) -> dict:
    """Share of bootstrap resamples (images resampled within each generator) in which each generator has the
    highest and the lowest mean quality; None for a generator without a quality to rank."""
    values = {g: np.array([r["quality"] for r in rows if r["generator"] == g and r["quality"] is not None])
              for g in generators}
    ranked = [g for g in generators if len(values[g])]
    boots = np.stack([bootstrap_means(values[g], n_bootstrap, rng) for g in ranked]) if ranked else np.zeros((0, 0))
    first = {g: float(np.mean(np.argmax(boots, axis=0) == ranked.index(g))) if g in ranked else None
             for g in generators}
    last = {g: float(np.mean(np.argmin(boots, axis=0) == ranked.index(g))) if g in ranked else None
            for g in generators}
    return {"first": first, "last": last, "resamples": n_bootstrap}


def depict_evoke(rows: list[dict], generators: list[str], depict: Sequence[str], evoke: Sequence[str],
                 n_bootstrap: int, rng: np.random.Generator) -> dict:
    """The depict-to-evoke gap. Per image, its depiction is the mean of its `depict` dimensions and its evocation the
    mean of its `evoke` dimensions (each over the dimensions it has a score on); per generator, over its images that
    have both, the mean depiction, the mean evocation and the mean gap (depiction − evocation), with a 95 % bootstrap
    interval of the gap (its images resampled)."""
    by_generator = {}
    for g in generators:
        both = [(d, e) for r in rows if r["generator"] == g
                for d, e in [(mean_or_none([r[k] for k in depict]), mean_or_none([r[k] for k in evoke]))]
                if d is not None and e is not None]
        if not both:
            by_generator[g] = {"depict": None, "evoke": None, "gap": None, "interval": None, "images": 0}
            continue
        pairs = np.array(both, dtype=float)
        boot = bootstrap_means(pairs[:, 0] - pairs[:, 1], n_bootstrap, rng)
        by_generator[g] = {"depict": float(pairs[:, 0].mean()), "evoke": float(pairs[:, 1].mean()),
                           "gap": float((pairs[:, 0] - pairs[:, 1]).mean()),
                           "interval": [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))],
                           "images": len(both)}
    return {"depict": list(depict), "evoke": list(evoke), "by_generator": by_generator}


def bootstrap_means(values: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `n` resamples (with replacement) of `values`."""
    if len(values) == 0:
        return np.full(n, np.nan)
    return values[rng.integers(0, len(values), size=(n, len(values)))].mean(axis=1)


def phase1_accuracy(ratings: list[dict]) -> dict[str, dict]:
    """Per rater group, the share of correct Phase-1 answers among the kept ratings that have one."""
    out = {}
    for group in ("expert", "crowd"):
        answers = [float(r["phase1_correct"]) for r in ratings
                   if r["rater_group"] == group and r["phase1_correct"] is not None]
        out[group] = {"accuracy": mean_or_none(answers), "answers": len(answers)}
    return out
