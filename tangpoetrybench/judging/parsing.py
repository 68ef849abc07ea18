"""Reading PAE's answer. Never raises, and never guesses: where two readings are possible the answer fails.

1. A `<think>…</think>` block (or everything before a lone `</think>`) is dropped, and a code fence unwrapped.
2. The answer is the last whole JSON object that names a rubric dimension — directly, one level down under a
   key (`{"scores": {…}}`; the mapping with the most usable scores), or as a list of `{"dimension": …,
   "score": …}` pairs — and a note says when another was ignored. An object cut off before its closing brace
   is read only when there is no whole one, and is `failed` unless every dimension made it, each value ended
   by a separator. Without an object, "key: value" pairs in the text are read.
3. A key given twice keeps its last value (JSON's own rule), with a note, in JSON and in free text alike.
4. Numbers are on the 0–1 scale the prompt asks for. Another scale counts only when it is stated — in the value
   ("4/5", "4 out of 5", "80%") or in the prose around the answer ("on a 1-5 scale", "scale of 0 to 10",
   "out of 10") — and only for numbers above 1. Unstated, numbers above 1 are read as 0–100 when one is above
   10 and none is a fraction of 1; a value above 1 beside fractions such as 0.67 is out of range; any other
   number above 1 (0–10? 1–5?) fails the answer, as do 1s under a stated 1–5 scale (best or worst?).
5. Option letters read as their scores and "N/A" words as null; values that are not scores become null.

`ok`: the whole answer is one JSON object with exactly the rubric's keys, once each, every value a number in
[0, 1] (or null where the dimension can be excluded). `repaired`: scores were read, and the notes say every
repair. `failed`: nothing usable — no rubric key, every score null, a truncated object, an unstated scale
that could be read two ways, or two different stated scales. `quality` is the mean of the scores, and null
unless every dimension that always applies has one. `PARSER_VERSION` changes whenever these rules do.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field

from ..numeric import whole_mean
from ..rubric import Rubric

PARSER_VERSION = 2  # recorded with every PAE result: a results file is resumed only under the same rules
NULL_WORDS = {"null", "none", "n/a", "na", "nan", "excluded", "not applicable", "not_applicable", "不适用", "无"}
FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\d.*])"
# A free-text "key: value": a number (maybe "80%", "7/10" or "4 out of 5"), null, a quoted string, a nested object,
# or an option letter standing alone (so the "a" of "a moonlit river" is not read as option a).
PAIR = re.compile(
    r"[\"']?([A-Za-z\u4e00-\u9fff][A-Za-z0-9_ \-\u4e00-\u9fff]{0,40}?)[\"']?\s*[:：=]\s*"
    rf"(\{{[^{{}}]*\}}|null|None|{NUMBER}\s*(?:%|(?:/|out of)\s*\d+(?:\.\d+)?)?|\(?[a-fA-F]\)?(?=\s*(?:[,;，；)}}\n]|$))"
    r"|\"[^\"]*\"|'[^']*')"
)
LETTER = re.compile(r"^(?:option\s+)?\(?([a-f])\)?\.?$", re.I)
FRACTION = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*(?:/|out of)\s*(\d+(?:\.\d+)?)$", re.I)
PERCENT = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*%$")
RANGE = r"(\d+(?:\.\d+)?)\s*(?:-|–|—|~|to)\s*(\d+(?:\.\d+)?)"
# A scale stated in the text: "1-5 scale", "1 to 5 point scale", "scale of 0-10", "range 0 to 100", "out of 10",
# "10分制", "满分10". "out of N" right after a number is that value's own fraction, not the answer's scale.
STATED_SCALES = [
    re.compile(rf"{RANGE}\s*(?:-\s*)?(?:points?\s*)?(?:scale|分制)", re.I),
    re.compile(rf"(?:scale|range)\s*(?:of|from|is|:)?\s*{RANGE}", re.I),
    re.compile(r"(?<![\d.\s])\s*\bout of (\d+(?:\.\d+)?)", re.I),
    re.compile(r"(?<![\d.])(\d+)\s*分制|满分\s*(\d+)"),
]
NAME_FIELDS = ("dimension", "key", "name", "criterion", "aspect", "维度")
SCORE_FIELDS = ("score", "value", "rating", "分数", "得分")


@dataclass
class ParsedAnswer:
    scores: dict[str, float | None]
    status: str  # ok | repaired | failed
    notes: list[str] = field(default_factory=list)
    quality: float | None = None

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


def parse_answer(text: str | None, rubric: Rubric) -> ParsedAnswer:
    """Parse a model's answer against `rubric`; never raises."""
    try:
        parsed = _parse(text or "", rubric)
    except Exception as exc:  # the contract is "never raises": a parser bug must not stop a scoring run
        parsed = _failed(rubric, [f"parser error: {type(exc).__name__}: {exc}"])
    if parsed.status != "failed" and all(v is None for v in parsed.scores.values()):
        parsed = _failed(rubric, parsed.notes + ["no usable score"])
    parsed.quality = answer_quality(parsed.scores, rubric) if parsed.status != "failed" else None
    return parsed


def _failed(rubric: Rubric, notes: list[str]) -> ParsedAnswer:
    return ParsedAnswer({k: None for k in rubric.keys}, "failed", notes)


def _parse(text: str, rubric: Rubric) -> ParsedAnswer:
    notes: list[str] = []
    body = text.strip()
    if "<think>" in body or "</think>" in body:
        before, closed, after = body.partition("</think>")
        if closed and "<think>" not in before:  # the opening tag was in the prompt
            body = after
        body = THINK.sub("", body).strip()
        notes.append("dropped the thinking")
    if not body:
        return _failed(rubric, notes + ["empty answer"])
    strict = _strict(body, rubric)
    if strict is not None and not notes:
        return ParsedAnswer(strict, "ok")
    if fenced := FENCE.search(body):
        body = fenced.group(1).strip()
        notes.append("removed a code fence")

    found = []  # (segment, closed, its mapping, the notes reading it made), each segment read once
    for seg, complete in _segments(body):
        seg_notes: list[str] = []
        mapping = _rubric_mapping(seg, complete, rubric, seg_notes)
        if mapping is not None:
            found.append((seg, complete, mapping, seg_notes))
    if found:
        closed = [i for i, f in enumerate(found) if f[1]]
        chosen = closed[-1] if closed else len(found) - 1  # the last whole answer; a cut-off one only if no other
        seg, complete, raw, seg_notes = found[chosen]
        notes += seg_notes
        if len(found) > 1:
            rest = "a later one was cut off" if chosen < len(found) - 1 else "the earlier ones were ignored"
            notes.append(f"read answer object {chosen + 1} of {len(found)}; {rest}")
        if seg != body:
            notes.append("removed text around the JSON object")
        if not complete:
            present = {_alias(rubric, k) for k in raw} - {None}
            if len(present) < len(rubric.keys):
                return _failed(rubric, notes + [f"the answer was cut off: {len(present)} of {len(rubric.keys)} "
                                                 "dimensions complete before the end"])
            notes.append("the object was not closed")
        prose = body.replace(seg, " ")  # a scale is stated in the prose, not inside the answer's own strings
    else:
        pairs = PAIR.findall(body)
        if not pairs:
            return _failed(rubric, notes + ["no JSON object or key: value pairs found"])
        raw = _free_text(pairs, notes)
        notes.append("read key: value pairs from free text")
        prose = body
    scores = _map(raw, rubric, notes, _stated_scale(prose))
    if isinstance(scores, str):
        return _failed(rubric, notes + [scores])
    return ParsedAnswer(scores, "repaired" if notes else "ok", notes)


def _strict(text: str, rubric: Rubric) -> dict[str, float | None] | None:
    """The scores of an answer that is exactly what was asked for, or None."""
    try:
        pairs = json.loads(text, object_pairs_hook=list)
    except ValueError:
        return None
    if not isinstance(pairs, list) or len(pairs) != len(rubric.keys) or {k for k, _ in pairs} != set(rubric.keys):
        return None
    out = {}
    for key, value in pairs:
        if value is None and excludable(rubric, key):
            out[key] = None
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            out[key] = float(value)
        else:
            return None
    return {k: out[k] for k in rubric.keys}


def _segments(text: str) -> list[tuple[str, bool]]:
    """Every top-level {…} or […] in the text (quotes respected), with whether it is closed; an unclosed one runs to
    the end of the text."""
    out, start, stack, quote, escaped = [], None, [], None, False
    for i, c in enumerate(text):
        if quote:
            escaped = c == "\\" and not escaped
            if c == quote and not escaped:
                quote = None
        elif c == '"' and stack:  # single quotes are apostrophes in prose; inside JSON they are repaired later
            quote = c
        elif c in "{[":
            if not stack:
                start = i
            stack.append("}" if c == "{" else "]")
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                out.append((text[start: i + 1], True))
        elif stack and c in "}]":  # a mismatched closer: the segment is not well formed; start over
            stack, start = [], None
    if stack and start is not None:
        out.append((text[start:], False))
    return out


def _rubric_mapping(segment: str, complete: bool, rubric: Rubric, notes: list[str]) -> dict | None:
    """The key → value mapping of a segment that names at least one rubric dimension, or None."""
    if not complete:
        matches = list(PAIR.finditer(segment))
        if matches and not re.match(r"\s*[,;，；\n]", segment[matches[-1].end():]):
            matches.pop()  # the last value may have been cut off mid-number: only what a separator ends is whole
        pairs = [m.groups() for m in matches]
        return _free_text(pairs, notes) if any(_alias(rubric, k) for k, _ in pairs) else None
    value = _loads_lenient(segment, notes)
    candidates: list[tuple[object, str | None]] = [(value, None)]
    if isinstance(value, dict):
        candidates += [(v, f"read the scores under {k!r}") for k, v in value.items() if isinstance(v, (dict, list))]
    best, best_notes, best_usable = None, [], 0
    for candidate, note in candidates:  # the mapping with the most usable scores ({"reasoning": {…}, "scores": {…}})
        candidate_notes = [note] if note else []
        mapping = _as_mapping(candidate, candidate_notes)
        usable = sum(_usable(rubric, k, v) for k, v in mapping.items()) if mapping else 0
        if usable > best_usable or best is None and mapping and any(_alias(rubric, k) for k in mapping):
            best, best_notes, best_usable = mapping, candidate_notes, usable
    notes += best_notes
    return best


def _usable(rubric: Rubric, key, value) -> bool:
    """Whether a key names a rubric dimension and its value reads as a score."""
    dim = _alias(rubric, key)
    if dim is None:
        return False
    if isinstance(value, dict):
        value = next((value[k] for k in value if str(k).lower() in SCORE_FIELDS), None)
    return _value(value, rubric, dim)[0] is not None


def _as_mapping(value, notes: list[str]) -> dict | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        pairs = []
        for item in value:
            lower = {str(k).lower(): v for k, v in item.items()}
            name = next((lower[f] for f in NAME_FIELDS if f in lower), None)
            if name is None or not any(f in lower for f in SCORE_FIELDS):
                return None
            pairs.append((str(name), next(lower[f] for f in SCORE_FIELDS if f in lower)))
        mapping = _keep_last(pairs, notes)
        notes.append("read a list of dimension/score pairs")
        return mapping
    return None


def _keep_last(pairs, notes: list[str]) -> dict:
    """A dict of (key, value) pairs where a repeated key keeps its last value, as JSON does; a note says so."""
    out: dict = {}
    for key, value in pairs:
        if key in out:
            notes.append(f"{key}: given twice, kept the last")
        out[key] = value
    return out


def _free_text(pairs: list[tuple[str, str]], notes: list[str]) -> dict:
    return _keep_last([(k, _literal(v)) for k, v in pairs], notes)


def _loads_lenient(segment: str, notes: list[str]):
    """A segment as JSON, or as a Python literal after repairs (quotes, commas, bare keys); None if neither."""
    try:
        return _dedupe(json.loads(segment, object_pairs_hook=_Pairs), notes)
    except ValueError:
        pass
    fixed = (segment.replace("：", ":").replace("，", ",").replace("“", '"').replace("”", '"')
             .replace("‘", "'").replace("’", "'"))
    fixed = re.sub(r"([{,]\s*)([A-Za-z_\u4e00-\u9fff][A-Za-z0-9_ \-\u4e00-\u9fff]*?)\s*:", r'\1"\2":', fixed)
    py = re.sub(r"\bnull\b", "None", re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", fixed)))
    py = re.sub(r"\bNaN\b", "None", py)
    try:
        value = _literal_pairs(ast.parse(py, mode="eval").body)  # literals only: no code runs
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    notes.append("repaired JSON syntax (quotes, trailing commas or bare keys)")
    return _dedupe(value, notes)


class _Pairs(list):
    """A JSON object as its (key, value) pairs, so that repeated keys are seen."""


def _literal_pairs(node):
    if isinstance(node, ast.Dict):
        return _Pairs((ast.literal_eval(k), _literal_pairs(v)) for k, v in zip(node.keys, node.values))
    if isinstance(node, ast.List):
        return [_literal_pairs(v) for v in node.elts]
    return ast.literal_eval(node)


def _dedupe(value, notes: list[str]):
    if isinstance(value, _Pairs):
        return _keep_last([(k, _dedupe(v, notes)) for k, v in value], notes)
    if isinstance(value, list):
        return [_dedupe(v, notes) for v in value]
    return value


def _literal(value: str):
    """A free-text value as a Python value: None, a number, a string, or the score of a nested object."""
    value = value.strip()
    if value.startswith("{"):
        m = re.search(r"(?:score|value)[\"']?\s*[:：=]\s*([-+]?\d+(?:\.\d+)?|null|None)", value)
        return _literal(m.group(1)) if m else None
    if value in ("null", "None"):
        return None
    if value[:1] in "\"'":
        return value[1:-1]
    try:
        return float(value)
    except ValueError:
        return value


def _normal(key: str) -> str:
    key = re.sub(r"^\s*\d+[.)]\s*", "", str(key)).strip().lower()
    return re.sub(r"[\s\-_/]+", "", key)


def _alias(rubric: Rubric, key) -> str | None:
    for dim in rubric.dimensions:
        if _normal(key) in {_normal(dim.key), _normal(dim.name["en"]), _normal(dim.name["zh"])}:
            return dim.key
    return None


def _stated_scale(text: str) -> tuple[float, float] | str | None:
    """(low, high) of a scale the text states; None if none; an error message if it states two."""
    found = set()
    for pattern in STATED_SCALES:
        for m in pattern.finditer(text):
            numbers = [float(g) for g in m.groups() if g is not None]
            found.add((numbers[0], numbers[1]) if len(numbers) == 2 else (0.0, numbers[0]))
    found = {s for s in found if s[1] > s[0]}
    if len(found) > 1:
        return "two scales stated: " + " and ".join(f"{lo:g}–{hi:g}" for lo, hi in sorted(found))
    return found.pop() if found else None


def _map(raw: dict, rubric: Rubric, notes: list[str], stated) -> dict[str, float | None] | str:
    """Rubric scores from the answer's mapping, or the reason it cannot be read."""
    found: dict[str, object] = {}
    renamed, unknown = [], []
    for k, v in raw.items():
        key = _alias(rubric, k)
        if key is None:
            unknown.append(str(k))
            continue
        if key in found:
            notes.append(f"{key}: given twice, kept the last")
        found[key] = v
        if k != key:
            renamed.append(f"{k!s}→{key}")
    if not found:
        return "no key matches a rubric dimension"
    if renamed:
        notes.append("renamed keys: " + ", ".join(renamed))
    if unknown:
        notes.append("ignored unknown keys: " + ", ".join(unknown))

    values: dict[str, float | None] = {}
    plain: dict[str, float] = {}  # numbers whose scale the value itself does not state
    nested = [k for k, v in found.items() if isinstance(v, dict)]
    if nested:
        notes.append("took the score from a nested object: " + ", ".join(nested))
    for key in rubric.keys:
        if key not in found:
            values[key] = None
            notes.append(f"{key}: missing")
            continue
        raw_value = found[key]
        if isinstance(raw_value, dict):
            raw_value = next((raw_value[k] for k in raw_value if str(k).lower() in SCORE_FIELDS), None)
        value, how = _value(raw_value, rubric, key)
        if how.startswith("plain"):
            plain[key] = value
            if how != "plain":
                notes.append(f"{key}: {how.removeprefix('plain: ')}")
        elif how != "ok":
            notes.append(f"{key}: {how}")
        elif value is None and not excludable(rubric, key):
            notes.append(f"{key}: null, but this dimension always applies")
        values[key] = value
    problem = _apply_scale(plain, values, notes, stated)
    if problem:
        return problem
    for key, value in values.items():
        if value is not None and not 0 <= value <= 1:
            notes.append(f"{key}: {value:g} is out of range, set to null")
            values[key] = None
    return values


def _value(value, rubric: Rubric, key: str) -> tuple[float | None, str]:
    """(score, how): how is "ok", "plain" (a bare number, its scale to settle; "plain: note" for one written as text)
    or a note on what was done."""
    if value is None:
        return None, "ok"
    if isinstance(value, bool):
        return None, f"{value!r} is not a score, set to null"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return None, f"{value} is not a score, set to null"
        return float(value), "plain"
    text = str(value).strip()
    if text.lower() in NULL_WORDS:
        return None, f"{text!r} read as null"
    if m := LETTER.match(text):
        letter = m.group(1).lower()
        dim = rubric.dimension(key)
        if letter in dim.letters:
            score = dim.option(letter).score
            return score, f"option {letter!r} read as {'null (excluded)' if score is None else f'{score:g}'}"
        return None, f"{text!r} is not an option of {key}, set to null"
    if m := PERCENT.match(text):
        return float(m.group(1)) / 100, f"{text} read as {float(m.group(1)) / 100:g}"
    if m := FRACTION.match(text):
        num, den = float(m.group(1)), float(m.group(2))
        if den > 0:
            return num / den, f"{text} read as {num / den:g}"
    try:
        number = float(text)
    except ValueError:
        return None, f"{text!r} is not a score, set to null"
    if not math.isfinite(number):
        return None, f"{text!r} is not a score, set to null"
    return number, f"plain: read the text {text!r} as a number"


def _apply_scale(plain: dict[str, float], values: dict[str, float | None], notes: list[str], stated) -> str | None:
    """Put bare numbers on 0–1: by the stated scale, by the values where only one reading fits, else the reason the
    answer cannot be read."""
    if not plain:
        return None
    nums = list(plain.values())
    if max(nums) <= 1:  # the 0–1 scale asked for, whatever the prose says about other scales, unless it reads both ways
        if isinstance(stated, tuple) and stated[0] >= 1 and min(nums) >= stated[0]:
            return f"numbers of 1 read as the best on 0–1 and the worst on the stated {stated[0]:g}–{stated[1]:g} scale"
        return None
    if isinstance(stated, str):
        return stated
    if stated is not None and any(0 < v < 1 for v in nums):
        return f"numbers above 1 and fractions of 1 together under a stated {stated[0]:g}–{stated[1]:g} scale"
    if stated is not None:
        low, high = stated
        if (low, high) != (0.0, 1.0):
            notes.append(f"numbers on the stated {low:g}–{high:g} scale, mapped to 0–1")
            for key, v in plain.items():
                inside = low <= v <= high
                values[key] = (v - low) / (high - low) if inside else None
                if not inside:
                    notes.append(f"{key}: {v:g} is outside the stated scale, set to null")
        return None
    if any(0 < v < 1 for v in nums):
        return None  # the 0–1 scale asked for: a number above 1 beside fractions of 1 is out of range
    if 10 < max(nums) <= 100:
        for key, v in plain.items():
            values[key] = v / 100
        notes.append("numbers above 10 with no stated scale: read on 0–100")
        return None
    return (f"numbers up to {max(nums):g} with no stated scale: 0–10, 1–5 and 0–100 would all read them, "
            "so none does")


# --- the pairwise answer: {"winner": "A" | "B", "reason": "…"} -------------------------------------------------------

PAIR_PARSER_VERSION = 1
WINNER_FIELDS = ("winner", "better", "choice", "preferred", "answer")
WINNER_VALUE = re.compile(r"^\s*(?:image\s*|图\s*)?([ab])\s*$", re.I)


@dataclass
class ParsedPair:
    winner: str | None  # "A", "B", or None when the answer could not be read
    reason: str | None
    status: str  # ok | repaired | failed
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def parse_pair_answer(text: str | None) -> ParsedPair:
    """Read a pairwise answer; never raises, never guesses. `ok`: exactly {"winner": "A"|"B", "reason": str};
    `repaired`: the last JSON object with a winner field was read from around other text, a fence or a thinking
    block, or with a lower-case or "Image A" winner; `failed`: no such object, a tie or another value."""
    notes: list[str] = []
    body = (text or "").strip()
    if "<think>" in body or "</think>" in body:
        before, closed, after = body.partition("</think>")
        body = (after if closed and "<think>" not in before else THINK.sub("", body)).strip()
        notes.append("dropped the thinking")
    try:
        exact = json.loads(body)
    except ValueError:
        exact = None
    if (isinstance(exact, dict) and set(exact) == {"winner", "reason"} and exact["winner"] in ("A", "B")
            and isinstance(exact["reason"], str) and not notes):
        return ParsedPair(exact["winner"], exact["reason"], "ok")
    if fenced := FENCE.search(body):
        body = fenced.group(1).strip()
        notes.append("removed a code fence")
    objects = [(seg, v) for seg, complete in _segments(body) if complete
               and isinstance(v := _loads_lenient(seg, notes), dict)
               and any(str(k).lower() in WINNER_FIELDS for k in v)]
    if not objects:
        return ParsedPair(None, None, "failed", notes + ["no JSON object with a winner"])
    if len(objects) > 1:
        notes.append(f"read the last of {len(objects)} answer objects")
    segment, found = objects[-1]
    if segment != body:
        notes.append("removed text around the JSON object")
    answer = {str(k).lower(): v for k, v in found.items()}
    value = next(answer[k] for k in WINNER_FIELDS if k in answer)
    match = WINNER_VALUE.match(value) if isinstance(value, str) else None
    if match is None:
        return ParsedPair(None, None, "failed", notes + [f"winner {value!r} is neither A nor B"])
    winner = match.group(1).upper()
    if value != winner or "winner" not in answer:
        notes.append(f"read {next(k for k in WINNER_FIELDS if k in answer)} {value!r} as winner {winner}")
    reason = answer.get("reason")
    if reason is None:
        notes.append("no reason given")
    return ParsedPair(winner, None if reason is None else str(reason), "repaired" if notes else "ok", notes)
