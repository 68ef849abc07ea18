"""What every answer reader does before it reads its task's answer, written once.

- `normalise`: Unicode NFKC (full-width letters, digits and punctuation become ASCII: `Ｂ`, `０．６７`, `：`).
- `drop_thinking`: `<think>` blocks, one behaviour everywhere: a closed block is dropped; a lone `</think>` means
  everything before it was thinking (the opening tag was in the prompt); an unclosed `<think>` runs to the end.
- `strike`: struck-through text (`~~0.67~~`, `<del>…</del>`, `<s>`, `<strike>`) is deleted text, not read.
- `FENCE` and `unfence`: code fences (one regex) are opened where they stand, so the label before a fence is the
  label of what it holds.
- `segments` and `loads`: the top-level JSON segments of a text (quotes and `//` comments respected), each with the
  label written before it, and lenient loading (comments, quotes, trailing commas, bare keys, raw newlines inside
  strings); a key given twice with different values is a `Conflict`, never the last one silently.
- `salvage`: the named objects inside a segment that does not load (`"scores": {…}` beside a broken reason).
- `kind`: containers and labels. "format", "example", "schema", "draft", "template", "for example", "e.g." are not
  answers (`other`); "final", "answer", "scores" are (`answer`); "correction", "revised", "on reflection" correct
  what came before (`correction`).
- `STRONG_CORRECTION`, `CORRECTION`, `sentences`: the words that correct an answer written before them ("Actually",
  "on second thought", "wait", "just kidding", "but honestly", "更正"), and the sentences they stand in.
- `NEGATION_BEFORE`: the words that deny what follows them ("not B", "rather than 0.67", "不是B"); `DENIED_CLAIM`:
  the words that deny a claim a little further on ("I don't think A is better", "I'm not sure it's B", "it is not
  the case that A …"); `DOUBT`: a sentence that doubts without naming anything ("Actually, I'm not sure.");
  `EARLIER`: words saying that what follows was an earlier version, not the answer ("In the draft I had …").
- `prepare`: the steps above, in order, each named in the notes: what every reader reads.
"""

from __future__ import annotations

import ast
import json
import re
import unicodedata
import warnings
from dataclasses import dataclass

FENCE = re.compile(r"```[\w+\-]*[ \t]*\n?(.*?)```", re.S)
LONE_FENCE = re.compile(r"^[ \t]*```[\w+\-]*[ \t]*$", re.M)  # a fence opened and never closed (a cut-off answer)
THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S)
STRUCK = re.compile(r"~~[^~\n]+~~|<(del|s|strike)>.*?</\1>", re.S | re.I)

# Names of the containers an answer comes in, and of those that hold something else (compared without spaces or
# punctuation). A label is a short text written just before an object, a fence or a line.
ANSWER_NAMES = {"scores", "score", "final", "finalscores", "finalscore", "finalanswer", "answer", "result",
                "results", "ratings", "rating", "evaluation", "assessment", "verdict", "output", "response",
                "judgment", "judgement", "评分", "分数", "得分", "最终", "最终评分", "答案", "结果", "结论"}
# Drafts, examples and formats: never the answer, wherever they stand.
PROVISIONAL_NAMES = {"draft", "drafts", "example", "examples", "format", "schema", "template", "sample", "eg",
                     "forexample", "forinstance", "placeholder", "initial", "preliminary", "tentative", "草稿", "初稿",
                     "示例", "例如", "比如", "格式", "模板", "初步"}
OTHER_NAMES = PROVISIONAL_NAMES | {
    "confidence", "confidences", "reason", "reasons", "reasoning", "rationale", "rationales", "explanation",
    "explanations", "comment", "comments", "note", "notes", "justification", "justifications", "analysis", "thoughts",
    "uncertainty", "置信度", "理由", "解释", "分析", "说明"}
CORRECTION_NAMES = {"correction", "corrected", "corrections", "revised", "revision", "update", "updated", "amended",
                    "更正", "修正", "修订", "订正", "纠正"}
# Words that correct what was written before them. Strong ones take back an answer even where no new one follows.
STRONG_CORRECTION = re.compile(
    r"\bon (?:second|further) (?:thought|reflection|consideration)\b|\bon reflection\b|\bwait\b|\bcorrection\b"
    r"|\bscratch that\b|\bi take (?:that|it) back\b|\blet me (?:correct|revise|reconsider|fix)\b"
    r"|\bi (?:misread|mixed|made a mistake|was wrong|changed my mind)\b|\bchange my answer\b"
    r"|\bupon (?:reflection|reconsideration|review)\b|\bafter reconsider\w*|\bjust kidding\b|\bi(?:'m| am) kidding\b"
    r"|更正|修正|订正|纠正|等等|不对|改正|重新考虑", re.I)
CORRECTION = re.compile(
    STRONG_CORRECTION.pattern + r"|\bactually\b|\bi meant?\b|\brather\b|\binstead\b"
    r"|\bbut (?:honestly|frankly|really|truly|in truth|to be honest|in the end|ultimately)\b"
    r"|\bshould (?:\w+ )?(?:be|have been)\b|\bmake (?:it|that)\b|\bchang(?:e|ed|ing) (?:it |that |this )?to\b"
    r"|\brevis(?:ed|ing|e)\b|\bcorrect(?:ed|ing)\b|\bupdat(?:ed|ing)\b|\bedit(?:ed)?\b|→|->|=>|⇒"
    r"|其实|应为|应该是|改为|改成", re.I)
# Words that deny what follows them, at the end of the text before it.
NEGATION_BEFORE = re.compile(r"(?:\bnot|n't|\bnever|\bno|\bnor|\bneither|\brather than|\binstead of|\bthan|\bover"
                             r"|\bunlike|\bexcept|\bexcluding|\bagainst|不是|并非|而非|非|不选|排除|而不是)$", re.I)
# A negation that denies the claim it governs a few words on: "I don't think A is better", "I would not say A",
# "I'm not sure it's B", "No way A is better", "It is not the case that A …", "我不认为A更好". The claim runs to the
# end of the text before the reference, within its clause (no "but", no stop between).
DENIED_CLAIM = re.compile(
    r"(?:(?:\b(?:not|never|no|hardly|scarcely|nobody|no one)|n't|n’t)\s+(?:(?!(?:i|we|you|they)\b)\w+\s+){0,2}?"
    r"(?:think|believe|say|agree|feel|sure|certain|convinced|the case|way|claim|suppose|reckon|consider|expect)\b"
    r"|不认为|不觉得|不确定|不敢说|很难说|未必)"
    r"(?:(?!\b(?:but|yet|however|though|although|so|while|whereas)\b)[^.,;:!?\n。，；：！？—–])*$", re.I)
# A sentence that doubts without naming anything: after an answer, it takes the answer back.
DOUBT = re.compile(
    r"(?:\b(?:not (?:sure|certain|confident)|unsure|uncertain|i (?:could|might|may) be wrong|hard to (?:say|tell)"
    r"|i (?:don't|do not|dont) know|no idea|can't (?:decide|tell|be sure)|cannot (?:decide|tell|be sure)"
    r"|not convinced)"
    r"(?:\s+(?:about|of)\s+(?:it|this|that|my answer|the answer|my choice|that one))?(?:\s*,?\s*(?:though|tbh))?"
    r"|不确定|不好说|说不准|拿不准|难以判断)\s*(?:[.!?…。！？]|$)", re.I)
# Words that say what follows is an earlier version, not the answer ("In the draft I had core_imagery: 0.33",
# "Earlier I had …"); not a reference to something said before ("as noted earlier, …" restates the answer).
EARLIER = re.compile(r"\b(?:drafts?|initially|originally|at first|first pass|preliminary|tentative)\b"
                     r"|\b(?:earlier|previously|before)\s*,?\s+(?:i|we)\s+(?:had|gave|wrote|put|scored|rated)\b"
                     r"|草稿|初稿|起初|原先|最初", re.I)
SENTENCE_END = re.compile(r"(?<=[^.][.!?])(?=\s)|(?<=[。！？；;])|\n")  # "…" and "..." go on


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def drop_thinking(text: str) -> tuple[str, bool]:
    """The text without its thinking, and whether there was any (see the module's docstring)."""
    if "<think>" not in text and "</think>" not in text:
        return text, False
    body = THINK_BLOCK.sub(" ", text)
    body = body.rpartition("</think>")[2]  # a lone closing tag: everything before it was thinking
    return body.split("<think>", 1)[0].strip(), True  # an unclosed block runs to the end


def strike(text: str) -> tuple[str, list[int]]:
    """The text without its struck-through parts, and where in it each part was (a deletion corrects what stood
    there)."""
    out, at, kept = [], [], 0
    for m in STRUCK.finditer(text):
        out.append(text[kept:m.start()])
        at.append(sum(map(len, out)))
        kept = m.end()
    return "".join(out) + text[kept:], at


def unfence(text: str) -> tuple[str, int]:
    """The text with its code fences opened (their content where they stood, on lines of its own), and how many."""
    count = 0

    def opened(m: re.Match) -> str:
        nonlocal count
        count += 1
        return "\n" + m.group(1).strip("\n") + "\n"

    out = FENCE.sub(opened, text)
    return LONE_FENCE.sub("", out), count


def prepare(text: str | None, notes: list[str], normal: bool = True) -> tuple[str, list[int]]:
    """What every reader reads of an answer, and where struck-through text stood in it: the thinking dropped,
    Unicode NFKC (unless `normal` is false: a reader that returns the answer's own words reads them as written
    too), code fences opened, struck-through text deleted; each step that changed something named in `notes`."""
    body, thought = drop_thinking((text or "").strip())
    if thought:
        notes.append("dropped the thinking")
    normal_body = normalise(body) if normal else body
    if normal_body != body:
        notes.append("normalised the text (Unicode NFKC: full-width letters, digits and punctuation)")
    body, fences = unfence(normal_body)
    if fences:
        notes.append("removed a code fence" if fences == 1 else f"opened {fences} code fences")
    body, struck = strike(body)
    if struck:
        notes.append("dropped struck-through text")
    return body, struck


def whole_fence(text: str) -> str:
    """What a text that is one code fence holds; any other text unchanged."""
    m = FENCE.fullmatch(text.strip())
    return m.group(1).strip() if m else text


def sentences(text: str) -> list[tuple[int, str]]:
    """(start, sentence) of each sentence or line of the text, the decimal point of a number not ending one."""
    out, start = [], 0
    for m in SENTENCE_END.finditer(text + "\n"):
        if text[start:m.start()].strip():
            out.append((start, text[start:m.start()]))
        start = m.end()
    return out


def label(prefix: str) -> str:
    """The label written just before an object, a fence or a value: the last line of the text before it, markup
    dropped."""
    lines = [line for line in prefix[-200:].splitlines() if line.strip()]  # a label is short
    return re.sub(r"[*#`_:=>\-\s]+$|^[*#`_\-\s]+", "", lines[-1]).strip() if lines else ""


def kind(name) -> str | None:
    """"other" for a label of something that is not the answer (a draft, an example, a format, reasons),
    "correction" for one that corrects an earlier answer, "answer" for a name of the answer's container; else None.
    A label is short: a sentence ("Here is my final assessment, with reasons:") is none."""
    if _named(name, OTHER_NAMES):
        return "other"
    if _named(name, CORRECTION_NAMES) or _short(name) and STRONG_CORRECTION.search(str(name)):
        return "correction"
    return "answer" if _named(name, ANSWER_NAMES) else None


def provisional(name) -> bool:
    """Whether a label names a draft, an example or a format ("Draft:", "For example:", "The answer format is")."""
    return _named(name, PROVISIONAL_NAMES)


def is_final(name) -> bool:
    """Whether a label or a cue names the final answer ("Final:", "Final answer", "最终")."""
    return bool(re.search(r"\bfinal\b|最终", str(name), re.I))


def _short(name) -> bool:
    return len(re.findall(r"[a-z]+|[\u4e00-\u9fff]+", str(name).lower())) <= 4


def _named(name, names: set[str]) -> bool:
    """Whether a short label is, or holds a word of, `names`."""
    if not _short(name):
        return False
    joined = re.sub(r"[\W_]+", "", str(name).lower())
    words = re.findall(r"[a-z]+|[\u4e00-\u9fff]+", str(name).lower())
    return joined in names or any(w in names for w in words) or "forexample" in joined and "forexample" in names


# --- JSON segments -------------------------------------------------------------------------------------------------

@dataclass
class Segment:
    """A top-level {…} or […] of a text: its text, where it starts, whether it closes, and the label before it."""

    text: str
    start: int
    closed: bool
    label: str

    @property
    def end(self) -> int:
        return self.start + len(self.text)


def segments(text: str) -> list[Segment]:
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
                out.append(Segment(text[start: i + 1], start, True, label(text[last_end:start])))
                last_end = i + 1
        elif stack and c in "}]":  # a mismatched closer: the segment is not well formed; start over
            stack, start = [], None
    if stack and start is not None:
        out.append(Segment(text[start:], start, False, label(text[last_end:start])))
    return out


class Pairs(list):
    """A JSON object as its (key, value) pairs, so that repeated keys are seen."""


class Conflict(list):
    """The different values given for one key: a duplicate key in an object, a key: value pair written twice. No
    reader takes one of them."""


def collect(pairs, notes: list[str], overrides: set[int] = frozenset(), same=None) -> dict:
    """A dict of (key, value) pairs. A key given twice with the same value keeps it; with different values it holds
    a `Conflict`, unless the later pair is a correction (its index in `overrides`). `same` maps a key to what it
    names, where two spellings name one thing (`Overall impression`, `overall_impression`)."""
    out: dict = {}
    spelled: dict = {}  # what a key names → the key as first written
    for i, (written, value) in enumerate(pairs):
        key = spelled.setdefault(same(written) or written if same else written, written)
        if key in out and i in overrides:
            notes.append(f"{key}: corrected later in the answer, read the correction")
        elif key in out and not _same(out[key], value):
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


def strip_comments(segment: str) -> str:
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


def loads(segment: str, notes: list[str]):
    """A segment as JSON (raw newlines inside strings allowed), or as a Python literal after repairs (comments,
    quotes, commas, bare keys); None if neither. Objects come back as dicts, a key given twice with different values
    holding a `Conflict`."""
    try:
        return _dedupe(json.loads(segment, object_pairs_hook=Pairs, strict=False), notes)
    except ValueError:
        pass
    bare = strip_comments(segment)
    if bare != segment:
        notes.append("removed comments from the JSON")
        try:
            return _dedupe(json.loads(bare, object_pairs_hook=Pairs, strict=False), notes)
        except ValueError:
            pass
    fixed = bare.replace("“", '"').replace("”", '"').replace("‘", "'").replace("’", "'")
    fixed = re.sub(r"([{,]\s*)([A-Za-z_\u4e00-\u9fff][A-Za-z0-9_ \-\u4e00-\u9fff]*?)\s*:", r'\1"\2":', fixed)
    py = re.sub(r"\bnull\b", "None", re.sub(r"\btrue\b", "True", re.sub(r"\bfalse\b", "False", fixed)))
    py = re.sub(r"\bNaN\b", "None", py)
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


NAMED_OBJECT = re.compile(r"[\"']([^\"'\n{}\[\]]{1,40})[\"']\s*:\s*(?=[{\[])")
# The end of an object whose strings are broken (an unescaped quote): the closing quote of its last entry, then its
# brace, then what may follow an object's value.
OBJECT_END = re.compile(r'"\s*}(?=\s*(?:[,}\]]|$))')


def salvage(segment: str, notes: list[str]) -> dict | None:
    """What loads of a segment that does not load as a whole: each named object that loads, read alone (`"scores":
    {…}` beside a reasons object broken by an unescaped quote), and the rest of the segment with every named object
    taken out, loaded again (scores written flat beside a broken `"reasons": {…}`); None if nothing loads. A broken
    object costs only itself."""
    found, cut, broken, covered = [], [], [], 0
    for m in NAMED_OBJECT.finditer(segment):
        if m.start() < covered:
            continue  # inside an object already read
        inner = segments(segment[m.end():])
        if not inner or inner[0].start != 0:
            continue
        if inner[0].closed:
            value, end = loads(inner[0].text, notes), m.end() + inner[0].end
        else:  # an unescaped quote inside it hides its end from `segments`
            close = OBJECT_END.search(segment, m.end())
            value, end = None, close.end() if close else None
        if value is not None:
            found.append((m.group(1), value))
        elif end is not None:
            broken.append(m.group(1))
        if end is not None:
            cut.append((m.start(), end))
            covered = end
    if found:
        notes.append("read " + ", ".join(repr(k) for k, _ in found) + " alone: the rest of the object is not valid "
                     "JSON")
    whole = segments(_without(segment, cut)) if cut else []
    rest = loads(whole[0].text, []) if whole and whole[0].start == 0 and whole[0].closed else None
    if isinstance(rest, dict) and rest:
        notes.append("left out " + ", ".join(map(repr, broken)) + " (not valid JSON) and read the rest of the object"
                     if broken else "read the rest of the object")
        found += list(rest.items())
    return collect(found, notes) if found else None


def _without(segment: str, cut: list[tuple[int, int]]) -> str:
    """A segment without the entries at `cut`, each with the comma that joined it to the next entry (or, for the
    last entry, to the one before)."""
    out, kept = "", 0
    for start, end in cut:
        out += segment[kept:start]
        if after := re.match(r"\s*,", segment[end:]):
            end += after.end()
        else:
            out = re.sub(r",\s*$", "", out)
        kept = end
    return out + segment[kept:]
