"""Reading a judge's rubric scores by an explicit grammar. Never raises, and never guesses.

A value is returned only where the answer is one of the forms below and no ambiguity detector fires; anything else
is a failed read whose note names the condition that failed (the repair round then asks for the exact form).
docs/reading.md holds the table of forms, each with the condition under which it is unambiguous.

Forms (after the envelope: reasoning set apart, answer wrappers and code fences taken off, NFKC):

- **S1, the schema's object** (`ok` where it is the whole answer, nothing else): `{"safety": 1, …}` with exactly the
  rubric's keys, each once, every value a number in [0, 1] or null where the dimension can be excluded. In explain
  mode, `{"scores": <that object>, "reasons": {…}}`.
- **S2, that object with repairs** (`repaired`): wrapped (fence, reasoning, answer tag), with JSON syntax repaired
  (single quotes, trailing commas, bare keys, comments), keys named by the dimensions' English or own names,
  values written as number strings, option letters (`"b"`, `"(b)"`) or N/A words for a dimension that can be
  excluded; the explain form's scores in plain mode and the plain form in explain mode; the same object repeated;
  text around it (S5's conditions).
- **S3, lines** `Name: value` (or `=`, or a dash), one dimension a line (or several on one line, `,` or `;` between them),
  maybe bulleted, numbered or bold; the value a number in [0, 1], an option letter (`b`, `(b)`) or an N/A word,
  maybe followed by a remark after a separator.
- **S4, a markdown table** `| Dimension | Score |`, or with an `Option` column beside or instead of the score (the
  two must agree), maybe with a `Reason` column.
- **S5, text around the form**: no digit, no correction, doubt or scale of its own, no dimension given a value
  (`Core imagery: …`, or an option's label or letter that is not the answer's).

Unambiguous only where: every dimension is given, each by one value (given again, the same value); no value is a
range, a pair, a hedge or on another scale; no reason gives its dimension another score; a free-text answer does not
end in its last number (it may have been cut off inside it); the reasoning's conclusion, where it names a
dimension's score, is the answer's.
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass, field

from ...numeric import whole_mean
from ...rubric import Dimension, Rubric
from .ambiguity import (ADJUSTS, CORRECTS, DOUBTS, NUMBERS, OWN_SCALE, PROVISIONAL, SENTENCE, conclusion_differs,
                        refuse_if)
from .core import Conflict, Pairs, loads, segments, split_comments
from .dimensions import alias, key_pattern, mention_pattern, name_forms, names, normal, word_pattern
from .envelope import MAX_CHARS, STRUCK, Unreadable, open_envelope
from .reasons import read_reasons, reasons_of

NULL_WORDS = {"null", "none", "n/a", "na", "excluded", "not applicable", "不适用"}
NUMBER = re.compile(r"(?:0|1)(?:\.\d+)?|\.\d+")  # a value on the 0–1 scale, written out (fullmatch)
LETTER = re.compile(r"(?:option\s+)?\(?([a-fA-F])\)?")  # an option's letter (fullmatch)
VALUE = r"(?:[01](?:\.\d+)?|\.\d+)(?![\d.]*\d)|\(?[a-fA-F]\)?(?![\w(])|null|none|n/a|N/A|excluded|不适用"
EMPHASIS = r"(?:\*\*|__|\*|`)?"
SCORE_HEADERS = {"score", "scores", "rating", "value", "分数", "得分", "评分", "分值"}
OPTION_HEADERS = {"option", "options", "letter", "choice", "anchor", "选项"}
REASON_HEADERS = {"reason", "reasons", "comment", "comments", "justification", "explanation", "rationale", "note",
                  "notes", "理由", "说明", "备注", "解释"}
REASONS_KEY = "reasons"
# A number in a reason: a count where a plural noun or a Chinese measure word follows it ("3 herons", "两只" is no
# digit), else a score, which must be the dimension's own.
REASON_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(\d*\.?\d+)(?!\s*(?:[A-Za-z]+s\b|[个只座位条棵艘人株朵处幅张行句字首]))")


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
        if (exact := _exact(text or "", rubric, explain)) is not None:  # S1: nothing around it to watch
            scores, explained = exact
            parsed = ParsedAnswer(scores, "ok", [], answer_quality(scores, rubric))
            parsed.reasons = read_reasons(text or "", rubric) if explain else {}
            return parsed
        scores, explained = _read(text or "", rubric, explain, notes)
    except Unreadable as why:
        return ParsedAnswer({k: None for k in rubric.keys}, "failed", notes + [str(why)])
    except Exception as exc:  # the contract is "never raises": a reader bug must not stop a scoring run
        return ParsedAnswer({k: None for k in rubric.keys}, "failed", [f"reader error: {type(exc).__name__}: {exc}"])
    parsed = ParsedAnswer(scores, "repaired", notes or ["read with repairs"])
    parsed.quality = answer_quality(scores, rubric)
    if explain and explained:
        parsed.reasons = read_reasons(text or "", rubric)
    return parsed


def _exact(text: str, rubric: Rubric, explain: bool) -> tuple[dict[str, float | None], bool] | None:
    """(the scores, whether explained) of an answer that is exactly the schema's object (S1), nothing around it,
    its reasons (explain mode) saying nothing against its scores; else None (the envelope's bounds and refusals
    are then the full read's)."""
    if len(text) > MAX_CHARS or STRUCK.search(text):
        return None
    try:
        pairs = json.loads(text.strip(), object_pairs_hook=Pairs)
    except ValueError:
        return None
    reasons = None
    if explain:
        if not isinstance(pairs, Pairs) or [k for k, _ in pairs] != ["scores", REASONS_KEY]:
            return None
        pairs, reasons = pairs[0][1], pairs[1][1]
    keys = rubric.keys
    if not isinstance(pairs, Pairs) or len(pairs) != len(keys) or {k for k, _ in pairs} != set(keys):
        return None
    given = dict(pairs)
    if not all(v is None and excludable(rubric, k) or type(v) in (int, float) and 0 <= v <= 1 for k, v in pairs):
        return None
    scores = {k: None if given[k] is None else float(given[k]) for k in keys}
    if isinstance(reasons, Pairs):
        _check_reasons(dict(reasons), scores, rubric)  # Unreadable: the caller's failed read
    return scores, explain


# --- the forms -----------------------------------------------------------------------------------------------------

def _read(text: str, rubric: Rubric, explain: bool, notes: list[str]) -> tuple[dict[str, float | None], bool]:
    """(the scores, whether they came with explain mode's reasons), or `Unreadable`."""
    envelope = open_envelope(text)
    notes += envelope.notes
    body = envelope.body
    refuse_if(body, "the answer", OWN_SCALE)  # before any value: no value form holds these words
    objects, prose, explained = _objects(body, rubric, notes)
    given, prose, cut = _free_text(prose, rubric, notes)
    if objects:
        scores = objects[0]
        if any(other != scores for other in objects[1:]):
            raise Unreadable(f"{len(objects)} answer objects that give different scores")
        if len(objects) > 1:
            notes.append(f"read {len(objects)} answer objects that agree")
        for dim, score in given.items():  # lines or a table beside the object: the same scores, or two readings
            _given(dict(scores), dim, score)
    elif not given:
        raise Unreadable("no answer object, lines or table of scores found")
    else:
        if cut:
            raise Unreadable("the answer ends in its last number: it may have been cut off inside it")
        scores = _whole(given, rubric)
    _check_prose(prose, scores, rubric)
    conclusion_differs(envelope.thoughts, lambda thought: _concluded(thought, rubric), scores)
    return scores, explained


def _objects(body: str, rubric: Rubric, notes: list[str]) -> tuple[list[dict], str, bool]:
    """(the scores of each answer object, the text around them, whether one was explain mode's form). A JSON
    segment that holds no rubric key is left in the text; one that does not load, or is cut off, and names a
    dimension fails the read (explain mode's scores object, whole before a broken or cut-off reasons object, reads)."""
    found, explained, prose = [], False, body
    named = mention_pattern(names(rubric))
    for seg in segments(body):
        value = loads(seg.text, notes) if seg.closed else None
        scores_text, comments = None, []
        if value is None:
            scores_text = _scores_before_reasons(seg.text)
            if scores_text is None:
                if named.search(seg.text) or re.search(r"[\"']scores[\"']", seg.text):
                    raise Unreadable("a JSON object that " + ("does not load" if seg.closed else "is cut off") +
                                     " gives scores: it is not read")
                continue
            value = loads(scores_text, notes)
            notes.append("read the scores object beside a reasons object that does not load")
            value = {"scores": value, REASONS_KEY: None}
        written = scores_text or seg.text
        comments = split_comments(written)[1] if "//" in written or "/*" in written else []
        scores = _object_scores(value, rubric, notes)
        if scores is None:
            continue
        explained |= isinstance(value, dict) and "scores" in value
        found.append(scores)
        _check_reasons(reasons_of(seg.text, seg.closed) or {}, scores, rubric)
        for comment in comments:
            refuse_if(comment, "a comment in the JSON", CORRECTS, DOUBTS, OWN_SCALE, ADJUSTS, PROVISIONAL, NUMBERS)
        prose = prose[:seg.start] + re.sub(r"[^\n]", " ", seg.text) + prose[seg.end:]
    if len(found) and body.strip() != prose.strip() and prose.strip():
        notes.append("read the JSON object and the text around it")
    return found, prose, explained


def _scores_before_reasons(segment: str) -> str | None:
    """Explain mode's `{"scores": {…}, "reasons": …` whose scores object is whole and loads, the reasons object
    being broken or cut off: the scores object's text, else None."""
    head = re.match(r'\{\s*"scores"\s*:\s*', segment)
    if not head:
        return None
    inner = segments(segment[head.end():])
    if not inner or inner[0].start != 0 or not inner[0].closed or loads(inner[0].text, []) is None:
        return None
    after = segment[head.end() + inner[0].end:]
    return inner[0].text if re.match(r'\s*,\s*"reasons"\s*:\s*\{', after) else None


def _object_scores(value, rubric: Rubric, notes: list[str]) -> dict[str, float | None] | None:
    """The scores of a loaded JSON value that is an answer object (S1, S2), None for one that holds no rubric key,
    or `Unreadable`."""
    if not isinstance(value, dict):
        if isinstance(value, list) and any(isinstance(v, (dict, list)) and _names_dimension(v, rubric) for v in value):
            raise Unreadable("the scores come as a list, not the answer's object")
        return None
    if "scores" in value and not any(alias(rubric, k) for k in value):
        if isinstance(value["scores"], Conflict):
            raise Unreadable("the object gives 'scores' twice, differently")
        if extra := [k for k in value if k not in ("scores", REASONS_KEY)]:
            raise Unreadable(f"the object has {extra[0]!r} beside 'scores' and 'reasons'")
        if not isinstance(value["scores"], dict):
            raise Unreadable("'scores' holds no object of scores")
        return _dimension_scores(value["scores"], rubric, notes)
    if not any(alias(rubric, k) for k in value):
        if _names_dimension(value, rubric):
            raise Unreadable(f"the scores are nested under {next(iter(value))!r}, not the answer's object")
        return None
    return _dimension_scores(value, rubric, notes)


def _names_dimension(value, rubric: Rubric) -> bool:
    if isinstance(value, dict):
        return any(alias(rubric, k) or _names_dimension(v, rubric) for k, v in value.items())
    return isinstance(value, list) and any(_names_dimension(v, rubric) for v in value)


def _dimension_scores(mapping: dict, rubric: Rubric, notes: list[str]) -> dict[str, float | None]:
    """Each dimension's score from an object of dimension → value: every key names a dimension, every dimension is
    given, each by one value."""
    found: dict[str, float | None] = {}
    renamed = []
    for key, value in mapping.items():
        dim = alias(rubric, key)
        if dim is None:
            raise Unreadable(f"the key {key!r} names no rubric dimension")
        if isinstance(value, Conflict):
            raise Unreadable(f"{dim}: given twice with different values")
        score = _value(value, rubric.dimension(dim))
        _given(found, dim, score)
        if key != dim:
            renamed.append(f"{key}→{dim}")
    if renamed:
        notes.append("renamed keys: " + ", ".join(renamed))
    return _whole(found, rubric)


def _given(found: dict, dim: str, score: float | None) -> None:
    if dim in found and found[dim] != score:
        raise Unreadable(f"{dim}: given twice with different values ({_shown(found[dim])} and {_shown(score)})")
    found[dim] = score


def _whole(found: dict, rubric: Rubric) -> dict[str, float | None]:
    if missing := [k for k in rubric.keys if k not in found]:
        raise Unreadable("no score for " + ", ".join(missing))
    return {k: found[k] for k in rubric.keys}


def _shown(score: float | None) -> str:
    return "null" if score is None else f"{score:g}"


def _value(value, dim: Dimension) -> float | None:
    """A value as the answer's forms write one (a number in [0, 1], an option letter, an N/A word where the dimension
    can be excluded), or `Unreadable` naming the dimension and what was written."""
    if isinstance(value, bool) or isinstance(value, (dict, list)):
        raise Unreadable(f"{dim.key}: {json.dumps(value, ensure_ascii=False)[:60]} is not a score")
    if isinstance(value, str):
        return _text_value(value, dim)
    if value is None:
        return _null(dim)
    if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise Unreadable(f"{dim.key}: {value!r} is not on the 0–1 scale the answer is asked for")
    return float(value)


def _text_value(text: str, dim: Dimension) -> float | None:
    written = text.strip()
    if NUMBER.fullmatch(written):
        number = float(written)
        if number > 1:
            raise Unreadable(f"{dim.key}: {written} is not on the 0–1 scale the answer is asked for")
        return number
    if written.lower() in NULL_WORDS:
        return _null(dim)
    if m := LETTER.fullmatch(written):
        return _option(m.group(1), dim)
    raise Unreadable(f"{dim.key}: {written[:60]!r} is not one value on the 0–1 scale")


def _null(dim: Dimension) -> None:
    if not any(o.excluded for o in dim.options):
        raise Unreadable(f"{dim.key}: null, but this dimension always applies")
    return None


def _option(letter: str, dim: Dimension) -> float | None:
    letter = letter.lower()
    if letter not in dim.letters:
        raise Unreadable(f"{dim.key}: ({letter}) is not one of its options")
    return dim.option(letter).score


def _free_text(body: str, rubric: Rubric, notes: list[str]) -> tuple[dict[str, float | None], str, bool]:
    """The scores a text gives as lines (S3) or a markdown table (S4), the text around them, and whether it ends in
    its last number (it may have been cut off inside it)."""
    found: dict[str, float | None] = {}
    prose: list[str] = []
    last_line = None
    lines = body.split("\n")
    i = 0
    while i < len(lines):
        if lines[i].strip().startswith("|"):
            j = i
            while j < len(lines) and lines[j].strip().startswith("|"):
                j += 1
            for dim, score in _table(lines[i:j], rubric):
                _given(found, dim, score)
            notes.append("read a markdown table")
            i = j
            continue
        items = _line_items(lines[i], rubric)
        if items is None and (named := _given_otherwise(lines[i], rubric)):
            raise Unreadable(f"{named[0]}: {named[1][:60]!r} is not one value on the 0–1 scale")
        if items is None:
            prose.append(lines[i])
        else:
            for dim, score in items:
                _given(found, dim, score)
            last_line = i
        i += 1
    if last_line is not None:
        notes.append("read Name: value lines")
    cut = last_line is not None and not "\n".join(lines[last_line + 1:]).strip() and not body.rstrip(" ").endswith(
        "\n") and _may_go_on(lines[last_line])
    return found, "\n".join(prose), cut


def _given_otherwise(line: str, rubric: Rubric) -> tuple[str, str] | None:
    """(the dimension, what follows it) of a line that starts with a dimension's name and a separator but is no
    item of S3 ("Core imagery: about 0.5", "Safety: 5"); None for any other line."""
    start = re.match(r"\s*(?:[-*•+]\s+|\d{1,2}[.)]\s+)?[*_`\"']*", line)
    m = key_pattern(names(rubric)).match(re.sub(r"[*_`]+", "", line[start.end():]))
    return (alias(rubric, m.group(1)), re.sub(r"[*_`]+", "", line[start.end():])[m.end():].strip()) if m else None


def _may_go_on(line: str) -> bool:
    """Whether a line that ends the answer ends in a number that more characters would make another value: "0.7"
    (of 0.75), "0" and "0." (of 0.5); not "1" (any longer value on the 0–1 scale is 1 too) nor "0.75." (a full stop
    ends it)."""
    m = re.search(r"(\d*\.?\d+|\d+\.)(\.?)[*_`]*\s*$", line)
    if m is None:
        return False
    number, stop = m.groups()
    return not (float(number) == 1 or stop and "." in number.rstrip("."))


@functools.lru_cache(maxsize=16)
def _line_pattern(dims: tuple[tuple[str, ...], ...]) -> re.Pattern:
    """One item of S3: a dimension's name (maybe bulleted, numbered, bold, with its other name in parentheses), `:`
    or `=`, a value, and the rest of the line (a remark)."""
    return re.compile(
        r"^\s*(?:[-*•+]\s+|\d{1,2}[.)]\s+)?" + EMPHASIS + r"[\"']?(?P<name>(?:" + name_forms(dims)
        + r")(?:[\s_]*(?:score|rating|得分|分数))?)[\"']?" + EMPHASIS
        + r"\s*(?:\((?P<other>[^()\n]{1,40})\))?\s*" + EMPHASIS + r"\s*(?:[:=]|\s[-—–]\s|[—–])\s*" + EMPHASIS
        + r"\s*(?P<value>" + VALUE + r")" + EMPHASIS + r"(?P<tail>.*)$", re.I)


def _line_items(line: str, rubric: Rubric) -> list[tuple[str, float | None]] | None:
    """The (dimension, score) items of a line of S3, None for a line that is not one (prose); `Unreadable` for a
    line that gives a dimension a value in another form."""
    pattern = _line_pattern(names(rubric))
    m = pattern.match(line)
    if m is None:
        return None
    if key_pattern(names(rubric)).search(m.group("tail")):  # "a: 1, b: 0.5": several items on one line
        items = [pattern.match(piece) for piece in re.split(r"[,;，；]", line)]
        if not all(items) or any(i.group("tail").strip(" .。") for i in items):
            raise Unreadable(f"a line that gives several dimensions is not one value each: {line.strip()[:80]!r}")
        return [_item(i, rubric) for i in items]
    return [_item(m, rubric)]


def _item(m: re.Match, rubric: Rubric) -> tuple[str, float | None]:
    dim = alias(rubric, m.group("name"))
    if m.group("other") and alias(rubric, m.group("other")) != dim:
        raise Unreadable(f"{dim}: {m.group(0).strip()[:80]!r} names it with a remark the reader does not take")
    score = _text_value(m.group("value"), rubric.dimension(dim))
    tail = m.group("tail")
    if tail.strip() and not re.match(r"\s*(?:[—–\-;,:(.]|\s)", tail) or re.match(
            r"\s*(?:[-–—~/]|to\b|or\b|and\b|,\s*or\b|\(?(?:maybe|or|could be|perhaps)\b)\s*[\d.(]", tail, re.I):
        raise Unreadable(f"{dim}: {m.group(0).strip()[:80]!r} is not one value (a range, a pair or a hedge?)")
    _check_remark(tail, dim, score, rubric, f"{dim}'s line")
    return dim, score


def _table(rows: list[str], rubric: Rubric) -> list[tuple[str, float | None]]:
    """The (dimension, score) rows of a markdown table: the dimension first, then a score column, an option column
    or both (which must agree), maybe a reason column."""
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    if len(cells) < 3 or not all(re.fullmatch(r":?-{2,}:?", c) for c in cells[1]):
        raise Unreadable("a table without a header row of dimension | score")
    header = [normal(re.sub(r"[*_`]", "", c)) for c in cells[0]]
    roles = ["score" if h in SCORE_HEADERS else "option" if h in OPTION_HEADERS else "reason" if h in REASON_HEADERS
             else None for h in header[1:]]
    if None in roles or len(set(roles)) != len(roles) or not {"score", "option"} & set(roles):
        raise Unreadable(f"a table whose columns are {' | '.join(cells[0])}, not dimension | score (| option) "
                         "(| reason)")
    out = []
    for row, written in zip(cells[2:], rows[2:]):
        if not written.rstrip().endswith("|") or len(row) != len(header):
            raise Unreadable(f"a table row that is cut off or has other columns: {written.strip()[:80]!r}")
        dim = alias(rubric, re.sub(r"[*_`]", "", row[0]))
        if dim is None:
            raise Unreadable(f"a table row that names no rubric dimension: {row[0]!r}")
        given = {role: re.sub(r"^[*_`]+|[*_`]+$", "", cell) for role, cell in zip(roles, row[1:])}
        scores = {_text_value(given[role], rubric.dimension(dim)) for role in ("score", "option") if role in given}
        if len(scores) > 1:
            raise Unreadable(f"{dim}: the table's score and option disagree ({given['score']!r}, {given['option']!r})")
        score = scores.pop()
        if "reason" in given:
            _check_remark(given["reason"], dim, score, rubric, f"{dim}'s reason")
        out.append((dim, score))
    return out


# --- the detectors, as the scores' grammar watches them ------------------------------------------------------------

def _check_remark(remark: str, dim: str, score: float | None, rubric: Rubric, where: str) -> None:
    """A remark beside a value (a line's tail, a table's reason): no number, correction, doubt or scale of its own,
    and no option's label or letter of the dimension that is not its value's."""
    refuse_if(remark, where, CORRECTS, DOUBTS, OWN_SCALE, ADJUSTS, PROVISIONAL, NUMBERS)
    _check_levels(remark, dim, score, rubric, where)


def _check_levels(text: str, dim: str, score: float | None, rubric: Rubric, where: str) -> None:
    """No option's label (English or the tradition's own) or letter of the dimension whose score is not `score`
    (the dimensions' own names taken out first: 场景一致性 does not say 一致)."""
    text = mention_pattern(names(rubric)).sub(" ", text)
    for option in rubric.dimension(dim).options:
        said = [label for label in option.label.values() if _says(text, label)]
        said += [m.group(0) for m in re.finditer(rf"\(\s*{option.letter}\s*\)|\boption\s+{option.letter}\b", text,
                                                  re.I)]
        if said and option.score != score:
            raise Unreadable(f"{where} calls {dim} {said[0]!r} (option {option.letter}, {_shown(option.score)}), "
                             f"the answer gives it {_shown(score)}")


def _says(text: str, label: str) -> bool:
    if re.search(r"[\u4e00-\u9fff]", label):
        return label in text
    return re.search(rf"(?<![A-Za-z]){re.escape(label)}(?![A-Za-z])", text, re.I) is not None


def _check_prose(prose: str, scores: dict[str, float | None], rubric: Rubric) -> None:
    """The text around the answer (S5): no number, correction, doubt or scale of its own, no dimension given a value
    in any form, no option's label or letter for a dimension that is not the answer's value."""
    if not prose.strip():
        return
    refuse_if(prose, "the text around the answer", CORRECTS, DOUBTS, ADJUSTS, PROVISIONAL, NUMBERS)
    prose = re.sub(r"[*_`]+", "", prose)
    if m := key_pattern(names(rubric)).search(prose):
        raise Unreadable(f"the text around the answer gives {alias(rubric, m.group(1))} a value in a form the answer "
                         f"does not take ({prose[m.start():m.end() + 30].strip()!r})")
    mention = mention_pattern(names(rubric))
    for sentence in SENTENCE.split(prose):
        for dim in {alias(rubric, m.group(0).strip("\"'` ")) for m in mention.finditer(sentence)} - {None}:
            _check_levels(sentence, dim, scores[dim], rubric, "the text around the answer")


def _check_reasons(reasons: dict, scores: dict[str, float | None], rubric: Rubric) -> None:
    """Explain mode's reasons: a number in a reason is a count ("3 herons") or its dimension's score, and no reason
    says its score is too high or too low, corrects it, or states a scale."""
    for key, sentence in reasons.items():
        dim = alias(rubric, key)
        if dim is None or not isinstance(sentence, str):
            continue
        refuse_if(sentence, f"the reason for {dim}", CORRECTS, ADJUSTS, OWN_SCALE)
        for m in REASON_NUMBER.finditer(sentence):
            if scores[dim] is None or not math.isclose(float(m.group(1)), scores[dim], abs_tol=1e-9):
                raise Unreadable(f"the reason for {dim} writes {m.group(1)}, its score is {_shown(scores[dim])}")


# --- the reasoning's conclusion ------------------------------------------------------------------------------------

THOUGHT_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(?:0?\.\d+|1\.0+|[01](?=\s*(?:$|[.,;:!?)。，；！？]|(?:for|on|in|and|or|but|"
                            r"because|since|as|so|stands|seems|fits|is|then|here|there|overall)\b)))(?![\d.]*\d)"
                            r"|\(\s*[a-f]\s*\)|(?<=[:=])\s*[a-f](?![A-Za-z])|\b(?:null|n/a|excluded|none)\b|不适用", re.I)


DECIMAL = re.compile(r"(?<![A-Za-z0-9_.])(?:0?\.\d+|1\.0+)(?![\d.]*\d)")


def _concluded(thought: str, rubric: Rubric) -> dict[str, float | None]:
    """What a reasoning block concludes, dimension by dimension: the last score it gives each (a JSON object's, or
    the last number written after the dimension's name, loosely named, in a sentence). A score it gives no
    dimension the reader can name ("the central figure gets 0.33") is `Unreadable`: which one would it be?"""
    said: dict[str, float | None] = {}
    words = word_pattern(names(rubric))
    for sentence in SENTENCE.split(thought):
        plain = sentence
        for seg in segments(sentence):
            plain = plain[:seg.start] + " " * len(seg.text) + plain[seg.end:]
            value = loads(seg.text, []) if seg.closed else None
            for key, given in (value.items() if isinstance(value, dict) else ()):
                dim = alias(rubric, key)
                if dim is not None:
                    try:
                        said[dim] = _value(given, rubric.dimension(dim))
                    except Unreadable:
                        pass
        found = list(words.finditer(sentence))
        head = plain if not found else "" if len(found) == 1 else plain[:found[0].start()]
        if stray := DECIMAL.search(head):
            raise Unreadable(f"the reasoning gives {stray.group(0)} to no dimension the reader can name")
        for m, nxt in zip(found, found[1:] + [None]):
            dim = rubric.keys[next(i for i, g in enumerate(m.groups()) if g)]
            window = sentence[m.end(): nxt.start() if nxt else len(sentence)]
            numbers = THOUGHT_NUMBER.findall(window)
            if not numbers and len(found) == 1:
                numbers = THOUGHT_NUMBER.findall(sentence[:m.start()])
            if numbers:
                written = numbers[-1].strip("() ")  # a number, an option letter, an N/A word
                try:
                    said[dim] = _text_value(written, rubric.dimension(dim))
                except Unreadable:
                    pass
    return said
