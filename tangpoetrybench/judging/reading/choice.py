"""Reading a choice among labelled options by an explicit grammar: the pairwise winner (A or B) and the Phase-1
letter (A–D), one reader parameterised by the question's `Options`. Never raises, and never guesses.

A value comes only from a form of the grammar (docs/reading.md's table: W1–W6 for the winner, L1–L7 for the letter,
each with the condition under which it is unambiguous): the answer object, a labelled line (`Winner: B`,
`Answer: C`), the letter alone, a short choosing sentence (`Image B is better.`, `C is correct.`), and for the
letter a candidate's title, alone or beside its letter. The rest of the answer is only *watched*: a reference to an
option there (its letter, a renamed option, a candidate's title), a correction, a doubt, a tie, a reason that does
not favour the winner, or a reasoning block that concludes otherwise fails the read, whose note names the
condition. Finding references is deliberately generous (a capital "A" is a reference even where it may be an
article): a reference found only ever refuses a read.

Titles are matched exactly after the normalisations that cannot merge two titles (brackets and spaces dropped, NFKC
width, middle dots alike, traditional characters as simplified ones by OpenCC): a title of two candidates, or one
written without brackets that begins another candidate's title (cut off?), fails.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass, field
from typing import Sequence

from .ambiguity import CORRECTS, DOUBTS, PROVISIONAL, TIES, conclusion_differs, last_sentence_with, refuse_if
from .core import Conflict, Pairs, loads, segments
from .envelope import Unreadable, normalise, open_envelope

LETTERS = "ABCDEFGH"
EMPHASIS = r"(?:\*\*|__|\*|`)?"


@dataclass(frozen=True)
class Options:
    """A closed set of labelled options, as the task's question defines them."""

    labels: str  # the options' letters in order: "AB", "ABCD"
    noun: str  # what an option is: "image", "poem"
    fields: tuple[str, ...]  # JSON keys that hold the choice
    line_labels: str  # a regex of the labels of a line that gives the choice ("winner|answer|…")
    titles: tuple[str, ...] = ()  # the options' titles in order (the letter task: `《江雪》` names its candidate)


WINNER = Options("AB", "image", ("winner",), r"winner|final answer|answer|verdict|better image|better one|choice|"
                                                  r"preferred|preference|胜者|答案|答")


def letter_options(n_options: int = 4, titles: Sequence[str] | None = None) -> Options:
    """The Phase-1 question: candidate poems lettered A, B, … in order."""
    return Options(LETTERS[:n_options], "poem", ("answer", "letter", "choice", "option"),
                   r"final answer|correct answer|my answer|answer|correct option|letter|option|choice|candidate|"
                   r"答案是|答案为|答案|答", tuple(titles or ()))


@dataclass
class Choice:
    """What the reader made of an answer: the option chosen, or None with the notes saying why."""

    label: str | None
    notes: list[str] = field(default_factory=list)
    reason: str | None = None  # the reason given with the choice (pairwise)


# --- titles ---------------------------------------------------------------------------------------------------------

TITLE_MARKS = re.compile(r"[《》「」『』〈〉\"'“”‘’()\[\]\s]")


@functools.lru_cache(maxsize=1)
def _to_simplified():
    import opencc

    return opencc.OpenCC("t2s")


def fold(text: str) -> str:
    """A text as the letter reader compares titles: NFKC (width), brackets and spaces dropped, middle dots alike,
    traditional characters as simplified ones. Two candidates whose titles fold alike cannot be told apart by their
    titles (`_titled` refuses both)."""
    folded = TITLE_MARKS.sub("", normalise(text))
    folded = re.sub(r"[·・•‧･]", "·", folded)
    return _to_simplified().convert(folded).lower()


fold_title = functools.lru_cache(maxsize=1024)(fold)  # titles recur: a candidate set is asked in four orders


def _is_title(written: str, options: Options) -> bool:
    return any(fold_title(t) == fold_title(written) for t in options.titles)


def _titled(written: str, options: Options, bracketed: bool) -> str:
    """The letter of the one candidate whose title is `written`, or `Unreadable`."""
    if not options.titles:
        raise Unreadable(f"the answer names the title {written!r}, but the reader was given no candidates' titles")
    folded = fold_title(written)
    matches = [LETTERS[i] for i, t in enumerate(options.titles) if fold_title(t) == folded]
    if not matches:
        raise Unreadable(f"{written!r} is no candidate's title")
    if len(matches) > 1:
        raise Unreadable(f"{written!r} is the title of {len(matches)} candidates ({', '.join(matches)})")
    if not bracketed and any(fold_title(t).startswith(folded) and fold_title(t) != folded for t in options.titles):
        raise Unreadable(f"{written!r}, without its brackets, begins another candidate's title: it may be cut off")
    return matches[0]


# --- references: only ever refuse a read ----------------------------------------------------------------------------

NOUNS = r"image|picture|pic|illustration|painting|artwork|panel|option|candidate|choice|letter|poem|answer"
VERB_AFTER = (r"is|was|has|had|wins|won|beats|loses|lost|does|did|isn't|doesn't|seems|looks|captures|shows|"
              r"depicts|conveys|fits|matches|and|or|but|over|vs|versus|better|worse")


@functools.lru_cache(maxsize=32)
def _references(options: Options) -> re.Pattern:
    """Every way an answer may name an option, its letter or otherwise; a letter found may be an article."""
    parts = [
        rf"\b(?:{NOUNS})s?(?:\s+#?\s*|\s*#\s*)(?P<noun>[A-Za-z])(?![A-Za-z0-9])",  # "image B", "option c", "Image A's"
        r"(?:图片?|选项|候选|答案)\s*(?P<zh>[A-Za-z])(?![A-Za-z0-9])|(?<![A-Za-z0-9])(?P<zh2>[A-Za-z])\s*(?:图|项|幅|张|首)",
        r"[(\[【]\s*(?P<bracket>[A-Za-z])\s*[)\]】]",
        r"(?<![A-Za-z0-9_'’\-])(?P<capital>[A-Z])(?![A-Za-z0-9_]|['’](?![sS]\b))",  # "A", "A's moon"
        rf"(?<![A-Za-z0-9_'’\-])(?P<lower>a)(?=\s*(?:{VERB_AFTER})\b|\s*[<>=])",
        rf"(?<![A-Za-z0-9_'’\-])(?P<lower2>[{options.labels[1:].lower()}])(?![A-Za-z0-9_]|['’](?![sS]\b))",
        r"[《「『](?P<title>[^《》「」『』\n]{1,40})[》」』]",
        # renamed: numbers, places, ordinals, sides, "the former"
        rf"\b(?P<renamed>(?:{NOUNS}|no\.?|number|#)\s*(?:[1-9]|one|two|three|four|i{{1,3}}|iv)\b"
        rf"|(?:first|second|third|fourth|1st|2nd|3rd|4th|last|left|right|top|bottom|upper|lower|leftmost|rightmost|"
        rf"earlier|later|other|another|this|that|these|those|rival|alternative|competing|opposing|remaining|"
        rf"losing|winning|chosen|preferred)\s+(?:{NOUNS}|ones?)s?\b|(?:the\s+)?(?:former|latter)\b|the\s+others?\b)",
        r"(?P<renamedzh>图\s*[1-9一二三四五六七八]|第\s*[1-9一二三四五六七八]\s*[张幅个首项]|前者|后者|[左右上下]图|"
        r"[左右上下]边的?(?:图|那张|这张)|另[一外]\s*[张幅个首]?|其他|其余|这[张幅首]|那[张幅首])",
    ]
    return re.compile("|".join(parts), re.I)


@dataclass
class _Ref:
    label: str | None  # None: it names no option (E of four, a renamed option, an unknown title)
    text: str
    how: str = "letter"  # "capital" (a capital letter alone, maybe an article), "renamed", "title" or "letter"


def references(text: str, options: Options) -> list[_Ref]:
    """Every reference to an option in a text (see `_references`), and for the letter task each candidate's title
    written anywhere in it, brackets or none."""
    out = []
    if options.titles:
        folded = fold(text)
        out += [_Ref(LETTERS[i], title, "title") for i, title in enumerate(options.titles)
                if fold_title(title) in folded]
    for m in _references(options).finditer(text):
        group, value = m.lastgroup, m.group(m.lastgroup)
        if group == "capital" and value not in LETTERS:
            continue  # "I", "X": not a letter of any question
        if group in ("renamed", "renamedzh"):
            label = None
        elif group == "title":
            try:
                label = _titled(value, options, True)
            except Unreadable:
                label = None
        else:
            label = value.upper() if value.upper() in options.labels else None
        how = "renamed" if group.startswith("renamed") else group if group in ("capital", "title") else "letter"
        out.append(_Ref(label, m.group(0), how))
    return out


def _refuse_references(text: str, options: Options, where: str) -> None:
    if refs := references(text, options):
        raise Unreadable(f"{where} names an option ({refs[0].text.strip()!r}): only the answer's form may")


# --- the forms ------------------------------------------------------------------------------------------------------

def _bare(options: Options) -> re.Pattern:
    """An option's letter written alone, maybe with its noun, brackets, quotes or emphasis: `B`, `(b)`, `**Image B**`,
    `option c`, `图B`, `B项`."""
    return re.compile(rf"{EMPHASIS}[\"'“”‘’`(\[【]?\s*(?:(?:{options.noun}|option|candidate|letter)\s+|图|选项)?\s*"
                      rf"(?P<letter>[A-Ha-h])\s*项?[\"'“”‘’`)\]】]?{EMPHASIS}", re.I)


TITLE = (r"(?:《(?P<t1>[^《》\n]{1,40})》|「(?P<t2>[^「」\n]{1,40})」|『(?P<t3>[^『』\n]{1,40})』|\((?P<t4>[^()\n]{1,40})\)"
         r"|(?P<t5>[\u4e00-\u9fff][\u4e00-\u9fff·・]{0,29}))")
END = r"\s*[.。!！]?\s*"
CHOSEN_AFTER = (r"(?:is|would be)\s+(?:the\s+)?(?:correct|right|best|better|winner|answer|correct answer|right answer|"
                r"better one|better image|better illustration|better choice|preferable|superior)"
                r"(?:\s+(?:one|image|illustration|choice|option|poem))?(?:\s+overall)?|wins")
CHOSEN_BEFORE = (r"(?:i|we)\s*(?:'d|would|will|'ll)?\s*(?:prefer|choose|pick|select|go with|take|vote for)"
                 r"|i(?:'m| am)\s+(?:choosing|picking|going with)|(?:i think |i believe |i'd say )?(?:it's|it is)|"
                 r"我选择?|选择?")


@functools.lru_cache(maxsize=32)
def _forms(options: Options) -> list[tuple[str, re.Pattern]]:
    """The forms of a line that gives the choice, each with its name (docs/reading.md's table)."""
    letter = _bare(options).pattern
    label = rf"{EMPHASIS}\s*(?:[-*•]\s*)?{EMPHASIS}(?:the\s+)?(?:{options.line_labels}){EMPHASIS}" \
            rf"\s*(?:[:：=]|\s[-—–]\s|[—–]|\bis\b)?\s*"
    forms = [("the letter alone", rf"{letter}{END}"),
             ("a labelled line", rf"{label}{letter}{END}"),
             ("a sentence that chooses the letter", rf"{letter}\s+(?:{CHOSEN_AFTER}){END}"),
             ("a sentence that chooses the letter", rf"(?:{CHOSEN_BEFORE})\s*{letter}{END}"),
             ("a sentence that chooses the letter", rf"{letter}(?:更好|更佳|更符合诗意|胜出|正确|是正确答案|是答案){END}")]
    if options.titles:
        forms += [("the letter with the title", rf"(?:{label})?{letter}\s*(?:[.:：)、,，]|\s[-—–]|[—–])?\s*{TITLE}{END}"),
                  ("the letter with the title", rf"(?:{label})?{TITLE}\s*(?:[-—–:：,，]|\s[-—–])?\s*{letter}{END}"),
                  ("the title alone", rf"(?:{label})?{EMPHASIS}{TITLE}{EMPHASIS}{END}")]
    return [(name, re.compile(form, re.I)) for name, form in forms]


def _statement(line: str, options: Options) -> tuple[str, str] | None:
    """(the option a line gives, the form's name) where the line is one of the forms; None for prose; `Unreadable`
    where a form's letter and title disagree, or a title matches no one candidate."""
    text = line.strip()
    for name, form in _forms(options):
        if m := form.fullmatch(text):
            found = m.groupdict()
            titles = [(k, found[k]) for k in ("t1", "t2", "t3", "t4", "t5") if found.get(k)]
            if titles and titles[0][0] == "t5" and not _is_title(titles[0][1], options):
                continue  # Chinese words that are no candidate's title: prose, watched as such
            by_title = _titled(titles[0][1], options, titles[0][0] != "t5") if titles else None
            by_letter = _letter(found["letter"], options) if found.get("letter") else None
            if by_title and by_letter and by_title != by_letter:
                raise Unreadable(f"{text!r} gives the letter {by_letter} and another candidate's title")
            return by_letter or by_title, name
    return None


def _letter(letter: str, options: Options) -> str:
    if letter.upper() not in options.labels:
        raise Unreadable(f"{letter.upper()} is not one of the options ({', '.join(options.labels)})")
    return letter.upper()


def _object_choice(value, options: Options) -> tuple[str | None, str | None] | None:
    """(the option, the reason) of a JSON object that gives the choice (W1, W2, L6); None for a value that gives
    none; `Unreadable` for one that gives it otherwise."""
    if not isinstance(value, dict):
        return None
    keys = {re.sub(r"[\W_]+", "", str(k).lower()): k for k in value}
    given = [keys[f] for f in options.fields if f in keys]
    if not given:
        if any(k in keys for k in ("winner", "better", "betterimage", "choice", "answer", "verdict", "letter",
                                   "selected", "preferred", "胜者", "答案", "选择")):
            raise Unreadable(f"the object gives its choice under {next(iter(value))!r}, not "
                             f"{options.fields[0]!r}")
        return None
    allowed = set(given) | ({k for k in value if str(k).lower() == "reason"} if options.noun == "image" else set())
    if extra := [k for k in value if k not in allowed]:
        raise Unreadable(f"the object has {extra[0]!r} beside its choice")
    chosen = set()
    for key in given:
        written = value[key]
        if isinstance(written, Conflict):
            raise Unreadable(f"the object gives {key!r} twice, differently")
        if not isinstance(written, str) or not (m := _bare(options).fullmatch(written.strip())):
            raise Unreadable(f"the object's {key!r} is {json.dumps(written, ensure_ascii=False)[:40]}, not one of "
                             f"the options ({', '.join(options.labels)})")
        chosen.add(_letter(m.group("letter"), options))
    if len(chosen) > 1:
        raise Unreadable(f"the object's fields give {' and '.join(sorted(chosen))}")
    reason = next((value[k] for k in value if str(k).lower() == "reason"), None)
    if isinstance(reason, Conflict) or reason is not None and not isinstance(reason, str):
        raise Unreadable("the object's reason is not one sentence")
    return chosen.pop(), reason


REASON_LINE = re.compile(rf"{EMPHASIS}\s*(?:[-*•]\s*)?{EMPHASIS}(?:reason|because|why|理由|原因){EMPHASIS}\s*[:：]"
                         rf"{EMPHASIS}\s*(?P<reason>.+)$", re.I)


def read_choice(text: str | None, options: Options) -> Choice:
    """The option an answer chooses (see the module's docstring); never raises."""
    notes: list[str] = []
    try:
        envelope = open_envelope(text)
        notes += envelope.notes
        label, reason = _read(envelope.body, options, notes)
        conclusion_differs(envelope.thoughts, lambda thought: _concluded(thought, options), {"choice": label})
        return Choice(label, notes, reason)
    except Unreadable as why:
        return Choice(None, notes + [str(why)])
    except Exception as exc:  # the contract is "never raises": a reader bug must not stop a run
        return Choice(None, notes + [f"reader error: {type(exc).__name__}: {exc}"])


def _read(body: str, options: Options, notes: list[str]) -> tuple[str, str | None]:
    """(the option, the reason) of an answer's body by the grammar, or `Unreadable`."""
    refuse_if(body, "the answer", TIES, CORRECTS, DOUBTS)  # before any value: no form, no reason may say these
    if renamed := next((r for r in references(body, options) if r.how == "renamed"), None):
        raise Unreadable(f"the answer names an option by another name ({renamed.text.strip()!r}), not its letter")
    chosen: list[tuple[str, str]] = []  # (option, how)
    reasons: list[str] = []
    prose = body
    for seg in segments(body):
        value = loads(seg.text, notes) if seg.closed else None
        found = _object_choice(value, options)
        if found is None:
            if not seg.closed and re.search(r"[\"'](?:" + "|".join(options.fields) + r")[\"']", seg.text, re.I):
                raise Unreadable("the answer object is cut off")
            continue
        chosen.append((found[0], "the answer object"))
        if found[1] is not None:
            reasons.append(found[1])
        prose = prose[:seg.start] + re.sub(r"[^\n]", " ", seg.text) + prose[seg.end:]
    kept = []
    for line in prose.split("\n"):
        if m := REASON_LINE.match(line.strip()):
            reasons.append(m.group("reason"))
        elif (found := _statement(line, options)) is not None:
            chosen.append(found)
        else:
            kept.append(line)
    if not chosen:
        raise Unreadable("no answer in the answer's forms (" + ("the object, a 'Winner: A' line or the letter alone"
                                                                if options.noun == "image" else
                                                                "the letter alone, an 'Answer: C' line or a title")
                         + ")")
    labels = sorted({label for label, _ in chosen})
    if len(labels) > 1:
        raise Unreadable(f"the answer gives {' and '.join(labels)}")
    label = labels[0]
    rest = "\n".join(kept)
    _refuse_references(rest, options, "the text around the answer")
    refuse_if(rest, "the text around the answer", CORRECTS, DOUBTS, TIES, PROVISIONAL)
    for reason in reasons:
        _check_reason(reason, label, options)
    if len(chosen) > 1:
        notes.append(f"read {len(chosen)} statements of the answer that agree")
    if rest.strip():
        notes.append("read the answer beside text that names no option")
    notes.append(f"read {chosen[0][1]}")
    return label, (reasons[0] if len(set(reasons)) == 1 else None)


def _concluded(thought: str, options: Options) -> dict[str, str]:
    """What a reasoning block concludes: the option its last sentence that names options names (two, or a renamed
    one, conclude nothing the answer could have)."""
    refs = last_sentence_with(thought, lambda sentence: references(sentence, options))
    named = {r.label for r in refs}
    if not named:
        return {}
    return {"choice": named.pop() if len(named) == 1 and None not in named else
            " and ".join(sorted(str(n) if n else "a renamed option" for n in named))}


# --- the pairwise reason, clause by clause --------------------------------------------------------------------------

CLAUSE = re.compile(r"[.;!?。；！？\n,，、:：]+|\s[—–-]\s|[—–]|\b(?:but|while|whereas|although|though|however|yet|and|"
                    r"so|because|since|as|which|that|who|where|whose|unlike)\b"
                    r"|但是?|而且?|却|不过|然而|虽然|并且|因为|所以|而", re.I)
NEGATION = re.compile(r"\b(?:not|never|no|none|nothing|nor|neither|without|lacks?|lacking|missing|misses|miss|absent|"
                      r"fails?|failed|loses|lost|lose|omits?|omitted|hardly|barely|leaves? out|left out|ignores?|"
                      r"ignored|drops?|dropped|forgets?|forgot)\b|n't|没有|没|无|不|未|缺|失去|丢失|"
                      r"少了|非", re.I)
KNOWN_BETTER = (r"better|stronger|richer|finer|closer|greater|sharper|clearer|truer|lovelier|nicer|prettier|crisper|"
                r"livelier")
# A comparative "than" follows whose sense the reader does not know ("calmer than", "brighter than"): refused.
UNKNOWN_COMPARATIVE = re.compile(rf"\b(?!(?:{KNOWN_BETTER}|other|rather|worse|over|under|either|neither|whether|"
                                 r"blurrier|darker|duller|muddier|busier|flatter|harsher|cruder|messier|uglier|noisier|"
                                 r"stranger|odder|weaker|poorer|fewer)\b)\w{2,}(?:ier|er)\s+than\b", re.I)
MORE = re.compile(rf"\b(?:{KNOWN_BETTER}|best|superior|more|beats|outshines|outperforms|surpasses|"
                  r"edges out|wins over|over|rather than|instead of|prefer(?:red|able)? to)\b|>|比|更|胜过|优于|强于|好于|超过",
                  re.I)
LESS = re.compile(r"\b(?:worse|worst|weaker|poorer|inferior|less|fewer|falls? short|loses to|lost to|lags?|trails?|"
                  r"not (?:as|so) \w+ as|blurrier|darker|duller|muddier|busier|flatter|"
                  r"harsher|cruder|messier|uglier|noisier|stranger|odder|more (?:blurry|blurred|muddy|cluttered|busy|"
                  r"dark|dull|flat|garish|harsh|distorted|crude|messy|awkward|artificial|modern|generic|bland|noisy|"
                  r"jarring|chaotic))\b|<|不如|逊于|逊色|差于|弱于|比不上|不及|更(?:差|弱|模糊|乱|暗|俗|生硬)", re.I)
PRAISE = re.compile(r"\b(?:good|great|nice|fine|excellent|perfect\w*|beautiful\w*|lovely|stunning|elegant\w*|vivid\w*|"
                    r"faithful\w*|accurate\w*|evocative|poetic|atmospheric|striking|impressive|pleasing|charming|"
                    r"subtle|harmonious|balanced|refined|delicate|graceful|expressive|authentic|appropriate|suitable|"
                    r"fitting|successful|effective|compelling|captivating|moving|touching|strong|rich|clear|crisp|"
                    r"sharp|well|wins?|winner|prefer\w*|captures?|conveys?|evokes?|fits|matches|shines|excels|nails|"
                    r"succeeds|works|merits?|strengths?|advantage|edge|equal|match|rival|unmatched|unrivalled|"
                    r"second to none|flawless|correct|right|keeps|retains|preserves)\b"
                    r"|好|佳|优|胜|妙|美|贴切|符合|准确|生动|传神|出色|不错|契合|到位|精|强|无可挑剔|无与伦比", re.I)
FLAW = re.compile(r"\b(?:flaws?|problems?|issues?|errors?|artifacts?|mistakes?|defects?|faults?|weakness\w*|"
                  r"blemish\w*|shortcomings?|drawbacks?|wrong|bad|poor|blurry|blurred|muddy|cluttered|busy|dark|dull|"
                  r"flat|garish|gaudy|harsh|distorted|deformed|garbled|broken|melted|incorrect|inaccurate|off|modern|"
                  r"anachronistic|cartoonish|cheap|bland|generic|sloppy|crude|messy|awkward|weak|ugly|unrelated|"
                  r"irrelevant|mismatched|inconsistent|jarring|clashing|odd|strange|unnatural|artificial|plastic|"
                  r"oversaturated|noisy|pixelated|empty|too \w+|overly \w+)\b"
                  r"|差|弱|模糊|杂乱|失真|变形|错误|问题|瑕疵|缺点|不足|突兀|俗|粗糙|生硬|偏离", re.I)


def _check_reason(reason: str, winner: str, options: Options) -> None:
    """A pairwise reason favours the winner (see the module's docstring), else `Unreadable` naming the clause."""
    refuse_if(reason, "the reason", CORRECTS, DOUBTS, TIES)
    clauses = [c for c in CLAUSE.split(reason) if c and c.strip()]
    named = [[r.label for r in references(c, options) if r.label] for c in clauses]
    if bad := next((r for c in clauses for r in references(c, options) if r.label is None and r.how != "capital"),
                   None):  # a capital letter of no option ("C", "F") is no name of the other image
        raise Unreadable(f"the reason names {bad.text.strip()!r}, not the option's letter")
    # before any option is named, a clause speaks of the first named; in a reason that names none, of the winner
    subject = next((refs[0] for refs in named if refs), winner)
    for clause, refs in zip(clauses, named):
        subject = refs[-1] if refs else subject  # a clause that names no option speaks of the one named last before it
        if not _favours(clause, refs or [subject], winner):
            raise Unreadable(f"the reason does not show that it favours {winner}: {clause.strip()[:80]!r}")


def _favours(clause: str, refs: list[str], winner: str) -> bool:
    """Whether a clause about the options `refs` (in order) is consistent with `winner` winning. A comparative
    before "than" whose sense is not known ("calmer than", "brighter than") counts both ways, and so refuses."""
    if re.search(r"\bless \w+", clause, re.I) and FLAW.search(clause) or UNKNOWN_COMPARATIVE.search(clause):
        return False  # "less blurry": a fault denied, which ranks the other way; "calmer than": which way?
    less = bool(LESS.search(clause))
    rest = LESS.sub(" ", clause)
    more, negations = bool(MORE.search(rest)), len(NEGATION.findall(rest))
    praise, flaw = bool(PRAISE.search(MORE.sub(" ", rest))), bool(FLAW.search(rest))
    if (more or less) and negations:
        return False  # a negated comparison: "A is no worse", "B is not better"
    order = list(dict.fromkeys(refs))
    if order == [winner]:
        return not less
    if winner not in order:  # the other image alone: only fault found with it
        return not more and not praise and (negations == 1 and not flaw or not negations and (flaw or less))
    return more and not less if order[0] == winner else less and not more


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
    its reason favouring the winner; `repaired`: another form of the grammar, the notes saying which; `failed`: none,
    the notes saying which condition failed."""
    read = read_choice(text, WINNER)
    if read.label is None:
        return ParsedPair(None, None, "failed", read.notes)
    if _exact_pair(text):
        return ParsedPair(read.label, read.reason, "ok")
    return ParsedPair(read.label, read.reason, "repaired", read.notes + ([] if read.reason is not None else
                                                                         ["no reason given"]))


def _exact_pair(text: str | None) -> bool:
    try:
        pairs = json.loads((text or "").strip(), object_pairs_hook=Pairs)
    except ValueError:
        return False
    return (isinstance(pairs, Pairs) and sorted(k for k, _ in pairs) == ["reason", "winner"]
            and dict(pairs)["winner"] in tuple(WINNER.labels) and isinstance(dict(pairs)["reason"], str))


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
