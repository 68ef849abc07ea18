"""Reading PAE's answer. Never raises, and never guesses.

The rule: a careful human reading the answer beside the rubric agrees with every score the parser returns, or the
parser returns none. Where two readings remain, the answer fails; a value that is not a score is null.

1. The text is normalised first (Unicode NFKC: full-width digits and punctuation become ASCII). A `<think>…</think>`
   block (or everything before a lone `</think>`) is dropped. Of several code fences the last one wins, or the last
   one labelled as the answer ("Final:"); one labelled as a draft, a confidence or reasons is never read.
2. The answer is the last whole JSON object that names a rubric dimension with a usable score (`//` and `/* */`
   comments removed) — directly, in a container named as the answer (`scores`, `final`, `answer`; never one named
   `confidence`, `draft`, `reasons`), or as a list of `{"dimension": …, "score": …}` or `[dimension, score]` pairs;
   objects that each name other dimensions are merged. A nested object gives its score or its option (both must
   agree). Two containers that disagree (`scores` and `final`) fail. An object labelled in the prose as a draft, a
   confidence or reasons is skipped. An object cut off before its closing brace is read only when there is no
   whole one, and fails unless every dimension made it, each value ended by a separator.
3. Without an object, "key: value" pairs are read from the text: a dimension's key, English or Chinese name (also
   `core_imagery_score`, `情感共鸣（Emotional resonance）`, `**Safety**`), then `:`, `=` or a dash, then the value;
   a dimension's heading with a later "Score: …" line; markdown table rows (a score column and an option column
   must agree). Sections headed as a draft,
   a confidence or reasons are skipped.
4. A key given twice keeps its last value (JSON's own rule), with a note.
5. A value is a number (`0.67`, `.5`, `0,67`, `80%`, `4/5`, `4 out of 5`), an option letter with or without its
   label (`b`, `(b)`, `b: minor flaws`, `a (coherent)`) or an option's label alone, or an "N/A" word (null).
   A number followed by a noun is a count (`0 issues found`), not a score: null. A range (`0.33–0.67`) or a
   correction (`0.67, actually 0.33`, `0.75 → 0.5`) leaves two readings: the answer fails; so does a letter whose
   label is another option's.
6. Numbers are on the 0–1 scale the prompt asks for. Another scale counts only when it is stated — in the value
   ("4/5", "4 out of 5", "80%") or in the prose around the answer ("on a 1-5 scale", "scale of 0 to 10",
   "out of 10") — and only for numbers above 1. Unstated, numbers above 1 are read as 0–100 when one is above
   10 and none is a fraction of 1; a value above 1 beside fractions such as 0.67 is out of range; any other
   number above 1 (0–10? 1–5?) fails the answer, as do 1s under a stated 1–5 scale (best or worst?) and a 1 on a
   two-option dimension under any scale but 0–1 (the best option, or 1 of 100?).

`ok`: the whole answer is one JSON object with exactly the rubric's keys, once each, every value a number in
[0, 1] (or null where the dimension can be excluded). `repaired`: scores were read, and the notes say every
repair. `failed`: nothing usable — no rubric key, every score null, a truncated object, two readings. `quality` is
the mean of the scores, and null unless every dimension that always applies has one. `PARSER_VERSION` changes
whenever these rules do.

Explain mode (`explain=True`): `ok` is also `{"scores": <the plain answer>, "reasons": {…}}` exactly; anything else
is read by the rules above (the scores one level down). The reasons are read beside the scores, never instead of
them: a rubric key's non-empty sentence is kept, a missing or empty one is left out, and neither changes a score.
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import unicodedata
from dataclasses import dataclass, field

from ..numeric import whole_mean
from ..rubric import Dimension, Rubric

PARSER_VERSION = 3  # recorded with every PAE result: a results file is resumed only under the same rules
NULL_WORDS = {"null", "none", "n/a", "na", "nan", "excluded", "not applicable", "not_applicable", "不适用", "无"}
# Names of the containers an answer comes in, and of those that hold something else (compared without spaces).
ANSWER_NAMES = {"scores", "score", "final", "finalscores", "finalscore", "finalanswer", "answer", "result",
                "results", "ratings", "rating", "evaluation", "assessment", "评分", "分数", "得分", "最终", "最终评分",
                "答案", "结果"}
OTHER_NAMES = {"confidence", "confidences", "draft", "drafts", "reason", "reasons", "reasoning", "rationale",
               "rationales", "explanation", "explanations", "comment", "comments", "note", "notes", "justification",
               "justifications", "analysis", "thoughts", "uncertainty", "example", "format", "schema", "置信度",
               "草稿", "初稿", "理由", "解释", "分析", "说明"}
FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.S)
THINK = re.compile(r"<think>.*?(?:</think>|$)", re.S)
NUMBER = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
SCORE_NUMBER = re.compile(rf"({NUMBER})(?:\s*(%)|\s*(?:/|out of)\s*({NUMBER}))?(?![\d*])(?!\.\d)", re.I)
# A number that is not a count: not followed by a word (a noun) after it.
RIVAL = re.compile(rf"(?<![\w.]){NUMBER}(?![\d.]|\s*[A-Za-z\u4e00-\u9fff])")
COUNT_OK = re.compile(r"\s*(?:points?|pts?)\b|\s*分(?!\w)", re.I)  # "4 points", "8分": a unit, not a noun
CONNECTOR = re.compile(r"\s*(?:because|since|as|given|but|though|although|with|without|overall)\b", re.I)
DECIMAL_COMMA = re.compile(r"^(\d+),(\d+)(?![\d,])")
LETTER = re.compile(r"^(?:option\s*)?(?:\(([a-f])\)|([a-f])(?=$|\s*[:)\-—–(]|\.(?:\s|$)))\s*[.:)\-—–]?\s*(.*)$",
                    re.I | re.S)  # "b", "(b)", "b: minor flaws", "a (coherent)", but not "a moonlit…" or "e.g."
RANGE = r"(?<![\d.])(\d{1,4}(?:\.\d{1,4})?)\s*(?:-|–|—|~|to)\s*(\d{1,4}(?:\.\d{1,4})?)"  # bounded: no backtracking
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
OPTION_FIELDS = ("option", "choice", "letter", "选项")
KEY_SUFFIX = re.compile(r"(?:score|rating|得分|分数|评分)$")
SEPARATOR = r"\s*(?::|=|\s[-–—]\s|[—–])\s*"
TABLE_SCORE = {"score", "scores", "rating", "value", "分数", "得分", "评分"}
TABLE_OPTION = {"option", "options", "choice", "letter", "选项"}
MARKUP = re.compile(r"\*+|`+")
SCORE_LINE = re.compile(r"\s*(?:[-•]\s*)?(?:score|rating|value|option|得分|分数|评分|选项)\s*[:=]\s*(.+)$", re.I)
AMBIGUOUS = "two readings: "  # the prefix of a value's note that fails the whole answer


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
    """Parse a model's answer against `rubric` (with `explain`, its reasons too); never raises."""
    try:
        parsed = (explain and _explained(text or "", rubric)) or _parse(text or "", rubric)
    except Exception as exc:  # the contract is "never raises": a parser bug must not stop a scoring run
        parsed = _failed(rubric, [f"parser error: {type(exc).__name__}: {exc}"])
    if parsed.status != "failed" and all(v is None for v in parsed.scores.values()):
        parsed = _failed(rubric, parsed.notes + ["no usable score"])
    parsed.quality = answer_quality(parsed.scores, rubric) if parsed.status != "failed" else None
    if explain and parsed.status != "failed":
        parsed.reasons = read_reasons(text or "", rubric)
    return parsed


def _explained(text: str, rubric: Rubric) -> ParsedAnswer | None:
    """An explain-mode answer that is exactly what was asked for, or None."""
    try:
        value = json.loads(text.strip())
    except ValueError:
        return None
    if not isinstance(value, dict) or list(value) != ["scores", "reasons"] or not isinstance(value["scores"], dict):
        return None
    strict = _strict(json.dumps(value["scores"]), rubric)
    return None if strict is None else ParsedAnswer(strict, "ok")


def read_reasons(text: str, rubric: Rubric) -> dict[str, str]:
    """The last whole `{…, "reasons": {…}}` object's reasons: rubric key → its stripped sentence, in rubric order;
    keys without a non-empty sentence are left out. Never raises."""
    try:
        for segment, complete, _label in reversed(_segments(THINK.sub("", text))):
            value = _loads_lenient(segment, []) if complete else None
            if isinstance(value, dict) and isinstance(value.get("reasons"), dict):
                found = {_alias(rubric, k): v.strip() for k, v in value["reasons"].items() if isinstance(v, str)}
                return {k: found[k] for k in rubric.keys if found.get(k)}
    except Exception:  # reasons are an addition: a reader bug must never fail the scores
        pass
    return {}


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
    normal = unicodedata.normalize("NFKC", body)
    if normal != body:
        notes.append("normalised the text (Unicode NFKC: full-width digits and punctuation)")
        body = normal
    body = _unfence(body, notes)
    if body is None:
        return _failed(rubric, notes + ["every code fence is labelled as something other than the answer"])

    start = body
    found = []  # (segment, closed, its mapping, the notes reading it made, usable, label), each segment read once
    for seg, complete, label in _segments(body):
        if _kind(label) == "other":
            notes.append(f"skipped an object labelled {label!r}")
            body = body.replace(seg, " ")  # nor is it read as free text
            continue
        seg_notes: list[str] = []
        mapping = _rubric_mapping(seg, complete, rubric, seg_notes)
        if isinstance(mapping, str):
            return _failed(rubric, notes + seg_notes + [mapping])
        if mapping is None:
            notes += seg_notes  # why it was not read ("ignored the scores under 'draft'")
            body = body.replace(seg, " ") if complete else body  # nor are its keys read as free text
        else:
            usable = any(_usable(rubric, k, v) for k, v in mapping.items())
            found.append((seg, complete, mapping, seg_notes, usable, _kind(label)))
    if found:
        closed = [i for i, f in enumerate(found) if f[1]]
        usable = [i for i in closed if found[i][4]]
        named = [i for i in usable if found[i][5] == "answer"]
        chosen = (named or usable or closed or [len(found) - 1])[-1]  # a cut-off one only if no whole one
        seg, complete, raw, seg_notes, _, _ = found[chosen]
        notes += seg_notes
        dims = [{_alias(rubric, k) for k in found[i][2]} - {None} for i in usable]
        if len(usable) > 1 and len(set().union(*dims)) == sum(map(len, dims)):  # one object per dimension
            raw = {k: v for i in usable for k, v in found[i][2].items()}
            notes.append(f"merged {len(usable)} objects that name different dimensions")
            for i in usable:
                body = body.replace(found[i][0], " ")
            found, seg = [found[chosen]], " "
        if len(found) > 1:
            later = found[chosen + 1:]
            rest = ("a later one was cut off" if any(not f[1] for f in later) else
                    "a later one was labelled or unusable" if later else "the earlier ones were ignored")
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
        pairs = _free_pairs(body, rubric, notes)
        if not pairs:
            return _failed(rubric, notes + ["no key matches a rubric dimension" if body != start else
                                            "no JSON object or key: value pairs found"])
        raw = _keep_last(pairs, notes)
        notes.append("read key: value pairs from free text")
        prose = body
    scores = _map(raw, rubric, notes, _stated_scale(prose))
    if isinstance(scores, str):
        return _failed(rubric, notes + [scores])
    return ParsedAnswer(scores, "repaired" if notes else "ok", notes)


def _strict(text: str, rubric: Rubric) -> dict[str, float | None] | None:
    """The scores of an answer that is exactly what was asked for, or None."""
    try:
        pairs = json.loads(text, object_pairs_hook=_Pairs)
    except ValueError:
        return None
    if not isinstance(pairs, _Pairs) or len(pairs) != len(rubric.keys) or {k for k, _ in pairs} != set(rubric.keys):
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


def _label(prefix: str) -> str:
    """The label written just before an object or a fence: the last line of the text before it, markup dropped."""
    lines = [line for line in prefix[-200:].splitlines() if line.strip()]  # a label is short
    return re.sub(r"[*#`_:=>\-\s]+$|^[*#`_\-\s]+", "", lines[-1]).strip() if lines else ""


def _kind(name) -> str | None:
    """"answer" for a name of the answer's container, "other" for a draft's, a confidence's, reasons'; else None."""
    words = re.findall(r"[a-z]+|[\u4e00-\u9fff]+", str(name).lower())
    if len(words) > 4:  # a sentence, not a label ("Here is my final assessment, with reasons:")
        return None
    joined = re.sub(r"[\s_\-]+", "", str(name).lower())
    if joined in OTHER_NAMES or any(w in OTHER_NAMES for w in words):
        return "other"
    if joined in ANSWER_NAMES or any(w in ANSWER_NAMES for w in words):
        return "answer"
    return None


def _unfence(body: str, notes: list[str]) -> str | None:
    """The answer's code fence unwrapped: the last one labelled as the answer, else the last one not labelled as
    something else; the body itself without fences; None when every fence is labelled as something else."""
    fences = list(FENCE.finditer(body))
    if not fences:
        return body
    kinds = [_kind(_label(body[(fences[i - 1].end() if i else 0): m.start()])) for i, m in enumerate(fences)]
    kept = [m for m, k in zip(fences, kinds) if k != "other"]
    if not kept:
        return None
    chosen = ([m for m, k in zip(fences, kinds) if k == "answer"] or kept)[-1]
    notes.append("removed a code fence" if len(fences) == 1 else
                 f"read code fence {fences.index(chosen) + 1} of {len(fences)}, removed the others")
    return chosen.group(1).strip()


def _segments(text: str) -> list[tuple[str, bool, str]]:
    """Every top-level {…} or […] in the text (quotes and // comments respected), with whether it is closed and the
    label before it; an unclosed one runs to the end of the text."""
    out, start, stack, quote, escaped, comment, last_end = [], None, [], None, False, False, 0
    for i, c in enumerate(text):
        if comment:
            comment = c != "\n"
        elif quote:
            escaped = c == "\\" and not escaped
            if c == quote and not escaped:
                quote = None
        elif c == '"' and stack:  # single quotes are apostrophes in prose; inside JSON they are repaired later
            quote = c
        elif stack and text.startswith("//", i):
            comment = True
        elif c in "{[":
            if not stack:
                start = i
            stack.append("}" if c == "{" else "]")
        elif stack and c == stack[-1]:
            stack.pop()
            if not stack:
                out.append((text[start: i + 1], True, _label(text[last_end:start])))
                last_end = i + 1
        elif stack and c in "}]":  # a mismatched closer: the segment is not well formed; start over
            stack, start = [], None
    if stack and start is not None:
        out.append((text[start:], False, _label(text[last_end:start])))
    return out


def _rubric_mapping(segment: str, complete: bool, rubric: Rubric, notes: list[str]) -> dict | str | None:
    """The key → value mapping of a segment that names at least one rubric dimension, None, or the reason the
    segment holds two answers."""
    if not complete:
        pairs = _free_pairs(segment, rubric, notes, cut_off=True)
        return _keep_last(pairs, notes) if pairs else None
    return _pick(_loads_lenient(segment, notes), rubric, notes)


def _pick(value, rubric: Rubric, notes: list[str], depth: int = 2) -> dict | str | None:
    """The mapping that holds the answer: the object's own keys where they name dimensions, or a container named as
    the answer, else the one unnamed container with scores, looked for up to `depth` levels down; never a container
    named as a draft, a confidence or reasons. Two that disagree: the reason, a string."""
    own = _as_mapping(value, notes)
    candidates = [(own, [])] if own is not None and any(_alias(rubric, k) for k in own) else []
    unnamed = []
    if isinstance(value, dict) and depth:
        for k, v in value.items():
            if _alias(rubric, k) is not None or not isinstance(v, (dict, list)):
                continue
            sub_notes = [f"read the scores under {k!r}"]
            mapping = _pick(v, rubric, sub_notes, depth - 1)
            if isinstance(mapping, str):
                return mapping
            if mapping is None or not any(_usable(rubric, mk, mv) for mk, mv in mapping.items()):
                continue
            kind = _kind(k)
            if kind == "other":
                notes.append(f"ignored the scores under {k!r}")
            else:
                (candidates if kind == "answer" else unnamed).append((mapping, sub_notes))
    usable = [c for c in candidates if any(_usable(rubric, k, v) for k, v in c[0].items())] or unnamed
    if len(usable) > 1:
        readings = {json.dumps(_readings(m, rubric), sort_keys=True) for m, _ in usable}
        if len(readings) > 1:
            return f"{AMBIGUOUS}the object holds {len(usable)} different answers"
    if usable:
        mapping, sub_notes = usable[0]
        notes += sub_notes
        return mapping
    return candidates[0][0] if candidates else None


def _readings(mapping: dict, rubric: Rubric) -> dict:
    return {dim: _value(_score_field(v), rubric, dim)[0] for k, v in mapping.items() if (dim := _alias(rubric, k))}


def _usable(rubric: Rubric, key, value) -> bool:
    """Whether a key names a rubric dimension and its value reads as a score."""
    dim = _alias(rubric, key)
    return dim is not None and _value(_score_field(value), rubric, dim)[0] is not None


def _score_field(value):
    """A nested object's score ({"score": 1, "reason": …}) or option ({"option": "b"}), both to agree where it gives
    both; or the value itself."""
    if isinstance(value, dict):
        given = [value[k] for k in value if str(k).lower() in SCORE_FIELDS + OPTION_FIELDS and value[k] is not None]
        return _Cells(given) if len(given) > 1 else given[0] if given else None
    return value


def _as_mapping(value, notes: list[str]) -> dict | None:
    if isinstance(value, dict):
        return value
    if isinstance(value, list) and value and all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], str)
                                                 for v in value):
        mapping = _keep_last([tuple(v) for v in value], notes)
        notes.append("read a list of [dimension, score] pairs")
        return mapping
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value) and not any(
            str(k).lower() in NAME_FIELDS for v in value for k in v):
        mapping = _keep_last([pair for item in value for pair in item.items()], notes)
        notes.append("merged a list of objects")
        return mapping
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


def _strip_comments(segment: str) -> str:
    """A JSON segment without its // and /* */ comments (quotes respected)."""
    out, i, quote = [], 0, None
    while i < len(segment):
        c = segment[i]
        if quote:
            out.append(c)
            if c == "\\":
                out.append(segment[i + 1: i + 2])
                i += 1
            elif c == quote:
                quote = None
        elif c in "\"'":
            quote = c
            out.append(c)
        elif segment.startswith("//", i):
            i = segment.find("\n", i)
            i = len(segment) if i < 0 else i
            continue
        elif segment.startswith("/*", i):
            i = segment.find("*/", i)
            i = len(segment) if i < 0 else i + 2
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _loads_lenient(segment: str, notes: list[str]):
    """A segment as JSON, or as a Python literal after repairs (comments, quotes, commas, bare keys); None if
    neither."""
    try:
        return _dedupe(json.loads(segment, object_pairs_hook=_Pairs), notes)
    except ValueError:
        pass
    bare = _strip_comments(segment)
    if bare != segment:
        notes.append("removed comments from the JSON")
        try:
            return _dedupe(json.loads(bare, object_pairs_hook=_Pairs), notes)
        except ValueError:
            pass
    fixed = bare.replace("“", '"').replace("”", '"').replace("‘", "'").replace("’", "'")
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
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal_pairs(v) for v in node.elts]
    return ast.literal_eval(node)


def _dedupe(value, notes: list[str]):
    if isinstance(value, _Pairs):
        return _keep_last([(k, _dedupe(v, notes)) for k, v in value], notes)
    if isinstance(value, list):
        return [_dedupe(v, notes) for v in value]
    return value


def _normal(key: str) -> str:
    key = re.sub(r"^\s*\d+[.)]\s*", "", str(key)).strip().lower()
    return re.sub(r"[\s\-_/]+", "", key)


def _alias(rubric: Rubric, key) -> str | None:
    """The dimension a key names: its key, English or own-language name (Chinese for Tang), maybe with "score" after
    it, or two of those names, one in parentheses (`情感共鸣（Emotional resonance）`) when both name the same dimension."""
    text = unicodedata.normalize("NFKC", str(key))
    outside, *inside = [p for p in re.split(r"[()]", text) if p.strip()] or [""]
    table, hits = _name_table(_names(rubric)), []
    for i, part in enumerate([outside, *inside]):
        form = _normal(part)
        dims = {table[f] for f in (form, KEY_SUFFIX.sub("", form)) if f in table}
        if not dims and i == 0:
            return None
        hits += dims  # a parenthesis that names no dimension is a remark ("Safety (a–c)")
    return hits[0] if len(set(hits)) == 1 else None


def _names(rubric: Rubric) -> tuple[tuple[str, ...], ...]:
    return tuple((d.key, *d.name.values()) for d in rubric.dimensions)  # English, then the tradition's own


@functools.lru_cache(maxsize=16)
def _name_table(names: tuple[tuple[str, ...], ...]) -> dict[str, str]:
    """Each name of a dimension, compared without case, spaces, hyphens or underscores → the dimension's key."""
    return {_normal(n): dim[0] for dim in names for n in dim}


@functools.lru_cache(maxsize=16)
def _key_pattern(names: tuple[tuple[str, ...], ...]) -> re.Pattern:
    """A dimension's name in free text, with its separator: `Safety:`, `**core imagery**:`, `"safety" =`,
    `情感共鸣(Emotional resonance):`, `Text integrity —`."""
    names = {n for dim in names for n in dim}
    forms = sorted((r"[\s_\-]*".join(map(re.escape, re.split(r"[\s_\-]+", n.strip()))) for n in names),
                   key=len, reverse=True)
    return re.compile(r"(?<![A-Za-z0-9_])[\"']?((?:" + "|".join(forms) + r")(?:[\s_]*(?:score|rating|得分|分数))?"
                      r"(?:\s*\([^()\n]{1,40}\))?)[\"']?" + SEPARATOR, re.I)


def _free_pairs(body: str, rubric: Rubric, notes: list[str], cut_off: bool = False) -> list[tuple[str, object]]:
    """(key, value text) pairs of free text: table rows and "key: value" entries, sections headed as a draft, a
    confidence or reasons skipped. With `cut_off`, the last value counts only if a separator ends it."""
    pattern, pairs, skipping = _key_pattern(_names(rubric)), [], False
    lines = MARKUP.sub(_markup, re.sub(r"(^|\s)//[^\n]*", r"\1", body)).splitlines()
    table = [line for line in lines if line.strip().startswith("|")]
    if len(table) >= 2:
        return _table_pairs(table, rubric, notes)
    pending = None  # a dimension named alone on its line (a heading), its score on a later "Score: …" line
    for line in lines:
        matches = list(pattern.finditer(line))
        if pending and not skipping and (score := SCORE_LINE.match(line)):
            pairs.append((pending, score.group(1)))
            pending = None
            continue
        if not matches:
            heading = _label(line) if re.fullmatch(r"\s*(?:#+\s*)?(?:\d+[.)]\s*)?[^\d:]{1,40}?[:：]?\s*", line) else ""
            if heading and _kind(heading):
                skipping = _kind(heading) == "other"
                if skipping:
                    notes.append(f"skipped the section {heading!r}")
            elif heading and _alias(rubric, re.sub(r"^\d+[.)]\s*", "", heading)):
                pending = heading
            continue
        inline = _kind(_label(line[:matches[0].start()]))
        if skipping or inline == "other":
            if inline == "other":
                notes.append(f"skipped the line {_label(line[:matches[0].start()])!r}")
            continue
        for m, nxt in zip(matches, matches[1:] + [None]):
            raw = line[m.end(): nxt.start() if nxt else len(line)]
            pairs.append((m.group(1).strip(), raw))
    if cut_off and pairs and not re.search(r"[,;\n]", pairs[-1][1]) and not body.endswith("\n"):
        pairs.pop()  # the last value may have been cut off mid-number: only what a separator ends is whole
    return [(k, _unquote(v)) for k, v in pairs]


def _markup(m: re.Match) -> str:
    """Markdown emphasis and code marks dropped, but not the ** of a power (10**1000: no score either way)."""
    text, start, end = m.string, m.start(), m.end()
    power = m.group(0).startswith("*") and start and text[start - 1].isdigit() and text[end: end + 1].isdigit()
    return m.group(0) if power else ""


def _unquote(raw: str):
    """A free-text value: its text, trimmed of separators and quotes, or the score field of a nested object."""
    value = raw.strip().rstrip(",;，；}]").strip()
    if value.startswith("{"):
        m = re.search(r"(?:score|value)[\"']?\s*[:=]\s*(" + NUMBER + r"|null|None)", value)
        return None if not m or m.group(1) in ("null", "None") else m.group(1)
    if value[:1] in "\"'" and value[-1:] == value[:1] and len(value) > 1:
        return value[1:-1]
    return None if value in ("null", "None") else value


class _Cells(list):
    """Several values given for one dimension (a table row's cells, a nested object's score and option): each read
    on its own; readings that disagree fail the answer."""


def _table_pairs(rows: list[str], rubric: Rubric, notes: list[str]) -> list[tuple[str, object]]:
    """(key, cells) of a markdown table's rows; a header names the score and option columns where it has them."""
    cells = [[c.strip() for c in row.strip().strip("|").split("|")] for row in rows]
    columns: list[int] | None = None
    if len(cells) > 1 and all(re.fullmatch(r":?-{2,}:?", c) for c in cells[1] if c):
        header = [_normal(c) for c in cells[0]]
        columns = [i for i, h in enumerate(header) if KEY_SUFFIX.sub("", h) in TABLE_SCORE | {""} and h
                   or h in TABLE_OPTION or h.startswith("score") or h.startswith("option")]
        cells = cells[2:]
    pairs = []
    for row in cells:
        key = next((i for i, c in enumerate(row) if _alias(rubric, c)), None)
        if key is None:
            continue
        chosen = [c for i, c in enumerate(row) if i != key and (columns is None or i in columns)]
        pairs.append((row[key], _Cells(chosen)))
    notes.append("read a markdown table")
    return pairs


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
        value, how = _value(_score_field(found[key]), rubric, key)
        if how.startswith(AMBIGUOUS):
            return f"{key}: {how}"
        if how.startswith("plain"):
            plain[key] = value
            if how != "plain":
                notes.append(f"{key}: {how.removeprefix('plain: ')}")
        elif how != "ok":
            notes.append(f"{key}: {how}")
        elif value is None and not excludable(rubric, key):
            notes.append(f"{key}: null, but this dimension always applies")
        values[key] = value
    problem = _apply_scale(plain, values, notes, stated, rubric)
    if problem:
        return problem
    for key, value in values.items():
        if value is not None and not 0 <= value <= 1:
            notes.append(f"{key}: {value:g} is out of range, set to null")
            values[key] = None
    return values


def _value(value, rubric: Rubric, key: str) -> tuple[float | None, str]:
    """(score, how): how is "ok", "plain" (a bare number, its scale to settle; "plain: note" for one written as text),
    a note on what was done, or a note starting with AMBIGUOUS, which fails the answer."""
    if value is None:
        return None, "ok"
    if isinstance(value, bool):
        return None, f"{value!r} is not a score, set to null"
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            return None, f"{value} is not a score, set to null"
        return float(value), "plain"
    if isinstance(value, _Cells):
        return _cells_value(value, rubric, key)
    if not isinstance(value, str):
        return None, f"{value!r} is not a score, set to null"
    return _text_value(value, rubric.dimension(key))


def _cells_value(cells: _Cells, rubric: Rubric, key: str) -> tuple[float | None, str]:
    """The one reading of several values for one dimension (a table row's score and option columns, a nested
    object's score and option): they must agree."""
    read = [r for r in (_value(c, rubric, key) for c in cells) if r[0] is not None or r[1].startswith(AMBIGUOUS)]
    if any(how.startswith(AMBIGUOUS) for _, how in read):
        return next(r for r in read if r[1].startswith(AMBIGUOUS))
    if len({round(v, 6) for v, _ in read}) > 1:
        return None, f"{AMBIGUOUS}{' | '.join(map(str, cells))} give different scores"
    if not read:
        nulls = [r for r in (_value(c, rubric, key) for c in cells) if "null" in r[1] and "not a" not in r[1]]
        return nulls[0] if nulls else (None, f"{' | '.join(map(str, cells))!r} is not a score, set to null")
    plain = [r for r in read if r[1].startswith("plain")]
    return plain[0] if plain and len(plain) == len(read) else next(r for r in read if not r[1].startswith("plain"))


def _text_value(value: str, dim: Dimension) -> tuple[float | None, str]:
    """A value written as text: an N/A word, an option letter or label, a number (maybe a fraction or a percent)."""
    text = value.strip().rstrip(" .。;,").strip()
    if text.lower() in NULL_WORDS:
        return None, f"{text!r} read as null"
    if letter := _option(text, dim):
        return letter
    if m := DECIMAL_COMMA.match(text):
        whole, frac = m.groups()
        if whole != "0" and len(frac) == 3:
            return None, f"{AMBIGUOUS}{text!r} is a decimal comma or a thousands separator"
        text = f"{whole}.{frac}{text[m.end():]}"
    m = SCORE_NUMBER.match(text)
    if not m:
        return None, f"{text!r} is not a score, set to null"
    rest = text[m.end():]
    if re.match(r"\s*[A-Za-z\u4e00-\u9fff]", rest) and not COUNT_OK.match(rest) and not CONNECTOR.match(rest) \
            and float(m.group(1)).is_integer():
        return None, f"{text!r} is a count, not a score, set to null"
    if rival := RIVAL.search(re.sub(r"\([^()]*\)", " ", COUNT_OK.sub(" ", rest, count=1))):
        return None, f"{AMBIGUOUS}{text!r} gives {m.group(0)} and {rival.group(0).strip()} (a range or a correction)"
    number = float(m.group(1))
    if not math.isfinite(number):
        return None, f"{text!r} is not a score, set to null"
    beside = re.match(r"\s*\(\s*(?:option\s*)?([a-f])\s*[):.,]", rest, re.I)  # "0.75 (b)", "0.5 (c: poor)"
    if beside and not m.group(2) and not m.group(3) and number <= 1 and beside.group(1).lower() in dim.letters:
        option = dim.option(beside.group(1).lower())
        if option.score is None or abs(option.score - number) > 0.005:
            return None, f"{AMBIGUOUS}{text!r} gives the score {m.group(1)} and option {option.letter!r}"
    if m.group(2):
        return number / 100, f"{m.group(0)} read as {number / 100:g}"
    if m.group(3):
        den = float(m.group(3))
        if den > 0:
            return number / den, f"{m.group(0)} read as {number / den:g}"
        return None, f"{text!r} is not a score, set to null"
    return number, f"plain: read the text {text!r} as a number"


def _option(text: str, dim: Dimension) -> tuple[float | None, str] | None:
    """(score, note) of an option letter, maybe with its label, or of an option's label alone; None for neither."""
    labels = {o.letter: {_normal(v) for v in o.label.values()} for o in dim.options}
    by_label = [o for o in dim.options if _normal(text) in labels[o.letter]]
    m = LETTER.match(text)
    if not m and not by_label:
        return None
    if m:
        letter = (m.group(1) or m.group(2)).lower()
        rest = re.sub(r"^\(|\)$", "", m.group(3).strip().rstrip(".")).strip()
        if letter not in dim.letters:
            return None, f"{text!r} is not an option of {dim.key}, set to null"
        named = [o.letter for o in dim.options if rest and _normal(rest) in labels[o.letter]]
        if named and letter not in named:
            return None, f"{AMBIGUOUS}{text!r} names option {letter!r} and the label of option {named[0]!r}"
        option = dim.option(letter)
        number = re.fullmatch(rf"\s*({NUMBER})\s*", rest)
        if number and (option.score is None or abs(float(number.group(1)) - option.score) > 0.005):
            return None, f"{AMBIGUOUS}{text!r} names option {letter!r} and the score {number.group(1)}"
    else:
        option = by_label[0]
    score = option.score
    how = "null (excluded)" if score is None else f"{score:g}"
    return score, f"option {option.letter!r} read as {how}" if m else f"{text!r} is option {option.letter!r}: {how}"


def _apply_scale(plain: dict[str, float], values: dict[str, float | None], notes: list[str], stated,
                 rubric: Rubric) -> str | None:
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
    if stated is None and any(0 < v < 1 for v in nums):
        return None  # the 0–1 scale asked for: a number above 1 beside fractions of 1 is out of range
    if stated is None and not 10 < max(nums) <= 100:
        return (f"numbers up to {max(nums):g} with no stated scale: 0–10, 1–5 and 0–100 would all read them, "
                "so none does")
    low, high = stated or (0.0, 100.0)
    if (low, high) == (0.0, 1.0):
        return None
    binary = [k for k, v in plain.items() if v == 1 and set(rubric.dimension(k).scores) == {0.0, 1.0}]
    if binary:
        return (f"{binary[0]}: 1 is the better of its two options on 0–1, or 1 on the {low:g}–{high:g} scale the "
                "other numbers are on")
    notes.append(f"numbers on the stated {low:g}–{high:g} scale, mapped to 0–1" if stated else
                 "numbers above 10 with no stated scale: read on 0–100")
    for key, v in plain.items():
        inside = low <= v <= high
        values[key] = (v - low) / (high - low) if inside else None
        if not inside:
            notes.append(f"{key}: {v:g} is outside the stated scale, set to null")
    return None


# --- the recognizability answer: one letter ------------------------------------------------------------------------

LETTER_PARSER_VERSION = 1
# A capital letter standing alone: not inside a word ("A moonlit" has its A standing alone too, and fails below).
STANDALONE_LETTER = re.compile(r"(?<![A-Za-z])([A-H])(?![A-Za-z])")
BARE_LETTER = re.compile(r"^\s*[(（【\[]?([A-H])[)）】\].。:：]?\s*$")


@dataclass
class ParsedLetter:
    letter: str | None
    status: str  # ok | repaired | failed
    error: str | None = None


def parse_letter(text: str | None, n_options: int = 4) -> ParsedLetter:
    """The option letter of a multiple-choice answer. `ok`: the answer is the letter alone (maybe bracketed or with a
    full stop); `repaired`: one letter of the options stands alone in a longer answer ("答案：B", "The answer is
    B."); `failed`: none, or two different ones (never guessed). Never raises."""
    body = text or ""
    if "</think>" in body:  # the answer follows the thinking
        body = body.rpartition("</think>")[2]
    body = THINK.sub("", body).strip()
    valid = "ABCDEFGH"[:n_options]
    if bare := BARE_LETTER.match(body):
        letter = bare.group(1)
        return ParsedLetter(letter, "ok") if letter in valid else ParsedLetter(None, "failed", f"no option {letter}")
    found = sorted({m for m in STANDALONE_LETTER.findall(body) if m in valid})
    if len(found) == 1:
        return ParsedLetter(found[0], "repaired", "read the letter from a longer answer")
    if not found:
        return ParsedLetter(None, "failed", "no option letter in the answer" if body else "empty answer")
    return ParsedLetter(None, "failed", f"several option letters ({', '.join(found)}): not guessed")


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
    objects = [(seg, v) for seg, complete, _label in _segments(body) if complete
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
