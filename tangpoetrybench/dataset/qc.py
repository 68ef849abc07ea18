"""Quality control of ratings (SPEC §4, paper Appendix D), applied before aggregation.

Each rule looks at all ratings as given (rules do not feed each other), so a rating can be dropped
for several reasons and the report lists them all. Set a rule's field to None to turn it off;
`QCConfig.off()` turns every rule off.

- min_seconds: drop ratings answered faster than this many seconds.
- straightline_min_ratings: drop every rating of a rater who gave at least this many ratings and the
  same ten answers in all of them (constant-answer pattern).
- phase1_min_answers / phase1_min_accuracy: drop every rating of a rater with at least that many Phase-1
  answers whose Phase-1 accuracy is below the floor. Both must be set for the rule to run.
- consistency: drop a rating that contradicts itself by a rule of the rubric (Tang: overall impression
  a while core imagery is d).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, fields

from .raw_release import Rating, Release

RULES = ("response_time", "straight_lining", "phase1_accuracy", "consistency")


@dataclass(frozen=True)
class QCConfig:
    min_seconds: float | None = 20.0
    straightline_min_ratings: int | None = 5
    phase1_min_answers: int | None = 5
    phase1_min_accuracy: float | None = 0.4
    consistency: bool = True

    @classmethod
    def off(cls) -> "QCConfig":
        return cls(**{f.name: (False if f.name == "consistency" else None) for f in fields(cls)})


@dataclass
class QCResult:
    kept: list[Rating]
    dropped: dict[str, list[str]]  # rating_id -> reasons (rule names)
    report: dict


def run_qc(release: Release, config: QCConfig = QCConfig()) -> QCResult:
    ratings = release.ratings
    reasons: dict[str, list[str]] = defaultdict(list)
    by_rater: dict[str, list[Rating]] = defaultdict(list)
    for r in ratings:
        by_rater[r.rater_id].append(r)

    if config.min_seconds is not None:
        for r in ratings:
            if r.seconds < config.min_seconds:
                reasons[r.rating_id].append("response_time")

    straightliners = {}
    if config.straightline_min_ratings is not None:
        for rater, rs in by_rater.items():
            answers = {tuple(r.answers[k] for k in release.keys) for r in rs}
            if len(rs) >= config.straightline_min_ratings and len(answers) == 1:
                straightliners[rater] = {"n_ratings": len(rs), "answers": "".join(next(iter(answers)))}
                for r in rs:
                    reasons[r.rating_id].append("straight_lining")

    low_phase1 = {}
    if config.phase1_min_answers is not None and config.phase1_min_accuracy is not None:
        for rater, rs in by_rater.items():
            answered = [r.phase1_correct for r in rs if r.phase1_correct is not None]
            if len(answered) >= config.phase1_min_answers:
                accuracy = sum(answered) / len(answered)
                if accuracy < config.phase1_min_accuracy:
                    low_phase1[rater] = {"n_answers": len(answered), "accuracy": round(accuracy, 4)}
                    for r in rs:
                        reasons[r.rating_id].append("phase1_accuracy")

    if config.consistency:
        for r in ratings:
            for when, forbid in release.rubric(r.poem_id).consistency:
                if all(r.answers[k] == v for k, v in when.items()) and all(
                    r.answers[k] == v for k, v in forbid.items()
                ):
                    reasons[r.rating_id].append("consistency")
                    break

    kept = [r for r in ratings if r.rating_id not in reasons]
    report = {
        "config": asdict(config),
        "n_ratings": len(ratings),
        "n_kept": len(kept),
        "n_dropped": len(reasons),
        "by_rule": {rule: sum(rule in rs for rs in reasons.values()) for rule in RULES},
        "raters": {"straight_lining": straightliners, "phase1_accuracy": low_phase1},
        "dropped": [
            {"rating_id": r.rating_id, "rater_id": r.rater_id, "image_id": r.image_id, "line": r.line,
             "reasons": reasons[r.rating_id]}
            for r in ratings if r.rating_id in reasons
        ],
    }
    return QCResult(kept=kept, dropped=dict(reasons), report=report)
