"""The reward: Flow-GRPO's and TRL's signatures around PAE, called the way their training loops call it."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from conftest import tiny_pae_items
from tangpoetrybench.judging.evaluators.base import EvalResult
from tangpoetrybench.judging.prompt import format_answer
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.reward import PAEReward, Scalar, as_images, as_poems, load_reward


def result(scores, quality, confidences=None) -> EvalResult:
    readout = None if confidences is None else {"dimensions": {k: {"confidence": c} for k, c in confidences.items()}}
    return EvalResult("x", "pae", scores, quality, None, "ok", None, 0.0, readout=readout)


def test_the_scalar_choices():
    r = result({"safety": 1.0, "text_integrity": 0.2, "scene_consistency": None, "overall_impression": 0.4}, 0.5333,
               {"safety": 1.0, "text_integrity": 0.5, "scene_consistency": 0.9, "overall_impression": 0.25})
    assert Scalar()(r) == 0.5333  # quality
    assert Scalar(weights={"overall_impression": 3, "safety": 1, "scene_consistency": 5})(r) == pytest.approx(0.55)
    assert Scalar(weights={"overall_impression": 1, "safety": 1}, confidence_weighted=True)(r) == pytest.approx(
        (0.25 * 0.4 + 1.0) / 1.25)
    assert Scalar(gates={"text_integrity": 0.5}, missing=-1.0)(r) == -1.0  # below the floor: no reward
    assert Scalar(gates={"scene_consistency": 0.5})(r) == 0.5333  # a dimension that does not apply passes
    assert Scalar(missing=-2.0)(result({}, None)) == -2.0
    with pytest.raises(ValueError, match="confidences"):
        Scalar(confidence_weighted=True)(result({"safety": 1.0}, 1.0))


def test_a_scalar_naming_no_dimension_of_the_rubric_is_refused():
    """A misspelt key would weigh nothing and gate nothing: every image the same reward, and nobody told."""
    rubric = load_rubric("tang")
    Scalar(weights={"core_imagery": 2, "overall_impression": 1}, gates={"text_integrity": 0.5}).check(rubric)
    with pytest.raises(ValueError) as refused:
        Scalar(weights={"scene": 1.0}).check(rubric)
    assert str(refused.value).startswith("Scalar weights: 'scene' is not a dimension of the tang rubric; its "
                                         "dimensions are safety, technical_quality,")
    with pytest.raises(ValueError, match="Scalar gates: 'text', 'saftey' are not dimensions of the tang rubric"):
        Scalar(gates={"text": 0.5, "saftey": 0.5}).check(rubric)
    reward = PAEReward(None, poems=sample_poems(), scalar=Scalar(weights={"scene": 1.0}))  # each poem's own rubric
    with pytest.raises(ValueError, match="'scene' is not a dimension"):
        reward.results([torch.rand(3, 8, 8)], [sample_poems()[0].poem_id])  # checked before anything is asked


def test_images_as_trainers_hold_them():
    tensor = torch.zeros(2, 3, 8, 6)
    tensor[1, 0] = 1.0
    images = as_images(tensor)  # Flow-GRPO: (N, C, H, W) floats in [0, 1]
    assert [im.size for im in images] == [(6, 8)] * 2 and images[1].getpixel((0, 0)) == (255, 0, 0)
    assert as_images(np.zeros((1, 4, 4, 3), dtype=np.uint8))[0].size == (4, 4)
    assert as_images(torch.full((1, 3, 2, 2), 255, dtype=torch.uint8))[0].getpixel((0, 0)) == (255, 255, 255)
    assert as_images(np.full((1, 2, 2, 3), 0.5))[0].getpixel((1, 1)) == (128, 128, 128)
    assert as_images(torch.full((1, 3, 2, 2), 1 + 1e-7))[0].getpixel((0, 0)) == (255, 255, 255)  # rounding: clipped


def test_images_a_reward_cannot_read_are_refused_with_one_sentence():
    """NaN would be scored as black, a [-1, 1] tensor clamped, a 1-channel one crash in PIL: each refused, named."""
    nan = torch.rand(2, 3, 4, 4)
    nan[1, 0, 0, 0] = float("nan")
    cases = [(nan, "image 1 holds 1 values that are NaN or infinite: the reward takes finite values in [0, 1]"),
             (torch.rand(2, 3, 4, 4) * 2 - 1, "image 0 has values in [-"),
             (torch.rand(1, 1, 4, 4), "image 0 has shape (1, 4, 4): the reward takes RGB images, 3 channels (C, H, W)"),
             (np.zeros((1, 4, 4, 4), dtype=np.uint8), "image 0 has shape (4, 4, 4): the reward takes RGB images, 3 "
                                                       "channels (H, W, C)"),
             (torch.rand(3, 4, 4), "the images are one Tensor of shape (3, 4, 4): give them as (N, C, H, W)"),
             ([torch.rand(3, 4, 4), torch.full((3, 4, 4), float("inf"))], "image 1 holds 48 values that are NaN")]
    for images, message in cases:
        with pytest.raises(ValueError) as refused:
            as_images(images)
        assert str(refused.value).startswith(message), str(refused.value)
    with pytest.raises(ValueError, match=r"give \(images \+ 1\) / 2"):
        as_images(torch.rand(1, 3, 4, 4) * 2 - 1)


def test_the_reward_takes_the_datasets_own_poems_and_names_an_unknown_id(demo_built):
    from datasets import load_dataset

    poems = load_dataset(str(demo_built), "poems", cache_dir=str(demo_built.parent / "hf-cache"))  # a DatasetDict
    every = as_poems(poems)
    assert len(every) == sum(poems.num_rows.values()) and every["tang300-011"].title == "静夜思"
    train = as_poems(poems["train"])  # a Dataset of rows, as the RL loop would load one split
    assert set(train) == set(poems["train"]["poem_id"]) and as_poems(list(poems["train"])) == train
    with pytest.raises(ValueError, match=r"poems\[0\] is not a poem"):
        as_poems([{"title": "no id"}])
    reward = PAEReward(None, poems=poems["train"])
    assert reward.poem("ignored", {"poem_id": poems["train"][0]["poem_id"]}, 0).poem_id == poems["train"][0]["poem_id"]
    with pytest.raises(ValueError) as refused:
        reward.poem(poems["train"][0]["poem_id"], {"poem_id": "tang300-999"}, 3)
    assert str(refused.value).startswith(f"image 3: its metadata poem_id 'tang300-999' is not one of the "
                                         f"{poems['train'].num_rows} poems this reward knows")


def test_a_failed_images_fill_is_its_poems_mean_in_the_docs_metadata_form():
    """docs/reward.md's metadata form, `{"poem": {title, author, text}}` (no id), three images a poem, the first one
    failed: its fill is the mean of its poem's scored images (not the call's), so with PAE alone its advantage under
    per-prompt standardisation is zero. The same with a `poem_id` of None; TRL's `poem` column names it alike."""
    from test_reward_fleet import per_prompt_advantages

    reward = PAEReward(None)
    chosen = [p for p in sample_poems()[:2] for _ in range(3)]
    prompts = [p.text for p in chosen]
    forms = {"metadata": [{"poem": {"title": p.title, "author": p.author, "text": p.text}} for p in chosen],
             "an id of None": [{"poem": {"poem_id": None, "title": p.title, "author": p.author, "text": p.text}}
                               for p in chosen]}
    failed = EvalResult("x", "pae", {}, None, None, "failed", "HTTP 503", 0.0, error_kind="transient")
    results = [failed] + [result({}, q) for q in (0.2, 0.4, 0.9, 0.8, 1.0)]
    for form, metadata in forms.items():
        poems = [reward.poem(prompt, meta, i) for i, (prompt, meta) in enumerate(zip(prompts, metadata))]
        rewards, status = reward.rewards(poems, results)
        assert status[0] == "filled" and rewards[0] == pytest.approx(0.3), form  # (0.2 + 0.4) / 2, not 0.66
        assert per_prompt_advantages(rewards, prompts)[0] == pytest.approx(0.0, abs=1e-9), form
    as_trl = [reward.poem(None, {"poem": m["poem"]}, i) for i, m in enumerate(forms["metadata"])]  # TRL's column
    assert len({p.poem_id for p in as_trl}) == 2


def test_the_local_reward_says_once_that_its_weights_are_random(tiny_models, caplog):
    """`info` says it for every call, the log once; a Scalar naming no dimension is refused as the reward is built."""
    import logging

    with pytest.raises(ValueError, match="'scene' is not a dimension of the tang rubric"):
        load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", rubric="tang", scalar=Scalar(weights={"scene": 1}))
    reward = load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", poems=sample_poems(), batch_size=2)
    poem = sample_poems()[0]
    with caplog.at_level(logging.WARNING, logger="tangpoetrybench.reward"):
        for _ in range(2):
            scores, info = reward(torch.rand(1, 3, 32, 32), [poem.poem_id])
            assert info["random_weights"] is True and info["readout_fallback"] == [None]
    notes = [m for m in caplog.messages if m.startswith("NOTE: random weights")]
    assert len(notes) == 1


def flow_grpo_loop(reward, steps: int = 2, batch: int = 2):
    """What Flow-GRPO's training loop does with a reward: each step, a batch of sampled images (a float tensor) with
    their prompts and metadata; the scores go to the advantages, the info to the logs."""
    poems = sample_poems()
    logged = []
    for step in range(steps):
        chosen = [poems[(step * batch + i) % len(poems)] for i in range(batch)]
        generator = torch.Generator().manual_seed(step)
        images = torch.rand(batch, 3, 48, 64, generator=generator)  # what the sampler would decode
        prompts = [p.poem_id for p in chosen]
        metadata = [{"poem_id": p.poem_id} for p in chosen]
        scores, info = reward(images, prompts, metadata)
        advantages = (scores - scores.mean()) / (scores.std() + 1e-4)
        logged.append((scores, info, advantages))
    return logged


@pytest.mark.slow
def test_a_flow_grpo_loop_with_the_local_tiny_pae(tiny_models):
    reward = load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", poems=sample_poems(), batch_size=2)
    assert reward.evaluator.settings()["readout"] == "expected" and reward.evaluator.random_weights
    for scores, info, advantages in flow_grpo_loop(reward):
        assert scores.shape == (2,) and np.all((0 <= scores) & (scores <= 1)) and np.isfinite(advantages).all()
        assert np.allclose(scores, info["quality"]) and info["status"] == ["ok", "ok"]
        for key, vector in info["scores"].items():
            confidence = info["confidence"][key]
            assert vector.shape == (2,) and np.all((confidence >= 0) & (confidence <= 1)), key
        assert np.all((info["quality_confidence"] >= 0) & (info["quality_confidence"] <= 1))
    # TRL: (prompts, completions, **columns) -> list[float], the poems from a dataset column
    items = tiny_pae_items()[:2]
    trl = reward.trl(prompts=["ignored", "ignored"], completions=[it.image for it in items],
                     poem_id=[it.poem.poem_id for it in items])
    direct, _ = reward([it.image for it in items], [it.poem for it in items])
    assert isinstance(trl, list) and trl == pytest.approx(direct.tolist())
    with pytest.raises(ValueError, match="neither a poem nor the id"):
        reward([items[0].image], ["a prompt that names no poem"])


@pytest.mark.slow
def test_a_flow_grpo_loop_through_a_served_judge(server):
    """The same loop with the judge behind a real `transformers serve` (the api path): decoded, where the tiny model's
    answers fail to parse and get the `on_failure` fill; and with the readout from logprobs, which `transformers serve` does not
    return, so the fault proxy strips them from the request and injects them into the real server's answer."""
    from fault_proxy import FaultProxy
    from test_readout import injected, served_logprobs

    reward = load_reward(model=server["model"], base_url=server["url"] + "/v1", poems=sample_poems(), batch_size=2,
                         max_new_tokens=8, readout="decode", on_failure=-1.0)
    for scores, info, _ in flow_grpo_loop(reward, steps=1):
        assert scores.shape == (2,) and len(info["status"]) == 2
        assert all(s == -1.0 and math.isnan(q) and e for s, q, st, e in zip(scores, info["quality"], info["status"],
                                                                            info["error"]) if st == "filled")
    rubric = load_rubric("tang")
    answer = format_answer({k: rubric.dimension(k).scores[0] for k in rubric.keys}, rubric)
    logprobs, _ = served_logprobs(answer, {}, {})
    with FaultProxy(server["url"], strip_fields=("logprobs", "top_logprobs"), rewrite=injected(answer, logprobs)) as proxy:
        reward = load_reward(model=server["model"], base_url=proxy.url, poems=sample_poems(), batch_size=2,
                             max_new_tokens=8)
        for scores, info, _ in flow_grpo_loop(reward, steps=2):
            assert scores.tolist() == [1.0, 1.0] and info["status"] == ["ok", "ok"]
            assert all(np.all(c == 1.0) for c in info["confidence"].values())
