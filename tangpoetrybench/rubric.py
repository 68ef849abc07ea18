"""The rubric: dimensions, their options and scores, read from a YAML file and checked on load.

A rubric is data (one file per tradition, under `tangpoetrybench/rubrics/`). Everything that needs to
know what a dimension means or how an option scores — validation, aggregation, the evaluator's prompt,
the statistics — asks a `Rubric`.

    >>> rubric = load_rubric("tang")
    >>> rubric.score("scene_consistency", "d")
    0.33
    >>> rubric.score("scene_consistency", "e") is None   # excluded: the dimension does not apply
    True
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .errors import DataError, Problem, quote

EXCLUDED = "excluded"
LANGUAGES = ("en", "zh")
# Anchor steps are written with two decimals (0.33); the distinct scores may differ by up to 0.01 more.
ANCHOR_TOLERANCE = 0.011
MAX_RUBRIC_BYTES = 256 * 1024  # a rubric is a few KB (the bundled ones are 7 KB); a larger file is refused unread


class RubricLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors and aliases (`&name`, `*name`): a rubric never needs them, and nested
    aliases expand a few hundred bytes into gigabytes (the "billion laughs")."""

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (&name, *name) are not allowed in a "
                                              "rubric: write each value out", event.start_mark)
        return super().compose_node(parent, index)


@dataclass(frozen=True)
class Option:
    letter: str
    label: dict[str, str]
    score: float | None  # None: excluded, the dimension does not apply

    @property
    def excluded(self) -> bool:
        return self.score is None


@dataclass(frozen=True)
class Dimension:
    key: str
    name: dict[str, str]
    description: dict[str, str]
    options: tuple[Option, ...]
    anchor_step: float

    def option(self, letter: str) -> Option:
        for opt in self.options:
            if opt.letter == letter:
                return opt
        raise KeyError(f"{self.key}: unknown option {quote(letter)} (expected one of {', '.join(self.letters)})")

    @property
    def letters(self) -> tuple[str, ...]:
        return tuple(o.letter for o in self.options)

    @property
    def scores(self) -> tuple[float, ...]:
        """The distinct non-excluded scores, best first."""
        return tuple(sorted({o.score for o in self.options if o.score is not None}, reverse=True))


@dataclass(frozen=True)
class Rubric:
    name: str
    tradition: str
    display: dict[str, str]
    version: int
    dimensions: tuple[Dimension, ...]
    adjudicated_dimension: str | None = None
    face_avoidance: tuple[str, str] | None = None  # (dimension, option)
    consistency: tuple[tuple[dict[str, str], dict[str, str]], ...] = ()  # (when, forbid) pairs
    source: str = field(default="", compare=False)

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(d.key for d in self.dimensions)

    def dimension(self, key: str) -> Dimension:
        for dim in self.dimensions:
            if dim.key == key:
                return dim
        raise KeyError(f"rubric {quote(self.name)} has no dimension {quote(key)}")

    def score(self, key: str, letter: str) -> float | None:
        """The score of option `letter` of dimension `key`; None when the option is excluded."""
        return self.dimension(key).option(letter).score

    def anchor_step(self, key: str) -> float:
        return self.dimension(key).anchor_step

    @cached_property
    def fingerprint(self) -> str:
        """`name@hash` of the rubric's content (not its file's layout): results made under another rubric
        content are never mixed with these."""
        content = {k: v for k, v in asdict(self).items() if k != "source"}
        digest = hashlib.sha256(json.dumps(content, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
        return f"{self.name}@{digest[:12]}"


BUILTIN = ("tang", "song_ci")


def load_rubric(name_or_path: str | Path) -> Rubric:
    """Load a bundled rubric by name (`tang`, `song_ci`) or any rubric YAML file by path."""
    if str(name_or_path) in BUILTIN:
        ref = resources.files("tangpoetrybench") / "rubrics" / f"{name_or_path}.yaml"
        return _load_builtin(str(name_or_path), ref.read_text(encoding="utf-8"))
    path = Path(name_or_path)
    if not path.is_file():
        raise DataError(Problem(str(path), f"no such rubric file (bundled rubrics: {', '.join(BUILTIN)})"))
    if path.stat().st_size > MAX_RUBRIC_BYTES:
        raise DataError(Problem(str(path), f"{path.stat().st_size:,} bytes: a rubric file may have at most "
                                f"{MAX_RUBRIC_BYTES:,}"))
    return parse_rubric(path.read_text(encoding="utf-8"), source=str(path))


@lru_cache(maxsize=None)
def _load_builtin(name: str, text: str) -> Rubric:
    return parse_rubric(text, source=f"rubrics/{name}.yaml")


def rubric_for_tradition(tradition: str) -> Rubric:
    """The bundled rubric of a poetic tradition (`tang` or `song_ci`)."""
    if tradition not in BUILTIN:
        raise KeyError(f"no bundled rubric for tradition {quote(tradition)} (known: {', '.join(BUILTIN)})")
    return load_rubric(tradition)


def parse_rubric(text: str, source: str = "<rubric>") -> Rubric:
    """Parse and check a rubric; every problem is reported with the field it concerns."""
    problems: list[Problem] = []

    def bad(where: str, message: str) -> None:
        problems.append(Problem(source, message, field=where))

    try:
        data = yaml.load(text, Loader=RubricLoader)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        raise DataError(Problem(source, f"not valid YAML: {exc}", line=None if line is None else line + 1)) from None
    if not isinstance(data, dict):
        raise DataError(Problem(source, "a rubric is a mapping with name, tradition and dimensions"))

    for key in ("name", "tradition"):
        if not isinstance(data.get(key), str) or not data[key]:
            bad(key, "required, a non-empty string")
    display = _texts(data.get("display", {}), "display", bad)
    version = data.get("version", 1)
    if not isinstance(version, int):
        bad("version", f"expected an integer, got {quote(version)}")

    dims: list[Dimension] = []
    raw_dims = data.get("dimensions")
    if not isinstance(raw_dims, list) or not raw_dims:
        bad("dimensions", "required, a non-empty list")
        raw_dims = []
    for i, raw in enumerate(raw_dims):
        dim = _dimension(raw, f"dimensions[{i}]", bad)
        if dim is not None:
            if dim.key in {d.key for d in dims}:
                bad(f"dimensions[{i}].key", f"duplicate dimension {quote(dim.key)}")
            dims.append(dim)
    by_key = {d.key: d for d in dims}

    def check_ref(where: str, key: Any, letter: Any = None) -> None:
        if key not in by_key:
            bad(where, f"unknown dimension {quote(key)}")
        elif letter is not None and letter not in by_key[key].letters:
            bad(where, f"{key} has no option {quote(letter)}")

    adjudicated = data.get("adjudicated_dimension")
    if adjudicated is not None:
        check_ref("adjudicated_dimension", adjudicated)
    face = data.get("face_avoidance")
    face_pair = None
    if face is not None:
        if not isinstance(face, dict) or set(face) != {"dimension", "option"}:
            bad("face_avoidance", "expected {dimension: KEY, option: LETTER}")
        else:
            check_ref("face_avoidance", face["dimension"], face["option"])
            face_pair = (face["dimension"], face["option"])
    rules = []
    for i, rule in enumerate(data.get("consistency") or []):
        if not isinstance(rule, dict) or set(rule) != {"when", "forbid"}:
            bad(f"consistency[{i}]", "expected {when: {KEY: LETTER}, forbid: {KEY: LETTER}}")
            continue
        for part in ("when", "forbid"):
            if not isinstance(rule[part], dict) or not rule[part]:
                bad(f"consistency[{i}].{part}", "expected a mapping {KEY: LETTER}")
                continue
            for key, letter in rule[part].items():
                check_ref(f"consistency[{i}].{part}.{key}", key, letter)
        rules.append((dict(rule["when"]), dict(rule["forbid"])))
    unknown = set(data) - {
        "name", "tradition", "display", "version", "dimensions",
        "adjudicated_dimension", "face_avoidance", "consistency",
    }
    for key in sorted(unknown):
        bad(key, "unknown field")
    if problems:
        raise DataError(problems)
    return Rubric(
        name=data["name"], tradition=data["tradition"], display=display, version=version,
        dimensions=tuple(dims), adjudicated_dimension=adjudicated, face_avoidance=face_pair,
        consistency=tuple(rules), source=source,
    )


def _texts(value: Any, where: str, bad) -> dict[str, str]:
    """A {en, zh} mapping of non-empty strings."""
    if not isinstance(value, dict) or set(value) != set(LANGUAGES) or not all(
        isinstance(v, str) and v.strip() for v in value.values()
    ):
        bad(where, f"expected non-empty texts for {' and '.join(LANGUAGES)}, got {quote(value)}")
        return {}
    return {k: value[k].strip() for k in LANGUAGES}


def _dimension(raw: Any, where: str, bad) -> Dimension | None:
    if not isinstance(raw, dict):
        bad(where, "expected a mapping")
        return None
    key = raw.get("key")
    if not isinstance(key, str) or not key.isidentifier():
        bad(f"{where}.key", f"expected an identifier, got {quote(key)}")
        return None
    unknown = set(raw) - {"key", "name", "description", "options", "anchor_step"}
    for k in sorted(unknown):
        bad(f"{where}.{k}", "unknown field")
    name = _texts(raw.get("name"), f"{where}.name", bad)
    description = _texts(raw.get("description"), f"{where}.description", bad)
    options: list[Option] = []
    raw_opts = raw.get("options")
    if not isinstance(raw_opts, list) or len(raw_opts) < 2:
        bad(f"{where}.options", "expected a list of at least two options")
        raw_opts = []
    for j, opt in enumerate(raw_opts):
        at = f"{where}.options[{j}]"
        if not isinstance(opt, dict) or set(opt) != {"letter", "label", "score"}:
            bad(at, "expected {letter, label, score}")
            continue
        letter, score = opt["letter"], opt["score"]
        if not (isinstance(letter, str) and len(letter) == 1 and letter.islower()):
            bad(f"{at}.letter", f"expected one lower-case letter, got {quote(letter)}")
            continue
        if letter in {o.letter for o in options}:
            bad(f"{at}.letter", f"duplicate option {quote(letter)}")
        if score == EXCLUDED:
            score = None
        elif isinstance(score, bool) or not isinstance(score, (int, float)) or not 0 <= score <= 1:
            bad(f"{at}.score", f"expected a number in [0, 1] or {EXCLUDED!r}, got {quote(score)}")
            continue
        else:
            score = float(score)
        options.append(Option(letter, _texts(opt["label"], f"{at}.label", bad), score))
    scores = sorted({o.score for o in options if o.score is not None}, reverse=True)
    if raw_opts and len(scores) < 2:
        bad(f"{where}.options", "need at least two distinct non-excluded scores")
    step = raw.get("anchor_step")
    if isinstance(step, bool) or not isinstance(step, (int, float)) or step <= 0:
        bad(f"{where}.anchor_step", f"expected a positive number, got {quote(step)}")
        step = 0.0
    elif len(scores) >= 2:
        gaps = [a - b for a, b in zip(scores, scores[1:])]
        if any(abs(g - step) > ANCHOR_TOLERANCE for g in gaps):
            bad(
                f"{where}.anchor_step",
                f"{step} does not match the gaps between the scores {scores} ({[round(g, 4) for g in gaps]})",
            )
    return Dimension(key, name, description, tuple(options), float(step))
