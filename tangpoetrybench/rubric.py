"""The rubric: dimensions, their options and scores, read from a YAML file and checked on load.

A rubric is data (one file per tradition: the bundled ones under `tangpoetrybench/rubrics/`, any other in a raw
release's or a built dataset's `rubrics/` folder). Everything that needs to know what a dimension means or how an
option scores — validation, aggregation, the evaluator's prompt, the statistics, the report's findings — asks a
`Rubric`. docs/rubrics.md describes every field.

    >>> rubric = load_rubric("tang")
    >>> rubric.score("scene_consistency", "d")
    0.33
    >>> rubric.score("scene_consistency", "e") is None   # excluded: the dimension does not apply
    True
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

import yaml

from .errors import DataError, Problem, quote

EXCLUDED = "excluded"
# A poem that names no tradition is one of the benchmark's own.
DEFAULT_TRADITION = "tang"
TRADITION_NAME = re.compile(r"[a-z][a-z0-9_]*")  # it names a config and a file: rubrics/<tradition>.yaml
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}(-[A-Za-z0-9]{2,8})*")
# What a rubric could not say before it could name its languages and what its poems are: such a field enters the
# fingerprint only where it differs from this, so a rubric written before keeps its fingerprint and its results.
FORMAT_1_LANGUAGES = {"en": "English", "zh": "Chinese"}
FORMAT_1_FRAMING = "classical Chinese poetry"
DEFAULT_TITLE = "《{title}》"  # how a title is written where a rubric says nothing (the bundled rubrics' Chinese way)
MAX_TITLE_FORMAT = 40
# Fields that shape no answer and no built score (report and card wording, the findings' roles): not fingerprinted.
UNSCORED = ("source", "yaml_text", "languages", "description", "short", "overall", "depict", "evoke", "title_format")
FIELDS = ("name", "tradition", "display", "short", "description", "languages", "version", "dimensions",
          "adjudicated_dimension", "face_avoidance", "consistency", "overall", "depict", "evoke", "title_format")
# Anchor steps are written with two decimals (0.33); the distinct scores may differ by up to 0.01 more.
ANCHOR_TOLERANCE = 0.011
TIE_TOLERANCE = 1e-9  # two distances to anchors closer than this are equal (float rounding): a tie
MAX_RUBRIC_BYTES = 256 * 1024  # a rubric is a few KB (the bundled ones are 7 KB); a larger file is refused unread
MAX_RUBRIC_DEPTH = 16  # levels of nested lists and mappings (the bundled rubrics use 6)


class RubricLoader(yaml.SafeLoader):
    """YAML's safe loader without anchors and aliases (`&name`, `*name`): a rubric never needs them, and nested
    aliases expand a few hundred bytes into gigabytes (the "billion laughs"). Nesting deeper than MAX_RUBRIC_DEPTH
    is refused too: 40 KB of `[[[...]]]` would otherwise exhaust Python's recursion limit."""

    depth = 0

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (&name, *name) are not allowed in a "
                                              "rubric: write each value out", event.start_mark)
        if self.depth >= MAX_RUBRIC_DEPTH:
            raise yaml.composer.ComposerError(None, None, f"nested more than {MAX_RUBRIC_DEPTH} levels deep: a "
                                              "rubric is not", event.start_mark)
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


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

    def nearest_score(self, value: float) -> float:
        """The distinct score nearest to `value` (a mean of raters may lie between two). Half-way between two is a
        tie, decided exactly: distances within `TIE_TOLERANCE` of each other are equal (|0.5 − 0.33| and
        |0.67 − 0.5| differ in the last bit), and a tie goes to the higher score. The one rule wherever a score is
        snapped to an anchor."""
        nearest = min(abs(s - value) for s in self.scores)
        return max(s for s in self.scores if abs(s - value) <= nearest + TIE_TOLERANCE)


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
    languages: dict[str, str] = field(default_factory=lambda: dict(FORMAT_1_LANGUAGES))  # code -> English name
    description: dict[str, str] = field(default_factory=dict)  # what the poems are; the prompts' framing is its `en`
    short: str = ""  # the tradition's name before "poems" or "images" in a sentence ("Tang", "haiku")
    overall: str | None = None  # the holistic dimension: poem difficulty, what the other dimensions drive
    depict: tuple[str, ...] = ()  # the dimensions that depict what the poem names ...
    evoke: tuple[str, ...] = ()  # ... and those that evoke what it means (the depict-to-evoke gap)
    title_format: str = DEFAULT_TITLE  # how a poem's title is written in prompts and pages (`format_title`)
    source: str = field(default="", compare=False)
    yaml_text: str = field(default="", compare=False, repr=False)  # the file as written, for a dataset to carry

    @property
    def keys(self) -> tuple[str, ...]:
        return tuple(d.key for d in self.dimensions)

    @property
    def own_language(self) -> str:
        """The tradition's own language (`zh`, `ja`), or `en` for a rubric in English alone."""
        return next((code for code in self.languages if code != "en"), "en")

    @property
    def framing(self) -> str:
        """What the poems are, as the prompts say it: "an expert judge of illustrations of {framing}"."""
        return (self.description or self.display)["en"]

    @property
    def short_name(self) -> str:
        return self.short or self.display["en"]

    def in_languages(self, texts: Mapping[str, str], pattern: str = "{en} / {own}") -> str:
        """A text in English and the tradition's own language (`Safety / 安全性`), or in English alone for a rubric
        in English only."""
        if self.own_language == "en":
            return texts["en"]
        return pattern.format(en=texts["en"], own=texts[self.own_language])

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
        """`name@hash` of what shapes an answer or a built score (not the file's layout, nor the report's wording):
        results made under another rubric content are never mixed with these."""
        content = {k: v for k, v in asdict(self).items() if k not in UNSCORED}
        if self.languages != FORMAT_1_LANGUAGES:
            content["languages"] = self.languages
        if self.framing != FORMAT_1_FRAMING:
            content["framing"] = self.framing
        if self.title_format != DEFAULT_TITLE:  # it shapes the prompt; the default keeps the fingerprints made before
            content["title_format"] = self.title_format
        digest = hashlib.sha256(json.dumps(content, ensure_ascii=False, sort_keys=True).encode()).hexdigest()
        return f"{self.name}@{digest[:12]}"


def format_title(title: str, rubric: Rubric | None = None) -> str:
    """A poem's title as its tradition writes it, in every prompt and page that shows one: the rubric's
    `title_format` with the title in place of `{title}` (`《静夜思》` for the bundled rubrics, and where no rubric is
    known)."""
    return (rubric.title_format if rubric is not None else DEFAULT_TITLE).replace("{title}", title)


def _bundled() -> tuple[str, ...]:
    """The bundled rubrics, found in the package's rubrics/ folder: the default tradition first, then by name."""
    folder = resources.files("tangpoetrybench") / "rubrics"
    names = [entry.name[: -len(".yaml")] for entry in folder.iterdir() if entry.name.endswith(".yaml")]
    return tuple(sorted(names, key=lambda n: (n != DEFAULT_TRADITION, n)))


BUILTIN = _bundled()


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
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise DataError(Problem(str(path), "not UTF-8 text")) from None
    return parse_rubric(text, source=str(path))


@lru_cache(maxsize=None)
def _load_builtin(name: str, text: str) -> Rubric:
    return parse_rubric(text, source=f"rubrics/{name}.yaml")


def rubric_for_tradition(tradition: str, found: Mapping[str, Rubric] | None = None) -> Rubric:
    """The rubric of a poetic tradition: one `found` with the data (a release's or a dataset's rubrics/ folder),
    else the bundled one."""
    if found and tradition in found:
        return found[tradition]
    if tradition not in BUILTIN:
        known = sorted({*BUILTIN, *(found or {})})
        raise KeyError(f"no rubric for tradition {quote(tradition)} (known: {', '.join(known)}): a tradition that is not "
                       f"bundled brings its rubric, rubrics/{tradition}.yaml (docs/rubrics.md)")
    return load_rubric(tradition)


def is_bundled(rubric: Rubric) -> bool:
    """Whether `rubric` is the bundled rubric of its tradition, word for word as far as any result can tell."""
    return rubric.tradition in BUILTIN and load_rubric(rubric.tradition).fingerprint == rubric.fingerprint


def read_rubric_folder(folder: Path, where: str = "rubrics") -> tuple[dict[str, Rubric], list[Problem]]:
    """The rubrics of a data folder's `rubrics/` (each `<tradition>.yaml`), by tradition, and every problem found.
    A file for a bundled tradition must say what the bundled rubric says (a dataset carries copies of them)."""
    found: dict[str, Rubric] = {}
    problems: list[Problem] = []
    if not folder.exists():
        return found, problems
    if folder.is_symlink() or not folder.is_dir():
        return found, [Problem(f"{where}/", "expected a folder of rubric files, <tradition>.yaml")]
    for path in sorted(folder.iterdir()):
        rel = f"{where}/{path.name}"
        if path.name.startswith("."):
            continue
        if path.is_symlink() or not path.is_file() or path.suffix != ".yaml":
            problems.append(Problem(rel, "expected a rubric file <tradition>.yaml (no links, folders or other files)"))
            continue
        if path.stat().st_size > MAX_RUBRIC_BYTES:
            problems.append(Problem(rel, f"{path.stat().st_size:,} bytes is over the limit of {MAX_RUBRIC_BYTES:,}"))
            continue
        try:
            rubric = parse_rubric(path.read_text(encoding="utf-8"), source=rel)
        except DataError as exc:
            problems += exc.problems
            continue
        except UnicodeDecodeError:
            problems.append(Problem(rel, "not UTF-8 text"))
            continue
        if rubric.tradition != path.stem:
            problems.append(Problem(rel, f"the file of tradition {rubric.tradition!r} is named "
                                         f"{rubric.tradition}.yaml", field="tradition"))
        elif rubric.tradition in BUILTIN and not is_bundled(rubric):
            problems.append(Problem(rel, f"differs from the bundled {rubric.tradition} rubric: a rubric of your own "
                                         "takes a tradition name of its own", field="tradition"))
        else:  # a bundled tradition's copy is the bundled rubric itself
            found[rubric.tradition] = load_rubric(rubric.tradition) if rubric.tradition in BUILTIN else rubric
    return found, problems


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
    except (ValueError, RecursionError) as exc:  # a value YAML cannot make (an integer of 100,000 digits)
        raise DataError(Problem(source, f"a value that cannot be read: {type(exc).__name__}: {exc}")) from None
    if not isinstance(data, dict):
        raise DataError(Problem(source, "a rubric is a mapping with name, tradition and dimensions"))

    for key in ("name", "tradition"):
        if not isinstance(data.get(key), str) or not data[key]:
            bad(key, "required, a non-empty string")
    if isinstance(data.get("tradition"), str) and data["tradition"] and not TRADITION_NAME.fullmatch(data["tradition"]):
        bad("tradition", f"{data['tradition']!r}: lower-case letters, digits and '_', starting with a letter (it "
                         "names a config and a file)")
    languages = _languages(data.get("languages", FORMAT_1_LANGUAGES), bad)
    display = _texts(data.get("display", {}), "display", bad, languages)
    description = _texts(data["description"], "description", bad, languages) if "description" in data else display
    short = data.get("short", "")
    if not isinstance(short, str):
        bad("short", f"expected a string, got {short!r}")
        short = ""
    title_format = data.get("title_format", DEFAULT_TITLE)
    if (not isinstance(title_format, str) or len(title_format) > MAX_TITLE_FORMAT or title_format.count("{title}") != 1
            or "{" in title_format.replace("{title}", "") or "}" in title_format.replace("{title}", "")
            or "\n" in title_format):
        bad("title_format", f"expected one line of at most {MAX_TITLE_FORMAT} characters with {{title}} once and no "
                            f"other braces (e.g. '“{{title}}”'), got {quote(title_format)}")
        title_format = DEFAULT_TITLE
    version = data.get("version", 1)
    if not isinstance(version, int):
        bad("version", f"expected an integer, got {quote(version)}")

    dims: list[Dimension] = []
    raw_dims = data.get("dimensions")
    if not isinstance(raw_dims, list) or not raw_dims:
        bad("dimensions", "required, a non-empty list")
        raw_dims = []
    for i, raw in enumerate(raw_dims):
        dim = _dimension(raw, f"dimensions[{i}]", bad, languages)
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
    overall = data.get("overall")
    if overall is not None:
        check_ref("overall", overall)
    groups = {}
    for role in ("depict", "evoke"):
        keys = data.get(role) or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            bad(role, "expected a list of dimension keys")
            keys = []
        for k in keys:
            check_ref(role, k)
        groups[role] = tuple(keys)
    both = sorted(set(groups["depict"]) & set(groups["evoke"]))
    if both:
        bad("evoke", f"a dimension cannot both depict and evoke: {', '.join(both)}")
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
    for key in sorted(set(data) - set(FIELDS)):
        bad(key, "unknown field")
    if problems:
        raise DataError(problems)
    return Rubric(
        name=data["name"], tradition=data["tradition"], display=display, version=version,
        dimensions=tuple(dims), adjudicated_dimension=adjudicated, face_avoidance=face_pair,
        consistency=tuple(rules), languages=languages, description=description, short=short, overall=overall,
        depict=groups["depict"], evoke=groups["evoke"], title_format=title_format, source=source, yaml_text=text,
    )


def _languages(value: Any, bad) -> dict[str, str]:
    """{code: English name}: `en` first, then at most the tradition's own language."""
    if (not isinstance(value, dict) or not value or next(iter(value)) != "en" or len(value) > 2
            or not all(isinstance(k, str) and LANGUAGE_CODE.fullmatch(k) for k in value)
            or not all(isinstance(v, str) and v.strip() for v in value.values())):
        bad("languages", f"expected {{en: English}} or {{en: English, CODE: NAME}} (the tradition's own language, "
                         f"e.g. ja: Japanese), got {value!r}")
        return dict(FORMAT_1_LANGUAGES)
    return {k: v.strip() for k, v in value.items()}


def _texts(value: Any, where: str, bad, languages: Mapping[str, str]) -> dict[str, str]:
    """A mapping of non-empty strings, one per language of the rubric."""
    if not isinstance(value, dict) or set(value) != set(languages) or not all(
        isinstance(v, str) and v.strip() for v in value.values()
    ):
        bad(where, f"expected non-empty texts for {' and '.join(languages)}, got {quote(value)}")
        return {}
    return {k: value[k].strip() for k in languages}


def _dimension(raw: Any, where: str, bad, languages: Mapping[str, str]) -> Dimension | None:
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
    name = _texts(raw.get("name"), f"{where}.name", bad, languages)
    description = _texts(raw.get("description"), f"{where}.description", bad, languages)
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
        options.append(Option(letter, _texts(opt["label"], f"{at}.label", bad, languages), score))
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
