"""Reading a choice among labelled options by a strict grammar: the pairwise winner (A or B) and the Phase-1 letter
(A–D), one reader parameterised by the question's `Options`. Never raises, and never guesses.

After the envelope, the answer must be **exactly one** form of docs/reading.md's table (W1–W5 for the winner, L1–L6
for the letter), nothing before, after or between: the answer object, a labelled line (`Winner: B`, `Answer: C`),
the letter alone, a choosing sentence from a closed set (`Image B is better.`, `C is correct.`), and for the letter
a candidate's title, alone or with its letter. The one free-text slot is the pairwise reason (the object's
`reason`, or a `Reason: …` line after the choice), checked by `slots.pair_reason`.

Titles are matched exactly after the normalisations that cannot merge two titles (brackets and spaces dropped,
width, middle dots alike, traditional characters as simplified ones by OpenCC): a title of two candidates, or one
written without brackets that begins another candidate's title (cut off?), fails.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Sequence

from .core import Pairs, parse_json
from .envelope import Unreadable, excerpt, fold_width, open_envelope
from .slots import pair_reason

LETTERS = "ABCDEFGH"
FORMATTING = re.compile(r"\*\*|__|`")


@dataclass(frozen=True)
class Options:
    """A closed set of labelled options, as the task's question defines them."""

    labels: str  # the options' letters in order: "AB", "ABCD"
    noun: str  # what an option is: "image", "poem"
    fields: tuple[str, ...]  # JSON keys that hold the choice
    line_labels: str  # a regex of the labels of a line that gives the choice ("winner|answer|…")
    sentences: tuple[str, ...]  # choosing sentences, each a regex around `{X}` (the letter's value)
    titles: tuple[str, ...] = ()  # the options' titles in order (the letter task: `《江雪》` names its candidate)

    @property
    def reasoned(self) -> bool:
        """Whether the answer has a reason slot (the pairwise winner)."""
        return self.noun == "image"


CHOOSING = (r"(?:i\s*(?:'d|would|will|'ll)?\s+(?:prefer|choose|pick|select|take|go with)|i(?:'m| am)\s+(?:choosing|"
            r"picking|taking|going with))")
WINNER = Options(
    "AB", "image", ("winner",),
    r"winner|final answer|answer|verdict|better image|better one|better illustration|preferred image|preferred|"
    r"choice|胜者|获胜者|答案|答",
    (r"(?:i think\s+)?{X}\s+is\s+(?:the\s+)?better(?:\s+(?:one|image|illustration|choice))?(?:\s+overall)?",
     r"{X}\s+wins", r"{X}\s+is\s+(?:preferred|preferable)",
     rf"{CHOOSING}\s+{{X}}",
     r"{X}\s+is\s+better\s+than\s+(?:(?:image|picture)\s+)?(?P<other>[A-Za-z])",
     r"(?:我认为|我觉得)?{X}(?:更好|更佳|更胜一筹|胜出|较好)", r"我?选(?:择)?{X}"))


def letter_options(n_options: int = 4, titles: Sequence[str] | None = None) -> Options:
    """The Phase-1 question: candidate poems lettered A, B, … in order."""
    return Options(LETTERS[:n_options], "poem", ("answer", "letter", "choice", "option"),
                   r"final answer|correct answer|my answer|answer|correct option|letter|option|choice|答案|答",
                   (r"{X}\s+is\s+(?:the\s+)?(?:correct|right)(?:\s+(?:answer|option|one|poem|choice))?",
                    r"(?:i (?:think|believe)\s+)?(?:it is|it's)\s+{X}", rf"{CHOOSING}\s+{{X}}",
                    r"我?选(?:择)?\s*{X}", r"{X}(?:是正确答案|正确|是答案)"),
                   tuple(titles or ()))


@dataclass
class Choice:
    """What the reader made of an answer: the option chosen, or None with the notes saying why."""

    label: str | None
    notes: list[str] = field(default_factory=list)
    reason: str | None = None  # the reason given with the choice (pairwise)


# --- titles ---------------------------------------------------------------------------------------------------------

TITLE_MARKS = re.compile(r"[《》「」『』〈〉【】\"'“”‘’()\[\]\s]")


@functools.lru_cache(maxsize=1)
def _to_simplified():
    import opencc

    return opencc.OpenCC("t2s")


def fold(text: str) -> str:
    """A title as the letter reader compares titles: width, brackets and spaces dropped, middle dots alike,
    traditional characters as simplified ones. Two candidates whose titles fold alike cannot be told apart by their
    titles (`_titled` refuses both)."""
    folded = TITLE_MARKS.sub("", fold_width(text))
    folded = re.sub(r"[·・•‧･]", "·", folded)
    return _to_simplified().convert(folded).lower()


fold_title = functools.lru_cache(maxsize=1024)(fold)  # titles recur: a candidate set is asked in four orders


def _titled(written: str, options: Options, bracketed: bool) -> str:
    """The letter of the one candidate whose title is `written`, or `Unreadable`."""
    if not options.titles:
        raise Unreadable(f"{written!r} is no candidate's title (the reader was given none)")
    folded = fold_title(written)
    matches = [LETTERS[i] for i, t in enumerate(options.titles) if fold_title(t) == folded]
    if not matches:
        raise Unreadable(f"{written!r} is no candidate's title")
    if len(matches) > 1:
        raise Unreadable(f"{written!r} is the title of {len(matches)} candidates ({', '.join(matches)})")
    if not bracketed and any(fold_title(t).startswith(folded) and fold_title(t) != folded for t in options.titles):
        raise Unreadable(f"{written!r}, without its brackets, begins another candidate's title: it may be cut off")
    return matches[0]


# --- the forms ------------------------------------------------------------------------------------------------------

VALUE = (r"(?:(?:image|picture|option|candidate|letter|poem)\s+|图片?\s*|选项\s*)?(?P<open>[(\[【\"'“‘])?"
         r"(?P<letter>[A-Za-z])(?(open)[)\]】\"'”’])(?:\s*(?:项|图))?")
TITLE = (r"(?:《(?P<t1>[^《》\n]{1,40})》|「(?P<t2>[^「」\n]{1,40})」|『(?P<t3>[^『』\n]{1,40})』|〈(?P<t4>[^〈〉\n]{1,40})〉"
         r"|【(?P<t5>[^【】\n]{1,40})】|“(?P<t6>[^“”\n]{1,40})”|\"(?P<t7>[^\"\n]{1,40})\""
         r"|(?P<bare>[\u4e00-\u9fff][\u4e00-\u9fff·・]{0,29}))")
END = r"[ \t]*[.。!！]?"
SEPARATOR = r"(?:[ \t]*(?:[:=]|[ \t][-—–][ \t]|[—–])|[ \t]+is|[ \t]*(?:是|为))[ \t]*"
REASON_LINE = re.compile(r"(?:[-*•][ \t]*)?(?:reason|because|why|理由|原因)[ \t]*:[ \t]*(?P<reason>.+)", re.I)


@functools.lru_cache(maxsize=32)
def _forms(options: Options) -> list[tuple[str, re.Pattern]]:
    """The forms of a line that gives the choice, each with its name (docs/reading.md's table)."""
    label = rf"(?:#{{1,6}}[ \t]+)?(?:the[ \t]+)?(?:{options.line_labels}){SEPARATOR}"
    first = "W" if options.reasoned else "L"
    forms = [(f"{first}3 (a labelled line)" if options.reasoned else "L2 (a labelled line)", rf"{label}{VALUE}{END}"),
             (f"{first}4 (the letter alone)" if options.reasoned else "L1 (the letter alone)", rf"{VALUE}{END}")]
    forms += [("W5 (a choosing sentence)" if options.reasoned else "L3 (a choosing sentence)",
               sentence.replace("{X}", VALUE) + END) for sentence in options.sentences]
    if options.titles:
        forms += [("L4 (the letter with its title)", rf"(?:{label})?{VALUE}[ \t]*(?:[.:、,)]|[ \t][-—–]|[—–])?[ \t]*{TITLE}{END}"),
                  ("L4 (the letter with its title)", rf"(?:{label})?{TITLE}[ \t]*(?:[-—–:,]|[ \t][-—–])?[ \t]*{VALUE}{END}"),
                  ("L5 (a title)", rf"(?:{label})?{TITLE}{END}")]
    return [(name, re.compile(form, re.I)) for name, form in forms]


@functools.lru_cache(maxsize=32)
def _label_line(options: Options) -> re.Pattern:
    """A line that is a choice's label alone (`Answer:`, `**Final Answer**`), its value on the next line."""
    return re.compile(rf"(?:#{{1,6}}[ \t]+)?(?:the[ \t]+)?(?:{options.line_labels})[ \t]*:?", re.I)


def _statement(line: str, options: Options) -> tuple[str, str] | None:
    """(the option a line gives, the form's name) where the whole line is one of the forms; None where it is none;
    `Unreadable` where a form's letter is no option, or its letter and title disagree, or its title is not exactly
    one candidate's."""
    text = FORMATTING.sub("", line).strip()
    for name, form in _forms(options):
        if not (m := form.fullmatch(text)):
            continue
        found = m.groupdict()
        title = next(((k, found[k]) for k in ("t1", "t2", "t3", "t4", "t5", "t6", "t7", "bare") if found.get(k)),
                     None)
        if title and title[0] == "bare" and not any(fold_title(t) == fold_title(title[1]) for t in options.titles):
            continue  # Chinese words that are no candidate's title
        by_title = _titled(title[1], options, title[0] != "bare") if title else None
        by_letter = _letter(found["letter"], options) if found.get("letter") else None
        if by_title and by_letter and by_title != by_letter:
            raise Unreadable(f"{text!r} gives the letter {by_letter} and another candidate's title")
        if found.get("other") and _letter(found["other"], options) == by_letter:
            raise Unreadable(f"no answer in the answer's forms ({text!r} compares {by_letter} with itself)")
        return by_letter or by_title, name
    return None


def _letter(letter: str, options: Options) -> str:
    if letter.upper() not in options.labels:
        raise Unreadable(f"{letter.upper()} is not one of the options ({', '.join(options.labels)})")
    return letter.upper()


def _object_choice(value, options: Options) -> tuple[str, str | None]:
    """(the option, the reason) of the answer object (W1, W2, L6), or `Unreadable`."""
    if not isinstance(value, Pairs):
        raise Unreadable("the answer is JSON, but not the answer's object: text outside the form")
    keys = [str(k).lower() for k in value.keys()]
    allowed = {*options.fields, *(("reason",) if options.reasoned else ())}
    if extra := next((k for k in value.keys() if str(k).lower() not in allowed or keys.count(str(k).lower()) > 1),
                     None):
        raise Unreadable(f"the object has {extra!r}" + (" twice" if str(extra).lower() in allowed else "")
                         + ": text outside the form")
    given = [(k, v) for k, v in value if str(k).lower() in options.fields]
    if len(given) > 1:
        raise Unreadable(f"the object gives its choice twice (under {' and '.join(k for k, _ in given)})")
    if not given:
        raise Unreadable(f"no answer in the answer's forms (the object has no {' or '.join(options.fields)})")
    key, written = given[0]
    if not isinstance(written, str) or not (m := re.fullmatch(VALUE, written.strip(), re.I)):
        raise Unreadable(f"the object's {key!r} is {json.dumps(written, ensure_ascii=False, default=str)[:40]}, not "
                         f"one of the options ({', '.join(options.labels)})")
    reason = next((v for k, v in value if str(k).lower() == "reason"), None)
    if reason is not None and not isinstance(reason, str):
        raise Unreadable("the object's reason is not a sentence: text outside the form")
    return _letter(m.group("letter"), options), reason


def read_choice(text: str | None, options: Options) -> Choice:
    """The option an answer chooses (see the module's docstring); never raises."""
    notes: list[str] = []
    try:
        envelope = open_envelope(text)
        notes += envelope.notes
        label, reason = _read(envelope.body.strip(), options, notes)
        if reason is not None:
            pair_reason(reason, label, options.labels)
        return Choice(label, notes, reason)
    except Unreadable as why:
        return Choice(None, notes + [str(why)])
    except Exception as exc:  # the contract is "never raises": a reader bug must not stop a run
        return Choice(None, notes + [f"reader error: {type(exc).__name__}: {exc}"])


def _read(body: str, options: Options, notes: list[str]) -> tuple[str, str | None]:
    """(the option, the reason) of an answer's body that is exactly one form, or `Unreadable`."""
    if body.startswith("{"):
        repairs: list[str] = []
        label, reason = _object_choice(parse_json(body, repairs), options)
        notes.append("read the answer object" + (f" (repaired: {', '.join(repairs)})" if repairs else ""))
        return label, reason
    lines = [line.strip() for line in body.split("\n") if line.strip()]
    if len(lines) >= 2 and _label_line(options).fullmatch(FORMATTING.sub("", lines[0])):
        lines = [f"{FORMATTING.sub('', lines[0]).rstrip(': ')}: {lines[1]}", *lines[2:]]  # `Answer:` then `C`
    reason = None
    if options.reasoned and len(lines) == 2 and (m := REASON_LINE.fullmatch(FORMATTING.sub("", lines[1]))):
        lines, reason = lines[:1], m.group("reason")
    found = [_statement(line, options) for line in lines]
    if len(lines) > 1:
        if all(found):
            given = sorted({label for label, _ in found})
            raise Unreadable(f"the answer gives {' and '.join(given)}" if len(given) > 1 else
                             f"the answer gives {given[0]} twice: one form only")
        raise Unreadable(f"text outside the form: {excerpt(next(l for l, f in zip(lines, found) if not f))}")
    if found[0] is None:
        raise Unreadable(f"no answer in the answer's forms ({excerpt(lines[0])} is none of them)")
    label, name = found[0]
    notes.append(f"read {name}")
    return label, reason


# --- the two tasks -------------------------------------------------------------------------------------------------

@dataclass
class ParsedPair:
    winner: str | None  # "A", "B", or None when the answer could not be read
    reason: str | None
    status: str  # ok | repaired | failed
    notes: list[str] = field(default_factory=list)

    @property
    def error(self) -> str | None:
        return "; ".join(self.notes) if self.notes else None


def parse_pair_answer(text: str | None) -> ParsedPair:
    """Read a pairwise answer; never raises, never guesses. `ok`: exactly W1, `{"winner": "A"|"B", "reason": str}`,
    its reason favouring the winner or empty; `repaired`: another form of the grammar, the notes saying which;
    `failed`: none, the notes saying which condition failed."""
    read = read_choice(text, WINNER)
    if read.label is None:
        return ParsedPair(None, None, "failed", read.notes)
    if _exact_pair(text):
        return ParsedPair(read.label, read.reason, "ok")
    return ParsedPair(read.label, read.reason, "repaired", read.notes + ([] if read.reason else ["no reason given"]))


def _exact_pair(text: str | None) -> bool:
    try:
        pairs = json.loads((text or "").strip(), object_pairs_hook=Pairs)
    except ValueError:
        return False
    return (isinstance(pairs, Pairs) and sorted(pairs.keys()) == ["reason", "winner"]
            and pairs.get("winner") in tuple(WINNER.labels) and isinstance(pairs.get("reason"), str))


@dataclass
class ParsedLetter:
    letter: str | None
    status: str  # ok | repaired | failed
    error: str | None = None


EXACT_LETTER = re.compile(r"\s*[(（【\[]?([A-H])[)）】\].。]?\s*")


def parse_letter(text: str | None, n_options: int = 4, titles: Sequence[str] | None = None) -> ParsedLetter:
    """The option letter of a multiple-choice answer; never raises, never guesses. `ok`: the letter alone (maybe
    bracketed or with a full stop); `repaired`: another form of the grammar (`titles`, the candidates' titles in
    letter order, let a title name its candidate); `failed`: none, the error saying which condition failed."""
    read = read_choice(text, letter_options(n_options, titles))
    if read.label is None:
        return ParsedLetter(None, "failed", "; ".join(read.notes))
    if EXACT_LETTER.fullmatch(text or ""):
        return ParsedLetter(read.label, "ok")
    return ParsedLetter(read.label, "repaired", "; ".join(read.notes))
