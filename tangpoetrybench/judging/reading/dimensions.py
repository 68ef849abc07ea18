"""Which rubric dimension a key or a phrase names: its key, English or Chinese name, maybe with "score" after it
(`core_imagery_score`), or two of those names, one in parentheses (`情感共鸣（Emotional resonance）`). Shared by the
scores reader and the reasons reader."""

from __future__ import annotations

import functools
import re

from ...rubric import Rubric
from .envelope import fold_width

KEY_SUFFIX = re.compile(r"(?:score|rating|得分|分数|评分)$")
SEPARATOR = r"[ \t]*(?::|=|[ \t][-–—][ \t]|[—–])[ \t]*"  # between a name and its value on a line


def normal(key: str) -> str:
    """A key compared without case, a leading number, spaces, hyphens, underscores or slashes."""
    key = re.sub(r"^\s*\d+[.)]\s*", "", str(key)).strip().lower()
    return re.sub(r"[\s\-_/]+", "", key)


def alias(rubric: Rubric, key) -> str | None:
    """The dimension a key names, or None (see the module's docstring); a parenthesis that names no dimension is a
    remark (`Safety (a–c)`)."""
    return _alias(names(rubric), str(key))


@functools.lru_cache(maxsize=4096)
def _alias(dims: tuple[tuple[str, ...], ...], key: str) -> str | None:
    text = fold_width(key)
    outside, *inside = [p for p in re.split(r"[()]", text) if p.strip()] or [""]
    table, hits = _name_table(dims), []
    for i, part in enumerate([outside, *inside]):
        form = normal(part)
        dims = {table[f] for f in (form, KEY_SUFFIX.sub("", form)) if f in table}
        if not dims and i == 0:
            return None
        hits += dims
    return hits[0] if len(set(hits)) == 1 else None


def names(rubric: Rubric) -> tuple[tuple[str, ...], ...]:
    """Each dimension's key, English name and own-language name (a rubric is read many times: kept by identity)."""
    kept = _NAMES.get(id(rubric))
    if kept is None or kept[0] is not rubric:
        kept = _NAMES[id(rubric)] = (rubric, tuple((d.key, *d.name.values()) for d in rubric.dimensions))
    return kept[1]


_NAMES: dict[int, tuple[Rubric, tuple]] = {}


@functools.lru_cache(maxsize=16)
def _name_table(dims: tuple[tuple[str, ...], ...]) -> dict[str, str]:
    """Each name of a dimension, compared as `normal` compares them → the dimension's key."""
    return {normal(n): dim[0] for dim in dims for n in dim}


@functools.lru_cache(maxsize=16)
def name_forms(dims: tuple[tuple[str, ...], ...]) -> str:
    """A dimension's names in free text, longest first, spaces, hyphens and underscores alike."""
    every = {n for dim in dims for n in dim}
    forms = sorted((r"[\s_\-]*".join(map(re.escape, re.split(r"[\s_\-]+", n.strip()))) for n in every),
                   key=len, reverse=True)
    return "|".join(forms)


@functools.lru_cache(maxsize=16)
def key_pattern(dims: tuple[tuple[str, ...], ...]) -> re.Pattern:
    """A dimension's name in free text with its separator: `Safety:`, `**core imagery**:`, `"safety" =`,
    `情感共鸣(Emotional resonance):`, `Text integrity —`."""
    return re.compile(r"(?<![A-Za-z0-9_])[\"']?((?:" + name_forms(dims) + r")(?:[\s_]*(?:score|rating|得分|分数))?"
                      r"(?:\s*\([^()\n]{1,40}\))?)[\"']?" + SEPARATOR, re.I)
