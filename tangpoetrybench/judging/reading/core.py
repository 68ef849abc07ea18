"""What the readers share below their grammars: JSON segments of a text and lenient JSON loading.

- `segments`: the top-level `{…}` and `[…]` of a text (quotes and `//` comments respected), each with where it
  starts and whether it closes (an unclosed one runs to the end: a cut-off answer).
- `loads`: a segment as JSON, leniently: raw newlines inside strings, `//` and `/* */` comments (taken out, and
  returned, so that a reader checks what they say), single quotes, trailing commas, bare keys, Python's `None`,
  `True`, `False`; a key given twice with different values is a `Conflict`, never the last one silently.
- `drop_thinking`, `whole_fence`: SemJudge's steps' strict reading (`steps`): a `<think>` block dropped, an answer
  that is one code fence unwrapped.
"""

from __future__ import annotations

import ast
import json
import re
import warnings
from dataclasses import dataclass

from .envelope import FENCE

THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S)


def drop_thinking(text: str) -> tuple[str, bool]:
    """The text without its `<think>` blocks, and whether there were any: a closed block is dropped; a lone
    `</think>` means everything before it was thinking; an unclosed `<think>` runs to the end."""
    if "<think>" not in text and "</think>" not in text:
        return text, False
    body = THINK_BLOCK.sub(" ", text)
    body = body.rpartition("</think>")[2]
    return body.split("<think>", 1)[0].strip(), True


def whole_fence(text: str) -> str:
    """What a text that is one code fence holds; any other text unchanged."""
    m = FENCE.fullmatch(text.strip())
    return m.group(1).strip() if m else text


# --- JSON segments -------------------------------------------------------------------------------------------------

@dataclass
class Segment:
    """A top-level {…} or […] of a text: its text, where it starts, and whether it closes."""

    text: str
    start: int
    closed: bool

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def segments(text: str) -> list[Segment]:
    """Every top-level {…} or […] in the text (quotes and // comments respected), with whether it is closed; an
    unclosed one runs to the end of the text."""
    out, start, stack, quote, escaped, comment = [], None, [], None, False, False
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
                out.append(Segment(text[start: i + 1], start, True))
        elif stack and c in "}]":  # a mismatched closer: the segment is not well formed; start over
            stack, start = [], None
    if stack and start is not None:
        out.append(Segment(text[start:], start, False))
    return out


class Pairs(list):
    """A JSON object as its (key, value) pairs, so that repeated keys are seen."""


class Conflict(list):
    """The different values given for one key: a duplicate key in an object. No reader takes one of them."""


def collect(pairs, notes: list[str]) -> dict:
    """A dict of (key, value) pairs. A key given twice with the same value keeps it; with different values it holds
    a `Conflict`."""
    out: dict = {}
    for key, value in pairs:
        if key in out and not _same(out[key], value):
            notes.append(f"{key}: given twice with different values")
            value = Conflict([*(out[key] if isinstance(out[key], Conflict) else [out[key]]), value])
        elif key in out:
            notes.append(f"{key}: given twice, the same")
        out[key] = value
    return out


def _same(one, other) -> bool:
    return type(one) is type(other) and one == other or (
        isinstance(one, (int, float)) and isinstance(other, (int, float)) and one == other
        and not isinstance(one, bool) and not isinstance(other, bool))


def split_comments(segment: str) -> tuple[str, list[str]]:
    """A JSON segment without its // and /* */ comments (quotes respected), and the comments' text."""
    out, found, i, quote = [], [], 0, None
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
        elif segment.startswith("//", i) or segment.startswith("/*", i):
            block = segment.startswith("/*", i)
            end = segment.find("*/" if block else "\n", i)
            end = len(segment) if end < 0 else end + (2 if block else 0)
            found.append(segment[i + 2: end - (2 if block and segment.endswith("*/", 0, end) else 0)])
            i = end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out), found


def loads(segment: str, notes: list[str]):
    """A segment as JSON (raw newlines inside strings allowed), or as a Python literal after repairs (comments,
    quotes, commas, bare keys); None if neither. Objects come back as dicts, a key given twice with different values
    holding a `Conflict`."""
    try:
        return _dedupe(json.loads(segment, object_pairs_hook=Pairs, strict=False), notes)
    except ValueError:
        pass
    bare, comments = split_comments(segment)
    if comments:
        notes.append("removed comments from the JSON")
        try:
            return _dedupe(json.loads(bare, object_pairs_hook=Pairs, strict=False), notes)
        except ValueError:
            pass
    fixed = bare.replace("“", '"').replace("”", '"').replace("‘", "'").replace("’", "'")
    fixed = re.sub(r"([{,]\s*)([A-Za-z_\u4e00-\u9fff][A-Za-z0-9_ \-\u4e00-\u9fff]*?)\s*:", r'\1"\2":', fixed)
    py = re.sub(r"\bnull\b", "None", re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", fixed)))
    try:
        with warnings.catch_warnings():  # "invalid escape sequence" in a string: the literal keeps the backslash
            warnings.simplefilter("ignore")
            value = _literal_pairs(ast.parse(py, mode="eval").body)  # literals only: no code runs
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    notes.append("repaired JSON syntax (quotes, trailing commas or bare keys)")
    return _dedupe(value, notes)


def _literal_pairs(node):
    if isinstance(node, ast.Dict):
        return Pairs((ast.literal_eval(k), _literal_pairs(v)) for k, v in zip(node.keys, node.values))
    if isinstance(node, (ast.List, ast.Tuple)):
        return [_literal_pairs(v) for v in node.elts]
    return ast.literal_eval(node)


def _dedupe(value, notes: list[str]):
    if isinstance(value, Pairs):
        return collect([(k, _dedupe(v, notes)) for k, v in value], notes)
    if isinstance(value, list):
        return [_dedupe(v, notes) for v in value]
    return value
