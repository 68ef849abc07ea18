"""What OCR'd text in a picture means for text integrity: the rules behind the `text-ocr` evaluator's verdicts.

An image's verdict, from its text regions (each a box, the text read and the recognition confidence):

- `leaked_poem_text`: a region repeats the poem (its lines, title or author): a local alignment against the poem's
  characters finds at least `LEAK_MIN_CHARS` matching characters with at most one error per extra match (so an OCR
  misread, or a generator's typo, inside a leaked line is tolerated), or two consecutive poem characters read with
  confidence ≥ `LEAK_PAIR_CONFIDENCE`;
- `garbled_characters`: a region of at least two Chinese characters that the recogniser reads with low confidence
  (the line's confidence below `GARBLED_LINE_CONFIDENCE`, or two of its characters below `GARBLED_CHAR_CONFIDENCE`):
  shapes that look like writing but are no characters it knows; or a run of `PSEUDO_SCRIPT_CHARS` symbols of any
  script read with confidence below `PSEUDO_SCRIPT_CONFIDENCE` (stroke scribbles read as kana, Latin and signs);
- `other_text`: legible text that is not the poem (two or more Chinese characters, or a Latin word of three letters,
  read with confidence);
- `seal_only`: the only text is a small, roughly square, red region — an artist's seal, which the rubric does not
  count as a text issue;
- `clean`: nothing of the above (single characters read from brushwork are ignored).

The first that applies wins, in that order. `leaked_poem_text`, `garbled_characters` and `other_text` are text
issues (`text_integrity` = the rubric's "text issue" score); as issue types of the raw release they are `leakage`,
`fake_characters` and `fake_characters` (irrelevant characters: the adjudicator may say otherwise).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ...poems import Poem, is_han

RULES_VERSION = 1  # recorded with every result: a resumed run must judge by the same rules
VERDICTS = ("clean", "leaked_poem_text", "garbled_characters", "other_text", "seal_only")
VERDICT_ISSUES = {"leaked_poem_text": "leakage", "garbled_characters": "fake_characters", "other_text": "fake_characters"}
LEAK_MIN_CHARS = 3
LEAK_PAIR_CONFIDENCE = 0.9
GARBLED_LINE_CONFIDENCE = 0.85
GARBLED_CHAR_CONFIDENCE = 0.5
PSEUDO_SCRIPT_CHARS = 4  # a run of this many symbols of any script read with low confidence: pseudo-writing
PSEUDO_SCRIPT_CONFIDENCE = 0.7
OTHER_TEXT_CONFIDENCE = 0.85
SEAL_MAX_SIDE = 0.2  # of the image's shorter side (the OCR's box has a margin round the seal)
SEAL_MAX_ASPECT = 2.2  # a seal holds one to four characters in a square or a short column
SEAL_MIN_RED_SHARE = 0.35  # of the box's pixels


def cjk(text: str) -> str:
    return "".join(c for c in text if is_han(c))


@dataclass
class TextRegion:
    """One line of text the OCR found. `box`: four [x, y] corners in the image's pixels; `chars`: each character's
    recognition confidence, where the recogniser gives them; `kind`: poem | garbled | other | seal | noise."""

    box: list[list[int]]
    text: str
    confidence: float
    chars: list[float] = field(default_factory=list)
    kind: str = "noise"
    matched: str = ""  # for a poem region: the poem characters it repeats

    def to_json(self) -> dict:
        record = asdict(self)
        if not self.matched:
            record.pop("matched")
        return record


@dataclass
class Judgement:
    verdict: str
    regions: list[TextRegion]
    matched: str = ""  # the poem characters that leaked, in the order found

    @property
    def text_issue(self) -> bool:
        return self.verdict in VERDICT_ISSUES

    @property
    def issue_type(self) -> str:
        return VERDICT_ISSUES.get(self.verdict, "none")

    def evidence(self) -> dict:
        return {"verdict": self.verdict, "issue_type": self.issue_type, "matched": self.matched,
                "seals": sum(r.kind == "seal" for r in self.regions), "rules": RULES_VERSION,
                "regions": [r.to_json() for r in self.regions]}


def poem_characters(poem: Poem) -> str:
    """What a leak can repeat: the poem's lines, then its title and author, with a separator between them (a leak
    that runs on from one line into the next costs one, as a misread would)."""
    return "|".join(part for part in (*(cjk(line) for line in poem.lines), cjk(poem.title), cjk(poem.author)) if part)


def align(read: str, poem: str) -> tuple[int, str]:
    """Smith–Waterman local alignment of the characters read against the poem's (match +1, mismatch or gap −1):
    (best score, the poem characters matched in it). A misread character costs one; text around the leak costs
    nothing."""
    rows, cols = len(read) + 1, len(poem) + 1
    score = np.zeros((rows, cols), dtype=np.int32)
    best, at = 0, (0, 0)
    for i in range(1, rows):
        for j in range(1, cols):
            same = read[i - 1] == poem[j - 1] and poem[j - 1] != "|"
            value = max(0, score[i - 1, j - 1] + (1 if same else -1), score[i - 1, j] - 1, score[i, j - 1] - 1)
            score[i, j] = value
            if value > best:
                best, at = int(value), (i, j)
    matched = []
    i, j = at
    while i > 0 and j > 0 and score[i, j] > 0:
        same = read[i - 1] == poem[j - 1] and poem[j - 1] != "|"
        if score[i, j] == score[i - 1, j - 1] + (1 if same else -1):
            if same:
                matched.append(poem[j - 1])
            i, j = i - 1, j - 1
        elif score[i, j] == score[i - 1, j] - 1:
            i -= 1
        else:
            j -= 1
    return best, "".join(reversed(matched))


def leaked(region: TextRegion, poem_chars: str) -> str:
    """The poem characters a region repeats ('' if it is no leak)."""
    read = cjk(region.text)
    if len(read) < 2:
        return ""
    score, matched = align(read, poem_chars)
    if len(matched) >= LEAK_MIN_CHARS and score >= LEAK_MIN_CHARS - 1:
        return matched
    if score >= 2 and region.confidence >= LEAK_PAIR_CONFIDENCE and len(read) <= 3:
        return matched
    return ""


def garbled(region: TextRegion) -> bool:
    if len("".join(region.text.split())) >= PSEUDO_SCRIPT_CHARS and region.confidence < PSEUDO_SCRIPT_CONFIDENCE:
        return True
    if len(cjk(region.text)) < 2:
        return False
    low = sum(c < GARBLED_CHAR_CONFIDENCE for c in region.chars)
    return region.confidence < GARBLED_LINE_CONFIDENCE or low >= 2


def legible_other(region: TextRegion) -> bool:
    latin_word = any(len(w) >= 3 and w.isascii() and w.isalpha() for w in region.text.split())
    return region.confidence >= OTHER_TEXT_CONFIDENCE and (len(cjk(region.text)) >= 2 or latin_word)


def red_seal(box: list[list[int]], image: np.ndarray) -> bool:
    """A small, roughly square region that is mostly seal red (an RGB image array)."""
    xs, ys = [p[0] for p in box], [p[1] for p in box]
    x0, x1 = max(0, min(xs)), min(image.shape[1], max(xs))
    y0, y1 = max(0, min(ys)), min(image.shape[0], max(ys))
    w, h = x1 - x0, y1 - y0
    if w <= 0 or h <= 0 or max(w, h) > SEAL_MAX_SIDE * min(image.shape[:2]) or max(w, h) > SEAL_MAX_ASPECT * min(w, h):
        return False
    crop = image[y0:y1, x0:x1].astype(np.int16)
    r, g, b = crop[..., 0], crop[..., 1], crop[..., 2]
    red = (r > 120) & (r - g > 50) & (r - b > 40)
    return float(red.mean()) >= SEAL_MIN_RED_SHARE


def judge(regions: list[TextRegion], poem: Poem, image: np.ndarray) -> Judgement:
    """Classify every region (setting its `kind`) and give the image's verdict."""
    poem_chars = poem_characters(poem)
    matched = []
    for region in regions:
        if red_seal(region.box, image):
            region.kind = "seal"
        elif found := leaked(region, poem_chars):
            region.kind, region.matched = "poem", found
            matched.append(found)
        elif garbled(region):
            region.kind = "garbled"
        elif legible_other(region):
            region.kind = "other"
        else:
            region.kind = "noise"
    kinds = {r.kind for r in regions}
    verdict = ("leaked_poem_text" if "poem" in kinds else "garbled_characters" if "garbled" in kinds
               else "other_text" if "other" in kinds else "seal_only" if "seal" in kinds else "clean")
    return Judgement(verdict, regions, "".join(matched))
