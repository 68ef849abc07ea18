"""What every answer comes in, opened the same way for every reader: its reasoning set apart, its final answer's
text normalised. A reader then reads the final answer by its task's grammar, and checks the reasoning's conclusion
against what it read (`ambiguity`).

- **Reasoning wrappers**, of every model family that writes one: `<think>…</think>` (Qwen3, DeepSeek-R1, QwQ, GLM,
  Hunyuan, InternVL, Phi), `<thinking>`, `<thought>`, `<reasoning>`, `<reflection>`, `<analysis>`, `<scratchpad>`,
  `<seed:think>` (Seed-OSS), `[THINK]…[/THINK]` (Magistral), `◁think▷…◁/think▷` (Kimi), `<|begin_of_thought|>…
  <|end_of_thought|>` (Sky-T1, OpenThoughts), gpt-oss's channels (`<|channel|>analysis<|message|>…` before
  `<|channel|>final<|message|>…`), Granite's "Here is my thought process: … Here is my response: …". A closed block is
  reasoning; a lone closing tag means everything before it was (the opening tag was in the prompt); a block opened
  and never closed, or channels without a final one, leave no final answer: the read fails.
- **Answer wrappers**: `<answer>…</answer>` (also `<final_answer>`, `<final>`, `<output>`, `<response>`, `<result>`,
  `<|begin_of_solution|>…<|end_of_solution|>`) and `\\boxed{…}` are taken off, their content kept where it stood;
  leftover special tokens (`<|im_end|>`, `<|return|>` …) are dropped.
- **Normalised**: Unicode NFKC (full-width letters, digits and punctuation become ASCII: `Ｂ`, `０．６７`, `：`).
- **Code fences** are opened where they stand (their content on lines of its own); a fence never closed loses its
  marker line only.
- **Refused here**, for every reader: an empty answer, one longer than `MAX_CHARS` (every wait and size is
  bounded), and struck-through text (`~~0.67~~ 0.33`, `<del>A</del> B`): an answer that corrects itself.
"""

from __future__ import annotations

import re
import unicodedata
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


class Unreadable(Exception):
    """An answer that admits no one reading: its message names the condition that failed. Readers raise it where
    they find the condition and return a failed read with the message."""


@dataclass
class Envelope:
    """An answer opened: the final answer's text (`body`), the reasoning blocks (`thoughts`), and the notes on what
    was taken off."""

    body: str
    thoughts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def open_envelope(text: str | None, normal: bool = True) -> Envelope:
    """The answer opened (see the module's docstring); raises `Unreadable` where no final answer can be read.
    `normal=False` keeps the text as written (the reasons reader returns the judge's own words)."""
    text = text or ""
    if len(text) > MAX_CHARS:
        raise Unreadable(f"the answer is {len(text):,} characters long, more than the reader reads ({MAX_CHARS:,})")
    notes: list[str] = []
    body = normalise(text) if normal else text
    if normal and body != text:
        notes.append("normalised the text (Unicode NFKC: full-width letters, digits and punctuation)")
    body, thoughts = _reasoning(body)
    if thoughts:
        notes.append("set the reasoning apart")
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
        raise Unreadable("no final answer after the reasoning" if thoughts else "empty answer")
    return Envelope(body, thoughts, notes)


def _reasoning(text: str) -> tuple[str, list[str]]:
    """(the text without its reasoning, the reasoning blocks), or `Unreadable` where the final answer never came."""
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
    return text, thoughts
