"""Reading a judge's rubric scores by a strict grammar. Never raises, and never guesses.

After the envelope (an empty reasoning block, answer wrappers and a code fence taken off, full-width characters as
ASCII), the answer must be **exactly one** of these forms, with nothing before, after or between its parts; free
text is allowed only in explain mode's reasons (`reasons`, checked by `slots.explain_reason`):

- **S1, the schema's object** (`ok`): `{"safety": 1, …}`, exactly the rubric's keys, each once, every value a
  number written `0`, `1`, `0.ddd` or `1.0…`, or null where the dimension can be excluded. In explain mode,
  `{"scores": <that object>, "reasons": {…}}`.
- **S2, that object with repairs** (`repaired`): in a wrapper; JSON syntax repaired (single quotes, trailing
  commas, bare keys, Python's `None`); keys by the dimensions' English or own names; values as strings of one value
  (`"0.5"`, `"b"`, `"(b)"`, `"N/A"`); the explain form in plain mode (its reasons checked all the same) and the
  plain form in explain mode.
- **S3, lines** `Name: value` (or `=`, or a dash), every line an item (or several items, `,` or `;` between them),
  maybe bulleted, numbered or bold, each dimension once; the value is the rest of the line (a full stop may end it).
- **S4, a markdown table**: `| Dimension | Score |` (or an `Option` column beside or instead of the score; the two
  agree), a separator row, one row per dimension, nothing else.

A value is one token of the value grammar (`VALUE`): a number `0`, `1`, `0.ddd`, `1.0…`; an option letter `b` or
`(b)`; null, `N/A` or `不适用` where the dimension can be excluded. Anything touching it that is not the form's own
delimiter (a superscript, a circled digit, a letter, `+`, `-`, a remark) makes the line no item: text outside the
form. A free-text answer that ends right after a number that more characters would make another value (`0.7` of
`0.75`) may be cut off, and is refused.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field

from ...numeric import whole_mean
from ...rubric import Dimension, Rubric
from .core import Num, Pairs, parse_json
from .dimensions import SEPARATOR, alias, key_pattern, name_forms, names
from .reasons import check as check_reasons, from_object, scan
from .envelope import MAX_CHARS, STRUCK, Unreadable, excerpt, fold_width, open_envelope

NUMBER = r"0(?:\.\d+)?|1(?:\.0+)?"
VALUE = rf"{NUMBER}|\([a-hA-H]\)|[a-hA-H]|null|n/a|N/A|不适用"
NULL_WORDS = ("null", "n/a", "不适用")
FORMATTING = re.compile(r"\*\*|__|`")
DIMENSION_HEADERS = {"dimension", "dimensions", "criterion", "criteria", "aspect", "维度", "评分维度", "指标"}
SCORE_HEADERS = {"score", "scores", "rating", "value", "分数", "得分", "评分", "分值", "score(0-1)", "score(0–1)",
                 "score(0to1)"}
OPTION_HEADERS = {"option", "letter", "选项"}


@dataclass
class ParsedAnswer:
    scores: dict[str, float | None]
    status: str  # ok | repaired | failed
    notes: list[str] = field(default_factory=list)
    quality: float | None = None
    reasons: dict[str, str] = field(default_factory=dict)  # explain mode: rubric key → its sentence

    @property
    def error(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def excludable(rubric: Rubric, key: str) -> bool:
    """Whether the dimension has an option that excludes it (its score may be null)."""
    return any(o.excluded for o in rubric.dimension(key).options)


def answer_quality(scores: dict[str, float | None], rubric: Rubric) -> float | None:
    """Mean of the scores; null unless every dimension that always applies has one (a partial answer's mean is
    not comparable with a whole one's)."""
    return whole_mean([scores.get(k) for k in rubric.keys], [not excludable(rubric, k) for k in rubric.keys])


def parse_answer(text: str | None, rubric: Rubric, explain: bool = False) -> ParsedAnswer:
    """Read a model's answer against `rubric` (with `explain`, its reasons too); never raises."""
    notes: list[str] = []
    try:
        scores, reasons, exact = _read(text or "", rubric, explain, notes)
    except Unreadable as why:
        return ParsedAnswer({k: None for k in rubric.keys}, "failed", notes + [str(why)])
    except Exception as exc:  # the contract is "never raises": a reader bug must not stop a scoring run
        return ParsedAnswer({k: None for k in rubric.keys}, "failed", [f"reader error: {type(exc).__name__}: {exc}"])
    return ParsedAnswer(scores, "ok" if exact else "repaired", [] if exact else notes or ["read with repairs"],
                        answer_quality(scores, rubric), reasons if explain else {})


def read_reasons(text: str | None, rubric: Rubric) -> dict[str, str]:
    """Explain mode's reasons, rubric key → the judge's sentence; {} unless the scores read (`parse_answer`)."""
    return parse_answer(text, rubric, explain=True).reasons


def _read(text: str, rubric: Rubric, explain: bool, notes: list[str]):
    """(the scores, the reasons kept, whether the answer is S1 exactly), or `Unreadable`."""
    if (value := _strict_json(text)) is not None:  # S1, or S2 as JSON that needs no repair: read as written
        return _object(value, rubric, explain, notes)
    envelope = open_envelope(text)
    notes += envelope.notes
    body = envelope.body
    start = body.lstrip()[:1]
    if start == "{":
        return (*_json(body, rubric, explain, notes, text), False)
    if start == "|":
        scores = _whole(_table(body, rubric), rubric)
        notes.append("read a markdown table (S4)")
    else:
        scores = _whole(_lines(body, rubric), rubric)
        notes.append("read Name: value lines (S3)")
    return scores, {}, False


def _strict_json(text: str):
    """The answer loaded as strict JSON (numbers as written), or None where it is not."""
    if len(text) > MAX_CHARS or not text.lstrip().startswith("{") or STRUCK.search(text):
        return None  # the envelope refuses these
    try:
        return json.loads(text, object_pairs_hook=Pairs, parse_float=Num, parse_int=Num,
                          parse_constant=lambda name: Num(name))
    except ValueError:
        return None


# --- S1, S2: the answer object ---------------------------------------------------------------------------------------

def _json(body: str, rubric: Rubric, explain: bool, notes: list[str], text: str):
    """(the scores, the reasons kept) of an answer object that needs repairs (S2)."""
    repairs: list[str] = []
    try:
        value = parse_json(body.strip(), repairs)
    except Unreadable:
        split = _broken_reasons(body.strip(), repairs)
        if split is None:
            raise
        scores_value, region = split
        scores = _dimension_scores(scores_value, rubric, notes)
        kept, every = scan(region, rubric)
        check_reasons(every, scores, rubric)
        notes.append("read the scores beside a reasons object that does not load, reason by reason")
        return scores, _as_written(text, rubric, kept)
    if repairs:
        notes.append("repaired JSON syntax (" + ", ".join(repairs) + ")")
    scores, reasons, _ = _object(value, rubric, explain, notes)
    return scores, _as_written(text, rubric, reasons)


def _object(value, rubric: Rubric, explain: bool, notes: list[str]):
    """(the scores, the reasons kept, whether S1 exactly) of a loaded answer object, or `Unreadable`."""
    if not isinstance(value, Pairs):
        raise Unreadable("the answer is JSON, but not the answer's object: text outside the form")
    keys = value.keys()
    if "scores" in keys:
        if sorted(keys) not in (["reasons", "scores"], ["scores"]):
            extra = next(k for k in keys if k not in ("scores", "reasons") or keys.count(k) > 1)
            raise Unreadable(f"the object has {extra!r} beside one 'scores' and one 'reasons': text outside the form")
        scores = _dimension_scores(value.get("scores"), rubric, notes)
        kept, every = from_object(value.get("reasons"), rubric)
        check_reasons(every, scores, rubric)
        if not explain:
            notes.append("read the explain form's scores (S2)")
        exact = explain and keys == ["scores", "reasons"] and _exact(value.get("scores"), rubric)
        return scores, kept, exact
    scores = _dimension_scores(value, rubric, notes)
    if explain:
        notes.append("read the plain form's scores, without reasons (S2)")
    return scores, {}, not explain and _exact(value, rubric)


def _exact(value: Pairs, rubric: Rubric) -> bool:
    """Whether a scores object is the schema's own: the rubric's keys, every value a number or null."""
    return sorted(value.keys()) == sorted(rubric.keys) and all(v is None or isinstance(v, Num) for _, v in value)


def _broken_reasons(body: str, repairs: list[str]) -> tuple[Pairs, str] | None:
    """Explain mode's `{"scores": {…}, "reasons": {…` whose scores object loads and whose reasons object does not:
    (the scores object, the reasons object's text after its brace), else None."""
    head = re.match(r"\{\s*[\"']scores[\"']\s*:\s*", body)
    if head is None:
        return None
    depth, end = 0, None
    for i in range(head.end(), len(body)):
        depth += {"{": 1, "}": -1}.get(body[i], 0)
        if depth == 0:
            end = i + 1
            break
    after = re.match(r"\s*,\s*[\"']reasons[\"']\s*:\s*\{", body[end:]) if end else None
    if after is None:
        return None
    try:
        scores = parse_json(body[head.end():end], repairs)
    except Unreadable:
        return None
    return scores, body[end + after.end():]


def _as_written(text: str, rubric: Rubric, kept: dict[str, str]) -> dict[str, str]:
    """The reasons as the judge wrote them (full-width punctuation kept) where the answer read without folding gives
    the same sentences; else as read."""
    if not kept or fold_width(text) == text:
        return kept
    try:
        body = open_envelope(text, fold=False).body.strip()
        try:
            written = from_object(parse_json(body).get("reasons"), rubric)[0]
        except Unreadable:
            written = scan(_broken_reasons(body, [])[1], rubric)[0]
    except Exception:  # the words as written are a nicety: the reasons as read stand
        return kept
    return {k: written[k] if fold_width(written.get(k, "")) == v else v for k, v in kept.items()}


def _dimension_scores(mapping, rubric: Rubric, notes: list[str]) -> dict[str, float | None]:
    """Each dimension's score from an object of dimension → value: every key names a dimension, once."""
    if not isinstance(mapping, Pairs):
        raise Unreadable("'scores' holds no object of scores: text outside the form")
    found: dict[str, float | None] = {}
    renamed = []
    for key, value in mapping:
        dim = alias(rubric, key)
        if dim is None:
            raise Unreadable(f"the key {key!r} names no rubric dimension: text outside the form")
        _given(found, dim, _value(value, rubric.dimension(dim)))
        if key != dim:
            renamed.append(f"{key}→{dim}")
    if renamed:
        notes.append("renamed keys: " + ", ".join(renamed))
    return _whole(found, rubric)


def _given(found: dict, dim: str, score: float | None) -> None:
    if dim in found:
        raise Unreadable(f"{dim}: given twice")
    found[dim] = score


def _whole(found: dict, rubric: Rubric) -> dict[str, float | None]:
    if missing := [k for k in rubric.keys if k not in found]:
        raise Unreadable("no score for " + ", ".join(missing))
    return {k: found[k] for k in rubric.keys}


def _value(value, dim: Dimension) -> float | None:
    """A JSON value as the forms write one, or `Unreadable` naming the dimension and what was written."""
    if isinstance(value, str):
        return _text_value(value.strip(), dim)
    if value is None:
        return _null(dim)
    if not isinstance(value, Num):
        raise Unreadable(f"{dim.key}: {json.dumps(value, ensure_ascii=False, default=str)[:60]} is not a score")
    if re.fullmatch(NUMBER, value.text):
        return float(value.text)
    try:
        number = float(value.text)
    except ValueError:
        number = math.nan
    if math.isfinite(number) and 0 <= number <= 1:
        raise Unreadable(f"{dim.key}: {value.text} is not a number as the form writes one (0, 1 or 0.ddd)")
    raise Unreadable(f"{dim.key}: {value.text} is not on the 0–1 scale the answer is asked for")


def _text_value(written: str, dim: Dimension) -> float | None:
    """One token of the value grammar (`VALUE`), the whole of `written`."""
    if re.fullmatch(NUMBER, written):
        return float(written)
    if written.lower() in NULL_WORDS:
        return _null(dim)
    if m := re.fullmatch(r"\(?([a-hA-H])\)?", written):
        if written.count("(") == written.count(")"):
            return _option(m.group(1), dim)
    if re.fullmatch(r"\d+(?:\.\d+)?", written):
        raise Unreadable(f"{dim.key}: {written} is not on the 0–1 scale the answer is asked for")
    raise Unreadable(f"{dim.key}: {excerpt(written)} is not one value of the form (a number 0, 1 or 0.ddd, an "
                     "option letter, N/A)")


def _null(dim: Dimension) -> None:
    if not any(o.excluded for o in dim.options):
        raise Unreadable(f"{dim.key}: null, but this dimension always applies")
    return None


def _option(letter: str, dim: Dimension) -> float | None:
    letter = letter.lower()
    if letter not in dim.letters:
        raise Unreadable(f"{dim.key}: ({letter}) is not one of its options")
    return dim.option(letter).score


# --- S3: lines -------------------------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=16)
def _item_pattern(dims: tuple[tuple[str, ...], ...]) -> re.Pattern:
    """One item of S3 (formatting marks taken out first): maybe a bullet or a number, a dimension's name (maybe
    italic, maybe with its other name in parentheses), a separator, one value, maybe a full stop."""
    return re.compile(
        r"[ \t]*(?:[-*•+][ \t]+|\d{1,2}[.)][ \t]+)?\*?(?P<name>(?:" + name_forms(dims)
        + r")(?:[\s_]*(?:score|rating|得分|分数))?)\*?[ \t]*(?:\((?P<other>[^()\n]{1,40})\))?" + SEPARATOR
        + r"\*?(?P<value>" + VALUE + r")\*?[ \t]*(?P<stop>[.。])?[ \t]*", re.I)


def _lines(body: str, rubric: Rubric) -> dict[str, float | None]:
    """The scores of S3: every non-blank line one item or several, or `Unreadable` naming the first that is not."""
    found: dict[str, float | None] = {}
    pattern = _item_pattern(names(rubric))
    lines = body.split("\n")
    last = max(i for i, line in enumerate(lines) if line.strip())
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        plain = FORMATTING.sub("", line)
        items = [pattern.fullmatch(plain)]
        if items[0] is None:
            items = [pattern.fullmatch(piece) for piece in re.split(r"[,;]", plain)]
            if not all(items) or any(m.group("stop") for m in items[:-1]):
                raise Unreadable(_not_an_item(plain, rubric))
        for m in items:
            dim = alias(rubric, m.group("name"))
            if m.group("other") and alias(rubric, m.group("other")) != dim:
                raise Unreadable(f"{dim}: {excerpt(plain)} names it with text outside the form "
                                 f"({m.group('other')!r})")
            _given(found, dim, _text_value(m.group("value"), rubric.dimension(dim)))
        if i == last and not body.endswith("\n") and _may_go_on(items[-1].group("value"), items[-1].group("stop")):
            raise Unreadable("the answer ends in its last number: it may have been cut off inside it")
    return found


def _not_an_item(line: str, rubric: Rubric) -> str:
    """Why a line is not an item of S3: a dimension's value that is not one of the value grammar, or text outside
    the form."""
    start = re.match(r"[ \t]*(?:[-*•+][ \t]+|\d{1,2}[.)][ \t]+)?\*?", line)
    m = key_pattern(names(rubric)).match(line, start.end())
    if m is not None and (dim := alias(rubric, m.group(1))) is not None:
        return f"{dim}: {excerpt(line[m.end():])} is not one value of the form (a number 0, 1 or 0.ddd, an option " \
               "letter, N/A)"
    return f"text outside the form: {excerpt(line)}"


def _may_go_on(value: str, stop: str | None) -> bool:
    """Whether an answer that ends right after `value` may have been cut off inside it: a number other than 1 that
    more digits would make another value (`0.7` of `0.75`, `0` or `0.` of `0.5`); a full stop after a decimal ends
    it."""
    if not re.fullmatch(NUMBER, value) or float(value) == 1:
        return False
    return not (stop and "." in value)


# --- S4: a markdown table --------------------------------------------------------------------------------------------

def _table(body: str, rubric: Rubric) -> dict[str, float | None]:
    """The scores of S4: a header row (the dimension, then a score column, an option column or both), a separator
    row, one row per dimension; `Unreadable` for anything else."""
    rows = [line.strip() for line in body.split("\n") if line.strip()]
    if outside := next((row for row in rows if not row.startswith("|")), None):
        raise Unreadable(f"text outside the form: {excerpt(outside)}")
    cells = [[FORMATTING.sub("", c).strip() for c in row.strip("|").split("|")] for row in rows]
    if len(cells) < 3 or not all(re.fullmatch(r":?-{2,}:?", c) for c in cells[1]):
        raise Unreadable("a table without a header row and a separator row: text outside the form")
    header = [re.sub(r"\s+", "", c.lower()) for c in cells[0]]
    roles = ["score" if h in SCORE_HEADERS else "option" if h in OPTION_HEADERS else None for h in header[1:]]
    if (not set(re.split(r"\s+", cells[0][0].lower())) <= DIMENSION_HEADERS or None in roles
            or len(set(roles)) != len(roles) or not roles):
        raise Unreadable(f"a table whose columns are {' | '.join(cells[0])}, not Dimension | Score (| Option): text "
                         "outside the form")
    found: dict[str, float | None] = {}
    for row, written in zip(cells[2:], rows[2:]):
        if not written.endswith("|") or len(row) != len(header):
            raise Unreadable(f"a table row that is cut off or has other columns: {excerpt(written)}")
        dim = alias(rubric, row[0])
        if dim is None:
            raise Unreadable(f"a table row that names no rubric dimension: {row[0]!r}")
        given = {_text_value(cell, rubric.dimension(dim)) for cell in row[1:]}
        if len(given) > 1:
            raise Unreadable(f"{dim}: given twice, differently, by the table's score and option ({' and '.join(row[1:])})")
        _given(found, dim, given.pop())
    return found
