"""Pairwise judging (`tpb compare`): the contract, both orders, verdicts, position bias, resumable records, the
pairwise prompt, parser and constraint; PAE on the tiny Qwen3-VL and the api judge through a real `transformers
serve` (random weights: the tests check the plumbing, never a choice)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from tangpoetrybench.judging.constrained import pair_state
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.pairwise import (Pair, PairAnswer, compare_to_jsonl, dataset_pairs, pair_id, position_bias,
                                              verdict)
from tangpoetrybench.judging.registry import evaluator_names
from tangpoetrybench.judging.results import read_lines
from tangpoetrybench.judging.reading import parse_pair_answer
from tangpoetrybench.judging.prompt import build_pair_messages, pair_answer_schema
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.stats.pairs import evaluator_choices, pair_table
from fault_proxy import FaultProxy

POEM = sample_poems()[0]


def answer(winner):
    return PairAnswer(winner, json.dumps({"winner": winner, "reason": ""}), "ok") if winner else \
        PairAnswer(None, "?", "failed", "unreadable", error_kind="parse")


def test_verdicts_from_both_orders():
    assert verdict(answer("A"), answer("B")) == "x"  # x first and chosen; x second and chosen
    assert verdict(answer("B"), answer("A")) == "y"
    assert verdict(answer("A"), answer("A")) == "tie"  # always the first image: no preference at all
    assert verdict(answer("B"), answer("B")) == "tie"
    assert verdict(answer("A"), answer(None)) is None
    with pytest.raises(ValueError):
        PairAnswer("C", "", "ok")
    with pytest.raises(ValueError):
        PairAnswer(None, "", "ok")  # no winner is a failed answer
    records = [{"orders": [{"winner": "A"}, {"winner": "A"}], "verdict": "tie"},
               {"orders": [{"winner": "A"}, {"winner": "B"}], "verdict": "x"},
               {"orders": [{"winner": None}, {"winner": "B"}], "verdict": None}]
    bias = position_bias(records)
    assert bias["answers"] == 5 and bias["first_position"] == 3 and bias["first_position_share"] == 0.6
    assert bias["pairs"] == 2 and bias["consistent_share"] == 0.5


class BrightJudge:
    """A real pairwise judge by the contract, with no model: it prefers the brighter image (and fails where told)."""

    name, model_name, random_weights = "bright", "mean-pixel", False

    def __init__(self, fail: set[str] = frozenset(), kind: str = "transient", setting: int = 1):
        self.fail, self.kind, self.setting, self.asked = set(fail), kind, setting, []

    def settings(self):
        return {"setting": self.setting}

    def judge(self, items):
        self.asked += [(it.pair_id, np.asarray(it.image_a).mean(), np.asarray(it.image_b).mean()) for it in items]
        out = []
        for it in items:
            if it.pair_id in self.fail:
                out.append(PairAnswer(None, None, "failed", "timed out", error_kind=self.kind))
            else:
                a, b = np.asarray(it.image_a).mean(), np.asarray(it.image_b).mean()
                out.append(PairAnswer("A" if a >= b else "B", "{}", "ok", reason=f"{a:.0f} vs {b:.0f}"))
        return out


def grey(level):
    return Image.new("RGB", (8, 8), (level,) * 3)


def test_compare_asks_both_orders_and_resumes(tmp_path):
    images = {"g1/p": grey(200), "g2/p": grey(100), "g3/p": grey(50)}
    pairs = [Pair(POEM, "g1/p", "g2/p"), Pair(POEM, "g1/p", "g3/p"), Pair(POEM, "g2/p", "g3/p")]
    out = tmp_path / "pairs.jsonl"
    judge = BrightJudge(fail={pair_id("g2/p", "g3/p")})
    summary = compare_to_jsonl(judge, pairs, images.__getitem__, out, batch_size=2)
    assert summary.judged == 3 and summary.failed == 1
    # both orders, x first then y first, within one batch
    assert [(p, round(a), round(b)) for p, a, b in judge.asked[:4]] == [
        ("g1/p|g2/p", 200, 100), ("g1/p|g2/p", 100, 200), ("g1/p|g3/p", 200, 50), ("g1/p|g3/p", 50, 200)]
    rows = [line.record for line in read_lines(out)]
    assert [r["verdict"] for r in rows] == ["x", "x", None] and rows[2]["error_kind"] == "transient"
    assert [o["order"] for o in rows[0]["orders"]] == ["xy", "yx"]
    assert rows[0]["orders"][1]["winner"] == "B" and summary.bias["first_position_share"] == 0.5
    # a rerun asks only the failure again, and its new record wins
    again = BrightJudge()
    summary = compare_to_jsonl(again, pairs, images.__getitem__, out)
    assert summary.skipped == 2 and summary.judged == 1 and {p for p, _, _ in again.asked} == {"g2/p|g3/p"}
    # a kill mid-line leaves a partial record: it is dropped and the pair asked again
    out.write_bytes(out.read_bytes() + b'{"pair_id": "g1/p|g2')
    assert compare_to_jsonl(BrightJudge(), pairs, images.__getitem__, out).judged == 0
    assert out.read_bytes().endswith(b"\n")
    with pytest.raises(ValueError, match="setting 1, not 2"):
        compare_to_jsonl(BrightJudge(setting=2), pairs, images.__getitem__, out)
    # a failed parse is final: not asked again
    out2 = tmp_path / "parse.jsonl"
    compare_to_jsonl(BrightJudge(fail={"g1/p|g2/p"}, kind="parse"), pairs[:1], images.__getitem__, out2)
    assert compare_to_jsonl(BrightJudge(), pairs[:1], images.__getitem__, out2).judged == 0


def test_the_registry_lists_the_pairwise_judges():
    assert {"pae", "api", "semjudge"} <= set(evaluator_names("pairwise"))
    assert "clipscore" not in evaluator_names("pairwise") and "semjudge" not in evaluator_names("pointwise")
    with pytest.raises(ValueError, match="unknown evaluator 'nope'"):
        load_evaluator("nope", task="pairwise")
    with pytest.raises(ValueError, match="clipscore answers scalar, not pairwise"):
        load_evaluator("clipscore", task="pairwise")


def test_pair_choices_follow_the_table_whatever_the_record_order(demo_built, tmp_path):
    table = pair_table(demo_built, "test")
    pairs, load = dataset_pairs(demo_built, "images", "test", table.id_pairs())
    assert len(pairs) == len(table.pairs) and all(p.x < p.y for p in pairs)
    assert load(pairs[0].x).mode == "RGB"
    # a judge that always picks the human winner scores 1.0, whichever image each record calls x
    winner = {pair_id(table.image_ids[a], table.image_ids[b]): table.image_ids[a] if w else table.image_ids[b]
              for a, b, w in zip(table.pairs.x, table.pairs.y, table.pairs.x_wins)}
    out = tmp_path / "oracle.jsonl"
    out.write_text("".join(json.dumps({"pair_id": p.pair_id, "x": p.x, "y": p.y, "judge": "oracle", "model": "",
                                       "orders": [], "verdict": "x" if winner[p.pair_id] == p.x else "y"}) + "\n"
                           for p in pairs))
    _, _, choices = evaluator_choices(table, out)
    from tangpoetrybench.stats.pairs import pairwise_accuracy

    assert pairwise_accuracy(table, choices, n_bootstrap=0)["accuracy"] == 1.0


def test_the_pairwise_prompt_and_parser():
    rubric = load_rubric("tang")
    a, b = grey(10), grey(20)
    messages = build_pair_messages(POEM, rubric, a, b)
    images = [p["image"] for p in messages[1]["content"] if p["type"] == "image"]
    assert images[0] is a and images[1] is b
    system = messages[0]["content"][0]["text"]
    assert all(rubric.dimension(k).name["en"] in system for k in rubric.keys) and '"winner"' in system
    assert pair_answer_schema()["properties"]["winner"]["enum"] == ["A", "B"]
    assert parse_pair_answer('{"winner": "B", "reason": "B is closer to the poem."}').status == "ok"
    repaired = parse_pair_answer('```json\n{"winner": "b", "reason": "B is closer to the poem."}\n```')
    assert repaired.winner == "B" and repaired.status == "repaired" and "code fence" in repaired.error
    assert parse_pair_answer("A").winner == "A" and parse_pair_answer("A").status == "repaired"  # a bare letter
    for bad in ('{"winner": "tie"}', "", None, '{"reason": "A is better"}', "Not B."):
        assert parse_pair_answer(bad).status == "failed" and parse_pair_answer(bad).winner is None


def test_pair_state():
    done = '{"winner": "A", "reason": "the moon"}'
    assert pair_state(done) == ("done", "")
    assert all(pair_state(done[:i])[0] != "bad" for i in range(len(done)))
    assert pair_state('{"winner": "C')[0] == "bad" and pair_state('{"winner": "A", "reason": "a\\n')[0] == "bad"


@pytest.mark.slow
def test_pae_pairwise_on_the_tiny_model_both_orders_resumes(tiny_models, demo_built, tmp_path):
    out = tmp_path / "pairs.jsonl"
    cmd = [sys.executable, "-m", "tangpoetrybench.cli", "compare", "--dataset", str(demo_built), "--evaluator", "pae",
           "--model", str(tiny_models["qwen3-vl"]), "--device", "cpu", "--constrained", "--max-new-tokens", "48",
           "--out", str(out)]
    first = subprocess.run(cmd + ["--limit", "2"], capture_output=True, text=True)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "2 pairs judged now" in first.stdout and "random weights" in first.stdout
    rest = subprocess.run(cmd, capture_output=True, text=True)
    assert rest.returncode == 0 and "2 already there" in rest.stdout, rest.stderr[-3000:]
    rows = [line.record for line in read_lines(out)]
    assert len(rows) == len(pair_table(demo_built, "test").pairs) and len({r["pair_id"] for r in rows}) == len(rows)
    for row in rows:  # constrained decoding: every answer in form, so every pair has a verdict
        assert [o["order"] for o in row["orders"]] == ["xy", "yx"]
        assert all(o["status"] == "ok" and json.loads(o["raw"])["winner"] == o["winner"] for o in row["orders"])
        assert row["verdict"] in ("x", "y", "tie") and row["settings"]["task"] == "pairwise"
    refused = subprocess.run(cmd[:-5] + ["--max-new-tokens", "48", "--out", str(out)], capture_output=True, text=True)
    assert refused.returncode != 0 and "constrained True, not no constrained setting" in refused.stderr
    agree = subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "agree", "--dataset", str(demo_built),
                            "--scores", str(out), "--bootstrap", "100", "--literal-bias"], capture_output=True, text=True)
    assert agree.returncode == 0 and "position bias:" in agree.stdout, agree.stderr[-3000:]


@pytest.mark.slow
def test_api_pairwise_through_transformers_serve(server, demo_built, tmp_path):  # noqa: F811
    out = tmp_path / "api_pairs.jsonl"
    with FaultProxy(server["url"], faults=["503"]) as proxy:
        judge = load_evaluator("api", task="pairwise", model=server["model"], base_url=proxy.url, max_new_tokens=8,
                               concurrency=2, backoff=0.01, repair=0)  # requests counted: no repair round
        pairs, load = dataset_pairs(demo_built, "images", "test", pair_table(demo_built, "test").id_pairs()[:3])
        summary = compare_to_jsonl(judge, pairs[:2], load, out)
        assert summary.judged == 2
        asked = len(proxy.requests)
        summary = compare_to_jsonl(judge, pairs, load, out)  # resumed: only the third pair is asked
        assert summary.skipped == 2 and summary.judged == 1 and len(proxy.requests) == asked + 2
    rows = [line.record for line in read_lines(out)]
    assert [r["pair_id"] for r in rows] == [p.pair_id for p in pairs]
    assert proxy.requests[0]["fault"] == "503"  # retried, then answered
    sent = [r for r in proxy.requests if r["fault"] is None]
    assert len(sent) == 6 and all("response_format" in r["fields"] for r in sent[:1])
    for row in rows:
        assert [o["order"] for o in row["orders"]] == ["xy", "yx"] and row["judge"] == "api"
        assert all(o["usage"]["prompt_tokens"] > 0 for o in row["orders"])  # answered by the server
        assert all(o["extra"]["served_model"] == server["model"] for o in row["orders"])
        assert {o["error_kind"] for o in row["orders"]} <= {None, "parse"}


@pytest.mark.slow
def test_a_pairwise_answer_saved_by_the_repair_round_keeps_its_winner(server, demo_built, tmp_path):  # noqa: F811
    """The first answer is prose, the repair round's is the form: the order is `repaired`, with the repair's winner
    and reason (not the first answer parsed again); its raw output stays the first answer."""
    from tangpoetrybench.judging.reading import REPAIR

    def answer(request: dict, response: dict) -> dict:
        repair = request["messages"][-1]["content"] == REPAIR["winner"]  # asks for a reason about the chosen image
        response["choices"][0]["message"]["content"] = (json.dumps({"winner": "B", "reason": "B better shows the moon."})
                                                        if repair else "Both are lovely, in their ways.")
        return response

    with FaultProxy(server["url"], rewrite=answer) as proxy:
        judge = load_evaluator("api", task="pairwise", model=server["model"], base_url=proxy.url, max_new_tokens=8)
        pairs, load = dataset_pairs(demo_built, "images", "test", pair_table(demo_built, "test").id_pairs()[:1])
        compare_to_jsonl(judge, pairs, load, tmp_path / "pairs.jsonl")
        assert len(proxy.requests) == 4  # each order asked, then repaired
    [row] = [line.record for line in read_lines(tmp_path / "pairs.jsonl")]
    for order in row["orders"]:
        assert order["status"] == "repaired" and order["winner"] == "B", order
        assert order["reason"] == "B better shows the moon." and order["raw"] == "Both are lovely, in their ways."


@pytest.mark.slow
def test_tpb_compare_warns_as_tpb_score_does_and_cannot_vouch_for_a_served_model(server, demo_built, tmp_path,
                                                                                  capsys):  # noqa: F811
    """Every answer of the tiny served model is noise: the warning says what the answers looked like, the position
    bias is not claimed from none, and the records say `random_weights: "unknown"` (nobody can vouch for a served
    model's weights), with the server that answered."""
    from tangpoetrybench.cli import main

    out = tmp_path / "pairs.jsonl"
    assert main(["compare", "--dataset", str(demo_built), "--evaluator", "api", "--model", server["model"],
                 "--base-url", server["url"] + "/v1", "--max-new-tokens", "8", "--limit", "1", "--repair", "0",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "(1 without a verdict)" in printed.out and "position bias: not measured" in printed.out
    assert "0 of 0 answers" not in printed.out
    assert f"WARNING: all 2 answers of this run failed (see their `error` in {out}): none of them holds a JSON " \
           "object" in printed.err
    [row] = [line.record for line in read_lines(out)]
    assert row["random_weights"] == "unknown"
    assert {o["extra"]["server"] for o in row["orders"]} == {server["url"] + "/v1"}


def test_a_folder_of_ones_own_images_is_compared_without_a_dataset(tiny_models, demo_raw, tmp_path, capsys):
    """`tpb compare --images DIR --poems FILE`: every pair of two generators' images of one poem, no dataset."""
    from tangpoetrybench.cli import main
    from tangpoetrybench.judging.pairwise import folder_pairs

    folder = tmp_path / "mine"
    files = {g: {p.stem: p for p in (demo_raw / "images" / g).iterdir()} for g in ("painter_a", "painter_b")}
    for generator, images in files.items():
        (folder / generator).mkdir(parents=True)
        for stem in sorted(set(files["painter_a"]) & set(files["painter_b"]))[:2]:
            (folder / generator / images[stem].name).write_bytes(images[stem].read_bytes())
    pairs, load = folder_pairs(folder, demo_raw / "poems.jsonl")
    assert [(p.x, p.y) for p in pairs] == [(f"painter_a/{p.poem.poem_id}", f"painter_b/{p.poem.poem_id}") for p in pairs]
    assert len(pairs) == 2 and load(pairs[0].x).mode == "RGB"
    out = tmp_path / "pairs.jsonl"
    assert main(["compare", "--images", str(folder), "--poems", str(demo_raw / "poems.jsonl"), "--evaluator", "pae",
                 "--model", str(tiny_models["qwen3-vl"]), "--constrained", "--out", str(out)]) == 0
    rows = [line.record for line in read_lines(out)]
    assert [r["pair_id"] for r in rows] == [p.pair_id for p in pairs] and all(r["verdict"] for r in rows)
    assert rows[0]["random_weights"] is True
    # constrained decoding closes the reason at once (the form PAE is trained to give): every answer reads as is
    assert all(o["status"] == "ok" and o["reason"] == "" for r in rows for o in r["orders"]), rows
    assert main(["compare", "--images", str(folder), "--evaluator", "pae", "--out", str(out)]) == 2
    assert "give --dataset DIR, or --images DIR with --poems FILE" in capsys.readouterr().err
