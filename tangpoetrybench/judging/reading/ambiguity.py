"""The ambiguity detectors every reader runs before it takes a value: each is a closed list of the words or marks
that open a second reading, and where one is found in the part of the answer it watches, the read fails with a
reason naming it. They never pick a reading; they only refuse one.

    CORRECTS   the answer corrects or takes back what it says: "actually", "on second thought", "wait", "I meant",
               "should be", "instead", "revised", "oops", an arrow (`0.5 → 1`), "更正", "应为", "其实"
    DOUBTS     it hedges or doubts: "maybe", "perhaps", "probably", "might", "not sure", "I guess", a question,
               "-ish", "roughly", "也许", "可能", "大概", "不确定"
    TIES       it calls a tie or none: "tie", "toss-up", "equally", "as good as", "neither", "either", "both good",
               `=`, `≈`, "50/50", "不分上下", "一样", "都好", "都不是"
    OWN_SCALE  it states a scale or a direction of its own: "scale", "out of", "points", "percent", "%", "stars",
               "grade", "lower is better", "higher scores mean", "penalty", "deduct", "inverted", "risk", "severity",
               "分制", "满分", "扣分", "越低越好"
    ADJUSTS    it says a score is too high or too low, or moves one (for scores: the prose around the answer and the
               reasons): "deserves", "too", "more", "less", "higher", "lower", "overrated", "generous", "harsh",
               "bump", "notch", "偏高", "偏低", "高估", "低估", "调高", "再低"
    PROVISIONAL  it calls something a draft, an example, a format or a template, not the answer: "draft",
               "for example", "e.g.", "format", "template", "schema", "placeholder", "preliminary", "草稿", "示例", "格式"
    NUMBERS    a number outside the answer's own values (for scores, where numbers are the values): any digit, a
               Chinese numeral with 分, or a value in words ("zero", "half", "full marks", "the highest", "满分")

Which part of an answer each reader watches with which detectors is its grammar's business (docs/reading.md's
table); the reasoning's conclusion is checked against the value read by `conclusion_differs`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from .envelope import Unreadable


@dataclass(frozen=True)
class Detector:
    says: str  # what the text does, in a sentence's predicate ("corrects itself")
    pattern: re.Pattern

    def find(self, text: str) -> str | None:
        """The first words of the text that open a second reading, or None."""
        m = self.pattern.search(text)
        return None if m is None else m.group(0).strip() or m.group(0)


CORRECTS = Detector("corrects itself", re.compile(
    r"\b(?:actually|on (?:second|further) (?:thought|reflection|consideration)|on reflection|wait|correction|"
    r"correct(?:ed|ing)|revis(?:e|ed|ing|ion)|i meant?|should (?:\w+ )?(?:be|have been)|chang(?:e|ed|ing) (?:\w+ )?to|"
    r"instead|rather|scratch that|take (?:that|it) back|let me (?:correct|revise|reconsider|fix|re-?evaluate|redo)|"
    r"reconsider\w*|mistake|mistaken|misread|mixed (?:them |it |these )?up|oops|sorry|updated?|amend\w*|"
    r"just kidding|kidding|changed my mind|double-?check\w*|re-?check\w*)\b"
    r"|→|->|=>|⇒|更正|修正|订正|纠正|改为|改成|应为|应该是|其实|不对|等等|重新考虑|说错|改一下", re.I))
DOUBTS = Detector("hedges or doubts", re.compile(
    r"\b(?:maybe|perhaps|possibly|probably|might|could be|may be|not (?:sure|certain|confident)|unsure|uncertain|"
    r"i guess|hard to (?:say|tell|decide)|(?:can't|cannot|could not|couldn't) (?:decide|tell|say)|or so|roughly|"
    r"approximately|torn|borderline|debatable)\b|-ish\b|\?|也许|可能|或许|大概|不确定|说不准|难说|难以判断|左右|大约",
    re.I))
TIES = Detector("calls a tie or none", re.compile(
    r"\b(?:tie|tied|ties|a draw|toss-?up|equal|equally|evenly|on par|as good as|as bad as|no (?:clear )?(?:winner|"
    r"difference|preference)|indistinguishable|neither|either|none|both (?:are |is )?(?:equally|good|fine|great|"
    r"strong|weak|bad|poor|excellent|acceptable|suitable|correct|wrong)|fifty-fifty)\b|\b50\s*(?:/|-)\s*50\b"
    r"|(?<![<>=!])=(?![=>])|≈|平局|不分上下|难分伯仲|难分高下|不相上下|一样|相当|都(?:很|还|比较)?(?:好|不错|差|不好|一般|可以)"
    r"|两者皆|皆可|都不是|都不对|都不符|皆非|均不|没有一(?:个|首|张)", re.I))
OWN_SCALE = Detector("states a scale or a direction of its own", re.compile(
    r"\bscales?\b|\bout of\b|\bpoints?\b|\bpercent\w*|%|\bstars?\b|[★☆]|\bgrade[sd]?\b|\branks?\b|"
    r"\b(?:lower|higher|smaller|larger|bigger|less|more)\s+(?:\w+\s+)?(?:is|are|=|means?|indicates?|implies|"
    r"signals?)\b|\bthe (?:lower|higher|smaller|larger)\b|\b(?:lower|higher|smaller|larger)\s+(?:scores?|numbers?|"
    r"values?|ratings?)\b|\bpenalt\w*|\bdeduct\w*|"
    r"\binvert\w*|\brevers\w*|\brisks?\b|\bseverity\b|\bdemerits?\b|分制|满分|扣分|罚分|越低越|越高越|分数越", re.I))
ADJUSTS = Detector("says a score is too high or too low", re.compile(
    r"\b(?:deserv\w*|too|more|less|higher|lower|overrat\w*|underrat\w*|overestimat\w*|underestimat\w*|generous|"
    r"harsh|lenient|strict|stingy|bump\w*|notch|rais\w+|reduc\w+|increas\w+|decreas\w+|upgrad\w*|downgrad\w*|"
    r"inflat\w*|lift|drop)\b|偏高|偏低|高了|低了|再高|再低|调高|调低|提高|降低|过高|过低|高估|低估|打高|打低|宽松|严苛|"
    r"高一点|低一点|高一些|低一些", re.I))
PROVISIONAL = Detector("calls something a draft, an example or a format", re.compile(
    r"\b(?:drafts?|examples?|for instance|e\.\s?g\.?|formats?|templates?|schemas?|placeholders?|preliminary|tentative|"
    r"initial(?:ly)?|sample)\b|草稿|初稿|示例|例如|比如|格式|模板|初步", re.I))
NUMBERS = Detector("gives a number of its own", re.compile(
    r"\d|[零〇一二三四五六七八九十百半两]+\s*分(?!析|别|辨|类|开|布|享|配|钟|子|量|明|外|之)|\b(?:zero|half|quarter|"
    r"full (?:marks|score)|perfect score|top (?:marks|score)|maximum|minimum|max|min|lowest|highest|null)\b|一半|最高分|"
    r"最低分|零分", re.I))


def refuse_if(text: str, where: str, *detectors: Detector) -> None:
    """Raise `Unreadable` naming `where` and the first detector that fires in `text`."""
    for detector in detectors:
        if (found := detector.find(text)) is not None:
            raise Unreadable(f"{where} {detector.says} ({found!r})")


def last_sentence_with(text: str, found: Callable[[str], Sequence]) -> Sequence:
    """What `found` finds in the last sentence of the text where it finds anything (the conclusion of a
    reasoning), or (); a question concludes nothing."""
    for sentence in reversed(SENTENCE.split(text)):
        if sentence.strip().endswith(("?", "？")):
            continue
        if hits := found(sentence):
            return hits
    return ()


SENTENCE = re.compile(r"(?<=[.!?。！？；;])\s+|(?<=[。！？；])|\n+")


def conclusion_differs(thoughts: Iterable[str], conclude: Callable[[str], dict], value: dict) -> None:
    """Raise `Unreadable` where a reasoning block's conclusion gives a value other than the one read: `conclude`
    maps a block to what it concludes, thing by thing (a dimension's score, the option chosen), and each thing it
    names must have the value read."""
    for thought in thoughts:
        for thing, concluded in conclude(thought).items():
            if thing in value and concluded != value[thing]:
                raise Unreadable(f"the reasoning concludes {_said(thing, concluded)}, the final answer "
                                 f"{_said(thing, value[thing])}")


def _said(thing, value) -> str:
    shown = "null" if value is None else f"{value:g}" if isinstance(value, float) else str(value)
    return shown if thing == "choice" else f"{thing} {shown}"
