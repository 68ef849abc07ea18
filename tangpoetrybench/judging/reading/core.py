"""What the readers share below their grammars: one JSON value read strictly, with the repairs that cannot change
what it says, and SemJudge's steps' unwrapping.

- `parse_json(text)`: the text as exactly one JSON value and nothing else (whitespace aside). Syntax is repaired
  where the repair cannot change a value: single quotes, bare keys, trailing commas, raw newlines inside strings,
  Python's `None`, `True`, `False`. Objects come back as `Pairs` (every key in order, so a key given twice is seen);
  numbers as `Num`, their text as written, so that a reader checks the number's form (`0.5`, not `5e-1`). A comment
  (`//`, `/* */`, `#`) is text outside the form; an object that does not close is cut off; anything after the value
  is text outside the form. Each of these raises `Unreadable` naming it.
- `drop_thinking`, `whole_fence`: SemJudge's steps' strict reading (`steps`): a `<think>` block dropped, an answer
  that is one code fence unwrapped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .envelope import FENCE, Unreadable, excerpt

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


class Pairs(list):
    """A JSON object as its (key, value) pairs, in order, so that a key given twice is seen."""

    def keys(self) -> list[str]:
        return [k for k, _ in self]

    def get(self, key: str, default=None):
        return next((v for k, v in self if k == key), default)


@dataclass(frozen=True)
class Num:
    """A JSON number as written."""

    text: str


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
BARE_KEY = re.compile(r"[A-Za-z_\u4e00-\u9fff][\w \-\u4e00-\u9fff]*?(?=\s*:)")
LITERALS = {"null": None, "None": None, "true": True, "True": True, "false": False, "False": False}
ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def parse_json(text: str, repairs: list[str] | None = None):
    """The text as one JSON value (see the module's docstring); `repairs` collects what syntax was repaired."""
    parser = _Parser(text, repairs if repairs is not None else [])
    parser.space()
    value = parser.value()
    parser.space()
    if parser.i < len(text):
        raise Unreadable(f"text outside the form after the JSON object: {excerpt(text[parser.i:])}")
    return value


class _Parser:
    def __init__(self, text: str, repairs: list[str]):
        self.text, self.i, self.repairs = text, 0, repairs

    def fail(self, what: str):
        if not re.search(r"[}\]]", self.text[self.i:]):  # nothing left that could close it
            raise Unreadable("the JSON object is cut off: it never closes")
        raise Unreadable(f"{what} at {excerpt(self.text[self.i:])}: the JSON does not load")

    def repaired(self, what: str) -> None:
        if what not in self.repairs:
            self.repairs.append(what)

    def space(self) -> None:
        while self.i < len(self.text):
            c = self.text[self.i]
            if c in " \t\r\n":
                self.i += 1
            elif self.text.startswith(("//", "/*"), self.i) or c == "#":
                raise Unreadable(f"a comment in the JSON ({excerpt(self.text[self.i:])}): text outside the form")
            else:
                return

    def value(self):
        if self.i >= len(self.text):
            self.fail("no value")
        c = self.text[self.i]
        if c == "{":
            return self.container("}", self.pair)
        if c == "[":
            return self.container("]", self.value)
        if c in "\"'":
            return self.string()
        if m := NUMBER.match(self.text, self.i):
            self.i = m.end()
            return Num(m.group(0))
        for word, literal in LITERALS.items():
            if self.text.startswith(word, self.i) and not self.text[self.i + len(word): self.i + len(word) + 1].isalnum():
                self.i += len(word)
                if word not in ("null", "true", "false"):
                    self.repaired(f"Python's {word}")
                return literal
        self.fail("no JSON value")

    def container(self, closer: str, item):
        self.i += 1
        out = Pairs() if closer == "}" else []
        while True:
            self.space()
            if self.text.startswith(closer, self.i):
                self.i += 1
                return out
            out.append(item())
            self.space()
            if self.text.startswith(",", self.i):
                self.i += 1
                self.space()
                if self.text.startswith(closer, self.i):
                    self.repaired("a trailing comma")
            elif not self.text.startswith(closer, self.i):
                self.fail(f"no ',' or '{closer}'")

    def pair(self):
        if self.i < len(self.text) and self.text[self.i] in "\"'":
            key = self.string()
        elif m := BARE_KEY.match(self.text, self.i):
            key = m.group(0).strip()
            self.i = m.end()
            self.repaired("bare keys")
        else:
            self.fail("no key")
        self.space()
        if not self.text.startswith(":", self.i):
            self.fail("no ':' after a key")
        self.i += 1
        self.space()
        return key, self.value()

    def string(self) -> str:
        quote = self.text[self.i]
        if quote == "'":
            self.repaired("single quotes")
        self.i += 1
        out = []
        while self.i < len(self.text):
            c = self.text[self.i]
            if c == quote:
                self.i += 1
                return "".join(out)
            if c == "\\":
                nxt = self.text[self.i + 1: self.i + 2]
                if nxt in ESCAPES:
                    out.append(ESCAPES[nxt])
                    self.i += 2
                    continue
                if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", self.text[self.i + 2: self.i + 6]):
                    out.append(chr(int(self.text[self.i + 2: self.i + 6], 16)))
                    self.i += 6
                    continue
                self.fail("an unknown escape in a string")
            out.append(c)
            self.i += 1
        self.fail("a string that never closes")
