"""The served backend, and the `api` evaluator on it (PAE's question to a served model). The slow tests run the real
`transformers serve` with the tiny Qwen3-VL on loopback (one server for the module) and inject faults with a loopback
proxy in front of it. The tiny model's answers do not parse (random weights): the tests check the plumbing, never a
score. The security review's items about the client (issue 35: 3, 4, 5, 9, 10, 12) each have a test named for it."""

import base64
import io
import json
import logging
import os
import pickle
import random
import re
import socket
import subprocess
import sys
import time
from email.utils import formatdate

import numpy as np
import pytest
from PIL import Image

from fault_proxy import FaultProxy, LoopbackServer
from tangpoetrybench.cli import main
from tangpoetrybench.files import is_internal_url
from tangpoetrybench.judging.backends.served import (ServedBackend, is_hf_host, json_format, redact,
                                                     retry_after_seconds, retry_delay, usage_line, wire_messages)
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import ScalarResult, ScoringItem
from tangpoetrybench.judging.reading import REPAIR, VERSIONS
from tangpoetrybench.models import chat_inputs
from tangpoetrybench.reward import Scalar, load_reward
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.judging.prompt import answer_schema, build_messages, format_answer
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.judging.results import read_lines
from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl

SECRET = "sk-test-0123456789abcdef"


# ---- fast: the parts that need no server ----

def test_retry_delay_backs_off_with_jitter_and_honours_retry_after():
    rng = random.Random(0)
    for attempt in range(8):
        ceiling = min(60.0, 2.0 ** attempt)
        delays = [retry_delay(attempt, rng=rng) for _ in range(200)]
        assert all(ceiling / 2 <= d <= ceiling for d in delays) and len(set(delays)) > 100
    assert retry_delay(0, retry_after=7.0, rng=rng) == 7.0  # the server's wait wins over a shorter backoff
    assert retry_delay(5, retry_after=1.0, rng=rng) >= 16.0
    assert retry_after_seconds("3") == 3.0 and retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    now = time.time()
    assert retry_after_seconds(formatdate(now + 10, usegmt=True), now=now) == pytest.approx(10, abs=1)
    assert retry_after_seconds(formatdate(now - 10, usegmt=True), now=now) == 0.0


def test_redaction_and_usage_line():
    assert redact(f"401: bad key {SECRET}!", SECRET) == "401: bad key ***!"
    assert redact("nothing", None) == "nothing" and redact(None, SECRET) is None
    assert usage_line(1_000_000, 200_000) == "tokens: 1,000,000 prompt + 200,000 completion"
    assert usage_line(1_000_000, 200_000, 0.5, 2.0).endswith("estimated cost $0.9000 (at $0.5 in, $2 out per million "
                                                              "tokens)")


def test_internal_urls():
    for url in ("http://127.0.0.1:8000/v1", "http://localhost:8000", "http://10.1.2.3/v1", "https://192.168.0.7",
                "http://[::1]:8000/v1", "http://169.254.1.1"):
        assert is_internal_url(url), url
    for url in ("https://8.8.8.8/v1", "http://no-such-host.invalid/v1", "not a url"):
        assert not is_internal_url(url), url


def test_offline_mode_allows_only_internal_servers(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert ServedBackend("pae", base_url="http://127.0.0.1:8000/v1").offline
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set and https://8.8.8.8/v1 is not a loopback or private"):
        ServedBackend("pae", base_url="https://8.8.8.8/v1")
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set and no --base-url was given"):
        ServedBackend("Qwen/Qwen3-VL-8B-Instruct")
    with pytest.raises(ValueError, match="HF_HUB_OFFLINE is set and https://8.8.8.8/v1 is not"):
        ServedBackend("pae", base_url=["http://127.0.0.1:8000/v1", "https://8.8.8.8/v1"])  # every replica of a fleet
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    assert not ServedBackend("pae", base_url="https://8.8.8.8/v1").offline


def test_the_request_is_paes_prompt():
    """The same messages as the prompt builder's, the image a lossless PNG data URL of the resized image, and the
    rubric's answer schema as the response format."""
    rubric = load_rubric("tang")
    poem = sample_poems()[0]
    image = Image.effect_noise((300, 200), 60).convert("RGB")
    judge = load_evaluator("api", model="pae", base_url=["http://127.0.0.1:8000/v1"], max_pixels=150 * 100)
    _, [wired], [question] = judge._prepare([ScoringItem("x", image, poem)])
    system, user = build_messages(poem, rubric, image)
    assert wired[0] == {"role": "system", "content": system["content"][0]["text"]}
    url = wired[1]["content"][0]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,") and wired[1]["content"][1] == user["content"][1]
    sent = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    assert sent.size == (150, 100) and sent.tobytes() == question.messages[1]["content"][0]["image"].tobytes()
    assert wire_messages(build_messages(poem, rubric, image))[1]["content"][1]["type"] == "text"
    assert question.schema == answer_schema(rubric)
    assert json_format("pae_answer", question.schema)["json_schema"] == {"name": "pae_answer", "schema": question.schema,
                                                                         "strict": True}


def test_judge_state_and_record_format(monkeypatch):
    """A data-loader worker's copy holds no key; results of other evaluators keep their format (no usage field)."""
    monkeypatch.setenv("TPB_TEST_KEY", SECRET)
    judge = load_evaluator("api", model="pae", base_url=["http://127.0.0.1:8000/v1"], api_key_env="TPB_TEST_KEY",
                           concurrency=3)
    assert SECRET.encode() not in pickle.dumps(judge) and judge.min_batch_size == 12
    assert judge.settings() == {"backend": "api", "max_pixels": 1024 * 1024, "max_new_tokens": 256,
                                "parser": VERSIONS["scores"], "temperature": 0.0, "seed": 0, "repair": 1}
    assert load_evaluator("api", model="pae", base_url="http://127.0.0.1:8000/v1", repair=0).settings()["repair"] == 0
    assert judge.backend.random_weights is None  # nobody can vouch for a served model's weights
    plain = ScalarResult("x", "clipscore", {}, 0.5, None, "ok", None, 0.1)
    assert "usage" not in plain.to_json()


def test_option_errors(tmp_path, capsys):
    with pytest.raises(ValueError, match=re.escape("--base-url does not apply to clipscore (it applies to api, "
                                                   "recognize, semjudge)")):
        load_evaluator("clipscore", base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match=re.escape("unknown evaluator 'nope' (known: pae, api, ")):
        load_evaluator("nope")
    with pytest.raises(ValueError, match="--adapter does not apply to a served model"):
        load_evaluator("recognize", candidates=tmp_path / "c.jsonl", adapter="a", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ValueError, match="--concurrency applies to a served judge: give --base-url"):
        load_evaluator("semjudge", model="m", concurrency=2)
    with pytest.raises(ValueError, match="needs --model"):
        load_evaluator("api", base_url="http://127.0.0.1:8000/v1")
    with pytest.raises(ValueError, match="is not an http"):
        load_evaluator("api", model="pae", base_url="127.0.0.1:8000")
    with pytest.raises(ValueError, match="--repair must be 0 .off. or 1"):
        load_evaluator("api", model="pae", base_url="http://127.0.0.1:8000/v1", repair=2)
    with pytest.raises(ValueError, match="--repair does not apply to clipscore"):
        load_evaluator("clipscore", repair=0)
    out = tmp_path / "x.jsonl"
    assert main(["score", "--images", str(tmp_path), "--poems", "p.jsonl", "--evaluator", "clipscore",
                 "--price-in", "1", "--out", str(out)]) == 2
    assert "--price-in and --price-out apply to a served judge only" in capsys.readouterr().err


# ---- slow: a real server on loopback ----

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def records(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def score_cmd(dataset, model, base_url, out, *extra):
    return [sys.executable, "-m", "tangpoetrybench.cli", "score", "--dataset", str(dataset), "--evaluator", "api",
            "--model", model, "--base-url", base_url, "--max-new-tokens", "8", "--out", str(out), "--quiet", *extra]


@pytest.mark.slow
def test_scores_the_split_offline_through_the_server(server, demo_built, tmp_path, capsys, monkeypatch):
    """`tpb score --evaluator api` through a key-checking gateway, resumed by a run with HF_HUB_OFFLINE=1 (read when
    huggingface_hub is imported: a process of its own): every image once, in the source's order, each record naming
    the model and carrying the server's token counts — as many prompt tokens as the local PAE feeds its model for the
    same item. The key appears nowhere."""
    out = tmp_path / "api.jsonl"
    monkeypatch.setenv("TPB_KEY", SECRET)
    with FaultProxy(server["url"], key=SECRET) as proxy:
        cmd = score_cmd(demo_built, server["model"], proxy.url, out, "--api-key-env", "TPB_KEY", "--repair", "0")
        assert main(cmd[3:] + ["--limit", "5"]) == 0
        first = capsys.readouterr()
        rest = subprocess.run(cmd + ["--price-in", "0.5", "--price-out", "2"], capture_output=True, text=True,
                              env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert rest.returncode == 0, rest.stderr[-3000:]
    assert "5 scored now" in first.out and "7 scored now" in rest.stdout and "5 already there" in rest.stdout
    assert "estimated cost $" in rest.stdout and "prompt +" in rest.stdout
    rows = records(out)
    ids = DatasetSource(demo_built, "images", "test").ids()
    assert [r["image_id"] for r in rows] == ids and len(ids) == 12
    assert all(r["evaluator"] == "api" and r["model"] == server["model"] for r in rows)
    assert all(r["settings"]["served_model"] == server["model"] for r in rows)
    assert all(r["usage"]["prompt_tokens"] > 1000 and 0 < r["usage"]["completion_tokens"] <= 8 for r in rows)
    assert {r["error_kind"] for r in rows} <= {None, "parse"}  # answered; random weights rarely parse
    assert len(proxy.requests) == 12 and all(r["authorization"] == f"Bearer {SECRET}" for r in proxy.requests)
    for text in (out.read_text(), first.out, first.err, rest.stdout, rest.stderr):
        assert SECRET not in text
    # The same prompt as the local PAE: the server counts exactly the tokens our processor makes for the item.
    pae = load_evaluator("pae", model=server["model"])
    item = next(iter(DatasetSource(demo_built, "images", "test"))).load()
    [question] = pae.task.questions(item, pae)
    assert rows[0]["usage"]["prompt_tokens"] == chat_inputs(pae.backend.processor, [question.messages])["input_ids"].shape[1]


@pytest.mark.slow
def test_faults_are_retried_and_every_image_is_scored_once(server, demo_built, tmp_path, caplog):
    """429 with Retry-After, 503, a dropped connection and an answer held until the client's timeout gives it up: each
    retried, each retry logged, and the run ends with every image scored exactly once."""
    with FaultProxy(server["url"], faults=["429", "503", "drop", "slow"]) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8, concurrency=4,
                               timeout=30, backoff=0.05, repair=0)
        with caplog.at_level(logging.WARNING, logger="tangpoetrybench.judging.backends.served"):
            summary = score_to_jsonl(judge, DatasetSource(demo_built, "images", "test"), tmp_path / "f.jsonl",
                                     progress=False)
    rows = records(tmp_path / "f.jsonl")
    assert summary.scored == 12 and summary.retryable == 0
    assert sorted(r["image_id"] for r in rows) == sorted(DatasetSource(demo_built, "images", "test").ids())
    assert len({r["image_id"] for r in rows}) == 12 and all(r["usage"] for r in rows)
    retries = [m for m in caplog.messages if ": retry " in m]
    for cause in ("HTTP 429", "HTTP 503", "RemoteProtocolError", "TimeoutError"):
        assert any(cause in m for m in retries), (cause, retries)
    waited = next(m for m in retries if "HTTP 429" in m)
    assert float(waited.split(" in ")[1].split(" s:")[0]) >= 1.0  # Retry-After: 1 honoured
    assert len(proxy.requests) >= 16


GOOD = json.dumps({"safety": 1, "technical_quality": 0.5, "ai_plausibility": 0.67, "text_integrity": 1,
                   "scene_consistency": None, "cultural_coherence": 1, "artistic_style": 0.5, "core_imagery": 0.33,
                   "emotional_resonance": 0.67, "overall_impression": 0.75})
MALFORMED = "Safety: 0.5 or 1\nCore imagery: 0.33–0.67"  # two readings: a failed parse


@pytest.mark.slow
def test_a_malformed_answer_gets_one_repair_round(server, demo_built, tmp_path, capsys):
    """The proxy puts a malformed answer in place of the real server's first one, then good ones (the next image's,
    and the answer to the repair request): the record keeps both, is `repaired` with the second's scores, and `tpb score`
    counts it. The next image answers well at once. With --repair 0 the malformed answer is a failed parse."""
    out = tmp_path / "repair.jsonl"
    with FaultProxy(server["url"], answers=[MALFORMED, GOOD, GOOD]) as proxy:
        cmd = score_cmd(demo_built, server["model"], proxy.url, out, "--limit", "2", "--concurrency", "1")
        assert main(cmd[3:]) == 0
    printed = capsys.readouterr().out
    assert "repair round: 1 of the 2 answers did not read and were asked again, 1 of them then read" in printed
    first, second = records(out)
    assert len(proxy.requests) == 3 and [r["settings"]["repair"] for r in (first, second)] == [1, 1]
    # the batch's questions first, then the repair round of those that did not read
    assert proxy.requests[2]["last_messages"] == [("assistant", MALFORMED), ("user", REPAIR["scores"])]
    assert first["raw_output"] == MALFORMED and first["parse_status"] == "repaired"
    assert first["repair"] == {"raw_output": GOOD, "parse_status": "ok", "error": None}
    assert first["scores"]["core_imagery"] == 0.33 and first["quality"] is not None
    assert first["error"].startswith("the first answer did not parse (") and "is not one value" in first["error"]
    assert first["usage"]["prompt_tokens"] > 1.5 * second["usage"]["prompt_tokens"]  # two requests' tokens
    assert second["raw_output"] == GOOD and second["parse_status"] == "ok" and "repair" not in second

    off = tmp_path / "off.jsonl"
    with FaultProxy(server["url"], answers=[MALFORMED]) as proxy:
        assert main(score_cmd(demo_built, server["model"], proxy.url, off, "--limit", "1", "--repair", "0")[3:]) == 0
    assert "repair round: off (--repair 0)" in capsys.readouterr().out
    [row] = records(off)
    assert len(proxy.requests) == 1 and row["parse_status"] == "failed" and "repair" not in row
    assert row["settings"]["repair"] == 0


# Free-text answers the strict readers refuse (the first issue-44 readers read a confident wrong value from each:
# the red team's F5, F10, F9) and the repair round's answer, in the strict form the repair asks for.
REFUSED = {
    "scores": ("Here are the error rates:\n" + GOOD, GOOD, "text outside the form"),
    "pairwise": ("Winner: B\nThe one on top is weaker.", json.dumps({"winner": "A", "reason": "Image A better shows the moon."}),
                 "text outside the form"),
    "letter": ("C\n\n上面写反了，应选前一个。", "A", "text outside the form"),
}


@pytest.mark.slow
@pytest.mark.parametrize("task", REFUSED)
def test_the_repair_round_reads_what_the_reader_refused(task, server, demo_built, demo_raw, tmp_path):
    """Through a real `transformers serve` behind the fault proxy, each task's first answer is free text that the
    reader refuses (it admits two readings); the repair round asks for the exact form and the record holds what the
    second answer says, the first kept as the raw output with the condition it failed."""
    from tangpoetrybench.dataset.distractors import choose_distractors, write_candidates
    from tangpoetrybench.judging.pairwise import compare_to_jsonl, dataset_pairs
    from tangpoetrybench.poems import read_poems
    from tangpoetrybench.stats.pairs import pair_table

    first, second, condition = REFUSED[task]

    def answer(request: dict, response: dict) -> dict:
        last = request["messages"][-1]["content"]  # the repair's text alone is a plain string on the wire
        repair = isinstance(last, str) and last.startswith("Reply with")
        assert not repair or last == {"scores": REPAIR["scores"], "pairwise": REPAIR["winner"],
                                      "letter": "Reply with the poem's letter only: A, B, C or D."}[task]
        response["choices"][0]["message"]["content"] = second if repair else first
        return response

    item = next(iter(DatasetSource(demo_built, "images", "test"))).load()
    with FaultProxy(server["url"], rewrite=answer) as proxy:
        if task == "scores":
            judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8)
            [result] = judge.score([item])
            assert result.parse_status == "repaired" and result.scores == json.loads(GOOD)
            assert result.raw_output == first and result.repair == {"raw_output": GOOD, "parse_status": "ok",
                                                                    "error": None}
            assert result.error.startswith("the first answer did not parse (") and condition in result.error
        elif task == "pairwise":
            judge = load_evaluator("api", task="pairwise", model=server["model"], base_url=proxy.url, max_new_tokens=8)
            pairs, load = dataset_pairs(demo_built, "images", "test", pair_table(demo_built, "test").id_pairs()[:1])
            compare_to_jsonl(judge, pairs, load, tmp_path / "pairs.jsonl")
            [row] = [line.record for line in read_lines(tmp_path / "pairs.jsonl")]
            for order in row["orders"]:
                assert order["status"] == "repaired" and order["winner"] == "A" and order["raw"] == first, order
                assert condition in order["error"]
        else:
            poems = read_poems(demo_raw / "poems.jsonl")
            candidates = write_candidates(choose_distractors(poems, seed=0), poems, tmp_path / "candidates.jsonl",
                                          {"seed": 0})
            judge = load_evaluator("recognize", model=server["model"], base_url=proxy.url, candidates=candidates,
                                   max_new_tokens=4)
            [result] = judge.score([item])
            assert result.parse_status == "repaired" and result.evidence["letters"] == ["A"] * 4
            assert json.loads(result.raw_output) == [first] * 4 and condition in result.error
    chats = [r for r in proxy.requests if r["path"].endswith("/chat/completions")]
    assert len(chats) == {"scores": 2, "pairwise": 4, "letter": 8}[task]  # every question asked, then repaired once


@pytest.mark.slow
def test_a_refused_response_format_is_asked_again_without(server, demo_built, tmp_path, caplog):
    with FaultProxy(server["url"], refuse_field="response_format") as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8, concurrency=2,
                               repair=0)
        with caplog.at_level(logging.WARNING, logger="tangpoetrybench.judging.backends.served"):
            score_to_jsonl(judge, DatasetSource(demo_built, "images", "test"), tmp_path / "r.jsonl", limit=8,
                           progress=False)
    rows = records(tmp_path / "r.jsonl")
    assert len(rows) == 8 and all(r["usage"] for r in rows)
    assert all(r["settings"]["response_format"].startswith("none (HTTP 400 from http://127.0.0.1:") for r in rows)
    chats = [r for r in proxy.requests if r["path"].endswith("/chat/completions")]  # (the server's model list too)
    asked = [r for r in chats if "response_format" in r["fields"]]
    assert 1 <= len(asked) <= 2 and len(chats) == 8 + len(asked)  # once per request in flight, then never
    assert any("to a request with a response format: asking once more without it" in m for m in caplog.messages)


@pytest.mark.slow
def test_a_server_down_leaves_transient_failures_that_a_rerun_completes(server, demo_built, tmp_path):
    out = tmp_path / "d.jsonl"
    source = DatasetSource(demo_built, "images", "test")
    port = free_port()
    with FaultProxy(server["url"], port=port) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8, retries=1,
                               backoff=0.05)
        score_to_jsonl(judge, source, out, limit=4, progress=False)
    down = score_to_jsonl(judge, source, out, progress=False)  # nothing listens on the port now
    assert down.scored == 8 and down.retryable == 8
    assert [r["error_kind"] for r in records(out)[4:]] == ["transient"] * 8
    assert "ConnectError" in records(out)[4]["error"] and "(2 attempts)" in records(out)[4]["error"]
    with FaultProxy(server["url"], port=port):
        back = score_to_jsonl(judge, source, out, progress=False)
    assert back.scored == 8 and back.skipped == 4 and back.retryable == 0
    rows = records(out)
    assert [r["image_id"] for r in rows] == source.ids() and {r["error_kind"] for r in rows} <= {None, "parse"}


@pytest.mark.slow
def test_a_refused_key_stops_the_run_at_once(server, demo_built, tmp_path, capsys, monkeypatch):
    """One clear line, one request (no retries), nothing written, and the key nowhere in the output."""
    monkeypatch.setenv("TPB_KEY", SECRET)
    out = tmp_path / "k.jsonl"
    with FaultProxy(server["url"], key="the-right-key") as proxy:
        code = main(["score", "--dataset", str(demo_built), "--evaluator", "api", "--model", server["model"],
                     "--base-url", proxy.url, "--api-key-env", "TPB_KEY", "--concurrency", "1", "--out", str(out),
                     "--quiet"])
    captured = capsys.readouterr()
    assert code == 2 and len(proxy.requests) == 1 and not read_lines(out)
    lines = captured.err.strip().splitlines()
    assert lines == [f"error: {proxy.url} refused the API key from $TPB_KEY (HTTP 401): set a valid key, or "
                     "--api-key-env to the variable that holds one; nothing was written for this batch"]
    assert SECRET not in captured.err + captured.out


def test_an_image_its_processor_would_refuse_is_not_sent(tmp_path):
    """The local path's processor refuses a longer side over 200 × the shorter; a server answers it with HTTP 500,
    retried in vain. Here it fails at once as `input`, unsent: nothing listens at this port, and a request would be
    a `transient` failure instead."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing answers there
    judge = load_evaluator("api", model="pae", base_url=f"http://127.0.0.1:{port}/v1", retries=0, repair=0)
    poem = sample_poems()[0]
    long, fine = judge.score([ScoringItem("long", Image.new("RGB", (4100, 20)), poem),
                              ScoringItem("fine", Image.new("RGB", (64, 64)), poem)])
    assert long.error_kind == "input" and long.error == ("ValueError: the image is 4100×20: its longer side is over "
                                                         "200 times the shorter one, which the Qwen-VL image "
                                                         "processors refuse")
    assert fine.error_kind == "transient"  # this one was sent: nothing answered


@pytest.mark.slow
def test_a_served_readout_without_logprobs_says_it_fell_back(server, demo_built, tmp_path, caplog, capsys):
    """`transformers serve` accepts `logprobs` and returns none: the readout falls back to the decoded answer (here a
    valid one put in place of the tiny model's), and says so in the reward's `info`, once in the log, and in
    `tpb score`'s summary."""
    rubric = load_rubric("tang")
    answer = format_answer({k: rubric.dimension(k).scores[0] for k in rubric.keys}, rubric)
    with FaultProxy(server["url"], answers=[answer] * 8) as proxy:
        reward = load_reward(model=server["model"], base_url=proxy.url, poems=sample_poems(), max_new_tokens=8)
        images = [Image.new("RGB", (64, 64), (i * 60, 90, 120)) for i in range(2)]
        with caplog.at_level(logging.WARNING, logger="tangpoetrybench.reward"):
            for _ in range(2):
                scores, info = reward(images, [p.poem_id for p in sample_poems()[:2]])
                assert info["status"] == ["ok", "ok"] and info["random_weights"] == "unknown"
                assert info["readout_fallback"] == ["the server returned no logprobs"] * 2
                assert all(np.isnan(c).all() for c in info["confidence"].values())
        assert sum("the readout fell back to decoding for 2 of 2 images" in m for m in caplog.messages) == 1
        assert all("logprobs" in r["fields"] for r in proxy.requests)  # asked for, and not returned
        out = tmp_path / "fallback.jsonl"
        assert main(["score", "--dataset", str(demo_built), "--evaluator", "api", "--model", server["model"],
                     "--base-url", proxy.url, "--readout", "expected", "--max-new-tokens", "8", "--limit", "4",
                     "--out", str(out), "--quiet"]) == 0
    assert "warning: the readout fell back to decoding for 4 of the 4 answers (the server returned no usable " \
           "logprobs)" in capsys.readouterr().out


@pytest.mark.slow
def test_served_reward(server):
    """The served judge as a reward: one float per image (the tiny model's answers give the `missing`)."""
    reward = load_reward(server["model"], base_url=server["url"] + "/v1", readout="decode", max_new_tokens=8,
                         scalar=Scalar(missing=-1.0))
    poems = sample_poems()[:3]
    rewards, info = reward([Image.new("RGB", (64, 64), (i * 60, 90, 120)) for i in range(3)], poems)
    assert len(rewards) == 3 and all(r == -1.0 or 0 <= r <= 1 for r in rewards)


@pytest.mark.slow
def test_concurrency_benchmark_runs(server, tmp_path):
    """benchmarks/api_concurrency.py against the module's server (its figures are not asserted)."""
    script = os.path.join(os.path.dirname(__file__), "..", "benchmarks", "api_concurrency.py")
    done = subprocess.run([sys.executable, script, "--images", "4", "--concurrency", "1,4", "--base-url",
                           server["url"] + "/v1", "--model", server["model"], "--out", str(tmp_path / "b.json")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| concurrency | wall s | images/s | × first row | answered |" in done.stdout
    assert [r["answered"] for r in json.loads((tmp_path / "b.json").read_text())["rows"]] == [4, 4]


# ---- the security review's items about the client (issue 35) ----

def test_the_hf_token_goes_only_to_hugging_face_hosts(monkeypatch):
    """Item 3: `$HF_TOKEN` is the key for Hugging Face's own inference hosts only; any other server gets none unless
    the user names the variable (`--api-key-env HF_TOKEN`)."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    assert ServedBackend("pae", base_url="http://127.0.0.1:8000/v1").key() is None
    assert ServedBackend("pae", base_url="https://judge.example.com/v1").key() is None
    assert ServedBackend("pae", base_url="https://huggingface.co.evil.example/v1").key() is None
    assert ServedBackend("Qwen/Qwen3-VL-8B-Instruct").key() == SECRET  # Inference Providers' router
    assert ServedBackend("pae", base_url="https://x.endpoints.huggingface.cloud/v1").key() == SECRET
    assert ServedBackend("pae", base_url="https://api-inference.huggingface.co/v1").key() == SECRET
    assert ServedBackend("pae", base_url="http://127.0.0.1:8000/v1", api_key_env="HF_TOKEN").key() == SECRET
    assert is_hf_host("https://router.huggingface.co/v1") and not is_hf_host("http://router.huggingface.co/v1")
    # A Space runs its owner's code, and the Hub's other hosts serve no inference: no token unless named.
    for url in ("https://someone-judge.hf.space/v1", "https://hf.space/v1", "https://huggingface.co/v1",
                "https://evil.huggingface.cloud/v1", "https://xendpoints.huggingface.cloud/v1"):
        assert ServedBackend("pae", base_url=url).key() is None, url
    assert ServedBackend("pae", base_url="https://someone-judge.hf.space/v1", api_key_env="HF_TOKEN").key() == SECRET


def test_credentials_in_a_base_url_are_refused():
    """Item 10: a key written into the URL would be stored in every record: refused, without echoing it."""
    with pytest.raises(ValueError, match="carries credentials in the URL: put the key in an environment variable") as e:
        ServedBackend("pae", base_url=f"https://user:{SECRET}@judge.example.com/v1")
    assert SECRET not in str(e.value) and "https://judge.example.com/v1" in str(e.value)


def one_image(demo_built):
    return next(iter(DatasetSource(demo_built, "images", "test"))).load()


@pytest.mark.slow
def test_the_hf_token_is_not_sent_to_a_base_url_by_default(server, demo_built, monkeypatch):
    """Item 3, over the wire: with HF_TOKEN set, a loopback server sees only the keyless `EMPTY`."""
    monkeypatch.setenv("HF_TOKEN", SECRET)
    with FaultProxy(server["url"]) as proxy:
        load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, repair=0).score(
            [one_image(demo_built)])
    assert [r["authorization"] for r in proxy.requests] == ["Bearer EMPTY"]


@pytest.mark.slow
def test_a_redirect_to_another_origin_is_not_followed_offline(server, demo_built, monkeypatch):
    """Item 4: with HF_HUB_OFFLINE=1, a loopback server's 307 to another host is a failure naming the target; the
    other host receives nothing, image and poem stay here."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with FaultProxy(server["url"]) as elsewhere, FaultProxy(server["url"], faults=["redirect"],
                                                             redirect_to=elsewhere.url.removesuffix("/v1")) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, retries=0)
        [result] = judge.score([one_image(demo_built)])
    assert result.parse_status == "failed" and result.error_kind == "model"
    assert "HTTP 307" in result.error and "not followed" in result.error and elsewhere.url.split("/v1")[0] in result.error
    assert elsewhere.requests == [] and len(proxy.requests) == 1


@pytest.mark.slow
def test_a_huge_response_is_a_failed_record_not_read_whole(server, demo_built):
    """Item 5: a 16 MB answer is cut at the body's bound (which follows max_new_tokens) and recorded as a failure
    that says why; nothing of it is stored."""
    with FaultProxy(server["url"], faults=["huge"]) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, retries=0)
        [result] = judge.score([one_image(demo_built)])
    assert result.parse_status == "failed" and result.raw_output is None and len(proxy.requests) == 1
    assert "over 65,792 bytes (the bound for 4 tokens), not read further" in result.error


@pytest.mark.slow
def test_a_trickling_response_is_cut_at_the_requests_deadline(server, demo_built):
    """Item 5: an answer sent a byte at a time holds a request no longer than its whole deadline (`--timeout`): the
    client gives up long before the body is sent (an event: the proxy counts the bytes it got out)."""
    with FaultProxy(server["url"], faults=["trickle"]) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, retries=0,
                               timeout=1)
        [result] = judge.score([one_image(demo_built)])
    assert result.parse_status == "failed" and result.error_kind == "transient" and "TimeoutError" in result.error
    assert 0 < proxy.sent < 200  # of a body of well over a kilobyte


@pytest.mark.slow
def test_the_servers_model_name_is_stored_redacted(server, demo_built, monkeypatch):
    """Item 9: a server's text is stored with the key redacted, its model name included."""
    monkeypatch.setenv("TPB_KEY", SECRET)

    def leak(request: dict, response: dict) -> dict:
        response["model"] = f"pae-{SECRET}"
        return response

    with FaultProxy(server["url"], rewrite=leak) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, repair=0,
                               api_key_env="TPB_KEY")
        [result] = judge.score([one_image(demo_built)])
    assert result.settings["served_model"] == "pae-***" and SECRET not in json.dumps(result.to_json())


@pytest.mark.slow
def test_a_200_carrying_an_error_is_a_transient_server_failure(server, demo_built, caplog):
    """Item 12: a 200 whose body is an error object keeps the server's message, is retried as a server failure, and
    without retries left is a `transient` failure a rerun asks again — never an empty answer."""
    with FaultProxy(server["url"], faults=["error200"]) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, repair=0,
                               backoff=0.01)
        with caplog.at_level(logging.WARNING, logger="tangpoetrybench.judging.backends.served"):
            [answered] = judge.score([one_image(demo_built)])
    assert answered.usage and any("with an error instead of an answer: the model's worker crashed" in m
                                  for m in caplog.messages)
    with FaultProxy(server["url"], faults=["error200"]) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=4, retries=0)
        [failed] = judge.score([one_image(demo_built)])
    assert failed.error_kind == "transient" and "the model's worker crashed" in failed.error
    assert failed.repair is None and len(proxy.requests) == 1  # no repair request spent on it


@pytest.mark.slow
def test_a_model_the_server_does_not_serve_stops_the_run_naming_its_models(server, demo_built, tmp_path, capsys):
    """A wrong --model is not blamed on the response format or memory: the server's model list says what it serves."""
    out = tmp_path / "wrong.jsonl"
    code = main(["score", "--dataset", str(demo_built), "--evaluator", "api", "--model", "no-such-model",
                 "--base-url", server["url"] + "/v1", "--max-new-tokens", "4", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and not read_lines(out)
    assert f"does not know model 'no-such-model'; it serves: {server['model']!r}" in err, err
    assert "response format" not in err and "memory" not in err
    pairs = tmp_path / "wrong-pairs.jsonl"  # tpb compare and tpb explain ask through the same client
    code = main(["compare", "--dataset", str(demo_built), "--evaluator", "api", "--model", "no-such-model",
                 "--base-url", server["url"] + "/v1", "--max-new-tokens", "4", "--limit", "1", "--out", str(pairs)])
    err = capsys.readouterr().err
    assert code == 2 and f"error: the server at {server['url']}/v1 does not know model 'no-such-model'" in err


class HostileServer(LoopbackServer):
    """A loopback OpenAI-compatible server of the test's own (stdlib `http.server`): `chat(body) -> (status, headers,
    body)` answers each chat completion; GET /v1/models lists `models`. `requests` logs each path asked."""

    path = "/v1"

    def __init__(self, chat, models: list[str] = ()):
        self.chat, self.models, self.requests = chat, list(models), []

    def handler(self):
        from http.server import BaseHTTPRequestHandler

        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def reply(self, status: int, headers: dict, data: bytes) -> None:
                self.send_response(status)
                for name, value in {"Content-Type": "application/json", "Content-Length": str(len(data)),
                                    **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client stopped reading at its bound
                    self.close_connection = True

            def do_GET(self):
                server.requests.append(self.path)
                listing = {"object": "list", "data": [{"id": m, "object": "model"} for m in server.models]}
                self.reply(200, {}, json.dumps(listing).encode())

            def do_POST(self):
                server.requests.append(self.path)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                self.reply(*server.chat(body))

            def log_message(self, *args):
                pass

        return Handler


def completion(content: str = "{}", model: str = "pae") -> tuple[int, dict, bytes]:
    return 200, {}, json.dumps({"model": model, "choices": [{"message": {"role": "assistant", "content": content}}],
                                "usage": {"prompt_tokens": 1, "completion_tokens": 1}}).encode()


def a_question():
    return [Image.new("RGB", (32, 32), "white")], [{"title": "静夜思", "author": "李白", "text": "床前明月光"}]


def test_item9_an_unknown_model_names_a_few_of_the_servers_models_quoted_redacted_and_bounded(tmp_path, monkeypatch,
                                                                                             capsys):
    """A server that does not know --model is asked its model list, read within MAX_MODELS_BODY bytes; the message
    names 20 of them, each quoted, redacted and cut, then a count. A listing over the bound says nothing (the run's
    records say the server's refusal instead); a long one once printed 1.8 MB with the key in it."""
    from tangpoetrybench.judging.backends.served import MAX_MODELS_BODY, ModelUnknown

    monkeypatch.setenv("TPB_KEY", SECRET)
    refuse = lambda body: (404, {}, json.dumps({"error": f"model {body['model']!r} not found"}).encode())  # noqa: E731
    names = [f"m{i}" for i in range(5000)] + [f"leak-{SECRET}", "x" * 10_000]
    names[3] = f"lora-{SECRET}"
    with HostileServer(refuse, names) as server:
        judge = load_evaluator("api", model="no-such-model", base_url=server.url, api_key_env="TPB_KEY", retries=0,
                               max_new_tokens=4, repair=0)
        with pytest.raises(ModelUnknown) as err:
            judge(*a_question())
    message = str(err.value)
    assert SECRET not in message and len(message) < 2000
    assert "it serves: 'm0', 'm1', 'm2', 'lora-***', 'm4'" in message and "'m19' and 4,982 more" in message
    folder = tmp_path / "images"
    folder.mkdir()
    Image.new("RGB", (32, 32)).save(folder / "p1.png")
    poems = tmp_path / "poems.jsonl"
    poem = {"poem_id": "p1", "title": "t", "author": "a", "text": "x", "tradition": "tang"}
    poems.write_text(json.dumps(poem) + "\n", encoding="utf-8")
    with HostileServer(refuse, names) as server:  # the command line prints the same message
        assert main(["score", "--images", str(folder), "--poems", str(poems), "--evaluator", "api", "--model",
                     "no-such-model", "--base-url", server.url, "--api-key-env", "TPB_KEY", "--retries", "0",
                     "--out", str(tmp_path / "s.jsonl"), "--quiet"]) == 2
    err_text = capsys.readouterr().err
    assert "does not know model 'no-such-model'" in err_text and SECRET not in err_text and len(err_text) < 3000
    huge = [f"model-{i:07d}" for i in range(200_000)]  # several MB of listing: over the bound, not read whole
    assert len(json.dumps(huge)) > MAX_MODELS_BODY
    with HostileServer(refuse, huge) as server:
        judge = load_evaluator("api", model="no-such-model", base_url=server.url, retries=0, max_new_tokens=4,
                               repair=0)
        [result] = judge(*a_question())
    assert result.error_kind == "model" and "HTTP 404" in result.error and len(result.error) < 1000
    assert judge.backend.listed == [] and judge.backend.served is True  # the capability, not the list


def test_item9_a_servers_model_name_and_redirect_target_are_redacted_and_bounded(monkeypatch):
    """Item 9 and 4: the model name a server reports is kept in every record, and a redirect's target in the failure
    message: both with the key redacted and cut to a bound, however long the server makes them."""
    monkeypatch.setenv("TPB_KEY", SECRET)
    long_name = "pae-" + SECRET + "x" * 50_000
    with HostileServer(lambda body: completion(model=long_name)) as server:
        judge = load_evaluator("api", model="pae", base_url=server.url, api_key_env="TPB_KEY", max_new_tokens=4,
                               repair=0)
        [result] = judge(*a_question())
    served = result.settings["served_model"]
    assert served.startswith("pae-***x") and len(served) <= 210 and SECRET not in json.dumps(result.to_json())
    target = "http://elsewhere.example/" + SECRET + "y" * 50_000
    with HostileServer(lambda body: (307, {"Location": target}, b"")) as server:
        judge = load_evaluator("api", model="pae", base_url=server.url, api_key_env="TPB_KEY", max_new_tokens=4,
                               retries=0)
        [result] = judge(*a_question())
    assert "HTTP 307" in result.error and "a redirect to 'http://elsewhere.example/***yyy" in result.error
    assert SECRET not in result.error and len(result.error) < 1000
