"""Explain mode's reasons: the free-text slot of the scores' explain form, `{"scores": {…}, "reasons": {…}}`.

Every reason is checked against the scores (`slots.explain_reason`) before any score is returned, and the reasons
are kept only where the scores read (`read_reasons(text, rubric)` is `parse_answer(text, rubric, explain=True)`'s
reasons). A reason is returned as the judge wrote it (full-width commas kept).

The reasons object is a rubric key (named as the scores' keys are) → a sentence, each key once; an empty or null
reason is no reason. Where the object is broken — an unescaped double quote or a raw backslash inside a reason —
its entries are read one by one (`scan`): each `"key": "sentence"` runs to the quote that the next entry or the
object's end follows, so a quote inside a sentence stays in it; every entry's text is checked, and an entry that
does not close on its quote is checked and not kept. A reasons object that is cut off fails the read: what it would
have gone on to say cannot be checked.
"""

from __future__ import annotations

import json
import re

from ...rubric import Rubric
from .core import Num, Pairs
from .dimensions import alias
from .envelope import Unreadable, excerpt, fold_width
from .slots import explain_reason

OBJECT_END = re.compile(r'"\s*}\s*}\s*$')  # the last reason's quote, the reasons object's brace, the answer's
ENTRY = re.compile(r'(?:^|,)\s*["\']([^"\'\n{}]{1,60})["\']\s*:\s*"')  # where an entry `"key": "…` starts


Reasons = tuple[dict[str, str], dict[str, str]]  # (the reasons kept, every reason's text, to be checked)


def from_object(value, rubric: Rubric) -> Reasons:
    """The reasons of a loaded reasons object (None: no reasons), or `Unreadable`."""
    if value is None:
        return {}, {}
    if not isinstance(value, Pairs):
        raise Unreadable("'reasons' holds no object of reasons: text outside the form")
    return _entries([(key, sentence, True) for key, sentence in value], rubric)


def scan(region: str, rubric: Rubric) -> Reasons:
    """The reasons of a reasons object's text that does not load (`region`: from after its opening brace
    to the end of the answer), entry by entry; `Unreadable` where it is cut off or holds text outside its entries."""
    close = OBJECT_END.search(region)
    if close is None:
        raise Unreadable("the reasons object is cut off: what it would have gone on to say cannot be checked")
    region = region[:close.start() + 1]
    entries = list(ENTRY.finditer(region))
    if not entries or region[:entries[0].start()].strip():
        raise Unreadable(f"the reasons object holds text outside its entries: {excerpt(region)}")
    found = []
    for entry, nxt in zip(entries, entries[1:] + [None]):
        raw = region[entry.end(): nxt.start() if nxt else len(region)]
        closed = re.search(r'"\s*$', raw)
        found.append((entry.group(1), _unescape(raw[:closed.start()] if closed else raw), closed is not None))
    return _entries(found, rubric)


def check(reasons: dict[str, str], scores: dict[str, float | None], rubric: Rubric) -> None:
    """`Unreadable` where a reason gives its answer another reading (`slots.explain_reason`)."""
    for dim, sentence in reasons.items():
        explain_reason(fold_width(sentence), dim, scores, rubric)


def _entries(found: list[tuple[str, object, bool]], rubric: Rubric) -> Reasons:
    """(key, sentence, closed) entries as (rubric key → sentence kept, rubric key → every sentence): every key a
    dimension's, each once, every reason a text (or empty, or null: no reason); an entry that does not close is
    checked and not kept."""
    kept: dict[str, str] = {}
    every: dict[str, str] = {}
    seen: set[str] = set()
    for key, sentence, closed in found:
        dim = alias(rubric, key)
        if dim is None:
            raise Unreadable(f"the reasons object's key {key!r} names no rubric dimension")
        if dim in seen:
            raise Unreadable(f"the reasons object gives {dim} twice")
        seen.add(dim)
        if isinstance(sentence, (Num, bool, int, float, list, Pairs)):
            raise Unreadable(f"the reason for {dim} is {json.dumps(str(getattr(sentence, 'text', sentence)))}, "
                             "not a sentence")
        if isinstance(sentence, str) and sentence.strip():
            every[dim] = sentence.strip()
            if closed:
                kept[dim] = sentence.strip()
    return {k: kept[k] for k in rubric.keys if k in kept}, every


def _unescape(raw: str) -> str:
    """A JSON string's text; where it does not decode (a quote or a backslash left unescaped), only its valid
    escapes are decoded."""
    try:
        return json.loads(f'"{raw}"', strict=False)
    except ValueError:
        return re.sub(r'\\(["\\/bfnrt]|u[0-9a-fA-F]{4})', lambda m: json.loads(f'"\\{m.group(1)}"'), raw)
