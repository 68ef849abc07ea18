"""Reading a choice among labelled options: the pairwise winner (A or B) and the Phase-1 letter (A–D), one reader
parameterised by the task's `Options` (the labels, and the other names each option goes by).

The rule: a careful person reading the answer beside the question agrees with the option returned, or none is
(a failed read, never a guess). After the core (`prepare`: thinking, NFKC, fences, struck-through text), the reader
finds every *reference* to an option: its letter (`B`, `(b)`, `Ｂ`, `option c`, `Image A`, `图B`, `B项`), and where the
task names them so, its number or place (`Image 2`, `the second image`, `第二张`, `图一`, `the third poem`, `第三首`),
its title (`《江雪》`, given `titles`), or "the former"/"the latter" (`前者`/`后者`: of the two options named before
it, or with none named, of the question's two: the pairwise prompt names A first). A capital "A" followed on its line
by a word that is not a verb ("A lone fisherman") is an article, and a lower-case letter followed by a word is not a
letter; a capital "A" that ends its line ("Winner: A" then a reason on the next) is a letter. References written as
one (`B (the second image)`, `C — 《江雪》`, `《江雪》, letter B`) must agree. Each reference is then:

- *chosen*: named as the answer (`Winner: B`, `Answer: (B)`, `the answer is B`, `I'd choose C`, `Prefer B over A`,
  `it's C`, `that is 《江雪》`, `选C`, `答案：A`), said to be better (`B is better`, `Image B wins`, `B > A`, `Image A
  better captures the snow`, `A loses to B` for B, `图一更符合诗意`, `A isn't, B is`), given alone (`B`, `B.`, a line or
  a clause of its own, the first word of the answer followed by a full stop or a dash), set against another where the
  sentence ends (`C rather than A.`, `D over B.`), ending its sentence after "but", "overall", "points to" or a
  correction word (`Not A but C.`, `Just kidding, A.`), or in a JSON field that holds the choice (`winner`,
  `better_image`, `answer`, `choice`, `答案` …, also nested under `answer`), whose value is read by these same rules;
- *rejected*: denied (`not B`, `Definitely not A`, `B is not better`, `rather than A`, `better than B`, `不是B`,
  `B > A` for A), or the claim a negation governs (`I don't think A is better`, `I'm not sure it's B`, `No way A is
  better`, `It is not the case that A …`);
- *hedged*: `maybe B`, `B might be better`, `Maybe B?`;
- *offered*, none chosen: `A or B`, `A, B, C, or D`;
- or only mentioned (`Image A shows the moon`, `between A and C`, a walk through the options line by line, `A would
  be better if it had the moon`, a concession: `Although A better captures the moon, …`).

A reference takes the reading of the one before it where the text says so (`B is wrong, so is C`, `A isn't, nor is
B`, `C is about spring; so is D`), and the members of a list that ends its sentence share the first's reading
(`Answer: A and B.` chooses two). The answer is the option chosen, where every choice agrees and none of it is
rejected. A later choice introduced by a correction word ("Actually, on second thought, B", "Wait — …", "but
honestly B", "Just kidding, A", a JSON object labelled "Correction:") or labelled final ("Final answer: B") replaces
the earlier ones. The read fails when nothing is chosen ("The answer is not B.", "Definitely not A.", "It's a
tie"), when two options are ("Image A is better" beside `{"winner": "B"}`, two JSON objects that disagree, a `winner`
key given twice, "Winner: A" and "Winner: B" on two lines), when the chosen option is not one (`E`, `C` of two
images, a title that is no candidate's, `tie`, "the former" with three named), when it is also rejected, or when the
answer wavers, doubts or takes it back after choosing ("Hmm, actually B might be better", "On second thought, I'm
not sure", "The answer is C. Actually, I am not sure.", "Just kidding."). Objects and lines introduced as a format,
an example or a draft are not answers. A reason inside the answer object is read as prose: a reason that prefers the
other image (`{"winner": "B", "reason": "Image A better captures the snow."}`) fails the answer, even in the exact
form asked for.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Sequence

from .core import (CORRECTION, DENIED_CLAIM, DOUBT, NEGATION_BEFORE, STRONG_CORRECTION, Conflict, Pairs, is_final, kind,
                   label, loads, prepare, provisional, segments)

LETTERS = "ABCDEFGH"
NEAR = 120  # characters around a reference that its cues are looked for in
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
            "1st": 1, "2nd": 2, "3rd": 3, "4th": 4, "5th": 5, "6th": 6, "7th": 7, "8th": 8}
CHINESE_NUMBERS = {c: i + 1 for i, c in enumerate("一二三四五六七八")}


@dataclass(frozen=True)
class Options:
    """A closed set of labelled options and the names that refer to them, as the task's question defines them."""

    labels: str  # the options' letters in order: "AB", "ABCD"
    nouns: tuple[str, ...]  # words that name an option with its letter ("image A", "option c")
    numbered: bool  # whether a number names an option in order ("Image 2", "图2"): the question numbered them so
    ordinal_nouns: tuple[str, ...]  # "the second image", "the third poem"
    counters: str  # Chinese measure words after an ordinal: 第二张, 第三首
    fields: frozenset[str]  # JSON fields that hold the choice, compared without case, spaces or punctuation
    verbs: str = ""  # words before a reference that choose it in this task ("the image illustrates 《江雪》")
    titles: tuple[str, ...] = ()  # the options' titles in order (《江雪》 names its option)


# The pairwise question: "Image A is the first image, image B the second."
WINNER = Options("AB", ("image", "picture", "pic", "illustration", "painting", "artwork", "option", "candidate"), True,
                 ("image", "picture", "pic", "illustration", "painting", "one", "artwork"), "张幅个",
                 frozenset({"winner", "better", "betterimage", "best", "bestimage", "choice", "chosen", "preferred",
                            "preference", "selected", "selection", "answer", "verdict", "pick", "final", "finalanswer",
                            "胜者", "答案", "选择", "更好"}))


def letter_options(n_options: int = 4, titles: Sequence[str] | None = None) -> Options:
    """The Phase-1 question: candidate poems lettered A, B, … in order."""
    return Options(LETTERS[:n_options], ("option", "choice", "letter", "candidate", "poem"), False,
                   ("poem", "option", "candidate", "choice", "one"), "首个项",
                   frozenset({"answer", "letter", "choice", "option", "selected", "selection", "pick", "final",
                              "finalanswer", "result", "prediction", "poem", "答案", "选项", "选择"}),
                   r"\b(?:illustrates?|depicts?|shows?|portrays?|represents?|matches|is about|is from|is|"
                   r"corresponds to|belongs to|refers to)|描绘的是|表现的是|画的是|对应的是|对应",
                   tuple(titles or ()))


@dataclass
class Choice:
    """What the reader made of an answer: the option chosen, or None with the notes saying why."""

    label: str | None
    notes: list[str] = field(default_factory=list)
    reason: str | None = None  # the answer object's reason, where one gave the choice


# --- the words around a reference ----------------------------------------------------------------------------------

FILLER_MARKS = " \t*_\"'`“”‘’"
FILLER_WORDS = set("the clearly definitely obviously certainly surely probably likely undoubtedly indeed still simply "
                   "just honestly frankly really truly".split())
CHOSEN_BEFORE = re.compile(
    r"(?:\b(?:answer|winner|verdict|choice|pick|selection|decision|conclusion|preference|output|result)s?"
    r"|\bbetter (?:one|image|illustration|picture|match|choice|fit)|\bbest (?:one|image|illustration|match|fit|choice)"
    r"|\b(?:correct|right) (?:one|answer|option|poem|choice|letter|image)|\bfinal(?: answer| choice| verdict)?"
    r"|\bthe one|答案|胜者|结论|选择|最终答案|最终选择|更好的(?:一张|一幅)?)[\"']?\s*"
    r"(?:is|would be|will be|must be|has to be|should be|:|=|-|—|–|→|是|为|应为|应是|应该是)?\s*$"
    r"|\b(?:i|we)(?:'d|’d|'ll|’ll| would| will| shall)?\s+(?:choose|chose|pick|picked|select|selected|go with|"
    r"went with|vote for|prefer|opt for|lean towards?|lean to|favou?r|say|recommend|take|go for)\s*[:：]?\s*$"
    r"|(?:^|[\n.!?;:]\s*)(?:prefer|choose|pick|select|go with|vote for|opt for)\s*[:：]?\s*$"
    r"|\b(?:to choose|to pick|goes to|go to|preferred|my vote)\s*[,:：]?\s*$|\byes\s*[,:;—–\-]*\s*$"
    r"|\b(?:better|best)\b[^.?!\n]{0,40}\bis\s*$"  # "the illustration that better matches the poem is …"
    r"|\b(?:closest|nearest|likeliest)(?: one| match| poem| image)?\s*(?:is|:)\s*$"
    r"|\b(?:i'm|i am|we're|we are)\s+(?:going with|choosing|picking|selecting|voting for)\s*$"
    r"|\bmy (?:answer|choice|pick|vote|verdict|selection)\s*(?:is|:)?\s*$"
    r"|\b(?:it's|it’s|it is|it must be|it has to be|it should be|that's|that’s|that is|this is|that would be|"
    r"must be|has to be|should be|so it's|so|thus|therefore|hence|i think|i believe|i'd say|i would say|i guess)\s*$"
    r"|\b(?:actually|on second thought|on reflection|wait|no|rather|instead|i mean|i meant|correction|"
    r"make (?:it|that))\s*[,:;—–\-]*\s*$"
    r"|(?:选择?|我选|应选|应该选|就选|选定|是|就是|应是|应为|应该是|乃|为|答案是|答案为)\s*[:：]?\s*$", re.I)
DEPICTS = (r"(?:captures?|fits?|matches|conveys?|depicts?|shows?|illustrates?|reflects?|renders?|evokes?|portrays?|"
           r"expresses|represents?|suits?|follows?|embodies)\b")
CHOSEN_AFTER = re.compile(
    r"^\s*(?:,?\s*(?:which|that)\s+)?(?:is|was|'s|seems|looks|appears|would be|must be|remains)\s+"
    r"(?:(?:clearly|definitely|obviously|certainly|probably|much|far|slightly|overall|still|simply|just|really|truly)"
    r"\s+)*(?:the\s+)?"
    r"(?:better|best|correct|right|winner|superior|stronger|preferable|preferred|closer|more faithful|more fitting|"
    r"more accurate|answer|one)\b(?!\s+(?:in|at|for|on|with|regarding|when|of|if|unless|were|had)\b)"
    r"|^\s*(?:wins|won|fits|matches|prevails)(?:\s+(?:best|better|most|overall|the (?:image|picture|poem) best))?"
    r"(?=\s*(?:$|[.,;!。，；！)—–]|\s-\s|\s(?:and|but|because|since|as|here)\b))"
    r"|^\s*(?:takes it|gets my vote|it is|is it|is my (?:answer|choice|pick)|is (?:the )?most likely|is likeliest)\b"
    r"|^\s*(?:outshines|outperforms|beats|surpasses|edges out|is preferred)\b"
    r"|^\s*(?:(?:much|far|clearly|simply)\s+)?(?:better|best|more (?:faithfully|closely|fully|accurately|vividly))\s+"
    rf"{DEPICTS}"  # "Image A better captures the snow"
    rf"|^\s*{DEPICTS}[^.;,!?\n。，；！？]{{0,40}}?\b(?:better|best|more (?:faithfully|closely|fully|accurately))\b"
    r"|^\s*>{1,2}(?=\s|[A-H]\b)"  # "B > A"
    r"|^\s*(?:is|does)\s*(?=[.!。！]|$)"  # "A isn't, B is."
    r"|^\s*[—–:-]\s*(?:(?:much|clearly|definitely)\s+)?(?:better|best|the better one|the winner|winner)\b"
    r"|^\s*(?:更好|更佳|更符合|更贴切|更契合|更胜一筹|胜出|获胜|较好|为佳|最好|最佳|最符合|正确|是正确|是答案|更合适|最合适)", re.I)
INVERSE_BEFORE = re.compile(r"\b(?:worse|weaker|poorer|inferior|less \w+)\s+(?:than|to)\s*$|\bnot (?:as|so) \w+ as\s*$"
                            r"|\b(?:loses?|lost|losing|yields?)\s+(?:out\s+)?to\s*$"  # "A loses to B"
                            r"|\bfalls? short of\s*$"
                            r"|\b(?:beaten|outdone|outshone|outperformed|surpassed|bested|eclipsed)\s+by\s*$"
                            r"|[^\s<>=-]\s*<\s*$", re.I)  # "A < B"
# A negated inverse comparison says only that the reference does not win: "B is no worse than A", "not inferior to A".
NEGATED_INVERSE = re.compile(r"(?:\bnot|n't|\bno|\bnever|\bhardly|\bscarcely|\bbarely)\s+(?:\w+\s+)?$", re.I)
LOSER_BEFORE = re.compile(r"[^\s<>=-]\s*>{1,2}\s*$")  # "B > A" (not an arrow "->", not a quoted line "> A")
REJECTED_AFTER = re.compile(
    r"^\s*(?:is|was|'s|seems|looks)?\s*(?:not|n't|never)\b|^\s*(?:isn't|isn’t|wasn't|doesn't|does not|did not|"
    r"didn't|can't|cannot|fails?|loses?|lost)\b|^\s*(?:is|was|seems|looks)\s+(?:wrong|incorrect|worse|weaker|"
    r"inferior|out|less|off|a poor)\b|^\s*<(?=\s|[A-H]\b)"
    r"|^\s*(?:不对|不是(?=\s*(?:$|[。.,，!！;；]))|错|不符|较差|更差|不行|不如|不正确)", re.I)
HEDGE_BEFORE = re.compile(r"\b(?:maybe|perhaps|possibly|might be|may be|could be|either)\s*$|也许|可能|或许", re.I)
# A clause that concedes what it says of a reference: "Although A better captures the moon, B wins".
CONCESSION = re.compile(r"\b(?:although|though|even though|even if|while|whereas|despite|granted|admittedly)\b"
                        r"[^.;:!?\n,。；：！？，]*$", re.I)
HEDGE_AFTER = re.compile(r"^\s*(?:might|may|could|possibly)\b|^\s*\?", re.I)
EXAMPLE_BEFORE = re.compile(r"(?:\bfor (?:example|instance)|\be\.g\.?|\bsuch as|\bexample|例如|比如)\s*[:,]?\s*$", re.I)
# What joins references written one after another: "A or B", "A, B, C, or D" (offered, none chosen), "A and B", "A, B"
# (a list: after a cue, every member shares the first's reading: "Answer: A and B." chooses two).
JOINER = re.compile(r"^[\s\"']*(?:(?P<alternative>,?\s*(?:or|and/or|/|或者?|还是|vs\.?|versus)"
                    r"\s*(?:maybe|perhaps|possibly)?)"
                    r"|(?P<list>,?\s*(?:and|&|和|与|及)|[,、]))[\s\"']*$", re.I)
# A reference that takes the reading of the one before it: "B is wrong, so is C", "A isn't, nor is B".
ANAPHORA = re.compile(r"\b(?:so|nor|neither|as)\s+(?:is|was|does|did|are|do|has|would|could|can)\s*$"
                      r"|\b(?:the )?same (?:goes )?(?:for|with)\s*$|\blikewise\s*,?\s*$", re.I)
# "C rather than A", "B over A", "B, not A": between two references, the first chosen where the sentence is theirs.
CONTRAST = re.compile(r"^\s*,?\s*(?:rather than|instead of|over|and not|but not|not|>)\s*$", re.I)
# Cues that choose a reference that ends its sentence: "Not A but C.", "A careful reading points to C.", "Overall, B.",
# a correction word ("Just kidding, A.", "Wait, A.").
END_CUE = re.compile(rf"\bbut\s*$|\b(?:points?|pointing|leads?|leading)\s+(?:\w+\s+)?to\s*$"
                     rf"|\b(?:overall|on balance|in the end|ultimately|all in all)[\s,:]*$"
                     rf"|(?:{CORRECTION.pattern})[\s,:;—–\-]*$", re.I)
APPOSITION = re.compile(r"^\s*(?:[(\[（【]|[—–]|\s-\s|[:：]|i\.e\.,?|namely|即)\s*$", re.I)
SEPARATED = re.compile(r"(?:[:：=→?？]|\s[—–-]|[—–])\s*$|[.!。！;；]\s*$")  # "…: C", "… — B", "Which is better? B",
# and a reference that is a sentence or a clause of its own ("… matters more. B.", "B is wrong, so is C; D.")
QUESTION = re.compile(r"^[^.!?。！？\n]*[?？]")  # the sentence a reference stands in is a question
ENDS = re.compile(r"^[\s)\]）】\"'*_`]*(?:[.。!！]\s*)?(?:$|\n)")  # the sentence (or the answer) ends here
LEADS = re.compile(r"^[\s)\]）】\"'*_`]*(?:$|[.。!！,，;；]|\(|\n)")  # an answer given first, then more
DASHED = re.compile(r"^[\s)\]）】\"'*_`]*(?:\s[—–-]|[—–])")  # "B — it keeps the snow" (a letter's, not "Image A — …")
LINE_START = re.compile(r"(?:^|\n)[ \t>*#\-•\"'`_]*(?:\d+[.)]\s*)?$")
# A bare capital A followed by one of these is the option; followed by any other word, it is an article.
AFTER_A = {"is", "was", "seems", "looks", "appears", "fits", "matches", "wins", "won", "has", "had", "shows",
           "depicts", "captures", "illustrates", "conveys", "does", "did", "and", "or", "but", "because", "since",
           "as", "over", "than", "vs", "versus", "better", "best", "would", "could", "might", "should", "will", "must",
           "can", "for", "which", "that", "clearly", "definitely", "probably", "too", "also", "then", "so", "not",
           "isn", "doesn", "remains", "lacks", "misses", "nor", "with", "without", "instead", "rather", "here",
           "edges", "beats", "outshines", "outperforms", "surpasses", "prevails", "takes", "gets", "keeps",
           "stands", "comes", "feels", "works", "suits", "shines", "definitely"}


@functools.lru_cache(maxsize=32)
def _reference(options: Options) -> re.Pattern:
    nouns = "|".join(options.nouns)
    parts = [rf"\b(?:{nouns})[\s_]*#?\s*(?P<noun>[A-Ha-h])(?![A-Za-z0-9])",
             r"(?:图片?|选项|候选)\s*(?P<zh>[A-Ha-h])(?![A-Za-z0-9])|(?<![A-Za-z0-9'’])(?P<zh2>[A-Ha-h])\s*(?:图|项)",
             r"[(\[【]\s*(?P<bracket>[A-Ha-h])\s*[)\]】]",
             r"(?<![A-Za-z0-9'’_\-])(?P<bare>[A-Ha-h])(?![A-Za-z0-9_'’]|-[A-Za-z]|\.[A-Za-z])"]
    if options.numbered:
        parts = [rf"\b(?:{nouns})\s*(?:#|no\.?|number)?\s*(?P<number>[1-9])(?!\d)",
                 r"图\s*(?P<zhnumber>[1-8一二三四五六七八])(?![\d])"] + parts
    ordinal = "|".join(ORDINALS)
    parts = [rf"(?:\bthe\s+)?\b(?P<ordinal>{ordinal})\s+(?:{'|'.join(options.ordinal_nouns)})\b",
             rf"\bthe\s+(?P<place>{ordinal})\b(?![\s_-]*\w)",  # "is the first.", "— the second"
             rf"第\s*(?P<zhordinal>[1-8一二三四五六七八])\s*[{options.counters}](?:图片?|画|诗)?",
             r"《(?P<title>[^《》\n]{1,30})》", r"\bthe\s+(?P<former>former|latter)\b|(?P<formerzh>前者|后者)"] + parts
    return re.compile("|".join(parts), re.I)


@dataclass
class _Ref:
    start: int
    end: int
    label: str | None  # None: it names something that is not an option (E of four, an unknown title)
    text: str
    bare: bool


def _references(text: str, options: Options) -> list[_Ref]:
    out = []
    for m in _reference(options).finditer(text):
        group = m.lastgroup
        value = m.group(group)
        if group == "bare" and _not_a_letter(text, m):
            continue
        if group in ("number", "zhnumber", "ordinal", "zhordinal", "place"):
            place = ORDINALS.get(value.lower()) or CHINESE_NUMBERS.get(value) or int(value)
            found = options.labels[place - 1] if place <= len(options.labels) else None
        elif group == "title":
            found = _titled(value, options.titles)
        elif group in ("former", "formerzh"):
            found = _former(value.lower() in ("former", "前者"), out, options)
        else:
            found = value.upper() if value.upper() in options.labels else None
        out.append(_Ref(m.start(), m.end(), found, m.group(0), group == "bare"))
    return out


def _not_a_letter(text: str, m: re.Match) -> bool:
    """Whether a letter standing alone is an English word or part of an abbreviation: "A lone fisherman", "a boat",
    "e.g."."""
    letter, after = m.group(0), text[m.end():m.end() + 40]
    if re.search(r"[A-Za-z]\.\Z", text[max(0, m.start() - 2):m.start()]):
        return True
    word = re.match(r"[ \t]+([A-Za-z]+)", after)  # on its line: "Winner: A\nReason: …" is option A
    if letter == "A":
        return bool(word) and word.group(1).lower() not in AFTER_A
    return letter.islower() and bool(re.match(r"\s*[A-Za-z]", after))


def _former(first: bool, before: list[_Ref], options: Options) -> str | None:
    """The option "the former" (`first`) or "the latter" names: of the two options named before it, or where none
    was, of the question's two (the pairwise prompt names A first); None where that is not two."""
    named = list(dict.fromkeys(r.label for r in before if r.label))
    two = named if named else list(options.labels)
    return (two[0] if first else two[1]) if len(two) == 2 else None


def _titled(written: str, titles: Sequence[str]) -> str | None:
    """The option whose title is written (exactly, or the one title that it begins or that begins it)."""
    written = written.strip()
    if written in titles:
        return LETTERS[titles.index(written)]
    close = [i for i, t in enumerate(titles) if t.startswith(written) or written.startswith(t)]
    return LETTERS[close[0]] if len(close) == 1 else None


# --- reading -------------------------------------------------------------------------------------------------------

@dataclass
class _Claim:
    at: float
    end: int
    label: str | None
    text: str
    corrects: bool = False  # introduced as a correction or labelled final: it replaces what came before
    hedged: bool = False
    clash: bool = False  # references written as one that name different options


def read_choice(text: str | None, options: Options) -> Choice:
    """The option an answer chooses (see the module's docstring); never raises."""
    notes: list[str] = []
    try:
        body, _ = prepare(text, notes)
        if not body.strip():
            return Choice(None, notes + ["empty answer"])
        claims, rejected, reason, body = _objects(body, options, notes)
        prose_claims, prose_rejected = _prose(body, options)
        claims = sorted(claims + prose_claims, key=lambda c: c.at)
        return _decide(claims, rejected + prose_rejected, body, reason, notes)
    except Exception as exc:  # the contract is "never raises": a reader bug must not stop a run
        return Choice(None, notes + [f"reader error: {type(exc).__name__}: {exc}"])


def _objects(body: str, options: Options, notes: list[str]):
    """The claims of the JSON objects that hold a choice field, and the body with every object blanked (an object
    that does not load stays, read as prose)."""
    claims, rejected, reason = [], [], None
    for seg in segments(body):
        if kind(seg.label) == "other":
            notes.append(f"skipped an object labelled {seg.label!r}")
        else:
            value = loads(seg.text, []) if seg.closed else None
            if value is None:
                continue  # an object that does not load (or never closes) is read as prose: '"winner": "A"' chooses
            fields, prose = _fields(value, options)
            corrects = kind(seg.label) == "correction" or is_final(seg.label)
            for name, given in fields:
                found = _value(given, options)
                if found is None:
                    notes.append(f"the object's {name!r} is " + ("given twice, differently" if isinstance(
                        given, Conflict) else f"{given!r}, not one of the options"))
                claims.append(_Claim(seg.start, seg.end, found, f"{name}: {given!r}", corrects))
            if fields:
                for i, sentence in enumerate(prose):  # the reason: read as prose, at the object's place
                    inner, inner_rejected = _prose(sentence, options, seg.start + (i + 1) / (len(prose) + 1))
                    for claim in inner:
                        claim.end = seg.end
                    claims, rejected = claims + inner, rejected + inner_rejected
                reason = next((v for k, v in _strings(value) if re.sub(r"[\W_]+", "", k.lower()) in
                               ("reason", "reasoning", "rationale", "explanation", "理由")), reason)
        body = body[:seg.start] + re.sub(r"[^\n]", " ", seg.text) + body[seg.end:]
    return claims, rejected, reason, body


def _value(given, options: Options) -> str | None:
    """The option a JSON field's value names: read by the same rules ("B", "Image 2", "B (the second image)"), or
    a place alone ("second"); None for anything else (a tie, two options, a number)."""
    if not isinstance(given, str):
        return None
    place = re.fullmatch(r"\s*(?:the\s+)?(\w+)(?:\s+one)?\s*\.?\s*", given, re.I)
    if place and place.group(1).lower() in ORDINALS:
        number = ORDINALS[place.group(1).lower()]
        return options.labels[number - 1] if number <= len(options.labels) else None
    return read_choice(given, options).label


def _fields(value, options: Options, depth: int = 2) -> tuple[list[tuple[str, object]], list[str]]:
    """The choice fields of a loaded object, up to `depth` levels down, and its other strings (read as prose)."""
    fields, prose = [], []
    if isinstance(value, dict):
        for key, inner in value.items():
            name = re.sub(r"[\W_]+", "", str(key).lower())
            if name in options.fields and not isinstance(inner, dict):
                fields.append((str(key), inner))
            elif isinstance(inner, dict) and depth and kind(key) != "other":
                more, text = _fields(inner, options, depth - 1)
                fields, prose = fields + more, prose + text
            elif isinstance(inner, str):
                prose.append(inner)
    return fields, prose


def _strings(value):
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, str):
                yield str(key), inner
            else:
                yield from _strings(inner)


def _prose(text: str, options: Options, at: float | None = None) -> tuple[list[_Claim], list[_Claim]]:
    """(claims, rejections) of the references in prose, at their places in it, or all at `at` (a reason inside an
    answer object stands at the object's place)."""
    refs = _references(text, options)
    phrases: list[list[_Ref]] = []
    for ref in refs:
        if phrases and _one_name(text, phrases[-1], ref):
            phrases[-1].append(ref)
        else:
            phrases.append([ref])
    leaders = {p[0].label for p in phrases if LINE_START.search(_near(text, p[0].start))
               and re.match(r"\s*[.:)\-—–]", text[p[-1].end:p[-1].end + 4])}
    listing = len(leaders) > 1  # "A: …\nB: …\nC: …": a walk through the options, none chosen by its place
    joins = [None] + [(m := JOINER.match(text[one[-1].end:two[0].start])) and m.lastgroup
                      for one, two in zip(phrases, phrases[1:])]
    offered, follows = _groups(text, phrases, joins)
    claims, rejected, readings = [], [], []
    for i, phrase in enumerate(phrases):
        start, end = phrase[0].start, phrase[-1].end
        pre, post = _before(_near(text, start)), text[end:end + NEAR]
        named = sorted({r.label for r in phrase} - {None})  # a phrase that names no option: an invalid choice
        item = _Claim(start if at is None else at, end, named[0] if len(named) == 1 else None, text[start:end],
                      clash=len(named) > 1)
        line = text[text.rfind("\n", max(0, start - NEAR), start) + 1:start]
        if i in offered or EXAMPLE_BEFORE.search(pre) or provisional(label(line)):
            reading = None
        elif i in follows or i and ANAPHORA.search(pre):
            reading = readings[follows.get(i, i - 1)]  # "Answer: A and B.", "B is wrong, so is C"
        else:
            after = phrases[i + 1] if i + 1 < len(phrases) else None
            contrast = after and CONTRAST.match(text[end:after[0].start]) and ENDS.match(text[after[-1].end:])
            joined = i + 1 < len(phrases) and joins[i + 1]
            reading = _reading(text, phrase, pre, post, options, alone=not listing and not joined,
                               contrast=bool(contrast))
        readings.append(reading)
        if reading == "rejected":
            rejected.append(item)
        elif reading:
            item.hedged, item.corrects = reading == "hedged", reading == "final"
            claims.append(item)
    return claims, rejected


def _groups(text: str, phrases: list[list[_Ref]], joins: list[str | None]) -> tuple[set[int], dict[int, int]]:
    """The phrases offered as alternatives ("A or B", "A, B, C, or D": none of them chosen), and the members of a
    list that ends its sentence, each with the first member, whose reading they share ("Answer: A and B.")."""
    offered, follows, i = set(), {}, 0
    while i < len(phrases):
        j = i
        while j + 1 < len(phrases) and joins[j + 1]:
            j += 1
        kinds = set(joins[i + 1:j + 1])
        if "alternative" in kinds:
            offered |= set(range(i, j + 1))
        elif kinds and ENDS.match(text[phrases[j][-1].end:]):
            follows.update({k: i for k in range(i + 1, j + 1)})
        i = j + 1
    return offered, follows


def _reading(text: str, phrase: list[_Ref], pre: str, post: str, options: Options, alone: bool,
             contrast: bool) -> str | None:
    """How a reference is read where it stands: "chosen", "final" (chosen, labelled final), "rejected", "hedged", or
    None (only mentioned). `alone`: it is joined to no reference after it (it may be an answer given first);
    `contrast`: the next reference is set against it where the sentence ends ("C rather than A.")."""
    if inverse := INVERSE_BEFORE.search(pre):
        return "rejected" if NEGATED_INVERSE.search(pre[:inverse.start()]) else "chosen"
    if _denied(_near(text, phrase[0].start)) or REJECTED_AFTER.match(post):
        return "rejected"
    if HEDGE_BEFORE.search(pre) or HEDGE_AFTER.match(post) or QUESTION.match(post):
        return "hedged"
    if CONCESSION.search(_near(text, phrase[0].start)):
        return None
    given_alone = alone and LINE_START.search(pre) and (ENDS.match(post) or not pre.strip() and (
        LEADS.match(post) or phrase[-1].bare and DASHED.match(post)))
    if (CHOSEN_BEFORE.search(pre) or CHOSEN_AFTER.match(post)
            or options.verbs and re.search(rf"(?:{options.verbs})\s*$", pre, re.I)
            or SEPARATED.search(pre) and ENDS.match(post) or END_CUE.search(pre) and ENDS.match(post)
            or contrast and (not pre.strip() or LINE_START.search(pre) or SEPARATED.search(pre))
            or given_alone):
        return "final" if is_final(pre[-30:]) else "chosen"
    return None


def _one_name(text: str, phrase: list[_Ref], ref: _Ref) -> bool:
    """Whether a reference names again what the phrase before it names: in brackets that close right after it
    ("B (the second image)", not "B (image A lacks the moon)"), after a dash or a colon where it ends the clause
    ("C — 《江雪》"), or beside a title ("《江雪》, letter B", "B 《江雪》", "(C) 《登鹳雀楼》"); neither one denied."""
    last, after = phrase[-1], text[ref.end:ref.end + NEAR]
    between = text[last.end:ref.start]
    if _denied(_near(text, phrase[0].start)) or _denied(_near(text, ref.start)):
        return False
    if last.bare and ref.bare:
        return False  # two letters are two references ("A vs B: B")
    if APPOSITION.match(between):
        if re.search(r"[(\[（【]", between):
            return bool(re.match(r"\s*[)\]）】]", after))
        return bool(re.match(r"\s*(?:$|[.,;:)\n]|\s[—–-])", after))
    titled = "《" in last.text + ref.text and re.fullmatch(r"\s*,?\s*", between)
    return bool(titled or ref.text[:1] in "([【" and not between.strip())


def _near(text: str, start: int) -> str:
    """The text before a reference that its cues stand in: a bounded window, so that a long answer reads in linear
    time (a window cut inside a line is not taken for the line's start)."""
    window = text[max(0, start - NEAR):start]
    return window if start <= NEAR else "\u2026" + window


def _before(pre: str) -> str:
    """The text before a reference, without the filler words and marks between it and its cue ("the answer is
    **clearly** B"), its last 60 characters: a cue is short."""
    while True:
        pre = pre.rstrip(FILLER_MARKS)
        start = len(pre)
        while start and pre[start - 1].isascii() and pre[start - 1].isalpha():
            start -= 1
        if not pre[start:] or pre[start:].lower() not in FILLER_WORDS or start and pre[start - 1].isalnum():
            return pre if len(pre) <= 60 else "\u2026" + pre[-60:]  # cut: not the start of a line
        pre = pre[:start]


def _denied(pre: str) -> bool:
    """Whether the text before a reference denies it: right before it ("not B", "rather than A", "B > A"), or as
    the claim a negation governs ("I don't think A is better", "I'm not sure it's B")."""
    return bool(NEGATION_BEFORE.search(_before(pre)[-30:]) or LOSER_BEFORE.search(pre) or DENIED_CLAIM.search(pre))


def _decide(claims: list[_Claim], rejected: list[_Claim], body: str, reason: str | None,
            notes: list[str]) -> Choice:
    """The option chosen: the choices from the last correction on must agree, none of them rejected after it, and
    nothing after them may waver or take them back (the module's docstring); else no option, with the reason."""
    firm = [c for c in claims if not c.hedged]
    if not firm:
        why = ("only a hedged choice" if claims else "only rejected options" if rejected else "no option chosen")
        return Choice(None, notes + [why])
    for i in range(1, len(firm)):
        if CORRECTION.search(body[firm[i - 1].end: int(firm[i].at)]) and firm[i].at > firm[i - 1].end:
            firm[i].corrects = True
    first = max((i for i, c in enumerate(firm) if c.corrects and i), default=0)
    active = firm[first:]
    if first:
        notes.append(f"read the correction {active[0].text!r}; the earlier choice was replaced")
    if clash := next((c for c in active if c.clash), None):
        return Choice(None, notes + [f"{clash.text!r} names two different options as one"])
    if wrong := next((c for c in active if c.label is None), None):
        return Choice(None, notes + [f"{wrong.text!r} is not one of the options"])
    labels = sorted({c.label for c in active})
    if len(labels) > 1:
        return Choice(None, notes + [f"the answer chooses {' and '.join(labels)}: not guessed"])
    verdict, since = labels[0], active[0].at if first else -1
    if any(r.label == verdict and r.at > since for r in rejected):
        return Choice(None, notes + [f"the answer both chooses and rejects {verdict}"])
    last = max(c.end for c in active)
    if any(c.hedged and c.label != verdict and c.at >= last for c in claims):
        return Choice(None, notes + ["the answer wavers after choosing"])
    if STRONG_CORRECTION.search(body[last:]):
        return Choice(None, notes + ["a correction after the choice names no option"])
    if DOUBT.search(body[last:]):
        return Choice(None, notes + ["the answer doubts its choice after making it"])
    return Choice(verdict, notes, reason)


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
    """Read a pairwise answer; never raises, never guesses. `ok`: exactly {"winner": "A"|"B", "reason": str};
    `repaired`: the winner read otherwise (the module's docstring), the notes saying how; `failed`: none."""
    if (exact := _exact_pair(text)) is not None:
        return exact
    read = read_choice(text, WINNER)
    if read.label is None:
        return ParsedPair(None, None, "failed", read.notes)
    notes = read.notes + ([] if read.reason is not None else ["no reason given"])
    return ParsedPair(read.label, read.reason, "repaired", notes or ["read the winner from a longer answer"])


def _exact_pair(text: str | None) -> ParsedPair | None:
    """The answer that is exactly what was asked for, its reason not preferring the other image; else None."""
    try:
        pairs = json.loads((text or "").strip(), object_pairs_hook=Pairs)
    except ValueError:
        return None
    if not isinstance(pairs, Pairs) or sorted(k for k, _ in pairs) != ["reason", "winner"]:
        return None
    answer = dict(pairs)
    if answer["winner"] not in tuple(WINNER.labels) or not isinstance(answer["reason"], str):
        return None
    claims, rejected = _prose(answer["reason"], WINNER)
    if any(not c.hedged and (c.label != answer["winner"] or c.clash) for c in claims) or any(
            r.label == answer["winner"] for r in rejected):
        return None
    return ParsedPair(answer["winner"], answer["reason"], "ok")


@dataclass
class ParsedLetter:
    letter: str | None
    status: str  # ok | repaired | failed
    error: str | None = None


BARE_LETTER = re.compile(r"^\s*[(（【\[]?([A-H])[)）】\].。:：]?\s*$")


def parse_letter(text: str | None, n_options: int = 4, titles: Sequence[str] | None = None) -> ParsedLetter:
    """The option letter of a multiple-choice answer; never raises, never guesses. `ok`: the letter alone (maybe
    bracketed or with a full stop); `repaired`: one option read as the module's docstring says (`titles`, the
    candidates' titles in letter order, let "that is 《江雪》" name its candidate); `failed`: none."""
    options = letter_options(n_options, titles)
    if (bare := BARE_LETTER.match(text or "")) and "<think>" not in (text or ""):
        found = bare.group(1)
        return ParsedLetter(found, "ok") if found in options.labels else ParsedLetter(None, "failed",
                                                                                      f"no option {found}")
    read = read_choice(text, options)
    if read.label is None:
        return ParsedLetter(None, "failed", "; ".join(read.notes))
    return ParsedLetter(read.label, "repaired", "; ".join(read.notes) or "read the letter from a longer answer")
