"""Reading explain mode's reasons, apart from the scores, so that a broken reason loses only itself.

The reasons are the `reasons` object of the answer (also `explanations`, `rationale`, `理由` …, up to two levels
down), in the objects the scores reader would read (the core's `prepare` first: thinking dropped, NFKC, fences
opened, struck-through text deleted; objects labelled as a draft or an example skipped). A sentence is returned as
the judge wrote it (its full-width commas kept) where reading the answer without NFKC finds the same sentence.
Where the answer object does not load as a whole — an unescaped double quote or a backslash inside one reason, an
object cut off — its entries are read one by one: each `"key": "sentence"` runs to the quote that the next entry or
the object's end follows, so a quote inside a sentence stays in it, and an entry that never closes is lost alone.
A rubric key's non-empty sentence is kept (stripped, in rubric order, keys named in English or Chinese as the scores
reader names them); a missing, empty or non-text reason is left out; a key given two different sentences (in one
object, or in two answer objects) is left out. Never raises.
"""

from __future__ import annotations

import json
import re

from ...rubric import Rubric
from .core import OBJECT_END, Conflict, kind, loads, normalise, prepare, segments
from .dimensions import alias

REASON_NAMES = {"reasons", "reason", "reasoning", "rationale", "rationales", "explanation", "explanations",
                "justification", "justifications", "理由", "解释"}
CONTAINER = re.compile(r"[\"']([^\"'\n{}]{1,40})[\"']\s*:\s*\{")
ENTRY = re.compile(r'(?:^|[{,])\s*"([^"\n{}]{1,60})"\s*:\s*"')  # where an entry `"key": "…` starts
DIFFERENT = object()  # a key given two different sentences


def read_reasons(text: str, rubric: Rubric) -> dict[str, str]:
    """Rubric key → its reason, read as the module's docstring says; {} where there are none."""
    try:
        read = _read(prepare(text, [])[0], rubric)
        if not read or normalise(text or "") == (text or ""):  # nothing NFKC changed: the words are the judge's
            return read
        written = _read(prepare(text, [], normal=False)[0], rubric)
        return {k: written[k] if normalise(written.get(k, "")) == v else v for k, v in read.items()}
    except Exception:  # reasons are an addition: a reader bug must never fail the scores
        return {}


def _read(body: str, rubric: Rubric) -> dict[str, str]:
    given: dict[str, object] = {}
    for seg in segments(body):
        if kind(seg.label) == "other":
            continue
        for key, sentence in (_reasons(seg.text, seg.closed) or {}).items():
            dim = alias(rubric, key)
            if dim is None or sentence is None:
                continue
            given[dim] = sentence if given.get(dim, sentence) == sentence else DIFFERENT
    return {k: given[k] for k in rubric.keys if isinstance(given.get(k), str) and given[k]}


def _reasons(segment: str, closed: bool) -> dict[str, object] | None:
    """Key → stripped sentence (DIFFERENT for a key given two, None for a reason that is no text) of the segment's
    reasons object; None when it has none."""
    value = loads(segment, []) if closed else None
    if value is None:
        return _scanned(segment)
    found = _container(value)
    if not isinstance(found, dict):
        return None
    return {k: (DIFFERENT if isinstance(v, Conflict) else v.strip() if isinstance(v, str) else None)
            for k, v in found.items()}


def _container(value, depth: int = 2):
    """The reasons object of a loaded answer, looked for up to `depth` levels down."""
    if not isinstance(value, dict) or not depth:
        return None
    for key, inner in value.items():
        if re.sub(r"[\W_]+", "", str(key).lower()) in REASON_NAMES:
            return inner
    return next((found for inner in value.values() if (found := _container(inner, depth - 1)) is not None), None)


def _scanned(segment: str) -> dict[str, object] | None:
    """The reasons of an object that does not load, entry by entry (see the module's docstring)."""
    opening = next((m for m in CONTAINER.finditer(segment)
                    if re.sub(r"[\W_]+", "", m.group(1).lower()) in REASON_NAMES), None)
    if opening is None:
        return None
    close = OBJECT_END.search(segment, opening.end())
    region = segment[opening.end(): close.start() + 1 if close else len(segment)]
    entries = list(ENTRY.finditer(region))
    out: dict[str, object] = {}
    for entry, nxt in zip(entries, entries[1:] + [None]):
        raw = region[entry.end(): nxt.start() if nxt else len(region)]
        ended = re.search(r'"\s*$', raw)  # a whole entry ends with its closing quote (before the next one's comma)
        sentence = _unescape(raw[:ended.start()]).strip() if ended else None
        key = entry.group(1)
        out[key] = sentence if out.get(key, sentence) == sentence else DIFFERENT
    return out


def _unescape(raw: str) -> str:
    """A JSON string's text; where it does not decode (a quote or a backslash left unescaped), only its valid
    escapes are decoded."""
    try:
        return json.loads(f'"{raw}"', strict=False)
    except ValueError:
        return re.sub(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})', lambda m: json.loads(f'"\\{m.group(1)}"'), raw)
