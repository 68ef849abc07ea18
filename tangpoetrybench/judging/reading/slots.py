"""The free-text slots of the forms, and the closed rules that check them. A form's free text is allowed only in
its slot (the pairwise `reason`, explain mode's `reasons`); everything a slot says that could give the answer a
second reading is refused by **classes of words that are closed by what they are** (the options' own letters and
labels, numbers, words of position and order, negations, comparatives), never by a list of bad phrases: a slot
that cannot be shown to agree with its form's value fails the whole read.

**The pairwise reason** (`pair_reason`) speaks of the winner only and says that it is better:

    names     it names the winner by its own label (`B`, `Image B`, `图B`) and no other image in any way: no other
              option's letter (a capital `A` is the other image even where it may be an article; a small `a` is
              the other image where no word follows it or a verb does), no number, no image noun (`image`,
              `picture`, `version`, `图`) but in the winner's label, no word of position or order (`first`,
              `second`, `former`, `latter`, `left`, `right`, `top`, `above` not followed by what is above, `前者`,
              `后一张`, `甲`, `一号`), no other-referring word (`other`, `another`, `both`, `either`, `rival`,
              `the one`, `另一张`, `其他`, `两张`)
    praises   it holds a comparative from the closed positive list (`better`, `best`, `closer`, `clearer`, `sharper`,
              `more faithful`, `more vividly` …; `更好`, `更贴切`, `最符合` …), and no other comparative (`more
              artifacts`, `less`, `worse`, `更模糊`, `略显`), no comparison with a standard (`than`, `compared`,
              `unlike`, `比`, `不如`), no negation or privative (`not`, `no`, `lacks`, `missing`, `hardly`, `不`,
              `没`, `无`, `缺`), no concession (`but`, `though`, `yet`, `但`, `却`)
    only      it speaks of the images, not of the answer or the judge (`I`, `my`, `answer`, `verdict`, `swapped`,
              `reverse`, `example`, `我`, `答案`, `写反`), and neither hedges nor calls a tie (`maybe`, `probably`,
              `seems`, `equally`, `same`, `even`, `也许`, `差不多`, `一样`, `各有千秋`); no question mark

A reason that is empty is no reason (the answer is read without one). What a reason cannot say under these rules
(most natural two-image comparisons) goes to the repair round, which asks for a reason about the chosen image only.

**Explain mode's reasons** (`explain_reason`): a dimension's reason gives no other level than the answer's scores:
no number but its own score (`0.67` beside 0.33; a count, `3 herons`, is refused too), no null level beside a
score (`N/A`, `null`, `none`, `not applicable`, `excluded`, `不适用`), no fraction or score word
(`half`, `two thirds`, `满分`), no option letter (`(c)`, `option c`, `between b and c`), no option label of any
dimension but the one of its given score (`fair` beside 0.75 `good`; its own dimension's labels first, then any
dimension's), no talk of the score itself (`score`, `rating`, `generous`, `harsh`, `rounded`, `torn`, `higher`,
`lower`, `should be`, `偏高`, `打分`, `介于`), and no hedge (`perhaps`, `maybe`, `也许`).
"""

from __future__ import annotations

import math
import re

from ...rubric import Rubric
from .dimensions import name_forms, names
from .envelope import Unreadable

# --- the pairwise reason -------------------------------------------------------------------------------------------

IMAGE_NOUNS = (r"images?|pictures?|pics?|imgs?|illustrations?|paintings?|artworks?|drawings?|renderings?|renditions?|"
               r"versions?|depictions?|panels?|options?|candidates?|entry|entries|submissions?|outputs?|photos?|"
               r"canvas(?:es)?")
POSITION = re.compile(
    r"\b(?:first|second|third|fourth|1st|2nd|3rd|4th|former|latter|preceding|previous|prior|earlier|later|opening|"
    r"leading|initial|last|left|leftmost|right|rightmost|top|topmost|bottom|upper|lower)\b"
    r"|\b(?:above|below|beneath)\b(?!\s+(?:the|a|an|its|his|her|their|this|that)\b)"
    r"|前者|后者|[前后头]一?[张幅个]|前面|后面|前图|后图|第\s*[一二三四五六七八九\d]|[上下左右][一]?[张幅]|"
    r"[上下左右](?:边|面|侧|方)的?(?:图|那|这|一)|[左右上下]图|甲|乙|丙|丁|[一二三四\d]\s*号", re.I)
OTHER = re.compile(
    r"\b(?:others?|another|both|either|neither|each|rivals?|counterparts?|alternatives?|opponents?|competitors?|"
    r"loser|runner-up|they|them|remaining|rest|pair|ones)\b|\b(?:the|this|that|which)\s+(?:one|two)\b"
    r"|另[一外]?|其他|其它|其余|其一|两[张幅个者]|二者|双方|对方|[这那此彼][张幅个图]", re.I)
NEGATION = re.compile(
    r"\b(?:not|no|never|none|nothing|nowhere|nor|without|lacks?|lacked|lacking|missing|misses|missed|miss|absent|"
    r"absence|fails?|failed|failing|omits?|omitted|hardly|barely|scarcely|needs?|needed|requires?|required)\b"
    r"|n't\b|(?<![Aa] )\b(?:little|few)\b|不|没|无|未|缺|非|欠|少了|失去|丢失", re.I)
CONCESSION = re.compile(r"\b(?:but|however|although|though|while|whilst|whereas|yet|despite|nonetheless|"
                        r"nevertheless|albeit|except)\b|但|却|然而|不过|虽|尽管|可是|只是", re.I)
STANDARD = re.compile(r"\b(?:than|compared?|comparison|comparing|versus|vs|relative|unlike|rather|instead)\b"
                      r"|比|相较|较之|不如|胜过|优于|逊|强于|弱于|好于|差于|超过|不及", re.I)
POSITIVE_WORDS = (r"faithful(?:ly)?|accurate(?:ly)?|vivid(?:ly)?|evocative(?:ly)?|poetic(?:ally)?|atmospheric|"
                  r"expressive(?:ly)?|fitting(?:ly)?|apt(?:ly)?|appropriate(?:ly)?|suitabl[ey]|authentic(?:ally)?|"
                  r"convincing(?:ly)?|coherent(?:ly)?|harmonious(?:ly)?|elegant(?:ly)?|beautiful(?:ly)?|"
                  r"natural(?:ly)?|complete(?:ly)?|closely|clearly|fully|effective(?:ly)?|true|truly|"
                  r"consistent(?:ly)?|moving|detailed|refined|graceful(?:ly)?|lively|delicate(?:ly)?|nuanced|"
                  r"precise(?:ly)?|successful(?:ly)?|compelling(?:ly)?|immersive|resonant")
POSITIVE_ZH = (r"好|佳|贴切|契合|符合|准确|生动|传神|忠实|到位|出色|优美|美|有意境|有诗意|富有诗意|接近|清晰|自然|协调|和谐|"
               r"完整|细腻|精致|动人|真实|逼真|雅致|典雅|优雅|恰当|合适|得体|有韵味|鲜明|突出|深远|悠远|淡雅|丰富|胜一筹")
POSITIVE = re.compile(rf"\b(?:better|best|superior|closer|clearer|truer|richer|stronger|sharper|finer|fuller)\b"
                      rf"|\b(?:more|most)\s+(?:{POSITIVE_WORDS})\b|(?:更加|更为|更是|更|最|较)(?:{POSITIVE_ZH})", re.I)
COMPARATIVE = re.compile(r"\b(?:more|most|less|least|lesser|fewer|fewest|worse|worst)\b|更|最|较|稍|略|还要", re.I)
ANSWER_TALK = re.compile(
    r"\b(?:i|me|my|mine|we|us|our|answers?|verdict|choice|choose|chose|chosen|pick|picked|select|selected|decision|"
    r"decided?|judge?ment|vote|json|reply|response|mistakes?|mistaken|erratum|correction|"
    r"corrected|swap|swapped|switch|switched|flip|flipped|reverse|reversed|opposite|invert|inverted|backwards?|"
    r"dummy|example|sample|placeholder|template|draft|format|actually|wait|oops|sorry|disregard|ignore|scratch)\b"
    r"|我|答案|选|判断|结论|写反|反了|反过来|颠倒|示例|样例|草稿|有误|更正|其实|应为|应该", re.I)
HEDGE = re.compile(
    r"\b(?:maybe|perhaps|probably|possibly|might|may|could|would|should|likely|unlikely|arguably|seems?|seemingly|"
    r"apparently|guess|unsure|uncertain|equal|equally|equals|same|similar|similarly|tie|tied|ties|even|evenly|par|"
    r"comparable|toss-?up|coin)\b|\?|也许|可能|或许|大概|似乎|好像|不确定|差不多|相当|一样|相同|类似|半斤八两|各有千秋|难分|"
    r"不分|伯仲", re.I)
A_VERBS = (r"is|was|has|had|does|did|seems|looks|appears|feels|lacks|shows|wins|won|loses|lost|and|or|vs|versus|but|"
           r"beats|captures|conveys|depicts|keeps|falls")


def pair_reason(reason: str, winner: str, labels: str) -> None:
    """Raise `Unreadable` where a pairwise reason does not show that it favours `winner` (the module's docstring)."""
    if not reason.strip():
        return
    why = _pair_reason_fault(reason, winner, labels)
    if why is not None:
        raise Unreadable(f"the reason does not show that it favours {winner}: it {why}")


def _pair_reason_fault(reason: str, winner: str, labels: str) -> str | None:
    letters = winner if winner == "A" else winner + winner.lower()  # a small a is the article
    own = re.compile(rf"(?:\b(?i:{IMAGE_NOUNS})\s*#?\s*|图片?\s*)?(?<![A-Za-z0-9_'’])[{letters}](?![A-Za-z0-9_])"
                     r"(?:\s*图)?")
    if not any(winner != "A" or not _may_be_article(reason, m) for m in own.finditer(reason)):
        return f"does not name {winner}"
    rest = own.sub(" ", reason)
    for found, what in ((_other_letter(rest, winner, labels), "names an image other than by its label"),
                        (_search(rf"(?i:\b(?:{IMAGE_NOUNS})\b)|\b[IVX]{{2,}}\b|(?<![构意地企试])图", rest),
                         "names an image other than by its label"),
                        (_search(r"\d", rest), "writes a number (an image's?)"),
                        (_search(POSITION, rest), "names an image by its position or order"),
                        (_search(OTHER, rest), "refers to another image"),
                        (_search(ANSWER_TALK, rest), "speaks of the answer or the judge"),
                        (_search(HEDGE, rest), "hedges or calls a tie"),
                        (_search(NEGATION, rest), "negates"),
                        (_search(CONCESSION, rest), "concedes"),
                        (_search(STANDARD, rest), "compares with something")):
        if found:
            return f"{what} ({found!r})"
    if other := _search(COMPARATIVE, POSITIVE.sub(" ", rest)):
        return f"holds a comparative that is not from the closed positive list ({other!r})"
    if not POSITIVE.search(rest):
        return "says nothing from the closed list of what makes the winner better ('better', 'more faithful', '更好' …)"
    return None


def _other_letter(text: str, winner: str, labels: str) -> str | None:
    """A single Latin letter standing alone that is not the winner's: the other options' (a small `a` only where it
    cannot be the article), any other capital but the pronoun I, any other small letter."""
    for m in re.finditer(r"(?<![A-Za-z0-9_'’])([A-Za-z])(?![A-Za-z0-9_])", text):
        letter = m.group(1)
        if letter in (winner, winner.lower(), "I"):
            continue
        if letter == "a" and _may_be_article(text, m):
            continue
        return letter
    return None


def _may_be_article(text: str, m: re.Match) -> bool:
    """Whether a letter `a` or `A` written alone (`m`, its letter last) may be the article: a word follows it, and
    that word is not a verb that an image's label would take (`A is`, `A lacks`)."""
    if not m.group(0).endswith(("a", "A")) or len(m.group(0).strip()) > 1:
        return False
    after = text[m.end():]
    return re.match(r"\s+[A-Za-z]", after) is not None and re.match(rf"\s+(?:{A_VERBS})\b", after, re.I) is None


def _search(pattern, text: str) -> str | None:
    m = re.search(pattern, text) if isinstance(pattern, str) else pattern.search(text)
    return None if m is None else m.group(0)


# --- explain mode's reasons ----------------------------------------------------------------------------------------

FRACTION_WORDS = re.compile(r"\b(?:zero|half|halves|thirds?|quarters?|fifths?|tenths?|percent|full marks)\b|一半|分之|"
                            r"满分|零分|[零一二三四五六七八九两半]分(?![析布别类开享配钟子量明外之辨散离割])", re.I)
LETTER_SAID = re.compile(r"\(\s*([a-h])\s*\)|\b(?:option|level|grade|anchor|choice|letter|选项)\s*([a-h])\b"
                         r"|\b([a-h])\s*(?:and|or|to|/|-|–)\s*([a-h])\b|(?<![A-Za-z0-9_'’])([b-hB-H])(?![A-Za-z0-9_])",
                         re.I)
SCORE_TALK = re.compile(
    r"\b(?:scores?|scored|scoring|ratings?|rated?|grades?|graded|marks?|marked|points?|generous(?:ly)?|harsh(?:ly)?|"
    r"lenient(?:ly)?|strict(?:ly)?|deserv\w*|rounded|round(?:ing)? (?:up|down)|bump\w*|notch\w*|overrat\w*|"
    r"underrat\w*|overestimat\w*|underestimat\w*|torn|borderline|higher|lower|(?:should|ought to|would|could) "
    r"(?:be|have been|get|receive)|maybe|perhaps|probably|possibly)\b|分数|打分|评分|给分|得分|偏高|偏低|高估|低估|介于|"
    r"也许|可能|或许|大概", re.I)
NUMBER_SAID = re.compile(r"(?<![\w.])\d+(?:\.\d+)?|(?<![\w])\.\d+")
NULL_SAID = re.compile(r"(?<![\w/])(?:null|none|n/a|not applicable|inapplicable|excluded|does not apply)(?![\w/])|不适用",
                       re.I)


def explain_reason(reason: str, dim: str, scores: dict[str, float | None], rubric: Rubric) -> None:
    """Raise `Unreadable` where explain mode's reason for `dim` gives its answer another reading (the module's
    docstring)."""
    where = f"the reason for {dim}"
    own = scores[dim]
    for m in NUMBER_SAID.finditer(reason):
        if own is None or not math.isclose(float(m.group(0)), own, abs_tol=1e-9):
            raise Unreadable(f"{where} writes {m.group(0)}, its score is {_shown(own)}")
    if own is not None and (m := NULL_SAID.search(reason)):
        raise Unreadable(f"{where} says {m.group(0)!r}, another level than its score ({_shown(own)})")
    if found := _search(FRACTION_WORDS, reason):
        raise Unreadable(f"{where} gives a number in words ({found!r}), its score is {_shown(own)}")
    if found := _search(SCORE_TALK, reason):
        raise Unreadable(f"{where} speaks of the score itself or hedges ({found!r})")
    dimension = rubric.dimension(dim)
    own_letters = {o.letter for o in dimension.options if o.score == own}
    for m in LETTER_SAID.finditer(reason):
        said = {g.lower() for g in m.groups() if g}
        if said - own_letters:
            raise Unreadable(f"{where} names option {m.group(0).strip()!r}, its score is {_shown(own)} "
                             f"(option {', '.join(sorted(own_letters)) or 'none'})")
    _labels_agree(reason, dim, scores, rubric, where)


def _labels_agree(text: str, dim: str, scores: dict, rubric: Rubric, where: str) -> None:
    """Every option label the text says (longest first; the dimensions' own names taken out, so that 场景一致性 does
    not say 一致) is the label of a score the answer gives: its own dimension's where that has the label, else every
    dimension's that has it."""
    text = re.sub(name_forms(names(rubric)), " ", text, flags=re.I)
    for label, holders in _label_table(rubric):
        pattern = re.escape(label) if re.search(r"[\u4e00-\u9fff]", label) else \
            rf"(?<![A-Za-z]){re.escape(label)}[a-z]*(?![A-Za-z])"
        if not (m := re.search(pattern, text, re.I)):
            continue
        text = re.sub(pattern, " ", text, flags=re.I)
        checked = [(d, s) for d, s in holders if d == dim] or holders
        wrong = [(d, s) for d, s in checked if scores[d] != s]
        if wrong:
            d, s = wrong[0]
            raise Unreadable(f"{where} says {m.group(0)!r}, the label of {d} {_shown(s)}; the answer gives {d} "
                             f"{_shown(scores[d])}")


def _label_table(rubric: Rubric) -> list[tuple[str, list[tuple[str, float | None]]]]:
    """Every option label of the rubric (English and the tradition's own), longest first, with the (dimension,
    score) of every option that has it."""
    table: dict[str, list] = {}
    for dimension in rubric.dimensions:
        for option in dimension.options:
            for label in option.label.values():
                table.setdefault(label.lower(), []).append((dimension.key, option.score))
    return sorted(table.items(), key=lambda item: -len(item[0]))


def _shown(score: float | None) -> str:
    return "null" if score is None else f"{score:g}"
