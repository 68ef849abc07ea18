"""Reading explain mode's reasons, apart from the scores, so that a broken reason loses only itself.

The reasons are the `reasons` object beside `scores` in explain mode's answer object (after the envelope: the
reasoning set apart, answer wrappers and fences taken off, NFKC; the scores reader decides whether the answer reads
at all, and `parse_answer` keeps reasons only where it does). A sentence is returned as
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
from .core import Conflict, loads, segments
from .dimensions import alias
from .envelope import normalise, open_envelope

CONTAINER = re.compile(r"[\"']reasons[\"']\s*:\s*\{")
# The end of an object whose strings are broken (an unescaped quote): the closing quote of its last entry, then its
# brace, then what may follow an object's value.
OBJECT_END = re.compile(r'"\s*}(?=\s*(?:[,}\]]|$))')
ENTRY = re.compile(r'(?:^|[{,])\s*"([^"\n{}]{1,60})"\s*:\s*"')  # where an entry `"key": "…` starts
DIFFERENT = object()  # a key given two different sentences


def read_reasons(text: str, rubric: Rubric) -> dict[str, str]:
    """Rubric key → its reason, read as the module's docstring says; {} where there are none."""
    try:
        read = _read(open_envelope(text).body, rubric)
        if not read or normalise(text or "") == (text or ""):  # nothing NFKC changed: the words are the judge's
            return read
        written = _read(open_envelope(text, normal=False).body, rubric)
        return {k: written[k] if normalise(written.get(k, "")) == v else v for k, v in read.items()}
    except Exception:  # reasons are an addition: an answer that does not open, or a reader bug, gives none
        return {}


def _read(body: str, rubric: Rubric) -> dict[str, str]:
    given: dict[str, object] = {}
    for seg in segments(body):
        for key, sentence in (reasons_of(seg.text, seg.closed) or {}).items():
            dim = alias(rubric, key)
            if dim is None or sentence is None:
                continue
            given[dim] = sentence if given.get(dim, sentence) == sentence else DIFFERENT
    return {k: given[k] for k in rubric.keys if isinstance(given.get(k), str) and given[k]}


def reasons_of(segment: str, closed: bool) -> dict[str, object] | None:
    """Key → stripped sentence (DIFFERENT for a key given two, None for a reason that is no text) of a JSON
    segment's reasons object (its entries read one by one where it does not load); None when it has none."""
    value = loads(segment, []) if closed else None
    if value is None:
        return _scanned(segment)
    found = value.get("reasons") if isinstance(value, dict) else None
    if not isinstance(found, dict):
        return None
    return {k: (DIFFERENT if isinstance(v, Conflict) else v.strip() if isinstance(v, str) else None)
            for k, v in found.items()}


def _scanned(segment: str) -> dict[str, object] | None:
    """The reasons of an object that does not load, entry by entry (see the module's docstring)."""
    opening = CONTAINER.search(segment)
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
