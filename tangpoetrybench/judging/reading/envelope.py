"""What every answer comes in, opened the same way for every reader before its grammar reads what is left: the
final answer, which must then be exactly one form of the task's grammar (nothing before, after or between).

- **Reasoning wrappers**, of every model family that writes one: `<think>…</think>` (Qwen3, DeepSeek-R1, QwQ, GLM,
  Hunyuan, InternVL, Phi), `<thinking>`, `<thought>`, `<reasoning>`, `<reflection>`, `<analysis>`, `<scratchpad>`,
  `<seed:think>` (Seed-OSS), `[THINK]…[/THINK]` (Magistral), `◁think▷…◁/think▷` (Kimi), `<|begin_of_thought|>…
  <|end_of_thought|>` (Sky-T1, OpenThoughts), gpt-oss's channels (`<|channel|>analysis<|message|>…` before
  `<|channel|>final<|message|>…`), Granite's "Here is my thought process: … Here is my response: …". A lone closing
  tag means everything before it was reasoning (the opening tag was in the prompt). **A reasoning block must be
  empty** (Qwen3's `<think>\\n\\n</think>` with thinking off): whatever it says — a number, a letter, a label, or
  "the snow is thin" — may conclude another value than the final answer, and no reader can show that it does not.
  A block opened and never closed, or channels without a final one, leave no final answer.
- **Answer wrappers** are taken off, their content kept: `<answer>…</answer>` (also `<final_answer>`, `<final>`,
  `<output>`, `<response>`, `<result>`, `<|begin_of_solution|>…<|end_of_solution|>`), `\\boxed{…}`; leftover
  special tokens (`<|im_end|>`, `<|return|>` …) are dropped.
- **Code fences** are opened where they stand (their content on lines of its own); a fence never closed loses its
  marker line only (what it held is then read, and refused if cut off).
- **Width only** (`fold_width`): full-width ASCII (`Ｂ`, `０．６７`, `：`, `（`) becomes ASCII and every kind of space a
  space. Not NFKC: NFKC makes `0.5¹` `0.51` and `½` `1⁄2`; a superscript, a circled digit or a combining mark stays
  itself, and the grammar, which takes none of them, refuses it.
- **Refused here**, for every reader: an empty answer, one longer than `MAX_CHARS` (every size is bounded), and
  struck-through text (`~~0.67~~ 0.33`, `<del>A</del> B`): an answer that corrects itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_CHARS = 20_000  # an explain-mode answer at its 1,536-token limit is about 6,000 characters

THOUGHT_TAGS = r"think|thinking|thought|thoughts|reasoning|reflection|analysis|scratchpad|seed:think"
XML_THOUGHT = re.compile(rf"<({THOUGHT_TAGS})(?:\s[^<>]*)?>(.*?)</\1\s*>", re.S | re.I)
OPEN_THOUGHT = re.compile(rf"<(?:{THOUGHT_TAGS})(?:\s[^<>]*)?>", re.I)
CLOSE_THOUGHT = re.compile(rf"</(?:{THOUGHT_TAGS})\s*>", re.I)
PAIRED_THOUGHTS = [  # (opening, closing) markers of the other families
    ("[THINK]", "[/THINK]"), ("◁think▷", "◁/think▷"), ("<|begin_of_thought|>", "<|end_of_thought|>"),
    ("Here is my thought process:", "Here is my response:"),
]
CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)\s*(?:<\|constrain\|>\s*\w+\s*)?<\|message\|>(.*?)"
                     r"(?=<\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|<\|channel\|>|$)", re.S)
ANSWER_TAG = re.compile(r"</?(?:answer|final_answer|final|output|response|result)\s*>|<\|(?:begin|end)_of_solution\|>",
                        re.I)
BOXED = re.compile(r"\\boxed\{\s*(?:\\text\{([^{}]*)\}|([^{}]*))\s*\}")
SPECIAL = re.compile(r"<\|[a-z_]{2,30}\|>")
FENCE = re.compile(r"```[\w+\-]*[ \t]*\n?(.*?)```", re.S)
LONE_FENCE = re.compile(r"^[ \t]*```[\w+\-]*[ \t]*$", re.M)
STRUCK = re.compile(r"~~[^~\n]+~~|<(del|s|strike)>.*?</\1>", re.S | re.I)
WIDTH = {**{c: c - 0xFEE0 for c in range(0xFF01, 0xFF5F)},
         **{c: 0x20 for c in (0xA0, 0x1680, *range(0x2000, 0x200B), 0x202F, 0x205F, 0x3000)}}


class Unreadable(Exception):
    """An answer that admits no one reading: its message names the condition that failed. Readers raise it where
    they find the condition and return a failed read with the message."""


@dataclass
class Envelope:
    """An answer opened: the final answer's text (`body`) and the notes on what was taken off."""

    body: str
    notes: list[str] = field(default_factory=list)


def fold_width(text: str) -> str:
    """Full-width ASCII as ASCII, every space a space; nothing else changed."""
    return text.translate(WIDTH)


def excerpt(text: str, n: int = 40) -> str:
    """A short quote of text for an error message."""
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[:n] + "…")


def open_envelope(text: str | None, fold: bool = True) -> Envelope:
    """The answer opened (see the module's docstring); raises `Unreadable` where no final answer can be read.
    `fold=False` keeps the text's width as written (the reasons reader returns the judge's own words)."""
    text = text or ""
    if len(text) > MAX_CHARS:
        raise Unreadable(f"the answer is {len(text):,} characters long, more than the reader reads ({MAX_CHARS:,})")
    notes: list[str] = []
    body = fold_width(text) if fold else text
    if body != text:
        notes.append("read full-width characters as ASCII")
    body, reasoned = _reasoning(body)
    if reasoned:
        notes.append("set an empty reasoning block apart")
    body, tags = ANSWER_TAG.subn("\n", body)
    body, boxed = BOXED.subn(lambda m: m.group(1) if m.group(1) is not None else m.group(2), body)
    body = SPECIAL.sub("\n", body)
    if tags or boxed:
        notes.append("took off the answer's wrapper")
    body, fences = FENCE.subn(lambda m: "\n" + m.group(1).strip("\n") + "\n", body)
    body = LONE_FENCE.sub("", body)
    if fences:
        notes.append("removed a code fence" if fences == 1 else f"opened {fences} code fences")
    if struck := STRUCK.search(body):
        raise Unreadable(f"struck-through text ({struck.group(0)!r}): the answer corrects itself")
    if not body.strip():
        raise Unreadable("no final answer after the reasoning" if reasoned else "empty answer")
    return Envelope(body, notes)


def _reasoning(text: str) -> tuple[str, bool]:
    """(the text without its reasoning blocks, whether it had any), or `Unreadable` where a block holds text or the
    final answer never came."""
    thoughts: list[str] = []
    if "<|channel|>" in text:
        channels = CHANNEL.findall(text)
        final = [content for name, content in channels if name.lower() == "final"]
        if not final:
            raise Unreadable("the answer's channels hold no final answer (only " +
                             ", ".join(sorted({name for name, _ in channels})) + ")" if channels else
                             "the answer's channels hold no final answer")
        thoughts += [content for name, content in channels if name.lower() != "final"]
        before = text[:min(i for i in (text.find("<|channel|>"), text.find("<|start|>")) if i >= 0)]
        text = before + "\n" + "\n".join(final)  # what came before the channels is read as the rest is
    for opening, closing in PAIRED_THOUGHTS:
        while opening in text or closing in text:
            start, end = text.find(opening), text.find(closing)
            if end < 0:
                raise Unreadable(f"the reasoning opened with {opening!r} never closed: no final answer")
            if start < 0 or start > end:  # a lone closing marker: everything before it was reasoning
                thoughts.append(text[:end])
                text = text[end + len(closing):]
            else:
                thoughts.append(text[start + len(opening):end])
                text = text[:start] + "\n" + text[end + len(closing):]
    while m := XML_THOUGHT.search(text):
        thoughts.append(m.group(2))
        text = text[:m.start()] + "\n" + text[m.end():]
    if close := list(CLOSE_THOUGHT.finditer(text)):
        thoughts.append(text[:close[-1].start()])
        text = text[close[-1].end():]
    if opened := OPEN_THOUGHT.search(text):
        raise Unreadable(f"the reasoning opened with {opened.group(0)!r} never closed: no final answer")
    if said := next((t for t in thoughts if t.strip()), None):
        raise Unreadable(f"the reasoning block holds text ({excerpt(said)}): what it concludes cannot be shown to "
                         "agree with the final answer")
    return text, bool(thoughts)
