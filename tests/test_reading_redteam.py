"""The second red team's tests of the readers (issue 44), adopted with their labels. They attacked the first round's
readers from docs/reading.md alone and labelled every answer before running it: the value a careful person reads,
or none where the answer admits no one reading (F1–F11: footnote marks merged into values, articles and grades read
as option letters, N/A words, scales and directions of the answer's own, remarks, comments, reasoning that concludes
in words or letters, reasons that fault the winner, notes that undo an answer, renamed images, explain-mode reasons
that move a score).

- `tests/data/redteam_i44b.jsonl` holds their labelled answers (the forms and refusals they read in the docs, the
  adversarial answers, the costs), each row as written in their tests: no reader returns a value other than the
  label, and every refusal names a condition of docs/reading.md's table.
- Their composed answers (a deterministic product per class they found) are composed here again.
- The forms they read in the first round's docs: those this grammar no longer reads fail with the condition the docs
  give for dropping them; their costs (plain answers refused) stay `xfail` where they are still refused.

Their end-to-end tests drove `tpb` against a scripted stand-in for a model; here the repair round runs against a
real `transformers serve` (tests/test_served.py) and a resume across reader versions is refused in
tests/test_reading.py."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tangpoetrybench.judging.reading import parse_answer, parse_letter, parse_pair_answer, read_reasons
from tangpoetrybench.rubric import load_rubric
from test_reading import documented_conditions

R = load_rubric("tang")
DATA = Path(__file__).parent / "data"
ROWS = [json.loads(line) for line in (DATA / "redteam_i44b.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()]
NAMES = {d.key: d.name["en"] for d in R.dimensions}
BASE = {"safety": 1.0, "technical_quality": 0.5, "ai_plausibility": 0.67, "text_integrity": 1.0,
        "scene_consistency": None, "cultural_coherence": 0.5, "artistic_style": 1.0, "core_imagery": 0.33,
        "emotional_resonance": 0.67, "overall_impression": 0.75}
J = json.dumps(BASE)
GOOD_W1 = '{"winner": "B", "reason": "B shows the moon; A lacks it."}'


def fmt(v):
    return "N/A" if v is None else (v if isinstance(v, str) else repr(v))


def lines(over=None, sep=": ", end="\n"):
    """One `Name: value` line per dimension; `over` replaces some values (strings are written as given)."""
    over = over or {}
    return "\n".join(f"{NAMES[k]}{sep}{fmt(over.get(k, v))}" for k, v in BASE.items()) + end


def table(over=None, header=("Dimension", "Score")):
    over = over or {}
    t = "| " + " | ".join(header) + " |\n|" + "---|" * len(header) + "\n"
    return t + "".join(f"| {NAMES[k]} | {fmt(over.get(k, v))} |\n" for k, v in BASE.items())


def read(row: dict) -> tuple[object, str, str | None]:
    """(the value read or None, the status, the error) of a row of any task."""
    if row["task"] in ("scores", "explain"):
        p = parse_answer(row["answer"], R, explain=row["task"] == "explain" or row.get("explain", False))
        return (None if p.status == "failed" else [p.scores[k] for k in R.keys]), p.status, p.error
    if row["task"] == "winner":
        p = parse_pair_answer(row["answer"])
        return p.winner, p.status, p.error
    p = parse_letter(row["answer"], row.get("n_options", 4), row.get("titles"))
    return p.letter, p.status, p.error


CONDITIONS = documented_conditions()


@pytest.mark.parametrize("row", ROWS, ids=[f"{r['task']}: {r['case']}" for r in ROWS])
def test_a_labelled_answer_is_never_read_wrong(row):
    """The label, or nothing; a refusal names a condition of the docs' table."""
    found, status, error = read(row)
    if found is None:
        assert status == "failed" and any(c in error for c in CONDITIONS), error
        return
    assert row["intended"] is not None, f"read {found!r} ({status}: {error}) from an answer with no one reading"
    assert found == (pytest.approx(row["intended"]) if row["task"] in ("scores", "explain") else row["intended"]), error


# The first round's documented forms that this grammar no longer reads, and the condition each now fails.
DROPPED = {
    "S2_after_think": "the reasoning block holds text", "W2_after_think": "the reasoning block holds text",
    "S2_line_comments": "a comment in the JSON", "S2_block_comments": "a comment in the JSON",
    "S2_same_object_twice": "text outside the form", "W2_twice": "text outside the form",
    "S3_remark": "is not one value of the form", "S4_score_option_reason": "text outside the form",
    "S5_intro": "text outside the form", "S5_intro_lines": "text outside the form", "W6_intro": "text outside the form",
    "L7_around": "text outside the form",
    # the red team's W1 reason, "B shows the moon; A lacks it.", names the other image
    "W1": "names an image other than by its label", "W2_fence": "names an image other than by its label",
    "W3_with_reason": "names an image other than by its label",
}
FORMS = [r for r in ROWS if r["kind"] == "docs form"]


@pytest.mark.parametrize("row", FORMS, ids=[r["case"] for r in FORMS])
def test_the_forms_they_read_in_the_docs(row):
    found, status, error = read(row)
    name = row["case"].removeprefix("docs form ")
    if name in DROPPED:
        assert found is None and DROPPED[name] in error, error
    else:
        assert found == (pytest.approx(row["intended"]) if row["task"] in ("scores", "explain") else
                         row["intended"]) and status in ("ok", "repaired"), error


def test_the_reasons_and_the_reasoning():
    """Explain mode: reasons kept as written, a broken but whole reason kept, one cut off refused; reasons only
    where the scores read. A reasoning block that agrees is refused all the same: it holds text."""
    reasons = {k: "Fine." for k in BASE} | {"core_imagery": "渔翁在，但雪景缺失。"}
    p = parse_answer(json.dumps({"scores": BASE, "reasons": reasons}, ensure_ascii=False), R, explain=True)
    assert p.status == "ok" and p.scores == BASE and p.reasons["core_imagery"] == "渔翁在，但雪景缺失。"
    broken = ('{"scores": ' + J + ', "reasons": {"safety": "No violence.", "core_imagery": "The "lone boat" is there", '
              '"overall_impression": "Good.')
    p = parse_answer(broken + '"}}', R, explain=True)
    assert p.scores == BASE and p.reasons == {"safety": "No violence.", "core_imagery": 'The "lone boat" is there',
                                              "overall_impression": "Good."}
    assert parse_answer(broken, R, explain=True).status == "failed"  # cut off: what it would have said is unknown
    assert read_reasons('{"scores": {"safety": 7}, "reasons": {"safety": "fine"}}', R) == {}
    final = json.dumps({**BASE, "core_imagery": 1.0})
    agrees = parse_answer("<think>The fisherman and the snow are both there: core imagery 1.</think>\n" + final, R)
    assert agrees.status == "failed" and "the reasoning block holds text" in agrees.error
    assert parse_answer("<think>\n\n</think>\n" + final, R).scores["core_imagery"] == 1.0


# --- their composed answers, class by class ------------------------------------------------------------------------

def scores_wrong(text: str, intended: dict | None) -> bool:
    p = parse_answer(text, R)
    return p.status != "failed" and (intended is None or any(p.scores[k] != intended[k] for k in intended))


def test_footnote_marks_are_not_merged_into_values():
    texts = [form({key: f"{v}{marks[d]}"}) for key, v in BASE.items() if v not in (None, 0.0, 1.0)
             for marks, d, form in itertools.product(("⁰¹²³⁴⁵⁶⁷⁸⁹", "₀₁₂₃₄₅₆₇₈₉", "⓪①②③④⑤⑥⑦⑧⑨"), range(1, 10), (lines, table))]
    wrong = [t for t in texts if scores_wrong(t, BASE)]
    assert len(texts) == 324 and not wrong, wrong[:3]


ARTICLE_REMARKS = ["few artifacts", "lot of artifacts", "bit soft", "touch off", "mismatch", "weak match",
                   "decent illustration", "poor fit", "clash of styles", "minor issue", "slight mismatch",
                   "muddy render", "jarring tone", "fair attempt", "serious problem", "little blurry",
                   "handful of glitches", "far cry from the poem", "so-so result", "middling effort"]


def test_an_article_is_not_option_a():
    texts = [lines({key: f"{cap} {remark}"}) for key, remark, cap in itertools.product(BASE, ARTICLE_REMARKS, "aA")]
    wrong = [t for t in texts if scores_wrong(t, None)]
    assert len(texts) == 400 and not wrong, wrong[:3]


DIRECTIONS = ["Values indicate the degree of deviation from the poem.", "Each score is how far the image falls short.",
              "Here are the error rates:", "Here are the probabilities that each dimension has a flaw:",
              "以下是各维度的问题严重程度：", "以下是各维度的缺陷程度：", "Confidence levels for each dimension:",
              "Here are the weights I'd assign:", "Each number is how much the image departs from the poem.",
              "数值表示偏离程度。", "数值越大问题越多。", "Scores measure the amount of each problem.",
              "Values are distances from the ideal illustration.", "These are the defect rates per dimension:"]


def test_a_direction_of_the_answers_own_is_refused():
    wrong = [(pre, body) for pre, body in itertools.product(DIRECTIONS, (J, lines(), table()))
             if scores_wrong(pre + "\n" + body, None)]
    assert not wrong, wrong[:3]


WINNER_FAULTS = ["lacks the moon", "is missing the fisherman", "has no snow", "has a distorted boat", "is cluttered",
                 "is blurry", "has garbled text", "looks artificial", "has melted hands", "feels generic",
                 "has more artifacts than {o}", "is noisier than {o}", "contains AI artifacts", "画面模糊",
                 "缺少渔翁", "有乱码"]


def test_a_reason_that_only_faults_the_winner_is_refused():
    texts = [text for w, fault in itertools.product("AB", WINNER_FAULTS)
             for reason in [f"{w} {fault.format(o='B' if w == 'A' else 'A')}."]
             for text in (json.dumps({"winner": w, "reason": reason}, ensure_ascii=False), f"Winner: {w}\nReason: {reason}")]
    read = [t for t in texts if parse_pair_answer(t).status != "failed"]
    assert len(texts) == 64 and not read, read[:3]


RENAMINGS = ["The one on top", "The leading image", "The preceding image", "The image shown first", "The image above",
             "The image below", "The rightmost", "Picture #2", "Img2", "The 2nd", "The opening image", "前一张",
             "头一张", "后一幅", "图甲", "甲图", "乙图", "一号图", "1号图", "上一张", "下一张", "第1张", "图①"]


def test_a_renamed_image_is_refused():
    texts = [f"{base}\n{name} is weaker." for name, base in itertools.product(RENAMINGS, ("Winner: B", GOOD_W1, "B"))]
    texts += [json.dumps({"winner": "B", "reason": f"Image B is better; {name.lower()} is weaker."}, ensure_ascii=False)
              for name in RENAMINGS]
    read = [t for t in texts if parse_pair_answer(t).status != "failed"]
    assert not read, read[:3]


UNDOING = ["They are about even.", "It is a coin flip.", "两张图半斤八两。", "各有千秋。", "I swapped the images.",
           "The opposite is true.", "The reverse holds.", "The JSON above is wrong.", "Disregard my verdict.",
           "上面写反了。", "反过来才对。", "以上答案有误。", "(dummy answer)", "样例输出", "不太确定。",
           "我猜的。", "This is a guess.", "Honestly, it could go either direction."]


def test_text_that_undoes_or_doubts_the_answer_is_refused():
    texts = [(f"{GOOD_W1}\n{extra}", "pair") for extra in UNDOING] + [(f"Winner: B\n{extra}", "pair") for extra in UNDOING]
    texts += [(f"Answer: C\n{extra}", "letter") for extra in UNDOING] + [(f"C\n\n{extra}", "letter") for extra in UNDOING]
    texts += [(json.dumps({"winner": "B", "reason": f"Image B is better. {extra}"}, ensure_ascii=False), "pair")
              for extra in UNDOING]
    read = [t for t, task in texts if (parse_pair_answer(t) if task == "pair" else parse_letter(t)).status != "failed"]
    assert not read, read[:3]


# --- their costs: plain answers a careful person reads, which the grammar may refuse (the repair round asks again;
# benchmarks/reader_corpora.py counts them) but never reads as another value ----------------------------------------

COSTS = [r for r in ROWS if r["kind"] == "cost"]


@pytest.mark.parametrize("row", COSTS, ids=[r["case"] for r in COSTS])
def test_a_cost_is_refused_or_read_as_intended(row):
    found, _, error = read(row)
    intended = pytest.approx(row["intended"]) if row["task"] in ("scores", "explain") else row["intended"]
    assert found is None or found == intended, error
