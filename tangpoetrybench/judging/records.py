"""Result records: one type per task, each declaring its fields as `datasets` declares its Features, and its task
written in every record, so that whoever reads a results file takes the file's kind from its records
(`results.ResultsFile.record_type`) and never guesses it from the evaluator's name or from which fields are there.

    task       record          one per   compared with people on                                          ranks
    scores     ScoresResult    image     the rubric: each dimension and the quality, on its [0, 1] scale    yes
    text       TextResult      image     the rubric: the one dimension it scores (the adjudicated one)
    letter     LetterResult    image     recognizability: the share of candidate orders answered right
    scalar     ScalarResult    image     ranking only: a number on a scale of its own
    pairwise   PairRecord      pair      the human pairs: a verdict from both orders

A record type is a dataclass whose fields carry their feature (`Value`, `Number`, `Words`, `Scores`, `Orders`,
`Weights`; a field without one is not checked): the one declaration from which a record is built
(`Evaluator.result`), written (`to_json`, with `task` after the evaluator's or judge's name and the empty optional
fields left out) and checked when a file is read (`problems`). Its class attributes say what the records are to
their readers: `per` (an image or a pair), `compared_with` (which human data `tpb agree`, `tpb report` and the
leaderboard set them beside) and `ranks_generators` (the leaderboard may rank generators by their quality). A new
task's record type is one class here and one entry in `RECORD_TYPES`; every reader then knows what to do with it.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar, Iterator

from .abstention import ABSTAIN_SETTING

STATUSES = ("ok", "repaired", "failed")
MODEL_FAILURES = ("model", "transient")  # `evaluators.base.error_kind`'s words: a rerun tries these again
ERROR_KINDS = ("input", *MODEL_FAILURES, "parse")
VERDICTS = ("x", "y", "tie")
WINNERS = ("A", "B")
UNKNOWN_WEIGHTS = "unknown"  # `random_weights` of a served model: nobody can vouch for its weights
RECOGNIZABILITY = "recognizability"  # the letter task's one score: the share of candidate orders answered right


def shown(value: Any) -> str:
    """A value as a message quotes it: its JSON, cut at 40 characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def number_problem(value: Any, bounded: bool = True) -> str | None:
    """Why `value` is not a JSON number in [0, 1] (with `bounded`; else any finite number) or null; None if it is."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not (isinstance(value, int) or math.isfinite(value)) or (bounded and not 0 <= value <= 1):
        return f"{shown(value)} is not {'a number in [0, 1]' if bounded else 'a finite number'} or null"
    return None


# --- features: what a field holds -----------------------------------------------------------------------------------

_TYPES = {"string": (str, "a string"), "object": (dict, "an object"), "list": (list, "a list")}


@dataclass(frozen=True)
class Value:
    """A JSON string, object or list (`dtype`), or null where `nullable`."""

    dtype: str
    nullable: bool = False

    def problems(self, key: str, value: Any) -> Iterator[str]:
        kind, words = _TYPES[self.dtype]
        if not (isinstance(value, kind) or (self.nullable and value is None)):
            yield f"{key}: {shown(value)} is not {words}" + (" or null" if self.nullable else "")


@dataclass(frozen=True)
class Number:
    """A JSON number in [0, 1] (`bounded`) or any finite one, or null."""

    bounded: bool = True

    def problems(self, key: str, value: Any) -> Iterator[str]:
        if (problem := number_problem(value, self.bounded)) is not None:
            yield f"{key}: {problem}"


@dataclass(frozen=True)
class Words:
    """One of a few words (None: null)."""

    words: tuple

    def problems(self, key: str, value: Any) -> Iterator[str]:
        if value not in self.words:
            yield f"{key}: {shown(value)} is not one of {', '.join(shown(w) for w in self.words)}"


@dataclass(frozen=True)
class Weights:
    """true for a random-weight test model, false for a real one, "unknown" for a served one."""

    def problems(self, key: str, value: Any) -> Iterator[str]:
        if not (isinstance(value, bool) or value == UNKNOWN_WEIGHTS):
            yield f'{key}: {shown(value)} is not true or false or "{UNKNOWN_WEIGHTS}"'


@dataclass(frozen=True)
class Scores:
    """Scores by name: an object of numbers in [0, 1] or null (or null). `keys`: the only names the task's records
    may hold (None: a rubric's dimensions, which the rubric a reader compares them with checks:
    `results.ResultsFile.rubric_scores`)."""

    keys: tuple[str, ...] | None = None

    def problems(self, key: str, value: Any) -> Iterator[str]:
        yield from Value("object", nullable=True).problems(key, value)
        for name, score in (value.items() if isinstance(value, dict) else ()):
            if self.keys is not None and name not in self.keys:
                yield (f"{key}.{name}: not a score of this task (its records hold "
                       f"{', '.join(self.keys) or 'no scores'})")
            yield from Number().problems(f"{key}.{name}", score)


@dataclass(frozen=True)
class Orders:
    """A pair's answers, one per order, each naming its `winner`: "A", "B" or null."""

    def problems(self, key: str, value: Any) -> Iterator[str]:
        yield from Value("list").problems(key, value)
        for n, order in enumerate(value if isinstance(value, list) else [], start=1):
            winner = order.get("winner") if isinstance(order, dict) else order
            if not isinstance(order, dict) or winner not in (*WINNERS, None):
                yield f'{key}[{n}].winner: {shown(winner)} is not "A", "B" or null'


@dataclass(frozen=True)
class Intervals:
    """A calibration's block (`judging.calibrated`), or null: an object whose `abstained`, where `tpb score --abstain`
    marked it, is true or false."""

    def problems(self, key: str, value: Any) -> Iterator[str]:
        yield from Value("object", nullable=True).problems(key, value)
        if isinstance(value, dict) and "abstained" in value and not isinstance(value["abstained"], bool):
            yield f"{key}.abstained: {shown(value['abstained'])} is not true or false"


def feature(check: Any = None, default: Any = MISSING, optional: bool = False, **kwargs) -> Any:
    """A record's field with its feature (None: not checked); `optional` fields are left out of a record when empty."""
    return field(default=default, metadata={"feature": check, "optional": optional}, **kwargs)


# --- the record types -----------------------------------------------------------------------------------------------


class Record:
    """What every record type declares (see the module's docstring)."""

    task: ClassVar[str]
    per: ClassVar[str]  # "image" or "pair"
    compared_with: ClassVar[str]  # "rubric", "ranking", "recognizability" or "pairs"
    ranks_generators: ClassVar[bool] = False
    maker: ClassVar[str]  # the field that names who made it: "evaluator" or "judge"

    @classmethod
    def features(cls) -> dict[str, Any]:
        """Every field's feature, `task`'s included (the field a record is written with)."""
        found = {f.name: f.metadata.get("feature") for f in fields(cls)}
        return {**found, "task": Words(tuple(RECORD_TYPES))}

    @classmethod
    def problems(cls, record: dict) -> Iterator[str]:
        """`field: problem` for each field of a record (a JSON object of this type) that breaks its feature."""
        for key, check in cls.features().items():
            if check is not None and key in record:
                yield from check.problems(key, record[key])

    trailing: ClassVar[tuple[str, ...]] = ()  # fields written last, whatever their type adds (what is added later)

    def to_json(self) -> dict[str, Any]:
        """The record as a results file holds it: `task` after the maker's name, empty optional fields left out."""
        record: dict[str, Any] = {}
        ordered = [f for f in fields(self) if f.name not in self.trailing]
        for f in ordered + [f for name in self.trailing for f in fields(self) if f.name == name]:
            value = getattr(self, f.name)
            if f.metadata.get("optional") and not value:
                continue
            record[f.name] = _plain(value)
            if f.name == self.maker:
                record["task"] = self.task
        return record


def _plain(value: Any) -> Any:
    """A field's value as JSON holds it (dataclasses inside lists and dicts as dicts)."""
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


@dataclass
class EvalResult(Record):
    """An image's record: what every pointwise task's records hold. `Evaluator.result(item, scores, quality, raw,
    status, error, kind)` builds one of its evaluator's record type; a task adds its own fields after."""

    image_id: str = feature(Value("string"))
    evaluator: str = feature(Value("string"))
    scores: dict[str, float | None] = feature(Scores())  # the rubric's keys; empty for scalar metrics
    quality: float | None = feature(Number())  # mean of the non-null scores, or the task's one number
    raw_output: str | None = feature()
    parse_status: str = feature(Words(STATUSES))  # ok | repaired | failed
    error: str | None = feature()
    seconds: float = feature()
    model: str = feature(Value("string"), default="")
    error_kind: str | None = feature(Words((None, *ERROR_KINDS)), default=None)  # for a failed result
    settings: dict[str, Any] = feature(Value("object"), default_factory=dict)  # besides the model, what shapes it
    random_weights: bool = feature(Weights(), default=False, optional=True)  # True: a plumbing check
    usage: dict[str, int] | None = feature(default=None, optional=True)  # a served model's prompt/completion tokens
    evidence: dict[str, Any] | None = feature(default=None, optional=True)  # what the score rests on, where shown
    repair: dict[str, Any] | None = feature(default=None, optional=True)  # the repair round's raw_output, status, error
    calibrated: dict[str, Any] | None = feature(Intervals(), default=None,
                                                optional=True)  # `judging.calibrated`'s intervals; `abstained`
    dataset: dict[str, Any] | None = feature(Value("object", nullable=True), default=None,
                                             optional=True)  # the dataset it scored (`tpb score --dataset`)

    per: ClassVar[str] = "image"
    maker: ClassVar[str] = "evaluator"
    trailing: ClassVar[tuple[str, ...]] = ("calibrated", "dataset")  # added by a calibration and by `tpb score`

    @classmethod
    def problems(cls, record: dict) -> Iterator[str]:
        """Each field's problems, and the abstention's marks: a record scored with `--abstain` (its setting true)
        that has a quality says in `calibrated.abstained` whether the judge abstained on it; no other record does."""
        yield from super().problems(record)
        settings, block = (record.get(k) if isinstance(record.get(k), dict) else {} for k in ("settings", "calibrated"))
        abstaining = settings.get(ABSTAIN_SETTING)
        if abstaining not in (None, True):
            yield f"settings.{ABSTAIN_SETTING}: {shown(abstaining)} is not true (tpb score --abstain)"
        elif abstaining and record.get("quality") is not None and "abstained" not in block:
            yield ("calibrated.abstained: missing (a record scored with --abstain that has a quality says whether the "
                   "judge abstained on it)")
        elif not abstaining and "abstained" in block:
            yield f"calibrated.abstained: a record scored without --abstain (no settings.{ABSTAIN_SETTING}) marks none"


@dataclass
class ScoresResult(EvalResult):
    """The rubric's scores (`tasks.scores`): every dimension and the quality, plain or with reasons or the readout."""

    reasons: dict[str, str] | None = feature(Value("object", nullable=True), default=None, optional=True)  # explain
    readout: dict[str, Any] | None = feature(default=None, optional=True)  # anchor distributions, confidences

    task: ClassVar[str] = "scores"
    compared_with: ClassVar[str] = "rubric"
    ranks_generators: ClassVar[bool] = True


@dataclass
class TextResult(EvalResult):
    """One rubric dimension from what is written in the image (text-ocr): its score, with the text as evidence."""

    task: ClassVar[str] = "text"
    compared_with: ClassVar[str] = "rubric"


@dataclass
class LetterResult(EvalResult):
    """The Phase-1 question (`tasks.letter`): `quality` (= `scores.recognizability`) the share of candidate orders
    answered right; `evidence` every order's letter and, where read, probabilities."""

    scores: dict[str, float | None] = feature(Scores(keys=(RECOGNIZABILITY,)))

    task: ClassVar[str] = "letter"
    compared_with: ClassVar[str] = "recognizability"


@dataclass
class ScalarResult(EvalResult):
    """One number per image on a scale of its own (CLIPScore's is [0, 2.5]): `scores` is empty."""

    scores: dict[str, float | None] = feature(Scores(keys=()))
    quality: float | None = feature(Number(bounded=False))

    task: ClassVar[str] = "scalar"
    compared_with: ClassVar[str] = "ranking"


@dataclass
class PairRecord(Record):
    """A pair's record (`tpb compare`): both orders' answers (`tasks.pairwise.PairAnswer`) and the verdict."""

    pair_id: str = feature(Value("string"))
    poem_id: str = feature()
    x: str = feature(Value("string"))
    y: str = feature(Value("string"))
    judge: str = feature(Value("string"))
    model: str = feature(Value("string"))
    settings: dict[str, Any] = feature(Value("object"))
    random_weights: bool | str = feature(Weights())
    orders: list[dict] = feature(Orders())
    verdict: str | None = feature(Words((None, *VERDICTS)))
    error_kind: str | None = feature(Words((None, *ERROR_KINDS)))  # a model failure in an order: asked again

    task: ClassVar[str] = "pairwise"
    per: ClassVar[str] = "pair"
    compared_with: ClassVar[str] = "pairs"
    maker: ClassVar[str] = "judge"


RECORD_TYPES: dict[str, type[Record]] = {t.task: t for t in (ScoresResult, TextResult, LetterResult, ScalarResult,
                                                              PairRecord)}
POINTWISE = tuple(task for task, t in RECORD_TYPES.items() if t.per == "image")  # the tasks `tpb score` runs


def record_type(task: str) -> type[Record]:
    """The record type of a task; an unknown task is refused."""
    if task not in RECORD_TYPES:
        raise ValueError(f"unknown task {task!r} (known: {', '.join(RECORD_TYPES)})")
    return RECORD_TYPES[task]


def abstained(record: dict) -> bool:
    """Whether an image's record (a JSON object) says the judge abstained on it (`tpb score --abstain`)."""
    block = record.get("calibrated")
    return isinstance(block, dict) and block.get("abstained") is True
