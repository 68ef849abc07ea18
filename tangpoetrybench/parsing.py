"""Reading PAE's answer: strict JSON first, then explicit repairs. Never raises.

`parse_answer` returns the ten scores (null where not given, not applicable or unusable) and a status:
- `ok`: the whole answer is one JSON object with exactly the rubric's keys, each a number in [0, 1]
  (or null where the dimension can be excluded);
- `repaired`: scores were recovered, and `notes` says every repair made: code fences or prose around
  the object, single quotes, trailing commas, bare keys, keys written differently (case, spaces, the
  English or Chinese names), option letters instead of numbers, percentages, "7/10" fractions, a 0–10
  or 0–100 scale, missing, unknown or out-of-range values;
- `failed`: no object and no recognisable "key: value" pairs; every score is null.

Scales are never guessed silently. Plain numbers are read as a 0–10 scale only when at least half of them
are above 1 and every one is a whole or half number in [0, 10] (0–100 likewise, whole numbers), and the
note says so; otherwise a number outside [0, 1] is out of range and becomes null.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field

from .rubric import Rubric

NULL_WORDS = {"null", "none", "n/a", "na", "nan", "excluded", "not applicable", "not_applicable", "不适用", "无"}
FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.S)
NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\d.*])"
# A free-text "key: value": a number (maybe "80%" or "7/10"), null, a quoted string, a nested object, or an
# option letter standing alone (so the "a" of "a moonlit river" is not read as option a).
PAIR = re.compile(
    r"[\"']?([A-Za-z\u4e00-\u9fff][A-Za-z0-9_ \-\u4e00-\u9fff]{0,40}?)[\"']?\s*[:：=]\s*"
    rf"(\{{[^{{}}]*\}}|null|None|{NUMBER}\s*(?:%|/\s*\d+(?:\.\d+)?)?|\(?[a-fA-F]\)?(?=\s*(?:[,;，；)}}\n]|$))"
    r"|\"[^\"]*\"|'[^']*')"
)
LETTER = re.compile(r"^(?:option\s+)?\(?([a-f])\)?\.?$", re.I)
FRACTION = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*/\s*(\d+(?:\.\d+)?)$")
PERCENT = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*%$")


@dataclass
class ParsedAnswer:
    scores: dict[str, float | None]
    status: str  # ok | repaired | failed
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def parse_answer(text: str | None, rubric: Rubric) -> ParsedAnswer:
    """Parse a model's answer against `rubric`; never raises."""
    empty = {k: None for k in rubric.keys}
    try:
        return _parse(text or "", rubric)
    except Exception as exc:  # the contract is "never raises": a parser bug must not stop a scoring run
        return ParsedAnswer(empty, "failed", [f"parser error: {type(exc).__name__}: {exc}"])


def _parse(text: str, rubric: Rubric) -> ParsedAnswer:
    empty = {k: None for k in rubric.keys}
    stripped = text.strip()
    if not stripped:
        return ParsedAnswer(empty, "failed", ["empty answer"])
    strict = _strict(stripped, rubric)
    if strict is not None:
        return ParsedAnswer(strict, "ok")

    notes: list[str] = []
    body = stripped
    fenced = FENCE.search(body)
    if fenced:
        body = fenced.group(1).strip()
        notes.append("removed a code fence")
    obj_text = _outer_object(body)
    raw: dict | None = None
    if obj_text is not None:
        if obj_text != body:
            notes.append("removed text around the JSON object")
        raw = _loads_lenient(obj_text, notes)
    if raw is None:
        pairs = PAIR.findall(obj_text if obj_text is not None else body)
        if not pairs:
            return ParsedAnswer(empty, "failed", notes + ["no JSON object or key: value pairs found"])
        raw = {}
        for k, v in pairs:
            raw.setdefault(k, _literal(v))
        notes.append("read key: value pairs from free text")
    scores = _map(raw, rubric, notes)
    if scores is None:
        return ParsedAnswer(empty, "failed", notes + ["no key matches a rubric dimension"])
    return ParsedAnswer(scores, "repaired" if notes else "ok", notes)


def _strict(text: str, rubric: Rubric) -> dict[str, float | None] | None:
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or set(obj) != set(rubric.keys):
        return None
    out = {}
    for key in rubric.keys:
        value = obj[key]
        if value is None and _excludable(rubric, key):
            out[key] = None
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            out[key] = float(value)
        else:
            return None
    return out


def _excludable(rubric: Rubric, key: str) -> bool:
    return any(o.excluded for o in rubric.dimension(key).options)


def _outer_object(text: str) -> str | None:
    """The first balanced {...} in text (quotes respected), or from the first { to the end if unbalanced."""
    start = text.find("{")
    if start < 0:
        return None
    depth, quote, escaped = 0, None, False
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            escaped = c == "\\" and not escaped
            if c == quote and not escaped:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return text[start: i + 1]
    return text[start:]


def _loads_lenient(obj_text: str, notes: list[str]) -> dict | None:
    try:
        obj = json.loads(obj_text)
        return obj if isinstance(obj, dict) else None
    except ValueError:
        pass
    fixed = (obj_text.replace("：", ":").replace("，", ",").replace("“", '"').replace("”", '"')
             .replace("‘", "'").replace("’", "'"))
    fixed = re.sub(r"([{,]\s*)([A-Za-z_\u4e00-\u9fff][A-Za-z0-9_ \-\u4e00-\u9fff]*?)\s*:", r'\1"\2":', fixed)
    py = re.sub(r"\bnull\b", "None", re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", fixed)))
    py = re.sub(r"\bNaN\b", "None", py)
    try:
        obj = ast.literal_eval(py)  # literals only: no code runs
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    if not isinstance(obj, dict):
        return None
    notes.append("repaired JSON syntax (quotes, trailing commas or bare keys)")
    return obj


def _literal(value: str):
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


def _aliases(rubric: Rubric) -> dict[str, str]:
    aliases = {}
    for dim in rubric.dimensions:
        for name in (dim.key, dim.name["en"], dim.name["zh"]):
            aliases[_normal(name)] = dim.key
    return aliases


def _map(raw: dict, rubric: Rubric, notes: list[str]) -> dict[str, float | None] | None:
    aliases = _aliases(rubric)
    found: dict[str, object] = {}
    renamed, unknown = [], []
    for k, v in raw.items():
        key = aliases.get(_normal(k))
        if key is None:
            unknown.append(str(k))
        elif key in found:
            notes.append(f"{key}: given twice, kept the first")
        else:
            found[key] = v
            if k != key:
                renamed.append(f"{k!s}→{key}")
    if not found:
        return None
    if renamed:
        notes.append("renamed keys: " + ", ".join(renamed))
    if unknown:
        notes.append("ignored unknown keys: " + ", ".join(unknown))

    values: dict[str, float | None] = {}
    plain: dict[str, float] = {}  # numbers whose scale is not stated
    for key in rubric.keys:
        if key not in found:
            values[key] = None
            notes.append(f"{key}: missing")
            continue
        value, how = _value(found[key], rubric, key)
        if how == "plain":
            plain[key] = value
        elif how != "ok":
            notes.append(f"{key}: {how}")
        elif value is None and not _excludable(rubric, key):
            notes.append(f"{key}: null, but this dimension always applies")
        values[key] = value
    _rescale(plain, values, notes)
    for key, value in values.items():
        if value is not None and not 0 <= value <= 1:
            notes.append(f"{key}: {value:g} is out of range, set to null")
            values[key] = None
    return values


def _value(value, rubric: Rubric, key: str) -> tuple[float | None, str]:
    """(score, how): how is "ok", "plain" (a bare number, scale to check) or a note on what was done."""
    if isinstance(value, dict):
        inner = next((value[k] for k in value if str(k).lower() in ("score", "value")), None)
        score, how = _value(inner, rubric, key)
        return score, "took the score from a nested object" if how in ("ok", "plain") else how
    if value is None:
        return None, "ok"
    if isinstance(value, bool):
        return None, f"{value!r} is not a score, set to null"
    if isinstance(value, (int, float)):
        if math.isnan(value):
            return None, "NaN, set to null"
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
    if math.isnan(number) or not 0 <= number <= 1:
        return None, f"{text!r} is not a score in [0, 1], set to null"
    return number, f"read the text {text!r} as a number"


def _rescale(plain: dict[str, float], values: dict[str, float | None], notes: list[str]) -> None:
    """Divide bare numbers by 10 or 100 only when they are unmistakably on that scale: at least half of them
    above 1 (one stray 3 among 0–1 scores is out of range, not a scale)."""
    nums = list(plain.values())
    if not nums or min(nums) < 0 or 2 * sum(v > 1 for v in nums) < len(nums):
        return
    if max(nums) <= 10 and all((2 * v).is_integer() for v in nums):
        scale = 10
    elif max(nums) <= 100 and all(v.is_integer() for v in nums):
        scale = 100
    else:
        return
    for key, v in plain.items():
        values[key] = v / scale
    notes.append(f"numbers on a 0–{scale} scale, divided by {scale}")
