"""Results files: what `tpb score` and `tpb compare` write, one JSON record a line, and every command reads back.

- `ResultsFile.read(path)` reads a file in one open, checks every record by one rule (`record_problem`), keeps the
  final record of each image or pair (`final_records`), and knows from its records what it holds: its record type
  (`record_type`: the task every record names, `records.RECORD_TYPES`), the evaluator or judge that made it, the
  model, the settings, whether a random-weight test model made it, and the dataset it scored (`scored_on`). A
  command opens each results file once and hands this object on; what a file feeds is decided by its record type's
  declarations (`per`, `compared_with`, `ranks_generators`), never by the evaluator's name.
- **Files written before records named their task** are read by one legacy rule (`legacy_task`), applied once per
  file to its records without a `task`: pair records are `pairwise`; the recognize evaluator's are `letter`, the
  text-ocr evaluator's `text` (the only evaluators of those tasks then); any other file whose scores hold only
  `recognizability` is `letter`, one with other scores in a record is `scores`, and one without is `scalar` — what
  those files always meant. New records always name their task, and nothing else is guessed.
- **The rubric's scores are the rubric's**: a reader that sets a rubric judge's records beside people
  (`ResultsFile.rubric_scores`) refuses a record holding a score that is not a dimension of the rubric it compares
  with (another rubric's judge, a file relabelled by hand); a task with scores of its own names them (`records.Scores`).
- `Resume` is a run adding to its results file (`tpb score` and `tpb compare` alike): what is done, checked record
  by record against the run's settings, and the one way of appending (flushed and synced to disk per batch).

The rule for a record: a JSON object naming its image (`image_id`) or its pair (`pair_id`, with `x` and `y`), whose
fields keep to its record type's features (`records`): every score a JSON number in [0, 1] or null; `quality` the
same, except for a scalar metric (CLIPScore's scale is [0, 2.5]), whose quality is any finite number or null. A
numeric string ("0.7"), a word ("high"), NaN, Infinity or true is no number. `task`, `parse_status`, `error_kind` and
a pair's `verdict` and winners take their documented words; `settings`, `dataset`, `reasons` are objects. A bad
record is a one-line error naming the file, the line, the image or pair and the field. A file holds the results of
one evaluator (or judge) and one task.

The final record of an image or pair: a record that failed in the model (`error_kind` "model" or "transient", which a
rerun asks again) is replaced by any later record of it; every other record — a result, or a final failure (an
unreadable image, an unreadable answer) — is final: nothing later replaces it, so a later failure never undoes a
success.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Protocol, Sequence

from . import records
from ..dataset.reading import dataset_fingerprint
from ..files import json_lines
from .records import MODEL_FAILURES, STATUSES, shown

PER_RESULT_SETTINGS = frozenset({"rubric", "served_model", "response_format", "server"})
"""Settings a result records about itself (checked apart, or not at all), not settings of the run."""
A_RECORD = {"image": "an image record", "pair": "a pair record"}
LEGACY_TASKS = {"recognize": "letter", "text-ocr": "text"}  # evaluator → task, for files older than `task`


def weights_word(random_weights: bool | None) -> bool | str:
    """What a record says of the model's weights: true for a random-weight test model, false for a real one, and
    "unknown" for a served model (a backend's `random_weights` is None there)."""
    return records.UNKNOWN_WEIGHTS if random_weights is None else bool(random_weights)


def legacy_task(lines: Iterable[dict]) -> str:
    """The task of records written before records named it, from all of a file's such records at once (see the
    module's docstring): the one place anything is derived."""
    lines = list(lines)
    if any("pair_id" in r for r in lines):
        return "pairwise"
    named = {LEGACY_TASKS.get(r.get("evaluator")) for r in lines}
    if len(named) == 1 and None not in named:
        return named.pop()
    scored = [set(r["scores"]) for r in lines if isinstance(r.get("scores"), dict) and r["scores"]]
    if scored and all(keys == {records.RECOGNIZABILITY} for keys in scored):
        return "letter"
    return "scores" if scored else "scalar"


def task_of(record: dict, legacy: str | None = None) -> str:
    """A record's task: the one it names, else the file's legacy task (`legacy_task`), else its own alone's."""
    task = record.get("task")
    if isinstance(task, str):
        return task
    return legacy or legacy_task([record])


def rubric_scores(record: dict, keys: Sequence[str], path: Path | str) -> list[float | None]:
    """A rubric judge's record's scores in `keys`' order (None where it gives none), for a reader that sets them
    beside people on the rubric of `keys`. A record holding a score that is not one of `keys` was not scored on that
    rubric (another rubric's judge, a file relabelled by hand): refused, naming the file, the image and the score."""
    scores = record.get("scores") or {}
    other = sorted(set(scores) - set(keys))
    if other:
        raise ValueError(f"{path}: image {record.get('image_id')!r}: scores: {', '.join(other)} is not a dimension of "
                         f"the rubric it is compared on ({', '.join(keys)}): these results were not scored on it")
    return [scores.get(k) for k in keys]


def record_id(record: dict) -> tuple[str, str]:
    """("image", its id) or ("pair", its id) of a record that passed `record_problem`."""
    return ("pair", record["pair_id"]) if "pair_id" in record else ("image", record["image_id"])


def record_problem(record: Any, legacy: str | None = None) -> str | None:
    """What is wrong with a record, in words that name the image or pair and the field; None when nothing is.
    `legacy`: the task of its file's records that do not name one (`legacy_task`)."""
    if not isinstance(record, dict):
        return f"{shown(record)} is not a JSON object (a result record)"
    key = "pair_id" if "pair_id" in record else "image_id"
    if not isinstance(record.get(key), str) or not record[key]:
        return f"{key}: {'missing' if key not in record else shown(record[key]) + ' is not an id'} (every result " \
               "names its image, or its pair)"
    if key == "pair_id" and not all(isinstance(record.get(k), str) for k in ("x", "y")):
        return f"pair {record[key]!r}: x, y: a pair record names its two images"
    task = task_of(record, legacy)
    kind = records.RECORD_TYPES.get(task)
    if kind is None:
        problem = next(records.Words(tuple(records.RECORD_TYPES)).problems("task", record.get("task")))
    elif (kind.per == "pair") != (key == "pair_id"):
        problem = f"task: {shown(task)} is not a task of {'pairs' if key == 'pair_id' else 'images'}"
    else:
        problem = next(kind.problems(record), None)
    return None if problem is None else f"{record_id(record)[0]} {record[key]!r}: {problem}"


@dataclass(frozen=True)
class Line:
    """A record where it was read: its file and line, and its task (named, or the file's legacy task)."""

    path: Path
    number: int
    record: dict
    task: str

    @property
    def where(self) -> str:
        return f"{self.path}:{self.number}"


def read_lines(path: Path, partial: str = "read") -> list[Line]:
    """Every record of a results file in order, each checked by the rule (`files.json_lines` for `partial`); a
    file that does not exist has none."""
    if not path.is_file():
        return []
    return checked_lines(path, list(json_lines(path, partial)))


def checked_lines(path: Path, numbered: list[tuple[int, Any]]) -> list[Line]:
    """(line number, record) pairs checked by the rule, the legacy task derived once for those without a task."""
    legacy = legacy_task(r for _, r in numbered if isinstance(r, dict) and "task" not in r)
    lines, problems = [], []
    for number, record in numbered:
        problem = record_problem(record, legacy)
        if problem is None:
            lines.append(Line(path, number, record, task_of(record, legacy)))
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
    record_type: type[records.Record]  # what its records are: the type of the task they name (`records`)
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
        return cls.of_lines(Path(where), checked_lines(Path(where), list(enumerate(records, start=1))))

    @classmethod
    def of_lines(cls, path: Path, lines: list["Line"]) -> "ResultsFile":
        if not lines:
            raise ValueError(f"{path}: no results")
        pairwise = "pair_id" in lines[0].record
        field = "judge" if pairwise else "evaluator"
        first_name, first_task = lines[0].record.get(field, "?"), lines[0].task
        for line in lines:
            what, key = record_id(line.record)
            if (what == "pair") != pairwise:
                raise ValueError(f"{line.where}: {what} {key!r}: {A_RECORD[what]} among "
                                 f"{'pair' if pairwise else 'image'} records (tpb score and tpb compare each write "
                                 "files of their own)")
            if line.record.get(field, "?") != first_name:
                raise ValueError(f"{line.where}: {what} {key!r}: {field}: {shown(line.record.get(field, '?'))}, but "
                                 f"line {lines[0].number} is {shown(first_name)}'s: results of several {field}s; "
                                 "use one file each")
            if line.task != first_task:
                raise ValueError(f"{line.where}: {what} {key!r}: task: {shown(line.task)}, but line {lines[0].number} "
                                 f"is of the {first_task} task: results of several tasks; use one file each")
        final = final_records(line.record for line in lines)
        first = next(iter(final.values()))
        held = {json.dumps(r["dataset"], sort_keys=True) for r in final.values() if r.get("dataset")}
        return cls(path, records.record_type(first_task), first_name, first.get("model", ""),
                   first.get("settings") or {}, any(r.get("random_weights") is True for r in final.values()), final,
                   [json.loads(d) for d in sorted(held)])

    @classmethod
    def of(cls, results: "ResultsFile | Path | str") -> "ResultsFile":
        """`results` itself, or the file at that path read (for functions a user may call with a path)."""
        return results if isinstance(results, ResultsFile) else cls.read(results)

    @property
    def task(self) -> str:
        return self.record_type.task

    @property
    def pointwise(self) -> bool:
        """Image records (`tpb score`), not pair records (`tpb compare`)."""
        return self.record_type.per == "image"

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

    def rubric_scores(self, image_id: str, keys: Sequence[str]) -> list[float | None]:
        """The scores of an image's record in `keys`' order (`rubric_scores`; a scalar metric's are all None)."""
        record = self.records[image_id]
        if self.record_type.compared_with != "rubric":
            return [(record.get("scores") or {}).get(k) for k in keys]
        return rubric_scores(record, keys, self.path)

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
