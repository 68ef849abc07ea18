"""PAE's probability readout (`--readout expected`) against a brute-force reference, and --quantize on the CPU."""

from __future__ import annotations

import json
import math

import pytest
import torch

from conftest import tiny_pae_items, tiny_pae_targets
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.prompt import build_messages, format_answer
from tangpoetrybench.judging.readout import Anchor, anchors, answer_text, prefix_text, summarize
from tangpoetrybench.models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels, quantization_config
from tangpoetrybench.rubric import load_rubric


def test_anchors_are_the_trained_answers_values():
    tang = load_rubric("tang")
    assert [a.text for a in anchors(tang, "safety")] == ["1.0", "0.5", "0.0"]
    assert [a.text for a in anchors(tang, "scene_consistency")] == ["1.0", "0.67", "0.33", "0.0", "null"]
    values = [anchors(tang, k)[-1].text for k in tang.keys]
    assert json.loads(answer_text(tang, values)) == json.loads(format_answer(
        {k: anchors(tang, k)[-1].score for k in tang.keys}, tang))
    assert answer_text(tang, values) == format_answer({k: anchors(tang, k)[-1].score for k in tang.keys}, tang)
    assert prefix_text(tang, values[:1]) == '{"safety": 0.0, "technical_quality": '


def test_summary_of_a_distribution():
    three = (Anchor("1.0", 1.0), Anchor("0.5", 0.5), Anchor("0.0", 0.0))
    flat = summarize(three, [0.0, 0.0, 0.0])
    assert flat.expected == pytest.approx(0.5) and flat.confidence == pytest.approx(0.0, abs=1e-12)
    sure = summarize(three, [0.0, -60.0, -60.0])
    assert sure.expected == pytest.approx(1.0) and sure.confidence == pytest.approx(1.0, abs=1e-6)
    some = summarize(three, [math.log(0.2), math.log(0.3), math.log(0.5)])  # unnormalised log-probs work too
    assert some.expected == pytest.approx(0.2 + 0.15) and 0 < some.confidence < 1 and some.best == "0.0"
    nullable = three + (Anchor("null", None),)
    assert summarize(nullable, [math.log(0.1), -99, -99, math.log(0.9)]).expected is None  # null most likely
    mostly = summarize(nullable, [math.log(0.3), math.log(0.3), -99, math.log(0.4) - 1])
    assert mostly.expected == pytest.approx(0.75)  # null's mass left out, the rest renormalised


def test_quantize_is_refused_where_it_cannot_work(tiny_models):
    with pytest.raises(ValueError, match="--quantize 8bit needs a CUDA GPU or the CPU"):
        quantization_config("8bit", torch.device("mps"))
    with pytest.raises(ValueError, match="unknown --quantize"):
        load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", quantize="3bit")
    with pytest.raises(ValueError, match="--quantize does not apply to clipscore"):
        load_evaluator("clipscore", model=str(tiny_models["clip"]), quantize="4bit")
    with pytest.raises(ValueError, match="nothing to constrain"):
        load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", readout="expected", constrained=True)


@pytest.mark.parametrize("quantize, layer", [("8bit", "Linear8bitLt"), ("4bit", "Linear4bit")])
def test_quantized_pae_reads_on_the_cpu(tiny_models, quantize, layer):
    """bitsandbytes' CPU path, for real: the language model's linear layers quantised, the vision tower and the
    output head left as they were, smaller weights, the readout's scores in range, the setting in the records."""
    pytest.importorskip("bitsandbytes")
    plain = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", readout="expected")
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", readout="expected",
                         quantize=quantize)
    kinds = {name: type(module).__name__ for name, module in pae.backend.model.named_modules()}
    assert kinds["model.language_model.layers.0.mlp.up_proj"] == layer
    assert kinds["lm_head"] == "Linear" and not any(k == layer for n, k in kinds.items() if n.startswith("model.visual"))
    assert pae.backend.model.get_memory_footprint() < plain.backend.model.get_memory_footprint()
    assert pae.settings()["quantize"] == quantize
    for result in pae.score(tiny_pae_items()):
        assert result.parse_status == "ok" and 0 <= result.quality <= 1
        assert all(0 <= d["confidence"] <= 1 for d in result.readout["dimensions"].values())


def brute_force(pae, item, rubric, values: list[str]) -> dict[str, dict[str, float]]:
    """Each dimension's anchor distribution, every anchor scored alone: the whole answer (the readout's values
    elsewhere, this anchor here) teacher-forced after the prompt in a forward pass of its own, without a cache or a
    batch; the anchor's probability is that of the answer's tokens up to the anchor's end, normalised over anchors."""
    tokenizer = pae.backend.processor.tokenizer
    prompt = chat_inputs(pae.backend.processor, [build_messages(item.poem, rubric, fit_pixels(item.image, DEFAULT_MAX_PIXELS))])
    n = prompt["input_ids"].shape[1]
    found = {}
    for i, key in enumerate(rubric.keys):
        logps = []
        for anchor in anchors(rubric, key):
            answer = tokenizer.encode(answer_text(rubric, values[:i] + [anchor.text] + values[i + 1:]),
                                      add_special_tokens=False)
            through = len(tokenizer.encode(prefix_text(rubric, values[:i]) + anchor.text, add_special_tokens=False))
            inputs = dict(prompt, input_ids=torch.cat([prompt["input_ids"], torch.tensor([answer])], 1))
            inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
            inputs["mm_token_type_ids"] = torch.nn.functional.pad(prompt["mm_token_type_ids"], (0, len(answer)))
            with torch.no_grad():
                logits = pae.backend.model(**inputs).logits[0, n - 1:n - 1 + through].double()
            logps.append(torch.log_softmax(logits, -1).gather(-1, torch.tensor(answer[:through])[:, None]).sum().item())
        total = torch.logsumexp(torch.tensor(logps, dtype=torch.float64), 0).item()
        found[key] = {a.text: math.exp(lp - total) for a, lp in zip(anchors(rubric, key), logps)}
    return found


@pytest.mark.slow
def test_readout_equals_the_brute_force_reference(tiny_models):
    """On the random tiny model (flat distributions, so every digit counts): the readout's distributions and
    expected scores equal the brute-force reference's, in a batch of images of different sizes (padding)."""
    tang = load_rubric("tang")
    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", readout="expected")
    assert pae.settings()["readout"] == "expected"
    items = tiny_pae_items()
    results = pae.score(items)
    for item, result in zip(items[:2], results):
        dims = result.readout["dimensions"]
        values = [max(dims[k]["distribution"].items(), key=lambda kv: kv[1])[0] for k in tang.keys]
        assert result.raw_output == answer_text(tang, values) and result.parse_status == "ok"
        reference = brute_force(pae, item, tang, values)
        for key in tang.keys:
            assert dims[key]["distribution"] == pytest.approx(reference[key], abs=1e-5), key
            expected = sum(p * a.score for a, p in zip(anchors(tang, key), reference[key].values())
                           if a.score is not None) / sum(p for a, p in zip(anchors(tang, key), reference[key].values())
                                                         if a.score is not None)
            if result.scores[key] is not None:
                assert result.scores[key] == pytest.approx(expected, abs=1e-5)
            assert 0 <= dims[key]["confidence"] <= 1
        assert 0 <= result.readout["quality_confidence"] <= 1
    again = pae.score(items)  # deterministic
    assert [(a.scores, a.readout, a.raw_output) for a in again] == [(b.scores, b.readout, b.raw_output) for b in results]
    [alone] = pae.score(items[1:2])
    assert alone.scores == pytest.approx(results[1].scores, abs=1e-5)  # a batch reads as its items alone


@pytest.mark.slow
def test_readout_argmax_is_the_constrained_greedy_answer(tiny_models, tiny_pae):
    """On the trained tiny PAE: the readout's most likely answer is the constrained greedy answer, which is the
    answer it was trained to give (a null included); every answer is ok; confidences lie in [0, 1]."""
    tang = load_rubric("tang")
    items = tiny_pae_items()
    greedy = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(tiny_pae), device="cpu",
                            constrained=True).score(items)
    read = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(tiny_pae), device="cpu",
                          readout="expected").score(items)
    for g, r, target in zip(greedy, read, tiny_pae_targets(tang)):
        assert g.raw_output == r.raw_output == format_answer(target, tang)
        assert r.parse_status == "ok" and r.quality is not None
        assert all(0 <= d["confidence"] <= 1 for d in r.readout["dimensions"].values())
        assert r.readout["quality_confidence"] > 0.5  # it has learned its answers
        assert [k for k, v in r.scores.items() if v is None] == [k for k, v in target.items() if v is None]


# ---- the api judge: the readout from a server's logprobs ----

def served_logprobs(answer: str, alternatives: dict[int, list[tuple[str, float]]], chosen_logp: dict[int, float]):
    """A chat completion choice's `logprobs` in OpenAI's format for `answer`, split as Qwen's tokenizer splits
    (digits one by one, the space apart): token i gets logprob `chosen_logp[i]` (default 0) and the alternatives."""
    import re

    tokens = re.findall(r"\d|[a-z_]+|\s|[^\w\s]+", answer)
    assert "".join(tokens) == answer
    entry = lambda t, lp: {"token": t, "logprob": lp, "bytes": list(t.encode())}  # noqa: E731
    return {"content": [dict(entry(t, chosen_logp.get(i, 0.0)),
                             top_logprobs=[entry(t, chosen_logp.get(i, 0.0))] + [entry(a, lp) for a, lp in
                                                                                 alternatives.get(i, [])])
                        for i, t in enumerate(tokens)]}, tokens


def test_readout_from_a_servers_logprobs():
    from tangpoetrybench.judging.readout import logprob_tokens, read_logprobs

    tang = load_rubric("tang")
    target = {k: anchors(tang, k)[0].score for k in tang.keys}
    answer = format_answer(target, tang)
    _, tokens = served_logprobs(answer, {}, {})
    first = tokens.index("1")  # safety's value: "1" of "1.0"
    scene = [i for i, t in enumerate(tokens) if t == "1"][4]  # scene_consistency's
    logprobs, _ = served_logprobs(answer, {first: [("0", math.log(0.4))], scene: [("n", math.log(0.5))]},
                                  {first: math.log(0.6), scene: math.log(0.5), scene + 2: math.log(0.5)})
    read = read_logprobs(logprob_tokens(logprobs), tang)
    safety = read.dimensions["safety"]  # 0.5 and 0.0 share the unexplored "0" branch: 0.2 each
    assert safety.distribution == pytest.approx({"1.0": 0.6, "0.5": 0.2, "0.0": 0.2})
    assert safety.expected == pytest.approx(0.6 + 0.1)
    # scene: "1" (0.5) "." "0" (0.5) spells 1.0 (0.25); the "n" branch (0.5) is null's alone, though unexplored
    sc = read.dimensions["scene_consistency"]
    assert sc.distribution["null"] == pytest.approx(0.5 / 0.75) and sc.expected is None and sc.best == "null"
    assert read.dimensions["overall_impression"].distribution["1.0"] == 1.0 and read.scores["overall_impression"] == 1
    assert read_logprobs(logprob_tokens({"content": []}), tang) is None


def injected(answer: str, logprobs: dict):
    """The proxy's rewrite: the server's answer replaced by `answer` with `logprobs`, in the server's own response."""
    def respond(request: dict, data: dict) -> dict:
        data["choices"][0]["message"]["content"] = answer
        data["choices"][0]["logprobs"] = logprobs
        return data
    return respond


@pytest.mark.slow
def test_the_api_judge_reads_a_servers_logprobs(server):
    """`transformers serve` refuses logprobs, so the fault proxy strips them from the request and puts a response in
    OpenAI's logprobs format in the real server's answer; the judge asked for them and reads them."""
    from fault_proxy import FaultProxy

    tang = load_rubric("tang")
    answer = format_answer({k: anchors(tang, k)[0].score for k in tang.keys}, tang)
    _, tokens = served_logprobs(answer, {}, {})
    logprobs, _ = served_logprobs(answer, {tokens.index("1"): [("0", math.log(0.4))]}, {tokens.index("1"): math.log(0.6)})
    with FaultProxy(server["url"], strip_fields=("logprobs", "top_logprobs"), rewrite=injected(answer, logprobs)) as proxy:
        judge = load_evaluator("api", model=server["model"], base_url=proxy.url, max_new_tokens=8, readout="expected")
        [result] = judge.score(tiny_pae_items()[:1])
    assert "logprobs" in proxy.requests[0]["fields"] and "top_logprobs" in proxy.requests[0]["fields"]
    assert result.parse_status == "ok" and result.settings["readout"] == "expected" and result.raw_output == answer
    assert result.readout["dimensions"]["safety"]["distribution"] == pytest.approx({"1.0": 0.6, "0.5": 0.2, "0.0": 0.2})
    assert result.scores["safety"] == pytest.approx(0.7) and result.scores["overall_impression"] == 1.0


@pytest.mark.slow
def test_a_resume_refuses_to_mix_readout_and_decoded_results(tiny_models, tmp_path):
    from tangpoetrybench.judging.scoring import score_to_jsonl, source_of
    from tangpoetrybench.poems import write_poems

    item = tiny_pae_items()[0]
    (tmp_path / "images").mkdir()
    item.image.save(tmp_path / "images" / f"{item.poem.poem_id}.png")
    write_poems([item.poem], tmp_path / "poems.jsonl")
    source = source_of(images=tmp_path / "images", poems=tmp_path / "poems.jsonl")
    out = tmp_path / "scores.jsonl"
    read = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", readout="expected", max_new_tokens=4)
    score_to_jsonl(read, source, out, progress=False)
    [record] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert record["settings"]["readout"] == "expected" and set(record["readout"]["dimensions"]) == set(record["scores"])
    decoded = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), device="cpu", max_new_tokens=4)
    with pytest.raises(ValueError, match="made with readout 'expected', not no readout setting"):
        score_to_jsonl(decoded, source, out, progress=False)
    score_to_jsonl(decoded, source, tmp_path / "decoded.jsonl", progress=False)
    with pytest.raises(ValueError, match="made with no readout setting, not readout 'expected'"):
        score_to_jsonl(read, source, tmp_path / "decoded.jsonl", progress=False)
