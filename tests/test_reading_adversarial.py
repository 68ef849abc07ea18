"""The readers against generated answers (Hypothesis, seeded and bounded): a correct answer in every accepted form of
docs/reading.md's grammar, with ambiguity composed into it — a scale or a direction of its own, a range, a pair or a
hedge in a value, the same dimension or choice given again with another value (another object, a line, a table
row, a duplicate key, the other language), a reasoning wrapper of any family concluding otherwise, a reason that
praises the other image or calls the winner worse, a tie, a split verdict, a renamed option, a title two candidates
share or one that begins another's, a correction, a truncation — and the classes the second red team found: footnote
marks on a value, articles and school grades where a letter stands, N/A words, a direction or a scale of the answer's
own in prose, remarks after a value, comments in JSON, reasoning that concludes in words or letters, renamed images,
notes that undo or doubt the answer, reasons that fault the winner. The property: **the reader never returns a
confident value other than the intended one**, and where the composition leaves the answer without one reading, it
returns none. A second property: every accepted form, clean, reads its intended value.

The fast suite runs a few hundred answers per task; the slow one (`-m slow -k adversarial`) runs at least 10,000
per task and counts them."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tangpoetrybench.judging.reading import parse_answer, parse_letter, parse_pair_answer
from tangpoetrybench.rubric import load_rubric

RUBRIC = load_rubric("tang")
DIMS = RUBRIC.dimensions
FAST, SLOW = 300, 10_000

WRAPPERS = [("<think>", "</think>"), ("<thinking>", "</thinking>"), ("<reasoning>", "</reasoning>"),
            ("<thought>", "</thought>"), ("<reflection>", "</reflection>"), ("[THINK]", "[/THINK]"),
            ("◁think▷", "◁/think▷"), ("<seed:think>", "</seed:think>"),
            ("<|begin_of_thought|>", "<|end_of_thought|>"),
            ("<|channel|>analysis<|message|>", "<|end|><|start|>assistant<|channel|>final<|message|>"),
            ("Here is my thought process:", "Here is my response:"), ("", "</think>")]
BENIGN = ["Here is my evaluation.", "Here are the scores for the illustration:", "Hope this helps!", "以下是我的评分：",
          "The illustration is a quiet ink-wash scene.", "I looked at the image carefully.", "这幅画意境清幽。"]


def run(check, examples: int) -> int:
    """Run a Hypothesis-wrapped check on `examples` generated answers (seeded: the same answers every run) and
    return how many it checked."""
    seen = []

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(st.randoms(use_true_random=False))
    def property_(rng):
        seen.append(1)
        check(rng)

    property_()
    return len(seen)


def draw_kinds(rng: random.Random, kinds: list[str], clean: bool) -> list[str]:
    """One to three compositions (none for a clean answer); a truncation only with harmless ones (a cut may remove the
    very text another composition added, leaving an answer with one reading)."""
    if clean:
        return []
    drawn = rng.sample(kinds, rng.randint(1, 3))
    return [k for k in drawn if k in ("truncation", "benign", "wrapper same")] if "truncation" in drawn else drawn


def truncate(rng: random.Random, text: str) -> str:
    """The answer cut where a tokenizer may cut it at the length limit: anywhere but inside an English word (a word
    such as "Answer" is one token in every chat model's vocabulary, digits and Chinese characters are not)."""
    cuts = [i for i in range(1, len(text)) if not (text[i - 1].isascii() and text[i - 1].isalpha()
                                                   and text[i].isascii() and text[i].isalpha())]
    return text[:rng.choice(cuts)] if cuts else text


# --- scores ---------------------------------------------------------------------------------------------------------

BETWEEN = [0.1, 0.2, 0.4, 0.6, 0.8, 0.9]


def draw_scores(rng: random.Random) -> dict:
    out = {}
    for dim in DIMS:
        anchors = [o.score for o in dim.options]
        out[dim.key] = rng.choice(anchors) if rng.random() < 0.85 else rng.choice(BETWEEN)
    return out


def number(rng: random.Random, value: float) -> str:
    if value == 1:
        return rng.choice(["1", "1.0", "1.00"])
    if value == 0:
        return rng.choice(["0", "0.0", "0.00"])
    return rng.choice([f"{value:g}", f"{value:.2f}"])


def written(rng: random.Random, dim, value, letters: bool) -> str:
    """A value as free text (or a JSON string) writes it: a number, an option letter, an N/A word."""
    options = [o for o in dim.options if o.score == value]
    if value is None:
        return rng.choice(["null", "N/A", "n/a", "不适用"] + ([options[0].letter] if letters else []))
    if letters and options and rng.random() < 0.4:
        return rng.choice([options[0].letter, f"({options[0].letter})"])
    return number(rng, value)


def name_of(rng: random.Random, dim, style: str) -> str:
    return {"key": dim.key, "en": dim.name["en"], "zh": dim.name["zh"]}[style]


def render_scores(rng: random.Random, scores: dict, form: str, bad: dict, clean: bool = False) -> str:
    """A correct answer of `scores` in `form`, with `bad` values (dimension → text) written in place of the right
    ones; `clean`: only in the forms that read (lines end in a newline, a table has no reason column)."""
    keys = [d.key for d in DIMS]
    if form in ("json", "fence", "explain", "json-lenient", "json-names", "json-strings"):
        style = rng.choice(["key", "en", "zh"]) if form == "json-names" else "key"
        obj = {}
        for dim in DIMS:
            value = scores[dim.key]
            if dim.key in bad:
                shown = bad[dim.key]
            elif form == "json-strings":
                shown = written(rng, dim, value, letters=True)
            else:
                shown = value
            obj[name_of(rng, dim, style)] = shown
        if form == "explain":
            obj = {"scores": obj, "reasons": {k: rng.choice(["笔墨清淡。", "The boat is there.", "无可挑剔之处不多。",
                                                             "A quiet river scene."]) for k in keys}}
        text = json.dumps(obj, ensure_ascii=False, indent=rng.choice([None, 2]))
        if form == "json-lenient":
            text = rng.choice([lambda t: t.replace('"', "'"), lambda t: t[:-1].rstrip() + ",}",
                               lambda t: t.replace("null", "None")])(text)
        if form == "fence":
            text = "```" + rng.choice(["json", ""]) + "\n" + text + "\n```"
        return text
    if form == "lines":
        style = rng.choice(["key", "en", "zh"])
        bullet = rng.choice(["", "- ", "* ", "• "])
        bold = rng.random() < 0.3
        sep = rng.choice([": ", " = ", " — ", "："])
        lines = []
        for i, dim in enumerate(DIMS):
            name = name_of(rng, dim, style)
            shown = bad.get(dim.key) or written(rng, dim, scores[dim.key], letters=True)
            lines.append(f"{bullet}{'**' + name + '**' if bold else name}{sep}{shown}")
        return "\n".join(lines) + ("\n" if clean else rng.choice(["", "\n"]))
    # table
    header = rng.choice([("Dimension", "Score"), ("维度", "分数"), ("Dimension", "Score (0-1)")] +
                        ([] if clean else [("Dimension", "Score", "Reason")]))
    rows = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for dim in DIMS:
        shown = bad.get(dim.key) or written(rng, dim, scores[dim.key], letters=False)
        cells = [name_of(rng, dim, rng.choice(["key", "en", "zh"])), shown] + (["fine"] if len(header) == 3 else [])
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


SCORE_FORMS = ["json", "fence", "explain", "json-lenient", "json-names", "json-strings", "lines", "table"]
MARKS = "¹²³⁴⁵⁶⁷⁸⁹₁₂₃①②③④⑤⑥⑦⑧⑨"
ARTICLES = ["a few artifacts", "A bit soft.", "a touch off", "a poor fit", "A solid illustration.", "a partial match",
            "a weak echo of the poem", "A lot of noise"]
GRADES = ["B-", "D-", "B+", "A-", "C+", "A+"]
NA_WORDS = ["none", "excluded", "none — the setting fits", "0 (n/a)", "N/A (0.67)", "n/a — the mood is wrong", "无"]
DIRECTIONS = ["Values indicate the degree of deviation from the poem.", "Each score is how far the image falls short.",
              "Here are the error rates:", "Confidence levels for each dimension:", "以下是各维度的问题严重程度：",
              "Here are the weights I'd assign:", "数值越大问题越多。", "These are the defect rates per dimension:"]
REMARKS = [" (partially accurate)", " — four stars", " — garbled characters in the corner", " (no text issue)",
           " — 四星", " (roughly matches)", " — the poem names no setting", " pts", "分"]
THOUGHTS_IN_WORDS = ["The fisherman is there but the snow is thin: {name} is partial.", "{name} → b.",
                     "{name} gets two thirds.", "核心意象部分准确。", "For {name} I pick option (c).",
                     "The {name} is only partial.", "Looks fine."]
SCALES = ["Scores are on a 1–5 scale.", "All values are out of 10.", "Lower is better.",
          "(Higher numbers mean more problems.)", "按10分制评分。", "These are penalty scores.",
          "Scores are inverted here: 0 is best.", "The values are percentages.", "Each value is a risk score.",
          "(满分为五分)", "Scored like grades, not fractions."]
HEDGES = ["{a}-{b}", "{a} or {b}", "~{a}", "about {a}", "{a}?", "{a} (maybe {b})", "{a}/{b}", "{a}–{b}",
          "between {a} and {b}", "{a} to {b}", "{a}, or {b}", "roughly {a}", "{a}-ish", "{a} (could be {b})"]


def other_value(rng: random.Random, dim, value):
    choices = [o.score for o in dim.options if o.score != value] + [v for v in BETWEEN if v != value]
    return rng.choice(choices)


def shown(value) -> str:
    return "null" if value is None else f"{value:g}"


def compose_scores(rng: random.Random, clean: bool = False):
    """(answer, intended scores or None where it admits no one reading, strict): strict asks that the reader fail."""
    scores = draw_scores(rng)
    form = rng.choice(SCORE_FORMS)
    kinds = draw_kinds(rng, ["scale", "hedge", "duplicate", "wrapper", "correction", "truncation", "label", "missing",
                             "scaled", "prose number", "struck", "benign", "wrapper same", "adjust", "stray",
                             "reason", "remark", "footnote", "article", "grade", "na word", "direction",
                             "any remark", "comment", "wrapper words"], clean)
    bad: dict = {}
    dim = rng.choice(DIMS)
    if "footnote" in kinds and form in ("lines", "table", "json-strings") and scores[dim.key] is not None:
        bad[dim.key] = f"{shown(scores[dim.key])}{rng.choice(MARKS)}"  # intended: the value, or nothing
    for kind, words in (("article", ARTICLES), ("grade", GRADES), ("na word", NA_WORDS)):
        if kind in kinds and form in ("lines", "table", "json-strings") and dim.key not in bad:
            bad[dim.key] = rng.choice(words)
    if "any remark" in kinds and form in ("lines", "table") and dim.key not in bad:
        bad[dim.key] = written(rng, dim, scores[dim.key], letters=False) + rng.choice(REMARKS)
    if "hedge" in kinds:
        hedged = rng.choice(DIMS)
        a = scores[hedged.key] if scores[hedged.key] is not None else 0.5
        bad[hedged.key] = rng.choice(HEDGES).format(a=shown(a), b=shown(other_value(rng, hedged, a) or 0.5))
    if "scaled" in kinds:
        factor = rng.choice([5, 10, 100])
        for scaled in DIMS:
            if scores[scaled.key] is not None and scaled.key not in bad:
                bad[scaled.key] = f"{round(scores[scaled.key] * factor):g}"
    text = render_scores(rng, scores, form, bad, clean)
    other = other_value(rng, dim, scores[dim.key])
    reasoned = "reason" in kinds and form == "explain"
    if reasoned:
        obj = json.loads(text)
        obj["reasons"][dim.key] = rng.choice([f"Worth {shown(other)} at most.", "This should be higher.",
                                             "Honestly I overrated this.", f"A {shown(other)} would be fairer."])
        text = json.dumps(obj, ensure_ascii=False)
    if "missing" in kinds:  # another dimension than the one the other compositions speak of
        gone = rng.choice([d for d in DIMS if d is not dim])
        if form in ("lines", "table"):
            text = "\n".join(line for line in text.split("\n") if gone.key not in line and gone.name["en"] not in line
                             and gone.name["zh"] not in line)
        else:
            text = json.dumps({k: v for k, v in scores.items() if k != gone.key})
    marked = "footnote" in kinds and len(bad) == 1 and bad.get(dim.key, "")[-1:] in MARKS
    strict = bool(bad) and not marked or "missing" in kinds or reasoned
    intended = dict(scores)
    if "comment" in kinds and form in ("json", "fence", "json-strings", "json-names") and "\n" in text:
        at = rng.choice([i for i, c in enumerate(text) if c == "\n"])
        text = text[:at] + rng.choice(["  // partial", "  /* looks right */", "  // was 0.67", "  # fine"]) + text[at:]
        strict = True
    if "direction" in kinds:
        sentence = rng.choice(DIRECTIONS)
        text = sentence + "\n" + text if rng.random() < 0.5 else text + "\n" + sentence
        strict = True
    if "truncation" in kinds:
        text = truncate(rng, text)
    if "benign" in kinds:
        text = rng.choice(BENIGN) + "\n" + text + "\n" + rng.choice(BENIGN)
    if "scale" in kinds:
        sentence = rng.choice(SCALES)
        text = sentence + "\n" + text if rng.random() < 0.5 else text + "\n" + sentence
        strict = True
    if "prose number" in kinds:
        text += "\n" + rng.choice(["Overall I'd call it a 7/10 illustration.", "Core imagery feels like a 3.",
                                   "整体印象大约七分。", "If pressed: 0.4 overall."])
        strict = True
    if "duplicate" in kinds:
        name = name_of(rng, dim, rng.choice(["key", "en", "zh"]))
        text = rng.choice([
            lambda: text + f"\n{name}: {shown(other)}",
            lambda: text + "\n" + json.dumps({**scores, dim.key: other}),
            lambda: text + f"\n\n| Dimension | Score |\n|---|---|\n| {name} | {shown(other)} |",
            lambda: text + f"\nI'd give {name} {shown(other)}.",
            lambda: text.replace("{", "{" + json.dumps(dim.key) + ": " + json.dumps(other) + ", ", 1)
            if "{" in text else text + f"\n{name} = {shown(other)}",
        ])()
        strict = True
    if "correction" in kinds:
        name = name_of(rng, dim, rng.choice(["en", "key"]))
        text += "\n" + rng.choice([f"Actually, {name} should be {shown(other)}.", f"Wait — {name}: {shown(other)}.",
                                   f"更正：{dim.name['zh']}应为{shown(other)}。",
                                   f"{name}: {shown(scores[dim.key])} → {shown(other)}",
                                   f"On second thought, {name} {shown(other)}."])
        intended[dim.key] = other  # a careful person reads the correction; the reader may read it or nothing
    if "label" in kinds:
        differing = [o for o in dim.options if o.score != scores[dim.key]]
        if differing:
            option = rng.choice(differing)
            text += "\n" + rng.choice([f"The {dim.name['en'].lower()} is {option.label['en']}.",
                                       f"{dim.name['zh']}{option.label['zh']}。",
                                       f"For {dim.name['en'].lower()} I'd pick option ({option.letter})."])
            strict = True
    if "struck" in kinds:
        text = f"~~{shown(other)}~~ " + text
    if "adjust" in kinds:
        text += "\n" + rng.choice([f"The {dim.name['en'].lower()} deserves less than I gave it.",
                                   f"I'd bump {dim.name['en'].lower()} up a notch.", f"{dim.name['zh']}偏高了。",
                                   f"I was too generous with the {dim.name['en'].lower()}.",
                                   f"In hindsight the {dim.name['en'].lower()} is overrated above."])
        strict = True
    if "remark" in kinds and form == "lines":
        differing = [o for o in dim.options if o.score != scores[dim.key]]
        if differing:
            label = rng.choice(differing).label[rng.choice(["en", "zh"])]
            names = {dim.key, dim.name["en"], dim.name["zh"]}
            text = "\n".join(line + f" ({label})" if any(n in line for n in names) else line
                             for line in text.split("\n"))
            strict = True
    if "wrapper same" in kinds:  # wrappers last: they hold only their own reasoning
        same = rng.choice(DIMS)
        opening, closing = rng.choice(WRAPPERS)
        text = f"{opening}Checking {same.name['en'].lower()}: {shown(intended[same.key])}.{closing}\n{text}"
    if "wrapper words" in kinds:
        opening, closing = rng.choice(WRAPPERS)
        thought = rng.choice(THOUGHTS_IN_WORDS).format(name=dim.name["en"].lower())
        text = f"{opening}{thought}{closing}\n{text}"
        strict = True
    if "wrapper" in kinds:
        opening, closing = rng.choice(WRAPPERS)
        wrong = other_value(rng, dim, intended[dim.key])
        name = name_of(rng, dim, rng.choice(["key", "en", "zh"]))
        loose = dim.name["en"].split()[-1].lower()
        thought = rng.choice([f"So {name} should be {shown(wrong)}.", f"{name}: {shown(wrong)}",
                              json.dumps({dim.key: wrong}), f"I'd settle on {shown(wrong)} for {name}.",
                              f"Final call on {name}: {shown(wrong)}.", f"The {loose} gets {shown(wrong)}."])
        text = f"{opening}Let me look at each dimension. {thought}{closing}\n{text}"
        strict = True
    if "stray" in kinds:
        opening, closing = rng.choice(WRAPPERS)
        text = f"{opening}The central figure gets 0.{rng.randint(1, 9)}5 at most.{closing}\n{text}"
        strict = True
    return text, (None if strict else intended), strict


def check_scores(rng: random.Random) -> None:
    text, intended, strict = compose_scores(rng)
    parsed = parse_answer(text, RUBRIC, explain=rng.random() < 0.2)
    if parsed.status == "failed":
        return
    assert not strict, f"read {parsed.scores} from an answer with no one reading:\n{text}\n{parsed.notes}"
    for key in RUBRIC.keys:
        got, want = parsed.scores[key], intended[key]
        assert (got is None) == (want is None) and (got is None or abs(got - want) < 1e-9), (
            f"{key}: read {got}, intended {want}:\n{text}\n{parsed.notes}")


# --- the pairwise winner ----------------------------------------------------------------------------------------------

FAVOURS = ["Image {W} better keeps the lone boat and the falling snow.", "{W} is closer to the solitude of the poem.",
           "图{W}描绘了明月与霜，意境更贴切。", "Image {W} more faithfully depicts the fisherman.", "",
           "{W} captures the cold mood better.", "Image {W} better conveys the snow.",
           "图{W}更符合诗意。", "{W} has the sharper brushwork and the more vivid river."]
# reasons that name the other image, or do not show that they favour the winner: the reader refuses every one
NAMING_THE_OTHER = ["{L} lacks the fisherman entirely.", "{W} is better than {L} at conveying the solitude.",
                    "{L} falls short of {W} in capturing the snow.", "{W} keeps the snow, which {L} loses.",
                    "Image {L} is blurry.", "The snowy river and the solitary fisherman are both there.",
                    "{W} captures the cold mood."]
FAULTING = ["{W} lacks the moon.", "{W} is missing the fisherman.", "{W} has no snow.", "{W} has a distorted boat.",
            "{W} is cluttered.", "{W} is blurry.", "{W} has more artifacts.", "{W} contains more AI artifacts.",
            "{W} 画面模糊。", "{W}缺少渔翁。", "{W} is better, but blurry.", "{W} is hardly better.",
            "{W} is less faithful.", "{W} would be better with snow.", "{W} is better? Not really.",
            "{W} conveys the mood worse.", "图{W}略显模糊，更差。"]
RENAMINGS = ["The one on top", "The leading image", "The preceding image", "The image shown first", "The image above",
             "The rightmost", "Picture #2", "Img2", "The 2nd", "The opening image", "前一张", "头一张", "后一幅",
             "图甲", "甲图", "乙图", "一号图", "上一张", "第1张", "The former", "Its rival", "The other one"]
UNDOING = ["They are about even.", "It is a coin flip.", "两张图半斤八两。", "各有千秋。", "I swapped the images.",
           "The reverse holds.", "The JSON above is wrong.", "Disregard my verdict.", "上面写反了。", "反过来才对。",
           "以上答案有误。", "(dummy answer)", "样例输出", "不太确定。", "This is a guess.", "Erratum: winner is the first."]
AGAINST = ["Image {L} better captures the cold loneliness of the poem.", "{L} is the stronger illustration overall.",
           "{L} has the better moon, {W} the better mood.", "Both are equally good; it is a toss-up.",
           "{W} is weaker than {L} on the core imagery.", "Image {L} has no flaws at all, but {W} is fine.",
           "图{L}更符合诗意。", "{W} is not better than {L}.", "{L} lacks nothing.", "{L} is more faithful.",
           "{L} is excellent.", "{W} keeps the boat, but {L} is more poetic.", "Unlike {W}, {L} keeps the snow.",
           "{L} wins on mood.", "{L} is as good as {W}.", "{L} isn't worse.", "{L} has no equal here.",
           "{W} falls short of {L}.", "{L} beats {W}.", "{L} > {W}", "{W} < {L}", "{L}, with its moon, is lovely.",
           "{L}'s moon is lovely; {W}'s snow is lovelier.", "{W} is blurrier than {L}.",
           "{W} is more cluttered than {L}.",
           "{L} is calmer than {W}.", "{L} is less blurry than {W}.", "{W} is darker and {L} is brighter.",
           "{L} lacks nothing.", "{L} misses nothing.", "{L} is not without charm.", "图{L}也不错。", "图{W}不如图{L}。",
           "The other image captures the snow better.", "It is worse at the snow.", "另一张图更好。",
           "This one is weaker than the other.", "{W} keeps the snow; the other keeps it better.",
           "The first image is better.", "Image 1 keeps the snow.", "The left one is better.", "图一更好。"]


def render_winner(rng: random.Random, winner: str, loser: str, reason: str, form: str) -> str:
    if form == "exact":
        return json.dumps({"winner": winner, "reason": reason}, ensure_ascii=False)
    if form == "object":
        obj = {"winner": rng.choice([winner, winner.lower(), f"Image {winner}"])}
        if rng.random() < 0.7:
            obj["reason"] = reason
        text = json.dumps(obj, ensure_ascii=False, indent=rng.choice([None, 2]))
        return rng.choice([text, "```json\n" + text + "\n```", text.replace('"', "'")])
    if form == "line":
        label = rng.choice(["Winner", "**Winner:**", "Answer", "Final answer", "Verdict", "胜者", "答案", "The winner is"])
        sep = "" if label.endswith(":**") or label.endswith(" is") else rng.choice([": ", " = ", " — ", "："])
        text = f"{label}{sep} {rng.choice([winner, 'Image ' + winner, '**' + winner + '**'])}".replace("  ", " ")
        return text + (f"\nReason: {reason}" if reason and rng.random() < 0.6 else "")
    if form == "bare":
        return rng.choice([winner, f"({winner})", f"{winner}.", f"Image {winner}", f"**{winner}**"])
    return rng.choice([f"Image {winner} is better.", f"{winner} wins.", f"I prefer image {winner}.",
                       f"图{winner}更好。", f"我选{winner}。", f"{winner} is the better illustration."])


def compose_winner(rng: random.Random, clean: bool = False):
    winner = rng.choice("AB")
    loser = "B" if winner == "A" else "A"
    form = rng.choice(["exact", "object", "line", "bare", "sentence"])
    kinds = draw_kinds(rng, ["against", "tie", "split", "duplicate", "renamed", "wrapper", "correction", "doubt",
                             "truncation", "benign", "wrapper same", "prose", "out of range", "faulting",
                             "naming the other", "renamed in the reason", "undo", "wrapper words"], clean)
    strict = False
    reason, against = rng.choice(FAVOURS).format(W=winner, L=loser), False
    for kind, reasons, favours in (("against", AGAINST, False), ("faulting", FAULTING, False),
                                   ("naming the other", NAMING_THE_OTHER, True)):
        if kind in kinds and form in ("exact", "object", "line"):
            reason, against = rng.choice(reasons).format(W=winner, L=loser), not favours
    if "renamed in the reason" in kinds and form in ("exact", "object", "line"):
        reason, against = f"{rng.choice(FAVOURS[:2]).format(W=winner)} {rng.choice(RENAMINGS)} is weaker.", True
    text = render_winner(rng, winner, loser, reason, form)
    strict = against and json.dumps(reason, ensure_ascii=False)[1:-1] in text.replace("'", '"')
    intended = winner
    if "truncation" in kinds:
        text = truncate(rng, text)
    if "benign" in kinds:
        text = rng.choice(BENIGN) + "\n" + text
    if "tie" in kinds:
        text += "\n" + rng.choice(["It's a tie.", "A = B", "Both are equally good.", "Honestly 50/50.", "两张图不分上下。",
                                   "Neither really fits.", "Either would do.", "A ≈ B"])
        strict = True
    if "split" in kinds:
        text += "\n" + rng.choice([f"{loser} for the imagery, {winner} for the mood.", f"{loser} wins on imagery.",
                                   f"图{loser}意象更准。"])
        strict = True
    if "duplicate" in kinds:
        text += "\n" + rng.choice([f"Winner: {loser}", json.dumps({"winner": loser, "reason": "x"}), f"胜者：{loser}",
                                   f"{loser}", f"Image {loser} is better."])
        strict = True
    if "renamed" in kinds:
        text += "\n" + rng.choice(["The second image is better.", "Image 2 wins.", "The first one.", "The right one.",
                                   "图二更好。", "The latter.", "Image X is better."] +
                                  [f"{name} is weaker." for name in RENAMINGS])
        strict = True
    if "undo" in kinds:
        text += "\n" + rng.choice(UNDOING)
        strict = True
    if "out of range" in kinds:
        text = rng.choice(["Winner: C", '{"winner": "C", "reason": "x"}', "C", "Image C is better."]) + (
            "\n" + text if rng.random() < 0.5 else "")
        strict = True
    if "correction" in kinds:
        text += "\n" + rng.choice([f"Actually, {loser}.", f"Wait, I mixed them up: {loser}.", f"更正：{loser}。"])
        intended = loser
    if "doubt" in kinds:
        text += "\n" + rng.choice(["I could be wrong.", "Though honestly I'm not sure.", f"Maybe {loser}?",
                                   "Hard to say.", "Probably."])
        strict = True
    if "prose" in kinds:
        text += "\n" + rng.choice([f"Image {loser} has the moon.", f"{loser} is nice too.",
                                   f"Image {winner} is better."])
        strict = strict or "nice" in text or "moon" in text
    if "wrapper same" in kinds:  # wrappers last: they hold only their own reasoning
        opening, closing = rng.choice(WRAPPERS)
        text = f"{opening}Comparing the two. So {intended}.{closing}\n{text}"
    if "wrapper" in kinds:
        opening, closing = rng.choice(WRAPPERS)
        other = "B" if intended == "A" else "A"
        thought = rng.choice([f"So the answer is {other}.", f"Winner: {other}", f"{other} is better.", f"图{other}更好。"])
        text = f"{opening}{thought}{closing}\n{text}"
        strict = True
    if "wrapper words" in kinds:
        opening, closing = rng.choice(WRAPPERS)
        thought = rng.choice([f"So the answer is {'ab'['AB'.index(loser)]}.", "I will go with the one shown first.",
                              "The image above wins.", "所以甲图更好。", "所以前者更好。", "A is better. Is B better? Hmm."])
        text = f"{opening}{thought}{closing}\n{text}"
        strict = True
    return text, (None if strict else intended), strict


def check_winner(rng: random.Random) -> None:
    text, intended, strict = compose_winner(rng)
    parsed = parse_pair_answer(text)
    if parsed.winner is None:
        assert parsed.status == "failed"
        return
    assert not strict, f"read {parsed.winner} from an answer with no one reading:\n{text}\n{parsed.notes}"
    assert parsed.winner == intended, f"read {parsed.winner}, intended {intended}:\n{text}\n{parsed.notes}"


# --- the letter -------------------------------------------------------------------------------------------------------

POOL = ["静夜思", "江雪", "登鹳雀楼", "春晓", "枫桥夜泊", "黄鹤楼", "黄鹤楼送孟浩然之广陵", "相思", "鹿柴", "凉州词", "出塞",
        "出塞·秦时明月汉时关", "杂诗", "春怨", "早发白帝城", "望庐山瀑布"]
TRADITIONAL = {"静夜思": "靜夜思", "登鹳雀楼": "登鸛雀樓", "春晓": "春曉", "枫桥夜泊": "楓橋夜泊", "黄鹤楼": "黃鶴樓",
               "杂诗": "雜詩", "凉州词": "涼州詞"}


def draw_titles(rng: random.Random) -> list[str]:
    titles = rng.sample(POOL, 4)
    if rng.random() < 0.15:  # two candidates of one title (Tang has two 凉州词)
        titles[rng.randrange(4)] = titles[rng.randrange(4)]
    return titles


def compose_letter(rng: random.Random, clean: bool = False):
    titles = draw_titles(rng)
    i = rng.randrange(4)
    letter, title = "ABCD"[i], titles[i]
    other_i = rng.choice([j for j in range(4) if titles[j] != title] or [i])
    other = "ABCD"[other_i]
    shared = titles.count(title) > 1
    prefix = any(t != title and t.startswith(title) for t in titles)
    written = TRADITIONAL.get(title, title) if rng.random() < 0.3 else title
    form = rng.choice(["bare", "label", "letter-title", "title-letter", "title", "bare-title", "json", "sentence"])
    strict = False
    if form == "bare":
        text = rng.choice([letter, f"({letter})", f"{letter}.", letter.lower(), f"**{letter}**", f"选项{letter}"])
    elif form == "label":
        text = rng.choice(["Answer: ", "Final answer: ", "The answer is ", "答案：", "答案是", "Letter: "]) + letter
    elif form == "letter-title":
        text = f"{letter}{rng.choice(['. ', ' ', ' — ', ': '])}{rng.choice(['《' + written + '》', '「' + written + '」'])}"
        strict = shared
    elif form == "title-letter":
        text = f"《{written}》 ({letter})"
        strict = shared
    elif form == "title":
        text = rng.choice([f"《{written}》", f"「{written}」", f"Answer: 《{written}》"])
        strict = shared
    elif form == "bare-title":
        text = written
        strict = shared or prefix
    elif form == "json":
        text = json.dumps({rng.choice(["answer", "letter"]): letter})
    else:
        text = rng.choice([f"{letter} is correct.", f"It is {letter}.", f"I'd go with option {letter.lower()}.",
                           f"选{letter}"])
    kinds = draw_kinds(rng, ["duplicate", "renamed", "wrapper", "hedge", "correction", "other title", "none",
                             "out of range", "truncation", "benign", "wrapper same", "undo", "wrapper words"], clean)
    intended = letter
    if "truncation" in kinds:
        text = truncate(rng, text)
        strict = False  # what is left may be a letter alone, which is its one reading
    if "benign" in kinds:
        text = rng.choice(["The image shows a quiet river scene.", "画面清幽。", "Looking at the image:"]) + "\n" + text
    if "duplicate" in kinds and other != letter:
        text += "\n" + rng.choice([f"Answer: {other}", other, f"《{titles[other_i]}》", json.dumps({"answer": other}),
                                   f"答案：{other}"])
        strict = True
    if "renamed" in kinds:
        text += "\n" + rng.choice(["The third poem.", "第三首", "Poem 3", "the second one", "Option 2"])
        strict = True
    if "hedge" in kinds:
        text = rng.choice([f"Probably {letter}.", f"{letter} or {other}", f"{letter}?", f"Maybe {letter}",
                           f"可能是{letter}"]) + "\n" + text
        strict = True
    if "correction" in kinds and other != letter:
        text += "\n" + rng.choice([f"Actually, {other}.", f"Wait, no — {other}.", f"更正：{other}"])
        intended = other
    if "other title" in kinds and other != letter:
        text += "\n" + rng.choice([f"It depicts 《{titles[other_i]}》.", f"画的是{titles[other_i]}。"])
        strict = True
    if "none" in kinds:
        text += "\n" + rng.choice(["None of them fit.", "Neither.", "都不是。"])
        strict = True
    if "undo" in kinds:
        text += rng.choice(["\n", "\n\n"]) + rng.choice(UNDOING + ["上面写反了，应选前一个。", "Could also be the final option.",
                                                         "Could also be the last one.", "(not confident)"])
        strict = True
    if "out of range" in kinds:
        text = rng.choice(["E", "Answer: F", "选E"]) + "\n" + text
        strict = True
    if "wrapper same" in kinds:  # wrappers last: they hold only their own reasoning
        opening, closing = rng.choice(WRAPPERS)
        text = f"{opening}The image fits {intended}.{closing}\n{text}"
    if "wrapper" in kinds and other != intended:
        opening, closing = rng.choice(WRAPPERS)
        wrong = "ABCD"[other_i] if other != intended else letter
        thought = rng.choice([f"It must be {wrong}.", f"Answer: {wrong}", f"《{titles['ABCD'.index(wrong)]}》 fits."])
        text = f"{opening}{thought}{closing}\n{text}"
        strict = True
    if "wrapper words" in kinds:
        opening, closing = rng.choice(WRAPPERS)
        thought = rng.choice([f"So the answer is {other.lower()}.", "... so the answer should be the second option.",
                              f"所以选{other}。", f"The lone fisherman: this is {titles[other_i]}."])
        text = f"{opening}{thought}{closing}\n{text}"
        strict = True
    return text, titles, (None if strict else intended), strict


def check_letter(rng: random.Random) -> None:
    text, titles, intended, strict = compose_letter(rng)
    parsed = parse_letter(text, 4, titles)
    if parsed.letter is None:
        assert parsed.status == "failed"
        return
    assert not strict, f"read {parsed.letter} from an answer with no one reading:\n{text}\n{titles}\n{parsed.error}"
    assert parsed.letter == intended, f"read {parsed.letter}, intended {intended}:\n{text}\n{titles}\n{parsed.error}"


# --- every form, clean, reads ----------------------------------------------------------------------------------------

def check_clean_scores(rng: random.Random) -> None:
    text, intended, _ = compose_scores(rng, clean=True)
    explain = "reasons" in text and rng.random() < 0.5
    parsed = parse_answer(text, RUBRIC, explain=explain)
    assert parsed.status != "failed", f"a clean answer refused:\n{text}\n{parsed.notes}"
    assert all(parsed.scores[k] == pytest.approx(intended[k]) if intended[k] is not None else parsed.scores[k] is None
               for k in RUBRIC.keys), (text, parsed.scores)


def check_clean_winner(rng: random.Random) -> None:
    text, intended, _ = compose_winner(rng, clean=True)
    parsed = parse_pair_answer(text)
    assert parsed.winner == intended, f"a clean answer not read as {intended}:\n{text}\n{parsed.notes}"


def check_clean_letter(rng: random.Random) -> None:
    text, titles, intended, strict = compose_letter(rng, clean=True)
    parsed = parse_letter(text, 4, titles)
    assert parsed.letter == (None if strict else intended), f"a clean answer read {parsed.letter}:\n{text}\n{titles}"


# --- the tests --------------------------------------------------------------------------------------------------------

CHECKS = {"scores": check_scores, "winner": check_winner, "letter": check_letter}
CLEAN = {"scores": check_clean_scores, "winner": check_clean_winner, "letter": check_clean_letter}


@pytest.mark.parametrize("task", CHECKS)
def test_no_confident_wrong_value_on_generated_answers(task):
    assert run(CHECKS[task], FAST) >= FAST


@pytest.mark.parametrize("task", CLEAN)
def test_every_form_clean_reads(task):
    assert run(CLEAN[task], FAST) >= FAST


@pytest.mark.slow
@pytest.mark.parametrize("task", CHECKS)
def test_no_confident_wrong_value_on_ten_thousand_generated_answers(task):
    assert run(CHECKS[task], SLOW) >= SLOW
