"""Quality control while the campaign runs, as `tpb build` will apply it: the admin page's numbers.

The ratings given so far go through `dataset.qc.run_qc` itself, with the same `QCConfig` (its defaults are the ones
`tpb build` applies), so a rater flagged here is one whose ratings the build will drop. Per rater: ratings given, the
median response time and how many fall under the time floor, the answer patterns (one pattern over many ratings is
straight-lining), Phase-1 accuracy against the floor, and the ratings that break a consistency rule of the rubric.
Beside them, progress (ratings per image, images done: rated by `overlap` raters) and the inter-rater agreement of the
kept ratings so far: within one level per dimension, as the paper's Table 5. The agreement statistic itself lives with
the statistics (`stats.noise_floor`, a later room): whoever builds the page hands it in as `agreement`.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field, fields
from typing import Callable

from ..dataset.qc import QCConfig, run_qc
from ..dataset.raw_release import Rating, Release
from ..rubric import Rubric
from .assignment import Plan, holding
from .campaign import Campaign, dimension_name
from .export import campaign_ratings
from .store import Store

# (rating rows: image_id, image_config, poem_id, rater_id and each dimension's score; the rubric) -> the noise floor
Agreement = Callable[[list[dict], Rubric], dict]


@dataclass
class RatedRelease(Release):
    """The campaign's release with the ratings given so far, asking the campaign for each poem's rubric."""

    campaign: Campaign | None = None

    def rubric(self, poem_id: str) -> Rubric:
        return self.campaign.rubric(poem_id)


def rated_release(campaign: Campaign, ratings: list[Rating]) -> RatedRelease:
    base = {f.name: getattr(campaign.release, f.name) for f in fields(Release)}
    return RatedRelease(**{**base, "ratings": ratings, "keys": campaign.keys}, campaign=campaign)


@dataclass
class Table:
    headers: list[str]
    rows: list[list]


@dataclass
class QCView:
    thresholds: Table
    progress: Table
    raters: Table
    flagged: Table
    agreement: Table
    summary: str
    report: dict = field(default_factory=dict)  # run_qc's report, as qc_report.json will hold it

    def to_json(self) -> dict:
        tables = {name: {"headers": t.headers, "rows": t.rows}
                  for name in ("thresholds", "progress", "raters", "flagged", "agreement")
                  for t in [getattr(self, name)]}
        return {"summary": self.summary, **tables, "qc": self.report}


def _off(value) -> str:
    return "off" if value is None or value is False else str(value)


def thresholds_table(config: QCConfig) -> Table:
    return Table(["rule", "threshold (those of tpb build)"], [
        ["response time: a rating faster than (s)", _off(config.min_seconds)],
        ["straight-lining: one answer pattern over at least (ratings)", _off(config.straightline_min_ratings)],
        ["Phase-1 floor: accuracy below, over at least N answers",
         f"{_off(config.phase1_min_accuracy)} (N = {_off(config.phase1_min_answers)})"],
        ["consistency rules of the rubric", "on" if config.consistency else "off"],
    ])


def campaign_qc(campaign: Campaign, store: Store, plan: Plan, config: QCConfig = QCConfig(),
                agreement: Agreement | None = None, now: float | None = None, lang: str = "en") -> QCView:
    """Every number of the admin page, from the store as it is now."""
    ratings = campaign_ratings(store) if store.meta("campaign") else []
    result = run_qc(rated_release(campaign, ratings), config)
    people = store.people()
    by_rater: dict[str, list[Rating]] = defaultdict(list)
    for r in ratings:
        by_rater[r.rater_id].append(r)
    rules: dict[str, Counter] = defaultdict(Counter)
    for r in ratings:
        for rule in result.dropped.get(r.rating_id, []):
            rules[r.rater_id][rule] += 1

    rater_rows, flagged_rows = [], []
    for name, person in people.items():
        if person.admin:
            continue
        mine = by_rater.get(name, [])
        answered = [r.phase1_correct for r in mine if r.phase1_correct is not None]
        patterns = len({tuple(r.answers[k] for k in campaign.keys) for r in mine})
        dropped = sum(r.rating_id in result.dropped for r in mine)
        hits = rules.get(name, Counter())
        rater_rows.append([
            name, person.role, len(mine),
            round(statistics.median(r.seconds for r in mine), 1) if mine else None,
            hits["response_time"], f"{patterns} in {len(mine)}",
            round(sum(answered) / len(answered), 3) if answered else None, len(answered),
            hits["consistency"], dropped, ", ".join(sorted(hits)) or "—"])
        if hits:
            flagged_rows.append([name, ", ".join(f"{rule} ({n})" for rule, n in sorted(hits.items())),
                                 f"{dropped} of {len(mine)}"])
    raters = Table(["rater", "group", "ratings", "median s", "under the time floor", "answer patterns",
                    "Phase-1 accuracy", "Phase-1 answers", "consistency", "dropped by QC", "flags"], rater_rows)
    flagged = Table(["rater", "rules (ratings)", "ratings dropped"], flagged_rows)

    now = time.time() if now is None else now
    per_image = Counter(r.image_id for r in ratings)
    in_progress = Counter(a.generator for a in holding(store.assignments(), now, plan.hold_s) if not a.done)
    generators = sorted({img.generator for img in campaign.images.values()})
    progress_rows = []
    for gen in generators + [None]:
        images = [i for i, img in campaign.images.items() if gen is None or img.generator == gen]
        progress_rows.append([
            "all" if gen is None else gen, len(images), sum(per_image[i] for i in images),
            sum(per_image[i] > 0 for i in images), sum(per_image[i] >= plan.overlap for i in images),
            sum(in_progress.values()) if gen is None else in_progress[gen]])
    progress = Table(["generator", "images", "ratings", "images rated", f"images done ({plan.overlap} raters)",
                      "in progress"], progress_rows)

    agreement_rows = []
    kept = result.kept
    if agreement is not None and kept:
        rubric = campaign.rubric(kept[0].poem_id)
        rows = [{"image_id": r.image_id, "image_config": "images", "poem_id": r.poem_id, "rater_id": r.rater_id,
                 **{k: campaign.rubric(r.poem_id).score(k, r.answers[k]) for k in campaign.keys}} for r in kept]
        floor = agreement(rows, rubric)
        for key in campaign.keys:
            d = floor["per_dimension"][key]
            within = d["within_one_level"]
            agreement_rows.append([dimension_name(rubric.dimension(key), lang), d["n_images"], d["n_pairs"],
                                   None if within is None else round(100 * within, 1)])
    table5 = Table(["dimension", "multi-rated images", "pairs of raters", "within one level (%)"], agreement_rows)
    summary = (f"{len(ratings)} ratings from {len(by_rater)} raters; QC as `tpb build` applies it keeps "
               f"{len(result.kept)} and drops {len(result.dropped)}; {len(flagged_rows)} raters flagged.")
    return QCView(thresholds_table(config), progress, raters, flagged, table5, summary, result.report)
