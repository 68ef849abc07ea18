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
  chance (on calibration-like images) that the most likely anchor is the people's;
- where the calibration holds a selective-judging threshold (`tpb calibrate --epsilon`, fitted in
  `stats.selective`), whether the judge abstains on a result: `Calibration.abstains` (from a score and its readout)
  and `abstains_on` (a calibrated result, as `tpb score --abstain` marks it and the reward treats it), the one place
  that says so;
- where it holds the people's quality distribution (format `/3`), a score's percentile in it (`percentile`).

A calibration holds for results made the way its calibration results were (evaluator, model, every setting and
the rubric): anything else is refused, naming the setting. See docs/calibration.md for what it guarantees.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import DataError, Problem, quote
from ..files import write_file
from .abstention import ABSTAIN_SETTING, ABSTAIN_TARGETS, EPSILON_STEP, Abstention
from .evaluators.base import EvalResult, Evaluator, Prepared, ScoringItem
from .results import PER_RESULT_SETTINGS, two_settings

FORMAT = "tangpoetrybench-calibration/3"  # /2 with the people's quality distribution and an optional threshold
FORMAT_2 = "tangpoetrybench-calibration/2"  # still read, and written back as it was (its fingerprint unchanged)
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
APPLIED = frozenset({CALIBRATION_SETTING, ABSTAIN_SETTING})
"""The settings that say how a calibration was applied to results (which one; whether the judge abstained), not how
the results were made: a calibration compares results without them."""


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
    human_quality: list[list[float]] | None = None  # [value, weight]: the people's quality, each poem weighing 1/K
    abstention: Abstention | None = None  # a selective-judging threshold, where one was fitted

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

    @property
    def format(self) -> str:
        """/3 where the file holds what /2 could not (the people's distribution, a threshold); else /2, so that a /2
        file read and written again keeps its fingerprint."""
        return FORMAT if self.human_quality is not None or self.abstention is not None else FORMAT_2

    def to_json(self) -> dict[str, Any]:
        record = {"format": self.format, **asdict(self)}
        if self.format == FORMAT_2:
            del record["human_quality"], record["abstention"]
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
        made = {"evaluator": evaluator, "model": model, **{k: v for k, v in settings.items() if k not in APPLIED}}
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

    def abstains(self, quality: float | None, readout: Mapping[str, Any] | None) -> bool:
        """Whether the judge abstains on a result scored so (its quality, and its readout's `quality_sd`): False
        without a threshold, and for a result without a score (a failure, not an abstention)."""
        if self.abstention is None or quality is None:
            return False
        return not self.abstention.keeps((readout or {}).get("quality_sd"))

    def abstains_on(self, result: EvalResult) -> bool:
        """Whether the judge abstains on a result this calibration was applied to (`apply_result`): `abstains` from
        its quality and readout, and on a scored result it could not be applied to (another rubric's, whose scores
        the threshold guarantees nothing of). A failed result is a failure, not an abstention."""
        if result.parse_status == "failed" or result.quality is None:
            return False
        return "quality" not in (result.calibrated or {}) or self.abstains(result.quality,
                                                                          getattr(result, "readout", None))

    def max_width(self) -> float | None:
        """The widest quality interval the judge keeps, before it is cut to the score range: 2 q̂ (max_spread +
        floor) for normalised intervals, 2 q̂ for plain ones; None without a threshold or where it keeps every
        score."""
        a, q = self.abstention, self.quality
        if a is None or a.max_spread is None or q.q_plain is None:
            return None
        return _round(2 * (q.q_normalised * (a.max_spread + self.spread_floor) if q.q_normalised is not None
                           else q.q_plain))

    def percentile(self, score: Any) -> Any:
        """Where `score` (a number or an array) lies in the people's quality distribution on the calibration images
        (each poem weighing one), in [0, 1]: linear between (0, 0), each value the people gave at its mid-rank
        (the weight below it plus half its own), and (1, 1)."""
        if self.human_quality is None:
            raise ValueError(f"calibration {self.fingerprint} holds no distribution of the people's scores (a file of "
                             f"format {FORMAT_2!r}): calibrate again for percentiles")
        values = np.array([v for v, _ in self.human_quality], dtype=float)
        weights = np.array([w for _, w in self.human_quality], dtype=float)
        mid = np.cumsum(weights) - weights / 2
        low, high = SCORE_RANGE
        xs = np.concatenate([[low] if values[0] > low else [], values, [high] if values[-1] < high else []])
        ys = np.concatenate([[0.0] if values[0] > low else [], mid, [1.0] if values[-1] < high else []])
        found = np.interp(score, xs, ys)
        return found if np.ndim(found) else float(found)

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

    def apply_result(self, result: EvalResult, abstain: bool = False) -> EvalResult:
        """The result with its `calibrated` block and the calibration's fingerprint among its settings; with
        `abstain` (`tpb score --abstain`), its settings say so and a result with a quality is marked `abstained`
        (`abstains_on`) in its block."""
        result.settings[CALIBRATION_SETTING] = self.fingerprint
        if abstain:
            result.settings[ABSTAIN_SETTING] = True
        rubric = self.settings.get("rubric")
        if rubric and result.settings.get("rubric") not in (None, rubric):
            result.calibrated = {"alpha": self.alpha, "calibration": self.fingerprint,
                                 "not_applied": f"calibrated under rubric {rubric}, not {result.settings['rubric']}"}
        else:
            result.calibrated = self.apply(result.scores, result.quality, getattr(result, "readout", None))
        if abstain and result.calibrated is not None and result.quality is not None:
            result.calibrated["abstained"] = self.abstains_on(result)
        return result  # (only the scores task's records carry a readout)


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

@dataclass(frozen=True)
class Check:
    """What one field of a calibration file may hold: `ok(value)`, said in words (`says`) in the error that names the
    file and the field, and `read` into what the dataclass keeps; a field not `required` may be absent (its default
    then holds)."""

    says: str
    ok: Callable[[Any], bool]
    required: bool = True
    read: Callable[[Any], Any] = lambda value: value


def number(low: float | None = None, high: float | None = None, above: bool = False, below: bool = False,
           null: bool = False) -> Check:
    """A finite number (never NaN or ±Infinity, which Python's JSON reader accepts) within [low, high], read as a
    float; `above`/`below` make a bound strict; `null` lets it be null."""
    def ok(value: Any) -> bool:
        if value is None:
            return null
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
            low is None or (value > low if above else value >= low)) and (
            high is None or (value < high if below else value <= high))

    bounds = [f"{'above' if above else 'at least'} {low:g}" if low is not None else None,
              f"{'below' if below else 'at most'} {high:g}" if high is not None else None]
    says = " and ".join(["a number", *(b for b in bounds if b)]).replace(" and ", " ", 1)
    return Check(says + (" or null" if null else ""), ok, read=lambda v: None if v is None else float(v))


def of(kind: type, says: str, required: bool = True) -> Check:
    return Check(says, lambda v: isinstance(v, kind) and not (kind is int and isinstance(v, bool)), required)


WHOLE = Check("a whole number of at least 0", lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0)
# Every field of the file, and of each target (`quality`, `dimensions.KEY`), with what it may hold: a field of
# `Calibration` or `Target` is read only through its line here (a target's is looked up by name).
FIELDS = {"alpha": number(0, 1, above=True, below=True), "evaluator": of(str, "a string"),
          "model": of(str, "a string"), "settings": of(dict, "an object"), "dataset": of(dict, "an object"),
          "poems": Check("a list of poem ids", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v)),
          "n_images": WHOLE, "quality": of(dict, "an object"), "dimensions": of(dict, "an object"),
          "spread_floor": number(0, above=True), "random_weights": of(bool, "true or false", required=False),
          "synthetic": of(bool, "true or false", required=False),
          "diagnostics": of(dict, "an object", required=False)}
TARGETS = ("quality", "dimensions")  # read by TARGET_FIELDS
TARGET_FIELDS = {"n": WHOLE, "n_poems": WHOLE, "q_plain": number(0, null=True), "q_normalised": number(0, null=True),
                 "set_n": WHOLE, "set_threshold": number(0, 1, null=True),
                 "temperature": number(0, above=True, null=True)}


def _read(raw: Mapping[str, Any], checks: Mapping[str, Check], where: str, prefix: str,
          problems: list[Problem]) -> dict[str, Any]:
    """The fields of `raw` that `checks` names, each read by its check; one that does not hold what it may is a
    problem naming the file and the field (and is left out)."""
    read = {}
    for name, check in checks.items():
        if name not in raw:
            if check.required:
                problems.append(Problem(where, f"missing (it must be {check.says})", field=f"{prefix}{name}"))
        elif not check.ok(raw[name]):
            problems.append(Problem(where, f"not {check.says}: {quote(raw[name])}", field=f"{prefix}{name}"))
        else:
            read[name] = check.read(raw[name])
    return read


def load_calibration(path: Path | str) -> Calibration:
    """A calibration file, every field checked against `FIELDS`, `TARGET_FIELDS` and `ABSTENTION_FIELDS` (its type,
    its range, a finite number: an error names the file and each bad field). The fingerprint says only that the file
    was not edited by mistake: anyone can compute it again, so it proves nothing of where a file came from."""
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
    if not isinstance(data, dict) or data.get("format") not in (FORMAT, FORMAT_2):
        raise DataError(Problem(where, f"not a calibration file (expected format {FORMAT!r}, or {FORMAT_2!r})",
                                field="format"))
    problems: list[Problem] = []
    values = _read(data, FIELDS, where, "", problems)
    raw = {"quality": values.get("quality"), **{f"dimensions.{k}": v for k, v in values.get("dimensions", {}).items()}}
    targets = {name: _target(value, where, name, problems) for name, value in raw.items()}
    if data["format"] == FORMAT_2:
        problems += [Problem(where, f"a file of format {FORMAT_2!r} holds none", field=key)
                     for key in ("human_quality", "abstention") if key in data]
        human, abstention = None, None
    else:
        human = _human_quality(data.get("human_quality"), where, problems)  # null: no percentiles
        abstention = None if data.get("abstention") is None else _abstention(data["abstention"], where, problems)
    if problems:
        raise DataError(problems)
    calibration = Calibration(**{k: v for k, v in values.items() if k not in TARGETS}, quality=targets.pop("quality"),
                              dimensions={k.split(".", 1)[1]: t for k, t in targets.items()}, human_quality=human,
                              abstention=abstention)
    if data.get("fingerprint") != calibration.fingerprint:
        raise DataError(Problem(where, f"{data.get('fingerprint')!r} does not match the file's content "
                                       f"({calibration.fingerprint}): it was edited; calibrate again",
                                field="fingerprint"))
    return calibration


def _target(raw: Any, where: str, name: str, problems: list[Problem]) -> Target | None:
    """One target (`quality`, `dimensions.KEY`), each of its fields read through `TARGET_FIELDS`."""
    if not isinstance(raw, dict):
        problems.append(Problem(where, "not an object", field=name))
        return None
    before = len(problems)
    read = _read(raw, {f.name: TARGET_FIELDS[f.name] for f in fields(Target)}, where, f"{name}.", problems)
    return Target(**read) if len(problems) == before else None


def _grid(values: Any) -> bool:
    return isinstance(values, list) and bool(values) and all(v is None or number(0).ok(v) for v in values)


# A threshold's fields, each with what it may hold (read through `_read`, as the file's own).
ABSTENTION_FIELDS = {
    "target": Check(f"one of {', '.join(ABSTAIN_TARGETS)}", lambda v: v in ABSTAIN_TARGETS),
    "epsilon": number(0, 1, above=True, below=True), "delta": number(0, 1, above=True, below=True),
    "max_spread": number(0, null=True), "method": of(str, "a string"),
    "grid": Check("a list of numbers of at least 0 or null", _grid), "p_value": number(0, 1),
    "risk": number(0, 1), "n_poems": Check("a whole number of at least 1", lambda v: WHOLE.ok(v) and v >= 1),
    "kept": number(0, 1), "smallest_epsilon": number(0, 1, above=True, below=True),
}


def _abstention(raw: Any, where: str, problems: list[Problem]) -> Abstention | None:
    """A threshold's fields (`ABSTENTION_FIELDS`), and that they agree: the threshold is one of the grid's, its
    p-value within δ over the grid's size (Bonferroni), the smallest ε certified (to a thousandth) not above ε."""
    if not isinstance(raw, dict):
        problems.append(Problem(where, "not an object or null", field="abstention"))
        return None
    before = len(problems)
    read = _read(raw, ABSTENTION_FIELDS, where, "abstention.", problems)
    if len(problems) > before:
        return None
    a = Abstention(**read)
    if a.max_spread not in a.grid:
        problems.append(Problem(where, f"{a.max_spread} is not one of the grid's thresholds",
                                field="abstention.max_spread"))
    if a.p_value > a.delta / len(a.grid) + SLACK:
        problems.append(Problem(where, f"{a.p_value:g} is above δ / {len(a.grid)} = {a.delta / len(a.grid):g}: the "
                                       "threshold is not certified", field="abstention.p_value"))
    if a.smallest_epsilon > a.epsilon + EPSILON_STEP:
        problems.append(Problem(where, f"{a.smallest_epsilon:g} is above ε = {a.epsilon:g}, which the threshold is "
                                       "certified for", field="abstention.smallest_epsilon"))
    return a


def _human_quality(raw: Any, where: str, problems: list[Problem]) -> list[list[float]] | None:
    """The people's distribution, or null: [value, weight] pairs, values in the score range and rising, weights > 0
    summing to 1."""
    if raw is None:
        return None
    finite = number()
    pairs = raw if isinstance(raw, list) and raw else None
    if pairs is None or not all(isinstance(p, list) and len(p) == 2 and all(finite.ok(x) for x in p) for p in pairs):
        problems.append(Problem(where, "missing or not a list of [value, weight] pairs", field="human_quality"))
        return None
    values, weights = [float(v) for v, _ in pairs], [float(w) for _, w in pairs]
    low, high = SCORE_RANGE
    if not (all(low <= v <= high for v in values) and all(a < b for a, b in zip(values, values[1:]))
            and all(w > 0 for w in weights) and abs(sum(weights) - 1) <= 1e-3):
        problems.append(Problem(where, f"values must rise within [{low:g}, {high:g}] and weights be > 0 and sum to 1",
                                field="human_quality"))
        return None
    return [[v, w] for v, w in zip(values, weights)]


# --- an evaluator whose results carry intervals ---

def check_abstain(calibration: Calibration | None, option: str = "--abstain") -> None:
    """Abstaining (`tpb score --abstain`, and what reads its marks: `option`) needs a calibration that holds a
    selective-judging threshold."""
    if calibration is None or calibration.abstention is None:
        which = ("--calibration FILE, a calibration with a selective-judging threshold" if calibration is None else
                 f"a calibration with a selective-judging threshold, and {calibration.fingerprint} holds none")
        raise ValueError(f"{option} needs {which}: make one with tpb calibrate ... --epsilon E --delta D "
                         "(docs/calibration.md)")


class Calibrated(Evaluator):
    """`evaluator`'s results, each with the calibration's `calibrated` block; its settings carry the calibration's
    fingerprint, so a resume never mixes calibrated and uncalibrated records (or two calibrations). With `abstain`
    (the calibration must hold a threshold), each result with a quality is marked `abstained` or not, and the
    settings say so: a resume with and without it is refused too."""

    def __init__(self, evaluator: Evaluator, calibration: Calibration, abstain: bool = False):
        calibration.check_evaluator(evaluator)
        if abstain:
            check_abstain(calibration)
        self.inner, self.calibration, self.abstain = evaluator, calibration, abstain
        self.rubric = evaluator.rubric
        for name in ("name", "record_type", "model_name", "random_weights", "uses_rubric", "min_batch_size",
                     "device", "worker_start_method"):
            setattr(self, name, getattr(evaluator, name))

    def __getattr__(self, name: str):
        """Anything else the wrapped evaluator has (a served judge's repair setting, a backend, ...)."""
        if name in ("inner", "calibration", "abstain") or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def settings(self) -> dict[str, Any]:
        return {**self.inner.settings(), CALIBRATION_SETTING: self.calibration.fingerprint,
                **({ABSTAIN_SETTING: True} if self.abstain else {})}

    def rubric_fingerprints(self) -> set[str]:
        return self.inner.rubric_fingerprints()

    def rubric_for(self, item: ScoringItem):
        return self.inner.rubric_for(item)

    def prepare(self, items: Sequence[ScoringItem]) -> Prepared:
        return self.inner.prepare(items)

    def run(self, batch: Prepared) -> list[EvalResult]:
        return [self.calibration.apply_result(r, self.abstain) for r in self.inner.run(batch)]

    def _prepare(self, items: Sequence[ScoringItem]) -> Any:
        return self.inner._prepare(items)

    def _run(self, inputs: Any, items: Sequence[ScoringItem]) -> list[EvalResult]:
        return [self.calibration.apply_result(r, self.abstain) for r in self.inner._run(inputs, items)]


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
