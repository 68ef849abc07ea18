"""The recognize evaluator: the Phase-1 question over candidate orders, its records, and its agreement with the
human Phase-1 track. Simulated judges (labelled so, plain Python answering the real prompts) check the verdict and
the statistics; the tiny random Qwen3-VL and a real `transformers serve` check the backends' plumbing."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from tangpoetrybench.cli import main
from tangpoetrybench.dataset.distractors import choose_distractors, read_candidates, write_candidates
from tangpoetrybench.dataset.reading import dataset_rows
from tangpoetrybench.judging.backends import Answer, Backend, Question
from tangpoetrybench.judging.backends.vllm import choice_probs, sampling_kwargs
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import ScoringItem
from tangpoetrybench.judging.judge import Judge
from tangpoetrybench.judging.reading import parse_letter
from tangpoetrybench.judging.prompt import build_recognize_messages
from tangpoetrybench.judging.results import read_lines
from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl
from tangpoetrybench.judging.tasks.letter import Recognize, order_set
from tangpoetrybench.poems import Poem, read_poems
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.stats.recognition import agree_recognition


class Simulated(Recognize):
    """The Phase-1 task, its questions telling a SIMULATED backend which image they show and its right poem."""

    def questions(self, item, judge):
        asked = super().questions(item, judge)
        four = self.candidates_for(item)
        for index, (question, order) in enumerate(zip(asked, self.orders)):
            question.meta.update(item=item, shown=[four[k] for k in order], index=index)
        return asked


class SimulatedBackend(Backend):
    """SIMULATED backend: plain Python that answers the real prompts with `answer(item, shown poems, order index)`."""

    name, model_name = "simulated", "simulated"

    def __init__(self, answer):
        self.answer_with = answer

    def prepare(self, questions):
        return questions

    def answer(self, prepared, questions):
        assert all(q.messages[1]["content"][0]["type"] == "image" for q in questions)
        return [Answer(self.answer_with(q.meta["item"], q.meta["shown"], q.meta["index"])) for q in questions]


def SimulatedJudge(candidates, orders, answer) -> Judge:
    """A SIMULATED recognize judge: the real task and machinery, answered by plain Python."""
    return Judge("recognize", Simulated(candidates, orders), SimulatedBackend(answer), max_pixels=64 * 64)


@pytest.fixture(scope="module")
def candidates(demo_raw, tmp_path_factory) -> Path:
    poems = read_poems(demo_raw / "poems.jsonl")
    sets = choose_distractors(poems, seed=0)
    return write_candidates(sets, poems, tmp_path_factory.mktemp("cand") / "candidates.jsonl", {"seed": 0})


@pytest.fixture(scope="module")
def answer_first(demo_raw, tmp_path_factory) -> dict:
    """Candidates as a naive builder writes them: the right poem always first."""
    poems = read_poems(demo_raw / "poems.jsonl")
    by_id = {p.poem_id: p for p in poems}
    return {s.poem_id: [by_id[s.poem_id]] + [by_id[d.poem_id] for d in s.distractors]
            for s in choose_distractors(poems, seed=0)}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_orders():
    rotations = order_set("rotations")
    assert len(rotations) == 4
    for position in range(4):  # every candidate once in every place
        assert sorted(o[position] for o in rotations) == [0, 1, 2, 3]
    everything = order_set("all")
    assert len(everything) == 24 and len(set(everything)) == 24 and set(everything) == set(itertools.permutations(range(4)))
    with pytest.raises(ValueError, match="--orders"):
        order_set("some")


def test_prompt_letters_the_candidates_in_order():
    four = [Poem(f"p{i}", f"题{i}", f"作者{i}", f"诗句{i}。", "tang") for i in range(4)]
    messages = build_recognize_messages([four[k] for k in (2, 0, 3, 1)], image="IMG")
    text = messages[1]["content"][1]["text"]
    assert messages[1]["content"][0] == {"type": "image", "image": "IMG"}
    assert [text.index(f"{letter}. 《题{k}》") for letter, k in zip("ABCD", (2, 0, 3, 1))] == sorted(
        text.index(f"{letter}. 《题{k}》") for letter, k in zip("ABCD", (2, 0, 3, 1)))
    assert "A, B, C or D" in text and "letter" in messages[0]["content"][0]["text"]
    assert messages[0]["content"][0]["text"].startswith("You are an expert reader of classical Chinese poetry.")
    haiku = build_recognize_messages(four, rubric=load_rubric(Path(__file__).parent / "data" / "haiku.yaml"))
    assert haiku[0]["content"][0]["text"].startswith("You are an expert reader of Japanese haiku.")  # its rubric's


def test_letter_parser_never_guesses():
    assert parse_letter("B").letter == "B" and parse_letter("B").status == "ok"
    assert parse_letter("（C）").letter == "C"
    assert parse_letter("答案：D").status == "repaired" and parse_letter("答案：D").letter == "D"
    assert parse_letter("<think>\n\n</think>\nC").letter == "C"  # an empty reasoning block, as with thinking off
    assert parse_letter("<think>A? or B?</think>\nC").letter is None  # a reasoning block that holds text
    assert parse_letter("A moonlit river, so B").letter is None  # "A" may be option A: refused, never guessed
    for bad in ("", "A or B", "E", "none of them", "The answer is not B.", "Definitely not A."):
        assert parse_letter(bad).status == "failed" and parse_letter(bad).letter is None, bad


def test_letter_probs_and_vllm_request():
    letters = ("A", "B", "C", "D")
    probs = choice_probs({"A": np.log(0.2), " B": np.log(0.6), "C": np.log(0.2), "x": 0.0}, letters)
    assert probs == pytest.approx([0.2, 0.6, 0.2, 0.0])
    assert choice_probs({"x": -1.0}, letters) is None
    kwargs = sampling_kwargs(Question([], 16, choices=letters))
    assert kwargs["max_tokens"] == 1 and kwargs["structured_outputs"] == {"choice": ["A", "B", "C", "D"]}


@pytest.mark.parametrize("orders", ["rotations", "all"])
def test_always_a_scores_chance_once_orders_rotate(demo_built, answer_first, orders, tmp_path):
    """A judge that always answers "A" is right for exactly 1 order in 4 of every image, even when the right poem is
    always listed first — it would score 100 % if asked in that order alone."""
    always_a = SimulatedJudge(answer_first, orders, lambda item, shown, index: "A")
    summary = score_to_jsonl(always_a, DatasetSource(demo_built, "images", "test"), tmp_path / "a.jsonl", progress=False)
    rows = records(tmp_path / "a.jsonl")
    assert summary.scored == len(rows) == 12 and summary.failed == 0
    assert {r["scores"]["recognizability"] for r in rows} == {0.25}
    assert all(r["evidence"]["letters"] == ["A"] * len(order_set(orders)) for r in rows)
    single = SimulatedJudge(answer_first, "rotations", lambda item, shown, index: "A")
    single.task.orders = order_set("rotations")[:1]  # the listed order only
    [result] = single.score([next(iter(DatasetSource(demo_built, "images", "test"))).load()])
    assert result.scores["recognizability"] == 1.0


def knows(item: ScoringItem, shown: list[Poem], index: int) -> str:
    """SIMULATED: right in the first k orders of an image (k from its id), else the first wrong candidate."""
    k = zlib.crc32(item.image_id.encode()) % 5
    right = [p.poem_id for p in shown].index(item.poem.poem_id)
    wrong = next(i for i, p in enumerate(shown) if p.poem_id != item.poem.poem_id)
    return "ABCD"[right if index < k else wrong]


def kendall_b(x: list[float], y: list[float]) -> float | None:
    conc = disc = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            a, b = np.sign(x[i] - x[j]), np.sign(y[i] - y[j])
            conc += a * b > 0
            disc += a * b < 0
            tx += a == 0 and b != 0
            ty += b == 0 and a != 0
    denominator = ((conc + disc + tx) * (conc + disc + ty)) ** 0.5
    return None if denominator == 0 else (conc - disc) / denominator


def test_agreement_matches_an_independent_computation(demo_built, candidates, tmp_path, capsys):
    judge = SimulatedJudge(candidates, "rotations", knows)
    out = tmp_path / "knows.jsonl"
    score_to_jsonl(judge, DatasetSource(demo_built, "images", "test"), out, progress=False)
    shares = {r["image_id"]: r["scores"]["recognizability"] for r in records(out)}
    assert set(shares.values()) - {0.0, 0.25, 0.5, 0.75, 1.0} == set() and len(set(shares.values())) > 2

    human = {r["image_id"]: (r["poem_id"], r["recognizability"])
             for r in dataset_rows(demo_built, "images", "test", ["image_id", "poem_id", "recognizability"])}
    both = {i: (p, h, shares[i]) for i, (p, h) in human.items() if h is not None and i in shares}
    mae = sum(abs(j - h) for _, h, j in both.values()) / len(both)
    decided = [(h > 0.5) == (j > 0.5) for _, h, j in both.values() if h != 0.5 and j != 0.5]
    taus = []
    for poem in sorted({p for p, _, _ in both.values()}):
        pairs = [(j, h) for p, h, j in both.values() if p == poem]
        if len(pairs) >= 2 and (tau := kendall_b([a for a, _ in pairs], [b for _, b in pairs])) is not None:
            taus.append(tau)

    result = agree_recognition(demo_built, out, n_bootstrap=500, seed=1)["recognition"]
    assert result["n_images"] == len(both)
    assert result["mae"] == pytest.approx(mae)
    assert result["majority_accuracy"] == pytest.approx(sum(decided) / len(decided))
    assert result["majority_images"] == len(decided)
    assert result["kendall_tau_poems"] == len(taus)
    if taus:
        assert result["kendall_tau"] == pytest.approx(sum(taus) / len(taus))
    assert result["judge_mean"] == pytest.approx(sum(j for _, _, j in both.values()) / len(both))
    assert result["mae_ci"][0] <= result["mae"] <= result["mae_ci"][1]

    assert main(["agree", "--dataset", str(demo_built), "--scores", str(out), "--bootstrap", "200"]) == 0
    printed = capsys.readouterr().out
    assert "Accuracy against the majority" in printed and "chance 0.25" in printed
    report = tmp_path / "report"
    assert main(["report", "--dataset", str(demo_built), "--scores", str(out), "--out", str(report),
                 "--bootstrap", "100"]) == 0
    numbers = json.loads((report / "numbers.json").read_text(encoding="utf-8"))
    assert numbers["recognizability_judge"]["knows"]["mae"] == pytest.approx(mae)
    assert "table4" not in numbers  # a recognize file is not scored against the rubric
    assert "Recognizability" in (report / "report.md").read_text(encoding="utf-8")


def test_resume_refuses_other_settings_and_missing_candidates_fail_alone(demo_built, candidates, tmp_path):
    source = DatasetSource(demo_built, "images", "test")
    out = tmp_path / "r.jsonl"
    score_to_jsonl(SimulatedJudge(candidates, "rotations", knows), source, out, limit=4, progress=False)
    summary = score_to_jsonl(SimulatedJudge(candidates, "rotations", knows), source, out, progress=False)
    assert (summary.skipped, summary.scored) == (4, 8)
    with pytest.raises(ValueError, match="orders"):
        score_to_jsonl(SimulatedJudge(candidates, "all", knows), source, out, progress=False)
    first = next(iter(source)).poem.poem_id
    fewer = {pid: four for pid, four in read_candidates(candidates).items() if pid != first}
    with pytest.raises(ValueError, match="candidates"):
        score_to_jsonl(SimulatedJudge(fewer, "rotations", knows), source, out, progress=False)
    missing = SimulatedJudge(fewer, "rotations", knows)
    lacking = [it.load() for it in source if it.poem.poem_id not in fewer]
    assert lacking
    result = missing.score(lacking[:1])[0]
    assert result.parse_status == "failed" and result.error_kind == "input" and "no candidates" in result.error


def test_option_errors(demo_built, candidates, tmp_path, capsys):
    base = ["score", "--dataset", str(demo_built), "--out", str(tmp_path / "x.jsonl")]
    assert main(base + ["--evaluator", "recognize", "--model", "m"]) == 2
    assert "--candidates FILE" in capsys.readouterr().err
    assert main(base + ["--evaluator", "pae", "--candidates", str(candidates)]) == 2
    assert "--candidates does not apply to pae (it applies to recognize)" in capsys.readouterr().err
    assert main(base + ["--evaluator", "recognize", "--candidates", str(candidates), "--concurrency", "3"]) == 2
    assert "give --base-url" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.slow
def test_tiny_qwen_over_all_orders_resumes(tiny_models, demo_built, candidates, tmp_path):
    """PAE's base model on transformers: every order asked, letter probabilities from the logits, the same in a
    batch as alone (left padding read right), and a resumed run completes the file. Random weights: plumbing only."""
    model = str(tiny_models["qwen3-vl"])
    out = tmp_path / "tiny.jsonl"
    cmd = ["score", "--dataset", str(demo_built), "--evaluator", "recognize", "--model", model, "--candidates",
           str(candidates), "--orders", "all", "--out", str(out), "--quiet", "--device", "cpu"]
    assert main(cmd + ["--limit", "1"]) == 0
    assert main(cmd + ["--limit", "2"]) == 0
    rows = records(out)
    ids = DatasetSource(demo_built, "images", "test").ids()
    assert [r["image_id"] for r in rows] == ids[:2]
    for r in rows:
        e = r["evidence"]
        assert r["random_weights"] and r["settings"]["orders"] == "all" and r["settings"]["readout"] == "letter-logits"
        assert len(e["orders"]) == len(e["letters"]) == len(e["letter_probs"]) == 24
        assert all(sum(p) == pytest.approx(1, abs=1e-4) for p in e["letter_probs"])
        assert r["scores"]["recognizability"] == pytest.approx(sum(e["correct"]) / 24)
        right = e["candidates"].index(e["answer"])
        assert e["p_correct"] == pytest.approx(np.mean([p[o.index(right)] for p, o in zip(e["letter_probs"],
                                                                                         e["orders"])]), abs=1e-5)
    judge = load_evaluator("recognize", model=model, candidates=candidates, orders="rotations", device="cpu")
    items = [it.load() for it in DatasetSource(demo_built, "images", "test")][:2]
    together = judge.score(items)
    alone = [judge.score([it])[0] for it in items]
    for a, b in zip(together, alone):
        assert np.allclose(a.evidence["letter_probs"], b.evidence["letter_probs"], atol=1e-4)


@pytest.mark.slow
def test_through_a_real_server_resumes(server, demo_built, candidates, tmp_path):  # noqa: F811
    """The served backend: one request per order to a real `transformers serve`, the answers parsed (random weights
    rarely give a letter: plumbing), usage summed over the orders; a second process resumes."""
    out = tmp_path / "served.jsonl"
    cmd = [sys.executable, "-m", "tangpoetrybench.cli", "score", "--dataset", str(demo_built), "--evaluator",
           "recognize", "--model", server["model"], "--base-url", server["url"] + "/v1", "--candidates",
           str(candidates), "--max-new-tokens", "4", "--out", str(out), "--quiet"]
    assert main(cmd[3:] + ["--limit", "2"]) == 0
    done = subprocess.run(cmd + ["--limit", "3"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 scored now" in done.stdout and "2 already there" in done.stdout
    rows = [line.record for line in read_lines(out)]
    assert len(rows) == 3
    for r in rows:
        assert r["evaluator"] == "recognize" and r["settings"]["backend"] == "api"
        assert r["settings"]["served_model"] == server["model"] and r["settings"]["orders"] == "rotations"
        assert len(json.loads(r["raw_output"])) == 4
        # four orders, each answer and its repair round (random weights rarely give a letter) at most 4 tokens
        assert r["usage"]["completion_tokens"] <= 4 * 2 * 4 and r["usage"]["prompt_tokens"] > 0
        assert r["error_kind"] in (None, "parse")


@pytest.mark.slow
def test_a_served_letter_that_does_not_read_gets_the_repair_round(server, demo_built, candidates, tmp_path):  # noqa: F811
    """Through a real `transformers serve` behind the fault proxy: each order's first answer is prose naming no
    letter, the repair round's is the letter; the record reads the repaired letters and keeps both answers."""
    from fault_proxy import FaultProxy

    def answer(request: dict, response: dict) -> dict:
        last = request["messages"][-1]["content"]  # the repair's text alone is a plain string on the wire
        repair = isinstance(last, str) and last.startswith("Reply with the poem's letter only")
        response["choices"][0]["message"]["content"] = "C" if repair else "Hard to say: they all have water."
        return response

    with FaultProxy(server["url"], rewrite=answer) as proxy:
        judge = load_evaluator("recognize", model=server["model"], base_url=proxy.url, candidates=candidates,
                               max_new_tokens=4)
        [result] = judge.score([next(iter(DatasetSource(demo_built, "images", "test"))).load()])
    chats = [r for r in proxy.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) == 8  # four orders, each repaired once
    assert result.parse_status == "repaired" and result.evidence["letters"] == ["C"] * 4
    assert json.loads(result.raw_output) == ["Hard to say: they all have water."] * 4
    assert result.evidence["repairs"] == [{"raw_output": "C", "parse_status": "ok", "error": None}] * 4
    assert result.settings["repair"] == 1 and result.usage["prompt_tokens"] > 0
