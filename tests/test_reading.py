"""The answer readers, table-driven: `tests/data/winner_cases.jsonl`, `letter_cases.jsonl` and `reasons_cases.jsonl`
(the scores' table, `parser_cases.jsonl`, runs in test_parsing.py) hold one answer per line with the reading a
careful person gives it (`expected`, or "failed" where it has none), its kind, and what the reader returns: the
reading, or a failed read (`status: failed`) whose error names the condition (`refused`). A new case is one more line.
Then the envelope every reader opens answers with (every family's reasoning wrapper, which must be empty; fences;
struck-through text; width), the strict JSON reader, SemJudge's steps, the versions, and a resume across versions
refused."""

import json
import re
import shutil
from importlib import resources
from pathlib import Path

import pytest
from PIL import Image

from tangpoetrybench.dataset.distractors import choose_distractors, write_candidates
from tangpoetrybench.judging.backends import Answer
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import ScoringItem
from tangpoetrybench.judging.judge import Attempt
from tangpoetrybench.judging.pairwise import Pair, PairAnswer, pair_record
from tangpoetrybench.judging.reading import (VERSIONS, parse_answer, parse_letter, parse_pair_answer, read_json,
                                             read_reasons, schema_problems)
from tangpoetrybench.judging.reading.core import Num, Pairs, drop_thinking, parse_json, whole_fence
from tangpoetrybench.judging.reading.envelope import Unreadable, open_envelope
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric

DATA = Path(__file__).parent / "data"
RUBRIC = load_rubric("tang")


def table(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text(encoding="utf-8").splitlines() if line.strip()]


WINNERS, LETTERS, REASONS = table("winner_cases.jsonl"), table("letter_cases.jsonl"), table("reasons_cases.jsonl")
FORMS = table("forms.jsonl")
DOCS = Path(__file__).resolve().parents[1] / "docs" / "reading.md"


def chosen(task: str, case: dict) -> tuple[str | None, str, str | None]:
    """(the option read, the status, the error) of a winner or a letter case."""
    if task == "winner":
        read = parse_pair_answer(case["answer"])
        return read.winner, read.status, read.error
    read = parse_letter(case["answer"], case.get("n_options", 4), case.get("titles"))
    return read.letter, read.status, read.error


CHOICES = [("winner", c) for c in WINNERS] + [("letter", c) for c in LETTERS]


@pytest.mark.parametrize("task,case", CHOICES, ids=[f"{t}: {c['case']}" for t, c in CHOICES])
def test_choice_case(task, case):
    """Never a value other than the expected one; a failed read where the table says so, naming its condition."""
    found, status, error = chosen(task, case)
    if case["expected"] == "failed" or case.get("status") == "failed":
        assert found is None and status == "failed" and case["refused"] in error, (found, error)
    else:
        assert found == case["expected"], error
        assert status == case["status"] and (error is None) == (status == "ok")


@pytest.mark.parametrize("case", REASONS, ids=[c["case"] for c in REASONS])
def test_reasons_case(case):
    """Reasons are read apart: a broken reason loses that reason at most, never a score."""
    assert read_reasons(case["answer"], RUBRIC) == case["reasons"]
    parsed = parse_answer(case["answer"], RUBRIC, explain=True)
    if case["scores"] == "failed":
        assert parsed.status == "failed" and parsed.reasons == {} and case["refused"] in parsed.error
    else:
        assert parsed.scores == pytest.approx(dict(zip(RUBRIC.keys, case["scores"]))), parsed.notes
        assert parsed.reasons == case["reasons"] and parsed.status == case.get("status", "repaired")


def read_any(case: dict) -> tuple[object, str, str | None]:
    """(the value read, the status, the error) of a row of any task."""
    if case["task"] == "scores":
        parsed = parse_answer(case["answer"], RUBRIC, explain=case.get("explain", False))
        return (None if parsed.status == "failed" else [parsed.scores[k] for k in RUBRIC.keys]), parsed.status, \
            parsed.error
    return chosen(case["task"], case)


@pytest.mark.parametrize("case", FORMS, ids=[f"{c['form']} {c['task']}: {c['answer'][:40]!r}" for c in FORMS])
def test_every_form_and_refusal_in_the_docs(case):
    """docs/reading.md's grammar, row by row: every form reads its example (ok only where the table says so), every
    refusal fails its example with the error the table quotes."""
    found, status, error = read_any(case)
    if case["expected"] == "failed":
        assert found is None and status == "failed" and case["refused"] in error, (found, error)
    else:
        assert found == (pytest.approx(case["expected"]) if case["task"] == "scores" else case["expected"]), error
        assert status == case.get("status", "repaired"), error


def documented_conditions() -> list[str]:
    """The phrases docs/reading.md's refusal table says the errors hold."""
    rows = [line for line in DOCS.read_text(encoding="utf-8").splitlines() if re.match(r"\| R\d+ \|", line)]
    return [p for line in rows for p in re.findall(r'"([^"]+)"', line.rsplit("|", 2)[-2])]


def test_every_refusal_names_a_condition_of_the_docs_table():
    conditions = documented_conditions()
    rows = FORMS + table("handwritten_answers.jsonl") + table("handwritten_redteam.jsonl") + [
        {**c, "task": task} for task, name in (("scores", "parser_cases.jsonl"), ("winner", "winner_cases.jsonl"),
                                              ("letter", "letter_cases.jsonl")) for c in table(name)] + [
        {**c, "task": "scores", "explain": True} for c in REASONS]
    unnamed = [(c["task"], c["answer"][:40], error) for c in rows
               if (read := read_any(c))[0] is None and not any(p in read[2] for p in conditions)
               for error in [read[2]]]
    assert len(conditions) > 25 and not unnamed, unnamed[:5]


def test_the_docs_table_and_the_forms_file_name_the_same_forms():
    documented = set(re.findall(r"^\| ([SWLR]\d+) \|", DOCS.read_text(encoding="utf-8"), re.M))
    assert documented == {c["form"] for c in FORMS} and len(documented) == 28


HAND_WRITTEN = table("handwritten_answers.jsonl") + table("handwritten_redteam.jsonl")


@pytest.mark.parametrize("case", HAND_WRITTEN, ids=[f"{c['task']}: {c['case']}" for c in HAND_WRITTEN])
def test_hand_written_answers_are_never_read_wrong(case):
    """The hand-written corpora (labelled with what a careful person reads, or null where no one reading exists):
    every reader returns the labelled value or nothing."""
    found, _, error = read_any(case)
    assert found is None or case["intended"] is not None and found == (
        pytest.approx(case["intended"]) if case["task"] == "scores" else case["intended"]), error


def test_the_tables_hold_enough_of_every_kind():
    for cases, least, kinds in ((WINNERS, 100, {"negation", "contradiction", "correction", "example", "chinese"}),
                                (LETTERS, 100, {"negation", "contradiction", "correction", "example", "chinese"}),
                                (REASONS, 30, {"quote", "newline", "broken", "truncated"}),
                                (table("parser_cases.jsonl"), 200, {"correction", "contradiction", "duplicate"})):
        assert len(cases) >= least and len({c["case"] for c in cases}) == len(cases)
        assert kinds <= {c["kind"] for c in cases} and all(c.get("kind") for c in cases)
        readings = {str(c.get("expected", c.get("status", c.get("scores")))) for c in cases}
        assert "failed" in readings and len(readings) > 2  # cases that read, and cases that must fail


def test_every_familys_reasoning_wrapper_is_set_apart_and_must_be_empty():
    """An empty block is set apart; one that holds anything is refused (what it concludes cannot be shown to agree
    with the final answer); a lone closing tag means everything before it was reasoning; one opened and never
    closed, or channels without a final one, leave no final answer."""
    for opening, closing in [("<think>", "</think>"), ("<thinking>", "</thinking>"), ("<reasoning>", "</reasoning>"),
                             ("<reflection>", "</reflection>"), ("<seed:think>", "</seed:think>"),
                             ("[THINK]", "[/THINK]"), ("◁think▷", "◁/think▷"),
                             ("<|begin_of_thought|>", "<|end_of_thought|>"),
                             ("Here is my thought process:", "Here is my response:"),
                             ("<|channel|>analysis<|message|>",
                              "<|end|><|start|>assistant<|channel|>final<|message|>")]:
        assert open_envelope(f"{opening}\n\n{closing}\nB").body.strip() == "B", opening
        with pytest.raises(Unreadable, match="the reasoning block holds text"):
            open_envelope(f"{opening}The snow is thin.{closing}\nB")
        with pytest.raises(Unreadable, match="never closed|no final answer"):
            open_envelope(f"{opening}A? maybe. B" if opening.startswith(("<", "[", "◁", "Here")) and "channel" not in
                          opening else f"{opening}A? maybe. B<|end|>")
    assert open_envelope("\n</think>\nB").body.strip() == "B"  # the opening tag was in the prompt
    assert open_envelope("<answer>B</answer>").body.strip() == "B" and open_envelope("\\boxed{C}").body == "C"
    with pytest.raises(Unreadable, match="struck-through"):
        open_envelope("~~A~~ B")
    for answer in ('I think A.</think>{"winner": "B", "reason": "B is sharper."}', "C?</think>C", "A? or B?</think>C"):
        read = parse_pair_answer(answer) if "winner" in answer else parse_letter(answer)
        assert read.status == "failed" and "the reasoning block holds text" in read.error
    assert parse_letter("<think>\n\n</think>\n\nC").letter == "C"  # Qwen3 with thinking off
    assert read_json('I think A.</think>{"winner": "B"}')[0] == {"winner": "B"}  # SemJudge's steps: thinking dropped
    assert drop_thinking("<think>A? B? C") == ("", True)
    assert read_json('<think>{"winner": "A"}')[1].startswith("not valid JSON")  # the answer never came


def test_width_is_folded_and_nothing_else():
    """Full-width characters read as ASCII; superscripts, circled digits and fractions stay themselves, so that no
    value grows a digit (NFKC would make `0.5¹` 0.51)."""
    assert open_envelope("Ｂ：０．６７　").body == "B:0.67 "
    assert open_envelope("0.5¹ 0.5① ½ ⅓").body == "0.5¹ 0.5① ½ ⅓"
    assert parse_pair_answer("Ｗｉｎｎｅｒ：Ｂ").winner == "B"


def test_fences_open_where_they_stand():
    assert open_envelope("Scores:\n```json\n{}\n```\nThanks").body == "Scores:\n\n{}\n\nThanks"
    assert whole_fence('```json\n{"a": 1}\n```') == '{"a": 1}' and whole_fence("x ```y```") == "x ```y```"


def test_json_is_read_strictly_with_repairs_that_cannot_change_a_value():
    repairs = []
    value = parse_json("{'a': 0.50, b: [1, None,], 'a': '2',}", repairs)
    assert value == Pairs([("a", Num("0.50")), ("b", [Num("1"), None]), ("a", "2")])  # a key twice is kept twice
    assert repairs == ["single quotes", "bare keys", "Python's None", "a trailing comma"]
    for text, error in (('{"a": 1} and more', "text outside the form"), ('{"a": 1, // note\n}', "a comment in the JSON"),
                        ('{"a": 1 # note\n}', "a comment in the JSON"), ('{"a": 0.', "cut off"),
                        ('{"a": "x', "cut off"), ('{"a" 1}', "does not load")):
        with pytest.raises(Unreadable, match=error):
            parse_json(text)


def test_steps_read_strictly_and_validate_with_jsonschema():
    schema = {"type": "object", "properties": {"winner": {"enum": ["A", "B"]}, "discussion": {"type": "string",
              "minLength": 1}, "boxes": {"type": "array", "items": {"type": "number"}, "maxItems": 2}},
              "required": ["winner", "discussion"], "additionalProperties": False}
    assert schema_problems({"winner": "A", "discussion": "moon"}, schema) == []
    assert schema_problems({"winner": "C", "discussion": "  ", "boxes": [1, "x", 3], "more": 1}, schema) == [
        "$.winner: 'C' is not one of A, B", "$.discussion: empty", "$.boxes[1]: expected a number, got str",
        "$.boxes: 3 items, not 0–2", "$: unexpected 'more'"]
    assert schema_problems({}, schema) == ["$: missing 'winner'", "$: missing 'discussion'"]
    assert schema_problems([], schema) == ["$: expected an object, got list"]
    assert read_json('The winner is {"winner": "A"}')[1].startswith("not valid JSON")  # never fished out of prose


def test_the_versions_are_in_one_place():
    assert VERSIONS == {"scores": 7, "winner": 5, "letter": 5, "steps": 1}
    judge = load_evaluator("api", model="pae", base_url="http://127.0.0.1:9/v1")
    assert judge.settings()["parser"] == VERSIONS["scores"]


DEAD = "http://127.0.0.1:9/v1"  # a judge never asked: the refusal comes first


def judged_under_older_rules(reader: str, tmp_path: Path) -> tuple[list[str], dict]:
    """The command that resumes a results file of `reader`'s task, and a record of that file as the judge writes it,
    its answer read by today's reader: synthetic images of the bundled sample poems, a served judge at a dead
    port."""
    poem = sample_poems()[0]
    images, poems = tmp_path / "images", tmp_path / "poems.jsonl"
    with resources.as_file(resources.files("tangpoetrybench") / "data" / "sample_poems.jsonl") as bundled:
        shutil.copy(bundled, poems)
    folders = [images / "g1", images / "g2"] if reader == "winner" else [images]
    for level, folder in enumerate(folders):
        folder.mkdir(parents=True)
        Image.new("RGB", (16, 16), (30 + 60 * level, 60, 90)).save(folder / f"{poem.poem_id}.png")  # synthetic
    served = ["--images", str(images), "--poems", str(poems), "--model", "pae", "--base-url", DEAD]
    if reader == "winner":
        judge = load_evaluator("api", task="pairwise", model="pae", base_url=DEAD)
        answers = [PairAnswer(read.winner, text, read.status, read.error, read.reason) for text in (
            '{"winner": "A", "reason": "A is sharper."}', '{"winner": "B", "reason": "B is sharper."}')
            if (read := parse_pair_answer(text))]
        record = pair_record(Pair(poem, f"g1/{poem.poem_id}", f"g2/{poem.poem_id}"), judge, answers)
        return ["compare", *served, "--evaluator", "api"], record
    if reader == "letter":
        candidates = write_candidates(choose_distractors(sample_poems(), seed=0), sample_poems(),
                                      tmp_path / "candidates.jsonl", {"seed": 0})
        judge = load_evaluator("recognize", model="pae", base_url=DEAD, candidates=candidates)
        item = ScoringItem(poem.poem_id, Image.open(images / f"{poem.poem_id}.png").convert("RGB"), poem)
        attempts = [Attempt(q, answer, judge.task.read(q, answer)) for q in judge.task.questions(item, judge)
                    if (answer := Answer("C"))]
        record = judge.task.record(judge, item, attempts).to_json()
        return ["score", *served, "--evaluator", "recognize", "--candidates", str(candidates), "--quiet"], record
    judge = load_evaluator("api", model="pae", base_url=DEAD)
    answer = '{"safety": 1, "technical_quality": 0.5}'
    parsed = parse_answer(answer, RUBRIC)
    record = judge.result(ScoringItem(poem.poem_id, None, poem), parsed.scores, parsed.quality, answer, parsed.status,
                          parsed.error).to_json()
    return ["score", *served, "--evaluator", "api", "--quiet"], record


@pytest.mark.parametrize("reader", ["scores", "winner", "letter"])
def test_a_file_read_under_an_older_reader_is_not_resumed(reader, tmp_path, capsys):
    """A results file whose answers were read by the reader's previous version is not resumed under this one
    (`tpb score` for rubric scores and letters, `tpb compare` for winners): a resume would mix two readings of the
    same kind of answer in one file."""
    from tangpoetrybench.cli import main

    command, record = judged_under_older_rules(reader, tmp_path)
    assert record["settings"]["parser"] == VERSIONS[reader]
    record["settings"]["parser"] = VERSIONS[reader] - 1
    out = tmp_path / "results.jsonl"
    out.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main([*command, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{out} holds results made with parser {VERSIONS[reader] - 1}, not {VERSIONS[reader]}" in err, err
    assert out.read_text(encoding="utf-8").count("\n") == 1  # nothing appended
