"""Results files: what `tpb score` and `tpb compare` write, one JSON record a line, and every command reads back.

- `ResultsFile.read(path)` reads a file in one open, checks every record by one rule (`record_problem`), keeps the
  final record of each image or pair (`final_records`), and knows from its records what it holds: its `kind`, the
  evaluator or judge that made it, the model, the settings, whether a random-weight test model made it, and the
  dataset it scored (`scored_on`). A command opens each results file once and hands this object on.
- The kinds: `pairwise`, a verdict per pair asked in both orders (`tpb compare`: records with `pair_id`);
  `recognition`, the recognize judge's share of candidate orders answered right; `explain`, rubric scores with a
  reason per dimension (records with `reasons`); `rubric`, rubric scores (pae, api, text-ocr); `scalar`, one number
  per image and no rubric scores (clipscore, blipscore, vqascore).
- `Resume` is a run adding to its results file (`tpb score` and `tpb compare` alike): what is done, checked record
  by record against the run's settings, and the one way of appending (flushed and synced to disk per batch).

The rule for a record: a JSON object naming its image (`image_id`) or its pair (`pair_id`, with `x` and `y`); every
score a JSON number in [0, 1] or null; `quality` the same, except for a scalar metric (no rubric scores: CLIPScore's
scale is [0, 2.5]), whose quality is any finite number or null. A numeric string ("0.7"), a word ("high"), NaN,
Infinity or true is no number. `parse_status`, `error_kind` and a pair's `verdict` and winners take their documented
words; `settings`, `dataset`, `reasons` are objects. A bad record is a one-line error naming the file, the line, the
image or pair and the field. A file holds the results of one evaluator (or judge).

The final record of an image or pair: a record that failed in the model (`error_kind` "model" or "transient", which a
rerun asks again) is replaced by any later record of it; every other record — a result, or a final failure (an
unreadable image, an unreadable answer) — is final: nothing later replaces it, so a later failure never undoes a
success.
"""

from __future__ import annotations

import json
import math
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from ..dataset.reading import dataset_fingerprint
from ..files import json_lines

RUBRIC, EXPLAIN, SCALAR, RECOGNITION, PAIRWISE = "rubric", "explain", "scalar", "recognition", "pairwise"
RECOGNIZE = "recognize"  # the recognizability judge's evaluator name
MODEL_FAILURES = ("model", "transient")  # `evaluators.base.error_kind`'s words: a rerun tries these again
ERROR_KINDS = ("input", *MODEL_FAILURES, "parse")
STATUSES = ("ok", "repaired", "failed")
VERDICTS = ("x", "y", "tie")
WINNERS = ("A", "B")
PER_RESULT_SETTINGS = frozenset({"rubric", "served_model", "response_format", "server"})
"""Settings a result records about itself (checked apart, or not at all), not settings of the run."""
UNKNOWN_WEIGHTS = "unknown"  # `random_weights` of a served model: nobody can vouch for its weights

# field → what it must be, where a record has it (None: null allowed)
_TYPES: dict[str, tuple] = {"evaluator": (str,), "judge": (str,), "model": (str,), "x": (str,), "y": (str,),
                            "settings": (dict,), "random_weights": (bool, UNKNOWN_WEIGHTS), "dataset": (dict, None),
                            "reasons": (dict, None), "scores": (dict, None), "orders": (list,)}
_WORDS: dict[str, tuple] = {"parse_status": STATUSES, "error_kind": (None, *ERROR_KINDS), "verdict": (None, *VERDICTS)}
A_RECORD = {"image": "an image record", "pair": "a pair record"}
_TYPE_NAMES = {str: "a string", dict: "an object", bool: "true or false", list: "a list", None: "null",
               UNKNOWN_WEIGHTS: f'"{UNKNOWN_WEIGHTS}"'}


def weights_word(random_weights: bool | None) -> bool | str:
    """What a record says of the model's weights: true for a random-weight test model, false for a real one, and
    "unknown" for a served model (a backend's `random_weights` is None there)."""
    return UNKNOWN_WEIGHTS if random_weights is None else bool(random_weights)


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


def number_problem(value: Any, bounded: bool = True) -> str | None:
    """Why `value` is not a JSON number in [0, 1] (with `bounded`; else any finite number) or null; None if it is."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not (isinstance(value, int) or math.isfinite(value)) or (bounded and not 0 <= value <= 1):
        return f"{_shown(value)} is not {'a number in [0, 1]' if bounded else 'a finite number'} or null"
    return None


def _is(value: Any, allowed: Any) -> bool:
    """Whether a field's value is of an allowed type (a class), the allowed word (a string) or null (None)."""
    if allowed is None:
        return value is None
    return value == allowed if isinstance(allowed, str) else isinstance(value, allowed)


def _field_problems(record: dict) -> Iterator[str]:
    """`field: problem` for each field of a record that breaks the rule."""
    for key, allowed in _TYPES.items():
        if key in record and not any(_is(record[key], t) for t in allowed):
            yield f"{key}: {_shown(record[key])} is not {' or '.join(_TYPE_NAMES[t] for t in allowed)}"
    for key, words in _WORDS.items():
        if key in record and record[key] not in words:
            yield f"{key}: {_shown(record[key])} is not one of {', '.join(_shown(w) for w in words)}"
    scores = record.get("scores") if isinstance(record.get("scores"), dict) else {}
    for key, value in scores.items():
        if (problem := number_problem(value)) is not None:
            yield f"scores.{key}: {problem}"
    if "quality" in record and (problem := number_problem(record["quality"], bounded=bool(scores))) is not None:
        yield f"quality: {problem}"
    for n, order in enumerate(record["orders"] if isinstance(record.get("orders"), list) else [], start=1):
        if not isinstance(order, dict) or order.get("winner") not in (*WINNERS, None):
            yield f"orders[{n}].winner: {_shown(order.get('winner') if isinstance(order, dict) else order)} is not " \
                  '"A", "B" or null'


def record_id(record: dict) -> tuple[str, str]:
    """("image", its id) or ("pair", its id) of a record that passed `record_problem`."""
    return ("pair", record["pair_id"]) if "pair_id" in record else ("image", record["image_id"])


def record_problem(record: Any) -> str | None:
    """What is wrong with a record, in words that name the image or pair and the field; None when nothing is."""
    if not isinstance(record, dict):
        return f"{_shown(record)} is not a JSON object (a result record)"
    key = "pair_id" if "pair_id" in record else "image_id"
    if not isinstance(record.get(key), str) or not record[key]:
        return f"{key}: {'missing' if key not in record else _shown(record[key]) + ' is not an id'} (every result " \
               "names its image, or its pair)"
    if key == "pair_id" and not all(isinstance(record.get(k), str) for k in ("x", "y")):
        return f"pair {record[key]!r}: x, y: a pair record names its two images"
    problem = next(_field_problems(record), None)
    return None if problem is None else f"{record_id(record)[0]} {record[key]!r}: {problem}"


@dataclass(frozen=True)
class Line:
    """A record where it was read: its file and line."""

    path: Path
    number: int
    record: dict

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"


def read_lines(path: Path, partial: str = "read") -> list[Line]:
    """Every record of a results file in order, each checked by the rule (`files.json_lines` for `partial`); a
    file that does not exist has none."""
    if not path.is_file():
        return []
    lines, problems = [], []
    for number, record in json_lines(path, partial):
        problem = record_problem(record)
        if problem is None:
            lines.append(Line(path, number, record))
        else:
            problems.append(f"{path}:{number}: {problem}")
    if problems:
        more = f" (and {len(problems) - 1} more bad records in the file)" if len(problems) > 1 else ""
        raise ValueError(problems[0] + more)
    return lines


def final_records(records: Iterable[dict]) -> dict[str, dict]:
    """The final record of each image or pair (see the module's docstring), in the order each first appears."""
    out: dict[str, dict] = {}
    for record in records:
        keep_final(out, record)
    return out


def keep_final(final: dict[str, dict], record: dict) -> None:
    """Add a later record to `final` (id → final record): it replaces only a record that failed in the model."""
    _, key = record_id(record)
    held = final.get(key)
    if held is None or held.get("error_kind") in MODEL_FAILURES:
        final[key] = record


@dataclass
class ResultsFile:
    """One results file, read once: its final record per image or pair id and what it says of itself."""

    path: Path
    kind: str  # RUBRIC, EXPLAIN, SCALAR, RECOGNITION or PAIRWISE (see the module's docstring)
    name: str  # the evaluator (tpb score) or the judge (tpb compare) that made it
    model: str
    settings: dict  # the first record's (a rubric fingerprint and a served model's name may differ per record)
    random_weights: bool  # some record was made by a random-weight test model: the numbers measure nothing
    records: dict[str, dict]  # by image_id (or pair_id), the final record of each
    datasets: list[dict]  # the dataset identities (fingerprint, config, split) its records say they scored

    @classmethod
    def read(cls, path: Path | str) -> "ResultsFile":
        """Read and check a results file (see the module's docstring): an error names the file, line and field."""
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"no scores file {path}: make one with `tpb score ... --out {path}` (pairs: `tpb compare "
                             f"... --out {path}`)")
        return cls.of_lines(path, read_lines(path))

    @classmethod
    def of_records(cls, records: Iterable[dict], where: str = "records in memory") -> "ResultsFile":
        """Records already in memory (a simulation's, say), checked by the same rule as a file's lines."""
        lines = []
        for number, record in enumerate(records, start=1):
            problem = record_problem(record)
            if problem is not None:
                raise ValueError(f"{where}:{number}: {problem}")
            lines.append(Line(Path(where), number, record))
        return cls.of_lines(Path(where), lines)

    @classmethod
    def of_lines(cls, path: Path, lines: list["Line"]) -> "ResultsFile":
        if not lines:
            raise ValueError(f"{path}: no results")
        pairwise = "pair_id" in lines[0].record
        field = "judge" if pairwise else "evaluator"
        first_name = lines[0].record.get(field, "?")
        for line in lines:
            what, key = record_id(line.record)
            if (what == "pair") != pairwise:
                raise ValueError(f"{line.where}: {what} {key!r}: {A_RECORD[what]} among "
                                 f"{'pair' if pairwise else 'image'} records (tpb score and tpb compare each write "
                                 "files of their own)")
            if line.record.get(field, "?") != first_name:
                raise ValueError(f"{line.where}: {what} {key!r}: {field}: {_shown(line.record.get(field, '?'))}, but "
                                 f"line {lines[0].number} is {_shown(first_name)}'s: results of several {field}s; "
                                 "use one file each")
        records = final_records(line.record for line in lines)
        first = next(iter(records.values()))
        kind = (PAIRWISE if pairwise else RECOGNITION if first_name == RECOGNIZE
                else EXPLAIN if any(r.get("reasons") for r in records.values())
                else RUBRIC if any(r.get("scores") for r in records.values()) else SCALAR)
        held = {json.dumps(r["dataset"], sort_keys=True) for r in records.values() if r.get("dataset")}
        return cls(path, kind, first_name, first.get("model", ""), first.get("settings") or {},
                   any(r.get("random_weights") is True for r in records.values()), records,
                   [json.loads(d) for d in sorted(held)])

    @classmethod
    def of(cls, results: "ResultsFile | Path | str") -> "ResultsFile":
        """`results` itself, or the file at that path read (for functions a user may call with a path)."""
        return results if isinstance(results, ResultsFile) else cls.read(results)

    @property
    def pointwise(self) -> bool:
        return self.kind != PAIRWISE

    @property
    def servers(self) -> list[str]:
        """The servers that answered, for a served judge's results (each result says which replica answered it)."""
        found = set()
        for record in self.records.values():
            found.add((record.get("settings") or {}).get("server"))
            found.update((o.get("extra") or {}).get("server") for o in record.get("orders") or [] if isinstance(o, dict))
        return sorted(s for s in found if isinstance(s, str))

    @property
    def label(self) -> str:
        """The evaluator (or judge) as a table names it: a served judge (its records name the servers that answered)
        with its model and servers, since the evaluator's name alone says nothing of who answered."""
        servers = self.servers
        return f"{self.name}: {self.model} at {', '.join(servers)}" if servers else self.name

    def status_counts(self, ids: Iterable[str]) -> dict[str, int]:
        """How many of these images' results parsed `ok`, were `repaired` or `failed`."""
        counts = dict.fromkeys(STATUSES, 0)
        for i in ids:
            status = self.records.get(i, {}).get("parse_status")
            if status in counts:
                counts[status] += 1
        return counts

    def scored_on(self, dataset: str | Path, split: str, configs: tuple[str, ...] = ("images",)) -> str | None:
        """Results of `tpb score --dataset` say what they scored (the build's fingerprint, config and split): another
        build, config or split is refused. Results that do not say it (an older tpb, or images scored from a
        folder) cannot be checked: a warning, returned. Ids that merely match are no proof of the same images."""
        if not self.datasets:
            return (f"{self.path} does not say which dataset it scored (written by an older tpb score, or scored from "
                    f"a folder of images): it is taken to be of {dataset} because its image ids match")
        fingerprint = dataset_fingerprint(dataset)
        for made in self.datasets:
            if made.get("config") not in configs or made.get("split") != split:
                raise ValueError(f"{self.path} scored the {made.get('config')} config's {made.get('split')} split, not "
                                 f"the {' or '.join(configs)} config's {split} split: give the --config and --split it "
                                 "was scored on, or score that split")
            if fingerprint and made.get("fingerprint") and made["fingerprint"] != fingerprint:
                raise ValueError(f"{self.path} scored the dataset build {made['fingerprint']}, but {dataset} is build "
                                 f"{fingerprint} (another dataset, or rebuilt since): score {dataset} again "
                                 f"(tpb score --dataset {dataset} --out NEW.jsonl)")
        return None


Results = ResultsFile | Path | str  # a results file already read, or its path


def setting_words(key: str, value: object) -> str:
    """A setting as a sentence says it: `max_new_tokens 4`, `constrained True`, `no constrained setting`."""
    return f"no {key} setting" if value is None else f"{key} {value!r}"


def two_settings(key: str, one: object, other: object) -> tuple[str, str]:
    """Two values of a setting, for "made with ONE, not OTHER": `max_new_tokens 4`, `8`; a missing one in words."""
    return setting_words(key, one), repr(other) if None not in (one, other) else setting_words(key, other)


class Maker(Protocol):
    """What made a run's results, as a resumed file must match it: an evaluator or a pairwise judge."""

    name: str
    model_name: str

    def settings(self) -> dict[str, Any]: ...


class Resume:
    """A run adding to its results file `out`: what is there, checked, and the one way of appending to it.

    Opening reads `out` and any `parts` (part files of a data-parallel run), each record checked by the rule and
    against the run, setting by setting: the evaluator (or judge), the model and every setting must be the run's
    (a setting added or dropped is a change too), a record without settings is refused, and a per-result rubric
    fingerprint must be one the maker can score under (`rubric_fingerprints`, where it has one). A line cut short by a
    kill is left out of every file and cut off `target` (the file this process appends to: `out` by default), and
    only there, since another process may be appending to the others."""

    ADVICE = "choose another --out, or delete it to start over"

    def __init__(self, maker: Maker, out: Path | str, pairwise: bool = False, target: Path | None = None,
                 parts: Sequence[Path] = ()):
        self.out = Path(out)
        self.target = Path(target or out)
        self.field = "judge" if pairwise else "evaluator"
        self.expected = {self.field: maker.name, "model": maker.model_name, **maker.settings()}
        fingerprints: Callable[[], set[str]] | None = getattr(maker, "rubric_fingerprints", None)
        self.rubrics = fingerprints() if fingerprints and "rubric" not in self.expected else set()
        paths = list(dict.fromkeys([self.out, *parts, self.target]))
        self.lines = [line for path in paths for line in read_lines(path, "cut" if path == self.target else "drop")]
        for line in self.lines:
            self._check_same_run(line)
        self.final = final_records(line.record for line in self.lines)
        self.given: set[str] = set()  # the ids `unseen` has let through

    def _check_same_run(self, line: Line) -> None:
        record = line.record
        if ("pair_id" in record) != (self.field == "judge"):
            raise ValueError(f"{line.where}: {A_RECORD[record_id(record)[0]]}, where the run writes "
                             f"{'pair' if self.field == 'judge' else 'image'} records: {self.ADVICE}")
        if "settings" not in record:
            raise ValueError(f"{self.out} holds results without their settings (written by an older tpb; "
                             f"{line.where}): {self.ADVICE}")
        made = {self.field: record.get(self.field), "model": record.get("model"), **record["settings"]}
        extra = [k for k in made if k not in self.expected and k not in PER_RESULT_SETTINGS]
        for key in [*self.expected, *extra]:
            if made.get(key) != self.expected.get(key):
                was, now = two_settings(key, made.get(key), self.expected.get(key))
                raise ValueError(f"{self.out} holds results made with {was}, not {now} ({line.where}): {self.ADVICE}")
        rubric = record["settings"].get("rubric")
        if self.rubrics and rubric not in self.rubrics:
            raise ValueError(f"{self.out} holds results made with rubric {rubric!r}, not "
                             f"{' or '.join(sorted(self.rubrics))} (the rubric's content changed; {line.where}): "
                             f"{self.ADVICE}")

    @property
    def done(self) -> set[str]:
        """The ids with a final record: a rerun does not ask them again."""
        return {i for i, r in self.final.items() if r.get("error_kind") not in MODEL_FAILURES}

    @property
    def retry(self) -> bool:
        """Whether some id's record failed in the model (a rerun asks it again)."""
        return any(r.get("error_kind") in MODEL_FAILURES for r in self.final.values())

    def unseen(self, records: Iterable[dict]) -> list[dict]:
        """The records of ids this run has not been given yet and that were not done before it, each id once: an
        engine that runs a lost task again (Ray) may send an image's result twice, and the run writes it once."""
        fresh = []
        for record in records:
            key = record_id(record)[1]
            held = self.final.get(key)
            if key in self.given or (held is not None and held.get("error_kind") not in MODEL_FAILURES):
                continue
            self.given.add(key)
            fresh.append(record)
        return fresh

    @contextmanager
    def appending(self) -> Iterator[Callable[[list[dict]], None]]:
        """`write(records)`: appends records to `target`, each checked by the rule first (a record an evaluator got
        wrong is an error now, not in every later command), flushed and synced to disk before it returns; the
        records join `final`."""
        with open(self.target, "a", encoding="utf-8") as f:
            def write(records: list[dict]) -> None:
                for record in records:
                    if (problem := record_problem(record)) is not None:
                        raise ValueError(f"a result for {self.target} breaks the rule for records: {problem}")
                f.write("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
                f.flush()
                os.fsync(f.fileno())
                for record in records:
                    keep_final(self.final, record)

            yield write
