"""A judge's results with conformal intervals: the calibration file (`tpb calibrate --out`), its checks, and the
arithmetic that turns one result into intervals, prediction sets and calibrated confidences.

Fitting lives in `stats.calibration`; this module only applies what was fitted, so that scoring (`tpb score
--calibration`), the reward and the Space need nothing of the statistics. Given a result's score s (quality or a
dimension) and the calibration's quantiles for it:

- an interval [s − h, s + h] cut to the score range [0, 1], where h = q_normalised · (spread + floor) when the
  calibration was fitted on the probability readout and the result carries its spread (quality: the readout's
  `quality_sd`; a dimension: the standard deviation of its anchor distribution), and h = q_plain otherwise (a
  decoded answer). An infinite quantile (more than α of the calibration pairs had no score) gives the whole range;
- a prediction set over a dimension's anchors: every anchor whose probability is at least 1 − t, t the quantile of
  1 − p(the people's anchor) (from the readout's distribution as it was recorded);
- a calibrated confidence: the probability of the most likely anchor after temperature scaling, p_T ∝ p^(1/T), the
  chance (on calibration-like images) that the most likely anchor is the people's.

A calibration holds for results made the way its calibration results were (evaluator, model, every setting and
the rubric): anything else is refused, naming the setting. See docs/calibration.md for what it guarantees.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import DataError, Problem
from ..files import write_file
from .evaluators.base import EvalResult, Evaluator, Prepared, ScoringItem
from .results import PER_RESULT_SETTINGS, two_settings

FORMAT = "tangpoetrybench-calibration/2"
EARLIER_FORMATS = ("tangpoetrybench-calibration/1",)  # quantiles ranked per image: not valid for unequal poems
SCORE_RANGE = (0.0, 1.0)
SPREAD_FLOOR = 0.01  # added to every spread, so that a readout sure of itself still gets an interval of some width
PROB_FLOOR = 1e-6  # the readout's probabilities are written with six decimals: a 0 there is below this
SLACK = 1e-9  # float slack where a threshold is compared
CALIBRATION_SETTING = "calibration"  # the key a calibrated result's settings carry the calibration's fingerprint under
SERVED_MODEL = "served_model"  # the model a server said answered a result: one model per calibration
ANSWER_FACTS = PER_RESULT_SETTINGS - {"rubric", SERVED_MODEL}
"""Which replica of a fleet answered a result and how its answer was constrained: facts of one answer, which may
differ between the results of one judge set up one way, never compared."""


@dataclass
class Target:
    """What calibration found for one score: quality, or one dimension."""

    n: int  # calibration pairs: images with a human score (for a set: with a human anchor)
    n_poems: int  # K: the calibration poems with a pair, each weighing one in the quantile
    q_plain: float | None  # the conformal quantile of |human − score| (None: too few pairs for α)
    q_normalised: float | None = None  # of |human − score| / (spread + floor), where every pair had a spread
    set_n: int = 0
    set_threshold: float | None = None  # the quantile of 1 − p(human anchor), where the results have distributions
    temperature: float | None = None  # fitted on the calibration pairs (None: no distributions)

    @property
    def method(self) -> str:
        return "normalised" if self.q_normalised is not None else "plain"


@dataclass
class Calibration:
    """A calibration file: what the intervals are and what they were fitted on."""

    alpha: float
    evaluator: str
    model: str
    settings: dict[str, Any]  # the calibration results' settings, the rubric's fingerprint among them
    dataset: dict[str, Any]  # fingerprint, config and split of the calibration images
    poems: list[str]  # the calibration poems: an evaluation on any of them would be in-sample, and is refused
    n_images: int
    quality: Target
    dimensions: dict[str, Target]
    spread_floor: float = SPREAD_FLOOR
    random_weights: bool = False
    synthetic: bool = False
    diagnostics: dict[str, Any] = field(default_factory=dict)  # what tpb calibrate found on the calibration images

    @property
    def fingerprint(self) -> str:
        """Sixteen hex digits of the sha256 of what the intervals depend on (not the diagnostics)."""
        content = {k: v for k, v in self.to_json().items() if k not in ("fingerprint", "diagnostics")}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def level(self) -> float:
        return 1.0 - self.alpha

    @property
    def on(self) -> str:
        """"images/validation": where it was fitted."""
        return f"{self.dataset.get('config')}/{self.dataset.get('split')}"

    def to_json(self) -> dict[str, Any]:
        record = {"format": FORMAT, **asdict(self)}
        record["fingerprint"] = None
        return record

    def write(self, path: Path | str) -> Path:
        record = {**self.to_json(), "fingerprint": self.fingerprint}
        return write_file(path, json.dumps(record, ensure_ascii=False, indent=1) + "\n")

    # --- what it applies to ---

    def mismatch(self, evaluator: str, model: str, settings: Mapping[str, Any]) -> str | None:
        """Why results made so are not what this calibration was fitted on (the first setting that differs), or
        None. A result's own calibration fingerprint does not count: the intervals are computed afresh. The model a
        server said it served counts where both name one (a failed request's record names none)."""
        made = {"evaluator": evaluator, "model": model,
                **{k: v for k, v in settings.items() if k != CALIBRATION_SETTING}}
        fitted = {"evaluator": self.evaluator, "model": self.model, **self.settings}
        for key in [*fitted, *(k for k in made if k not in fitted)]:
            if key in ANSWER_FACTS or key == SERVED_MODEL and None in (made.get(key), fitted.get(key)):
                continue  # what a server said about one answer, not a setting of the run
            if made.get(key) != fitted.get(key):
                was, now = two_settings(key, made.get(key), fitted.get(key))
                return f"made with {was}, but the calibration ({self.on}) with {now}"
        return None

    def check_evaluator(self, evaluator: Evaluator) -> None:
        """Refuse an evaluator whose results this calibration does not cover."""
        per_result = {k: v for k, v in self.settings.items() if k in PER_RESULT_SETTINGS}  # checked per result
        why = self.mismatch(evaluator.name, evaluator.model_name, {**evaluator.settings(), **per_result})
        rubrics, rubric = evaluator.rubric_fingerprints(), self.settings.get("rubric")
        if why is None and rubric and rubrics and rubric not in rubrics:
            why = f"scored with rubric {' or '.join(sorted(rubrics))}, not the calibration's {rubric}"
        if why:
            raise ValueError(f"the calibration does not apply to this {evaluator.name} evaluator: its results would be "
                             f"{why}; calibrate it as it is set up (tpb calibrate)")

    def check_record(self, record: Mapping[str, Any], where: str) -> None:
        why = self.mismatch(record.get("evaluator", "?"), record.get("model", ""), record.get("settings") or {})
        if why:
            raise ValueError(f"{where}: results {why}: a calibration holds only for results made the way its "
                             "calibration results were; calibrate these (tpb calibrate) or score them that way")

    # --- applying it ---

    def apply(self, scores: Mapping[str, float | None], quality: float | None,
              readout: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The `calibrated` block of one result: α, the quality's and each dimension's interval, each dimension's
        prediction set and calibrated confidence; None for a result without scores (a failed answer)."""
        if quality is None and not any(v is not None for v in (scores or {}).values()):
            return None
        dims = (readout or {}).get("dimensions", {})
        out: dict[str, Any] = {"alpha": self.alpha, "calibration": self.fingerprint,
                               "quality": self._interval(self.quality, quality, (readout or {}).get("quality_sd"))}
        out["scores"] = {k: self._interval(t, scores.get(k), spread_of(dims.get(k)))
                         for k, t in self.dimensions.items()}
        sets = {k: prediction_set(dims[k]["distribution"], t.set_threshold) for k, t in self.dimensions.items()
                if t.set_threshold is not None and k in dims}
        confidence = {k: _round(max(scaled(dims[k]["distribution"], t.temperature).values()))
                      for k, t in self.dimensions.items() if t.temperature is not None and k in dims}
        out.update({"sets": sets} if sets else {}, **({"confidence": confidence} if confidence else {}))
        return out

    def _interval(self, target: Target, score: float | None, spread: float | None) -> list[float] | None:
        if score is None or target.q_plain is None:
            return None
        normalised = target.q_normalised is not None and spread is not None
        half = target.q_normalised * (spread + self.spread_floor) if normalised else target.q_plain
        low, high = SCORE_RANGE
        return [_round(max(low, score - half)), _round(min(high, score + half))]

    def apply_result(self, result: EvalResult) -> EvalResult:
        """The result with its `calibrated` block and the calibration's fingerprint among its settings."""
        result.settings[CALIBRATION_SETTING] = self.fingerprint
        rubric = self.settings.get("rubric")
        if rubric and result.settings.get("rubric") not in (None, rubric):
            result.calibrated = {"alpha": self.alpha, "calibration": self.fingerprint,
                                 "not_applied": f"calibrated under rubric {rubric}, not {result.settings['rubric']}"}
        else:
            result.calibrated = self.apply(result.scores, result.quality, result.readout)
        return result


def _round(x: float) -> float:
    return round(float(x), 6)


def anchor_score(text: str) -> float | None:
    """An anchor's score from its text as the answer writes it (`1.0`, `0.67`, `null`: JSON)."""
    return json.loads(text)


def spread_of(dimension: Mapping[str, Any] | None) -> float | None:
    """The standard deviation of a dimension's anchor distribution over its scored anchors (null's mass left out);
    None without a distribution or with all of it on null."""
    if not dimension or not dimension.get("distribution"):
        return None
    scored = [(p, anchor_score(a)) for a, p in dimension["distribution"].items() if anchor_score(a) is not None]
    mass = sum(p for p, _ in scored)
    if mass <= 0:
        return None
    mean = sum(p * s for p, s in scored) / mass
    return math.sqrt(max(0.0, sum(p * (s - mean) ** 2 for p, s in scored) / mass))


def scaled(distribution: Mapping[str, float], temperature: float) -> dict[str, float]:
    """p_T ∝ max(p, PROB_FLOOR)^(1/T), normalised: temperature scaling of a recorded distribution."""
    logs = {a: math.log(max(p, PROB_FLOOR)) / temperature for a, p in distribution.items()}
    top = max(logs.values())
    weights = {a: math.exp(v - top) for a, v in logs.items()}
    total = sum(weights.values())
    return {a: w / total for a, w in weights.items()}


def prediction_set(distribution: Mapping[str, float], threshold: float) -> list[str]:
    """The anchors whose probability is at least 1 − threshold, most likely first (all of them for an infinite
    threshold)."""
    kept = [a for a, p in distribution.items() if p >= 1.0 - threshold - SLACK]
    return sorted(kept, key=lambda a: -distribution[a])


# --- reading a calibration file ---

FIELDS = {"alpha": (float, "a number"), "evaluator": (str, "a string"), "model": (str, "a string"),
          "settings": (dict, "an object"), "dataset": (dict, "an object"), "poems": (list, "a list"),
          "n_images": (int, "a whole number"), "quality": (dict, "an object"), "dimensions": (dict, "an object")}


def _is(value: Any, kind: type) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, (int, float)) if kind is float else isinstance(value, kind)


def load_calibration(path: Path | str) -> Calibration:
    """A calibration file, checked field by field (an error names the file and each bad field)."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise ValueError(f"no calibration file {path}: make one with `tpb calibrate ... --out {path}`")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(Problem(where, f"not a JSON calibration file ({exc})")) from None
    if isinstance(data, dict) and data.get("format") in EARLIER_FORMATS:
        raise DataError(Problem(where, f"a calibration of an earlier version ({data['format']!r}), whose quantiles "
                                       "counted images, not poems, and held only where every poem had as many "
                                       "images: calibrate again", field="format"))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise DataError(Problem(where, f"not a calibration file (expected format {FORMAT!r})", field="format"))
    problems = [Problem(where, f"missing or not {name}", field=key) for key, (kind, name) in FIELDS.items()
                if not _is(data.get(key), kind)]
    if _is(data.get("alpha"), float) and not 0 < data["alpha"] < 1:
        problems.append(Problem(where, f"must lie strictly between 0 and 1, not {data['alpha']}", field="alpha"))
    raw = {"quality": data.get("quality"), **{f"dimensions.{k}": v for k, v in (data.get("dimensions") or {}).items()}}
    targets = {name: _target(value, where, name, problems) for name, value in raw.items()}
    if problems:
        raise DataError(problems)
    calibration = Calibration(
        alpha=float(data["alpha"]), evaluator=data["evaluator"], model=data["model"], settings=data["settings"],
        dataset=data["dataset"], poems=[str(p) for p in data["poems"]], n_images=data["n_images"],
        quality=targets.pop("quality"), dimensions={k.split(".", 1)[1]: t for k, t in targets.items()},
        spread_floor=float(data.get("spread_floor", SPREAD_FLOOR)), random_weights=bool(data.get("random_weights")),
        synthetic=bool(data.get("synthetic")), diagnostics=data.get("diagnostics") or {})
    if data.get("fingerprint") != calibration.fingerprint:
        raise DataError(Problem(where, f"{data.get('fingerprint')!r} does not match the file's content "
                                       f"({calibration.fingerprint}): it was edited; calibrate again",
                                field="fingerprint"))
    return calibration


def _target(raw: Any, where: str, name: str, problems: list[Problem]) -> Target:
    """One target's fields: counts are whole numbers, quantiles and temperatures numbers ≥ 0 or null."""
    if not isinstance(raw, dict):
        problems.append(Problem(where, "not an object", field=name))
        return Target(0, 0, None)
    values = {}
    for f in fields(Target):
        value, whole = raw.get(f.name), f.name in ("n", "n_poems", "set_n")
        if not whole and value is None:
            values[f.name] = None
        elif not _is(value, int if whole else float) or value < 0 or (f.name == "temperature" and value == 0):
            problems.append(Problem(where, f"missing or not {'a whole number' if whole else 'a number'} ≥ 0",
                                    field=f"{name}.{f.name}"))
            values[f.name] = None
        else:
            values[f.name] = value if whole else float(value)
    return Target(**values)


# --- an evaluator whose results carry intervals ---

class Calibrated(Evaluator):
    """`evaluator`'s results, each with the calibration's `calibrated` block; its settings carry the calibration's
    fingerprint, so a resume never mixes calibrated and uncalibrated records (or two calibrations)."""

    def __init__(self, evaluator: Evaluator, calibration: Calibration):
        calibration.check_evaluator(evaluator)
        self.inner, self.calibration = evaluator, calibration
        self.rubric = evaluator.rubric
        for name in ("name", "model_name", "random_weights", "uses_rubric", "min_batch_size", "device",
                     "worker_start_method"):
            setattr(self, name, getattr(evaluator, name))

    def __getattr__(self, name: str):
        """Anything else the wrapped evaluator has (a served judge's repair setting, a backend, ...)."""
        if name in ("inner", "calibration") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def settings(self) -> dict[str, Any]:
        return {**self.inner.settings(), CALIBRATION_SETTING: self.calibration.fingerprint}

    def rubric_fingerprints(self) -> set[str]:
        return self.inner.rubric_fingerprints()

    def rubric_for(self, item: ScoringItem):
        return self.inner.rubric_for(item)

    def prepare(self, items: Sequence[ScoringItem]) -> Prepared:
        return self.inner.prepare(items)

    def run(self, batch: Prepared) -> list[EvalResult]:
        return [self.calibration.apply_result(r) for r in self.inner.run(batch)]

    def _prepare(self, items: Sequence[ScoringItem]) -> Any:
        return self.inner._prepare(items)

    def _run(self, inputs: Any, items: Sequence[ScoringItem]) -> list[EvalResult]:
        return [self.calibration.apply_result(r) for r in self.inner._run(inputs, items)]


def interval_info(results: Sequence[EvalResult]) -> dict[str, Any]:
    """What a reward's `info` adds for calibrated results (none for others): `quality_interval` (N, 2) with NaN
    where a result has none, `score_intervals` per dimension, and `calibrated_confidence` per dimension."""
    blocks = [r.calibrated or {} for r in results]
    if not any("quality" in b for b in blocks):
        return {}
    keys = list(dict.fromkeys(k for b in blocks for k in b.get("scores", {})))

    def pairs(values) -> np.ndarray:
        return np.array([[math.nan, math.nan] if v is None else v for v in values], dtype=np.float64).reshape(-1, 2)

    return {"quality_interval": pairs(b.get("quality") for b in blocks),
            "score_intervals": {k: pairs(b.get("scores", {}).get(k) for b in blocks) for k in keys},
            "calibrated_confidence": {k: np.array([b.get("confidence", {}).get(k, math.nan) for b in blocks],
                                                  dtype=np.float64) for k in keys},
            "alpha": blocks[next(i for i, b in enumerate(blocks) if "alpha" in b)]["alpha"]}
