"""Reading a judge's rubric scores. Never raises, and never guesses.

The rule: a careful human reading the answer beside the rubric agrees with every score the reader returns, or the
reader returns none. Where two readings remain, the answer fails; a value that is not a score is null.

1. The core comes first (`core`): NFKC, the thinking dropped, struck-through text deleted, code fences opened.
2. The answer is the last whole JSON object that names a rubric dimension with a usable score (`//` and `/* */`
   comments removed) — directly, in a container named as the answer (`scores`, `final`, `answer`; never one named
   `confidence`, `draft`, `reasons`), or as a list of `{"dimension": …, "score": …}` or `[dimension, score]` pairs;
   objects that each name other dimensions are merged. A nested object gives its score or its option (both must
   agree). Two containers that disagree (`scores` and `final`) fail. An object labelled in the prose as a draft, a
   confidence, reasons, an example or a format is skipped. Two answer objects that disagree fail, unless the later
   one is labelled or introduced as a correction or as final ("Correction:", "On reflection:", "Final:"), which
   then corrects the earlier one (dimension by dimension where it names fewer). An object that does not load as a
   whole (a reason broken by an unescaped quote) gives the named objects inside it that do (`"scores": {…}`). An
   object cut off before its closing brace is read only when there is no whole one, and fails unless every
   dimension made it, each value ended by a separator.
3. Prose after the answer that corrects it ("Wait, core_imagery should be 0.33", "更正：核心意象应为0.33") is read
   where it is unambiguous: one value for each dimension it names; a correction without a readable value, two
   values, or "wait, that's wrong" fails the answer. Prose after it that gives a dimension another value without
   a correction ("Core imagery: 0.33" after 0.67 in the object) fails it too.
4. Without an object, "key: value" pairs are read from the text: a dimension's key, English or Chinese name (also
   `core_imagery_score`, `情感共鸣（Emotional resonance）`, `**Safety**`), then `:`, `=` or a dash, then the value;
   a dimension's heading with a later "Score: …" line; markdown table rows (a score column and an option column
   must agree). Sections headed as a draft, a confidence or reasons are skipped. A later line that corrects an
   earlier one ("On second thought, overall impression: 0.75", "Wait, core imagery should be 0.33") is read.
5. A key given twice with the same value is read once; with different values (and no correction) it fails.
6. A value is a number (`0.67`, `.5`, `0,67`, `80%`, `4/5`, `4 out of 5`), an option letter with or without its
   label (`b`, `(b)`, `b: minor flaws`, `a (coherent)`) or an option's label alone, or an "N/A" word (null).
   A number followed by a noun is a count (`0 issues found`), not a score: null. A range (`0.33–0.67`) or a
   correction inside one value (`0.67, actually 0.33`, `0.75 → 0.5`) leaves two readings: the answer fails; so does
   a letter whose label is another option's.
7. Numbers are on the 0–1 scale the prompt asks for. Another scale counts only when it is stated — in the value
   ("4/5", "4 out of 5", "80%") or in the prose around the answer ("on a 1-5 scale", "scale of 0 to 10",
   "out of 10") — and only for numbers above 1. Unstated, numbers above 1 are read as 0–100 when one is above
   10 and none is a fraction of 1; a value above 1 beside fractions such as 0.67 is out of range; any other
   number above 1 (0–10? 1–5?) fails the answer, as do 1s under a stated 1–5 scale (best or worst?) and a 1 on a
   two-option dimension under any scale but 0–1 (the best option, or 1 of 100?).

`ok`: the whole answer is one JSON object with exactly the rubric's keys, once each, every value a number in
[0, 1] (or null where the dimension can be excluded). `repaired`: scores were read, and the notes say every
repair. `failed`: nothing usable — no rubric key, every score null, a truncated object, two readings. `quality` is
the mean of the scores, and null unless every dimension that always applies has one.

Explain mode (`explain=True`): `ok` is also `{"scores": <the plain answer>, "reasons": {…}}` exactly; anything else
is read by the rules above (the scores one level down). The reasons are read apart (`reasons.read_reasons`), never
instead of the scores: a broken reason loses that reason, never a score.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from ...numeric import whole_mean
from ...rubric import Dimension, Rubric
from .core import (CORRECTION, EARLIER, STRONG_CORRECTION, Conflict, Pairs, collect, is_final, kind, label, loads,
                   prepare, salvage, segments, sentences)
from .dimensions import KEY_SUFFIX, alias, key_pattern, mention_pattern, names, normal
from .reasons import read_reasons

NULL_WORDS = {"null", "none", "n/a", "na", "nan", "excluded", "not applicable", "not_applicable", "不适用", "无"}
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
TABLE_SCORE = {"score", "scores", "rating", "value", "分数", "得分", "评分"}
TABLE_OPTION = {"option", "options", "choice", "letter", "选项"}
MARKUP = re.compile(r"\*+|`+")
SCORE_LINE = re.compile(r"\s*(?:[-•]\s*)?(?:score|rating|value|option|得分|分数|评分|选项)\s*[:=]\s*(.+)$", re.I)
# A value in a correction: a number (maybe a fraction or a percentage) or a bracketed option letter.
CORRECTED_VALUE = re.compile(rf"(?<![A-Za-z0-9.]){NUMBER}(?:\s*%|\s*(?:/|out of)\s*{NUMBER})?(?![\d.]*\d)"
                             r"|\(\s*[a-f]\s*\)|\boption\s+[a-f]\b|\b(?:null|n/a|excluded)\b", re.I)
# A value given before the dimension it corrects: "I meant 0.33 for core imagery".
VALUE_FOR = re.compile(rf"({NUMBER})\s*(?:for|on|in)\s*(?:the\s+)?$", re.I)
HEDGED = re.compile(r"\b(?:closer to|around|about|roughly|approximately|maybe|perhaps|probably|or so|somewhere|"
                    r"something like)\b|-ish\b|大约|左右|也许|可能", re.I)
OLD_VALUE = re.compile(rf"(?:\brather than|\binstead of|\bnot|\bfrom|不是|而非|而不是)\s*(?:{NUMBER}\s*%?|\(\s*[a-f]\s*\))",
                       re.I)
# A value given to a dimension in plain prose, right after its name: "Core imagery: 0.33", "safety is 1".
DIRECT_VALUE = re.compile(rf"^\s*(?:score|rating)?\s*(?:[:=|]|\bis\b|\bof\b|\bat\b|\bgets?\b|\()\s*({NUMBER}%?)"
                          r"(?![\d.]*\d)", re.I)
LATER_ONE = re.compile(r"\b(?:second|last|latter|later|final|bottom|corrected|revised)\s+(?:block|object|one|answer|"
                       r"version|json|scores)\b", re.I)
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
    """Read a model's answer against `rubric` (with `explain`, its reasons too); never raises."""
    try:
        parsed = (explain and _explained(text or "", rubric)) or _parse(text or "", rubric)
    except Exception as exc:  # the contract is "never raises": a reader bug must not stop a scoring run
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
        pairs = json.loads(text.strip(), object_pairs_hook=Pairs)
    except ValueError:
        return None
    if not isinstance(pairs, Pairs) or [k for k, _ in pairs] != ["scores", "reasons"]:
        return None
    strict = _strict_pairs(pairs[0][1], rubric)
    return None if strict is None else ParsedAnswer(strict, "ok")


def _failed(rubric: Rubric, notes: list[str]) -> ParsedAnswer:
    return ParsedAnswer({k: None for k in rubric.keys}, "failed", notes)


@dataclass
class _Found:
    """A JSON segment that names a rubric dimension, read."""

    segment: object  # core.Segment
    mapping: dict
    notes: list[str]
    usable: bool
    kind: str | None


def _parse(text: str, rubric: Rubric) -> ParsedAnswer:
    if (strict := _strict(text.strip(), rubric)) is not None:
        return ParsedAnswer(strict, "ok")
    notes: list[str] = []
    body, struck = prepare(text, notes)
    if not body.strip():
        return _failed(rubric, notes + ["empty answer"])

    start = body
    found: list[_Found] = []
    for seg in segments(body):
        if kind(seg.label) == "other":
            notes.append(f"skipped an object labelled {seg.label!r}")
            body = _blank(body, seg)  # nor is it read as free text
            continue
        seg_notes: list[str] = []
        mapping = _rubric_mapping(seg, rubric, seg_notes)
        if isinstance(mapping, str):
            return _failed(rubric, notes + seg_notes + [mapping])
        if mapping is None:
            notes += seg_notes  # why it was not read ("ignored the scores under 'draft'")
            body = _blank(body, seg) if seg.closed else body  # nor are its keys read as free text
        else:
            usable = any(_usable(rubric, k, v) for k, v in mapping.items())
            found.append(_Found(seg, mapping, seg_notes, usable, kind(seg.label)))
    if found:
        chosen = _choose(found, body, rubric, notes)
        if isinstance(chosen, str):
            return _failed(rubric, notes + [chosen])
        raw, complete, end = chosen
        if body.strip() != found[-1].segment.text.strip() or len(found) > 1:
            notes.append("removed text around the JSON object")
        if not complete:
            present = {alias(rubric, k) for k in raw} - {None}
            if len(present) < len(rubric.keys):
                return _failed(rubric, notes + [f"the answer was cut off: {len(present)} of {len(rubric.keys)} "
                                                 "dimensions complete before the end"])
            notes.append("the object was not closed")
        for f in found:
            body = _blank(body, f.segment)
        units = [(end + start, sentence) for start, sentence in sentences(body[end:])]
        raw = _corrections(units, rubric, raw, notes, struck, direct=True)
        prose = body  # a scale is stated in the prose, not inside the answer's own strings
    else:
        pairs, overrides, loose = _free_pairs(body, rubric, notes)
        if not pairs:
            return _failed(rubric, notes + ["no key matches a rubric dimension" if body != start else
                                            "no JSON object or key: value pairs found"])
        raw = collect([(k, v) for k, v, _ in pairs], notes, overrides, lambda k: alias(rubric, k))
        last = {}
        for key, _, at in pairs:
            last[alias(rubric, key)] = at
        units = [(at + start, sentence) for at, line in loose for start, sentence in sentences(line)]
        raw = _corrections(units, rubric, raw, notes, struck, after=last)
        notes.append("read key: value pairs from free text")
        prose = body
    if isinstance(raw, str):
        return _failed(rubric, notes + [raw])
    scores = _map(raw, rubric, notes, _stated_scale(prose))
    if isinstance(scores, str):
        return _failed(rubric, notes + [scores])
    return ParsedAnswer(scores, "repaired" if notes else "ok", notes)


def _blank(body: str, seg) -> str:
    """The body with a segment's characters blanked (its lines kept), so that positions after it stay put."""
    return body[:seg.start] + re.sub(r"[^\n]", " ", seg.text) + body[seg.end:]


def _choose(found: list[_Found], body: str, rubric: Rubric, notes: list[str]) -> tuple[dict, bool, int] | str:
    """(the answer's mapping, whether it is whole, where it ends) from the objects found, or why it cannot be
    chosen: a whole one over a cut-off one; objects that name different dimensions merged; objects that agree read
    together; of objects that disagree, a later one labelled or introduced as a correction or as final."""
    closed = [f for f in found if f.segment.closed]
    usable = [f for f in closed if f.usable]
    if len(usable) <= 1:
        chosen = (usable or closed or found)[-1]
        notes.extend(chosen.notes)
        if len(found) > 1:
            i = found.index(chosen)
            later = found[i + 1:]
            rest = ("a later one was cut off" if any(not f.segment.closed for f in later) else
                    "a later one was labelled or unusable" if later else "the earlier ones were ignored")
            notes.append(f"read answer object {i + 1} of {len(found)}; {rest}")
        return chosen.mapping, chosen.segment.closed, chosen.segment.end
    for f in usable:
        notes.extend(f.notes)
    dims = [{alias(rubric, k) for k in f.mapping} - {None} for f in usable]
    readings = [_readings(f.mapping, rubric) for f in usable]
    if len(set().union(*dims)) == sum(map(len, dims)):  # one object per dimension
        notes.append(f"merged {len(usable)} objects that name different dimensions")
        return {k: v for f in usable for k, v in f.mapping.items()}, True, usable[-1].segment.end
    if all(r.get(d) == readings[0].get(d) for r in readings for d in set(r) & set(readings[0])):
        notes.append(f"read {len(usable)} answer objects that agree")
        return {k: v for f in usable for k, v in f.mapping.items()}, True, usable[-1].segment.end
    last, before = usable[-1], usable[-2]
    between, later = body[before.segment.end:last.segment.start], body[last.segment.end:]
    named = CORRECTION.search(later) and LATER_ONE.search(later)  # "The second block is my corrected answer."
    if not (last.kind == "correction" or is_final(last.segment.label) or CORRECTION.search(between) or named):
        return f"{AMBIGUOUS}{len(usable)} answer objects that disagree, none of them a correction"
    i = found.index(last)
    notes.append(f"read answer object {i + 1} of {len(found)}, a correction; the earlier ones were ignored")
    mapping = {alias(rubric, k) or k: v for k, v in last.mapping.items()}
    if dims[-1] < dims[-2]:  # a correction of some dimensions: the rest stand as the earlier answer gave them
        mapping = {**{alias(rubric, k) or k: v for k, v in before.mapping.items()}, **mapping}
    return mapping, True, last.segment.end


def _corrections(units: list[tuple[int, str]], rubric: Rubric, raw: dict, notes: list[str], struck: list[int],
                 direct: bool = False, after: dict[str, int] | None = None) -> dict | str:
    """The answer's mapping with the corrections written in `units` ((position, sentence) after the answer, or the
    free text's loose lines) applied, or why the answer cannot be read. A sentence with a correction word (or a
    deletion: `struck`, where struck-through text stood; or right after a sentence that is only a correction word,
    "Hmm, wait.") gives each dimension it names one value; with `direct`, a sentence without one that gives a named
    dimension another value right after its name contradicts the answer, unless it speaks of an earlier version ("In
    the draft I had core_imagery: 0.33"; with a correction word too, it leaves two readings). `after`: where each
    dimension's own value stands (a correction must come later)."""
    mention, out, pending = mention_pattern(names(rubric)), dict(raw), ""
    keys = {alias(rubric, k): k for k in raw}
    for start, sentence in units:
        found = list(mention.finditer(sentence))
        if kind(label(sentence[:found[0].start()] if found else sentence)) == "other":
            continue  # "Confidence: core_imagery: 0.9"
        marked = pending or CORRECTION.search(sentence) or any(start <= at <= start + len(sentence) for at in struck)
        pending = ""
        if not found:
            if marked and len(re.findall(r"\w+", sentence)) <= 3 and not CORRECTED_VALUE.search(sentence):
                pending = sentence  # "Hmm, wait." corrects the sentence after it
            elif STRONG_CORRECTION.search(sentence) or marked and CORRECTED_VALUE.search(sentence):
                return f"a correction after the answer that names no dimension: {sentence.strip()!r}"
            continue
        for i, (m, nxt) in enumerate(zip(found, found[1:] + [None])):
            dim = alias(rubric, m.group(0).strip("\"'` "))
            window = sentence[m.end(): nxt.start() if nxt else len(sentence)]
            history = EARLIER.search(sentence[:m.start()])  # "In the draft I had core_imagery: 0.33"
            if marked and history:
                return f"{dim}: {AMBIGUOUS}the correction {sentence.strip()!r} also gives an earlier version"
            if marked:
                values = {v.group(0).strip() for v in CORRECTED_VALUE.finditer(OLD_VALUE.sub(" ", window))
                          if not _count(window[v.end():], v.group(0))}
                earlier = VALUE_FOR.search(sentence[found[i - 1].end() if i else 0: m.start()])
                values |= {earlier.group(1)} if earlier and not values else set()
                if not values and _confirms(window, out.get(keys.get(dim)), rubric, dim):
                    continue  # "Wait, text integrity… no text is visible, so 1 stands": the answer's own value
                if len(values) != 1 or HEDGED.search(window):
                    return (f"{dim}: {AMBIGUOUS}the correction {sentence.strip()!r} is not one value"
                            if values else f"{dim}: a correction without a score it can read: {sentence.strip()!r}")
                value = values.pop()
                if after and after.get(dim, -1) > start:
                    return f"{dim}: {AMBIGUOUS}a correction before the value it would correct"
                if _reading(out.get(keys.get(dim)), rubric, dim) != _reading(value, rubric, dim):
                    notes.append(f"{dim}: read the correction after the answer ({value})")
                out[keys.get(dim, dim)] = value
            elif direct and not history and (given := DIRECT_VALUE.match(window)) and dim in keys and not _count(
                    window[given.end():], given.group(1)):
                said, answered = _reading(given.group(1), rubric, dim), _reading(out[keys[dim]], rubric, dim)
                if said is not None and answered is not None and abs(said - answered) > 1e-9:
                    return f"{dim}: {AMBIGUOUS}the prose after the answer gives {given.group(1)}, the answer another"
    if pending and STRONG_CORRECTION.search(pending):  # "Just kidding." last: nothing after it corrects the answer
        return f"a correction after the answer that names no dimension: {pending.strip()!r}"
    return out


def _confirms(window: str, value, rubric: Rubric, dim: str | None) -> bool:
    """Whether every number a sentence gives a dimension is the value the answer already gave it."""
    given = [float(n) for n in re.findall(rf"(?<![A-Za-z0-9.]){NUMBER}", window)]
    answered = _reading(value, rubric, dim)
    return bool(given) and answered is not None and all(abs(n - answered) < 1e-9 for n in given)


def _count(rest: str, number: str) -> bool:
    """Whether a whole number followed by `rest` is a count ("2 herons", "0 issues found"), not a score."""
    whole = re.match(NUMBER, number.strip())
    return bool(re.match(r"\s*[A-Za-z\u4e00-\u9fff]", rest) and not COUNT_OK.match(rest)
                and not CONNECTOR.match(rest) and whole and float(whole.group(0)).is_integer())


def _reading(value, rubric: Rubric, dim: str | None) -> float | None:
    return None if dim is None or value is None else _value(_score_field(value), rubric, dim)[0]


def _strict(text: str, rubric: Rubric) -> dict[str, float | None] | None:
    """The scores of an answer that is exactly what was asked for, or None."""
    try:
        return _strict_pairs(json.loads(text, object_pairs_hook=Pairs), rubric)
    except ValueError:
        return None


def _strict_pairs(pairs, rubric: Rubric) -> dict[str, float | None] | None:
    if not isinstance(pairs, Pairs) or len(pairs) != len(rubric.keys) or {k for k, _ in pairs} != set(rubric.keys):
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


def _rubric_mapping(seg, rubric: Rubric, notes: list[str]) -> dict | str | None:
    """The key → value mapping of a segment that names at least one rubric dimension, None, or the reason the
    segment holds two answers."""
    if seg.closed:
        value = loads(seg.text, notes)
        return _pick(value if value is not None else salvage(seg.text, notes), rubric, notes)
    saved_notes: list[str] = []
    saved = _pick(salvage(seg.text, saved_notes), rubric, saved_notes)
    if isinstance(saved, dict) and any(_usable(rubric, k, v) for k, v in saved.items()):
        notes += saved_notes
        return saved
    pairs, overrides, _ = _free_pairs(seg.text, rubric, notes, cut_off=True)
    return collect([(k, v) for k, v, _ in pairs], notes, overrides) if pairs else None


def _pick(value, rubric: Rubric, notes: list[str], depth: int = 2) -> dict | str | None:
    """The mapping that holds the answer: the object's own keys where they name dimensions, or a container named as
    the answer, else the one unnamed container with scores, looked for up to `depth` levels down; never a container
    named as a draft, a confidence or reasons. Two that disagree: the reason, a string."""
    own = _as_mapping(value, notes)
    candidates = [(own, [])] if own is not None and any(alias(rubric, k) for k in own) else []
    unnamed = []
    if isinstance(value, dict) and depth:
        for k, v in value.items():
            if alias(rubric, k) is not None or not isinstance(v, (dict, list)):
                continue
            if isinstance(v, Conflict):
                if kind(k) != "other" and any(isinstance(_pick(x, rubric, [], depth - 1), dict) for x in v):
                    return f"{AMBIGUOUS}the object gives {k!r} twice, differently"
                continue
            sub_notes = [f"read the scores under {k!r}"]
            mapping = _pick(v, rubric, sub_notes, depth - 1)
            if isinstance(mapping, str):
                return mapping
            if mapping is None or not any(_usable(rubric, mk, mv) for mk, mv in mapping.items()):
                continue
            container = kind(k)
            if container == "other":
                notes.append(f"ignored the scores under {k!r}")
            else:
                (candidates if container else unnamed).append((mapping, sub_notes))
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
    return {dim: _value(_score_field(v), rubric, dim)[0] for k, v in mapping.items() if (dim := alias(rubric, k))}


def _usable(rubric: Rubric, key, value) -> bool:
    """Whether a key names a rubric dimension and its value reads as a score."""
    dim = alias(rubric, key)
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
    if isinstance(value, Conflict) or not isinstance(value, list) or not value:
        return None
    if all(isinstance(v, list) and len(v) == 2 and isinstance(v[0], str) for v in value):
        mapping = collect([tuple(v) for v in value], notes)
        notes.append("read a list of [dimension, score] pairs")
        return mapping
    if all(isinstance(v, dict) for v in value) and not any(str(k).lower() in NAME_FIELDS for v in value for k in v):
        mapping = collect([pair for item in value for pair in item.items()], notes)
        notes.append("merged a list of objects")
        return mapping
    if all(isinstance(v, dict) for v in value):
        pairs = []
        for item in value:
            lower = {str(k).lower(): v for k, v in item.items()}
            name = next((lower[f] for f in NAME_FIELDS if f in lower), None)
            if name is None or not any(f in lower for f in SCORE_FIELDS):
                return None
            pairs.append((str(name), next(lower[f] for f in SCORE_FIELDS if f in lower)))
        mapping = collect(pairs, notes)
        notes.append("read a list of dimension/score pairs")
        return mapping
    return None


def _free_pairs(body: str, rubric: Rubric, notes: list[str], cut_off: bool = False):
    """([(key, value text, position)], the indices of pairs that correct an earlier one, [(position, line)] of the
    lines that hold no pair) of free text: table rows and "key: value" entries, sections headed as a draft, a
    confidence or reasons skipped. With `cut_off`, the last value counts only if a separator ends it."""
    pattern, pairs, overrides, loose = key_pattern(names(rubric)), [], set(), []
    skipping = correcting = False
    text = MARKUP.sub(_markup, re.sub(r"(^|\s)//[^\n]*", r"\1", body))
    lines = text.splitlines()
    table = [line for line in lines if line.strip().startswith("|")]
    if len(table) >= 2:
        return [(k, v, 0) for k, v in _table_pairs(table, rubric, notes)], set(), []
    pending = None  # a dimension named alone on its line (a heading), its score on a later "Score: …" line
    at = 0
    for line in lines:
        here, at = at, at + len(line) + 1
        matches = list(pattern.finditer(line))
        if pending and not skipping and (score := SCORE_LINE.match(line)):
            pairs.append((pending, score.group(1), here))
            pending = None
            continue
        if not matches:
            heading = label(line) if re.fullmatch(r"\s*(?:#+\s*)?(?:\d+[.)]\s*)?[^\d:]{1,40}?[:：]?\s*", line) else ""
            if heading and kind(heading):
                skipping, correcting = kind(heading) == "other", kind(heading) == "correction"
                if skipping:
                    notes.append(f"skipped the section {heading!r}")
                if correcting:
                    loose.append((here, line))  # "Wait, that's wrong." takes back what came before
            elif heading and alias(rubric, re.sub(r"^\d+[.)]\s*", "", heading)):
                pending = heading
            elif not skipping:
                loose.append((here, line))
            continue
        before = line[:matches[0].start()]
        inline = kind(label(before))
        if skipping or inline == "other":
            if inline == "other":
                notes.append(f"skipped the line {label(before)!r}")
            continue
        corrects = correcting or bool(CORRECTION.search(before))
        for m, nxt in zip(matches, matches[1:] + [None]):
            if corrects:
                overrides.add(len(pairs))
            pairs.append((m.group(1).strip(), line[m.end(): nxt.start() if nxt else len(line)], here))
    if cut_off and pairs and not re.search(r"[,;\n]", pairs[-1][1]) and not body.endswith("\n"):
        pairs.pop()  # the last value may have been cut off mid-number: only what a separator ends is whole
    return [(k, _unquote(v), p) for k, v, p in pairs], overrides, loose


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
        header = [normal(c) for c in cells[0]]
        columns = [i for i, h in enumerate(header) if KEY_SUFFIX.sub("", h) in TABLE_SCORE | {""} and h
                   or h in TABLE_OPTION or h.startswith("score") or h.startswith("option")]
        cells = cells[2:]
    pairs = []
    for row in cells:
        key = next((i for i, c in enumerate(row) if alias(rubric, c)), None)
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
        key = alias(rubric, k)
        if key is None:
            unknown.append(str(k))
            continue
        if key in found and _reading(found[key], rubric, key) != _reading(v, rubric, key):
            notes.append(f"{key}: given twice with different values")
            v = Conflict([found[key], v])
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
    if isinstance(value, Conflict):
        return None, f"{AMBIGUOUS}given twice with different values"
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
    if _count(rest, m.group(1)):
        return None, f"{text!r} is a count, not a score, set to null"
    remark = next((r for r in re.findall(r"\(([^()]*)\)", rest) if CORRECTION.search(r)
                   and CORRECTED_VALUE.search(r)), None)
    if remark:  # "0.67 (revised down to 0.33)": a correction in parentheses is a second reading, not a remark
        return None, f"{AMBIGUOUS}{text!r} gives {m.group(0)} and a correction ({remark})"
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
    labels = {o.letter: {normal(v) for v in o.label.values()} for o in dim.options}
    by_label = [o for o in dim.options if normal(text) in labels[o.letter]]
    m = LETTER.match(text)
    if not m and not by_label:
        return None
    if m:
        letter = (m.group(1) or m.group(2)).lower()
        rest = re.sub(r"^\(|\)$", "", m.group(3).strip().rstrip(".")).strip()
        if letter not in dim.letters:
            return None, f"{text!r} is not an option of {dim.key}, set to null"
        named = [o.letter for o in dim.options if rest and normal(rest) in labels[o.letter]]
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
