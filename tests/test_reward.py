"""The reward: Flow-GRPO's and TRL's signatures around PAE, called the way their training loops call it."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from conftest import tiny_pae_items
from tangpoetrybench.judging.abstention import Abstention
from tangpoetrybench.judging.calibrated import Calibrated, Calibration, Target
from tangpoetrybench.judging.evaluators import load_evaluator
from tangpoetrybench.judging.evaluators.base import EvalResult, ScoresResult
from tangpoetrybench.judging.prompt import format_answer
from tangpoetrybench.poems import sample_poems
from tangpoetrybench.rubric import load_rubric
from tangpoetrybench.reward import ABSTAINED_METRIC, PAEReward, Scalar, as_images, as_poems, load_reward


def result(scores, quality, confidences=None) -> ScoresResult:
    readout = None if confidences is None else {"dimensions": {k: {"confidence": c} for k, c in confidences.items()}}
    return ScoresResult("x", "pae", scores, quality, None, "ok", None, 0.0, readout=readout)


def test_the_scalar_choices():
    r = result({"safety": 1.0, "text_integrity": 0.2, "scene_consistency": None, "overall_impression": 0.4}, 0.5333,
               {"safety": 1.0, "text_integrity": 0.5, "scene_consistency": 0.9, "overall_impression": 0.25})
    assert Scalar()(r) == 0.5333  # quality
    assert Scalar(weights={"overall_impression": 3, "safety": 1, "scene_consistency": 5})(r) == pytest.approx(0.55)
    assert Scalar(weights={"overall_impression": 1, "safety": 1}, confidence_weighted=True)(r) == pytest.approx(
        (0.25 * 0.4 + 1.0) / 1.25)
    assert Scalar(gates={"text_integrity": 0.5}, missing=-1.0)(r) == -1.0  # below the floor: no reward
    assert Scalar(gates={"scene_consistency": 0.5})(r) == 0.5333  # a dimension that does not apply passes
    for weights in ({"core_imagery": -1, "safety": 1.01}, {"safety": 0}, {"safety": float("nan")}):
        with pytest.raises(ValueError, match="each weight must be a finite number of at least 0, and some above 0"):
            Scalar(weights=weights)  # a weighted mean outside [0, 1]: the reward's scale would not hold
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
    failed = ScoresResult("x", "pae", {}, None, None, "failed", "HTTP 503", 0.0, error_kind="transient")
    results = [failed] + [result({}, q) for q in (0.2, 0.4, 0.9, 0.8, 1.0)]
    for form, metadata in forms.items():
        poems = [reward.poem(prompt, meta, i) for i, (prompt, meta) in enumerate(zip(prompts, metadata))]
        rewards, status, _ = reward.rewards(poems, results)
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


# --- a reward that abstains where the judge is unsure ---

def calibration_of(evaluator, max_spread: float | None, human_quality=None) -> Calibration:
    """A calibration of `evaluator` as it is set up, its numbers SET BY HAND for the reward's plumbing (quantile
    q̂ = 2 on the readout's spread, a threshold `max_spread`): nothing here is certified by data (tests/test_selective.py
    tests the fitting)."""
    grid = sorted({0.01, 0.04, *([max_spread] if max_spread is not None else [])}) + [None]
    return Calibration(alpha=0.2, evaluator=evaluator.name, model=evaluator.model_name, settings=evaluator.settings(),
                       dataset={}, poems=[], n_images=0, quality=Target(0, 0, 0.3, 2.0), dimensions={},
                       human_quality=human_quality or [[0.0, 0.25], [0.5, 0.5], [1.0, 0.25]],
                       abstention=Abstention("mae", 0.1, 0.1, max_spread, "set by hand", grid, 0.0, 0.0, 1, 1.0, 0.1))


def served_judge(max_spread: float | None = 0.04, **reward):
    """A reward around a served judge that is never asked (its server's port is closed): `rewards` is given
    results made here."""
    judge = load_evaluator("api", model="pae", base_url="http://127.0.0.1:9/v1", readout="expected")
    return PAEReward(Calibrated(judge, calibration_of(judge, max_spread)), poems=sample_poems(), **reward)


def made(reward: PAEReward, quality: float | None, sd: float | None) -> EvalResult:
    """A result as the calibrated judge returns it (its `calibrated` block applied); quality None: a failed answer."""
    failed = quality is None
    result = ScoresResult("x", "api", {} if failed else {"overall_impression": quality}, quality, None,
                        "failed" if failed else "ok", "HTTP 503" if failed else None, 0.0,
                        readout=None if failed else {"quality_sd": sd, "dimensions": {}})
    return reward.evaluator.calibration.apply_result(result)


CALL = [(0.8, 0.02), (0.1, 0.2), (0.6, 0.03), (None, None), (0.9, 0.3), (0.4, 0.01)]  # (quality, sd) per image
GROUPS = [0, 0, 0, 1, 1, 1]  # the poem of each image: three of each


def rewards_of(reward: PAEReward, call=CALL):
    poems = [sample_poems()[g] for g in GROUPS]
    return reward.rewards(poems, [made(reward, q, sd) for q, sd in call])


def test_an_image_the_judge_abstains_on_is_treated_as_asked_by_hand():
    """Threshold 0.04: images 1 and 4 (spreads 0.2, 0.3) are abstained on, image 3 failed. `mean`: an abstained
    image gets its poem's mean over the kept images (poem 0: (0.8 + 0.6) / 2; poem 1: 0.4), as the failed one does;
    its advantage per poem is then 0. NaN, a number, the lower bound of its quality interval (q̂·(sd + 0.01) below:
    0.1 − 2·0.21 cut at 0; 0.9 − 0.62), and abstain=True as on_failure says."""
    rewards, status, abstained = rewards_of(served_judge(abstain="mean"))
    assert abstained.tolist() == [False, True, False, False, True, False] and status[3] == "filled"
    assert rewards == pytest.approx([0.8, 0.7, 0.6, 0.4, 0.4, 0.4])
    for group in ([0, 1, 2], [3, 4, 5]):
        advantages = rewards[group] - rewards[group].mean()
        assert advantages[[i for i, g in enumerate(group) if abstained[g]]] == pytest.approx(0.0, abs=1e-12)
    rewards, _, _ = rewards_of(served_judge(abstain="nan", on_failure=0.0))
    assert np.array_equal(rewards, [0.8, np.nan, 0.6, 0.0, np.nan, 0.4], equal_nan=True)
    assert rewards_of(served_judge(abstain=-1.0))[0] == pytest.approx([0.8, -1, 0.6, 0.4, -1, 0.4])
    assert rewards_of(served_judge(abstain="lower"))[0] == pytest.approx([0.8, 0.0, 0.6, 0.4, 0.28, 0.4])
    assert np.isnan(rewards_of(served_judge(abstain=True, on_failure="nan"))[0][[1, 3, 4]]).all()
    keep_all = rewards_of(served_judge(None, abstain="mean"))  # a threshold that keeps every score
    assert not keep_all[2].any() and keep_all[0] == pytest.approx([0.8, 0.1, 0.6, 0.65, 0.9, 0.4])


def test_abstaining_is_asked_for_and_checked():
    with pytest.raises(ValueError, match="abstain=True treats an abstention as on_failure says"):
        served_judge(abstain=True, on_failure="raise")
    with pytest.raises(ValueError, match="abstain must be True, 'mean', 'nan', 'lower' or a number, not 'zero'"):
        served_judge(abstain="zero")
    judge = load_evaluator("api", model="pae", base_url="http://127.0.0.1:9/v1", readout="expected")
    without = dataclasses.replace(calibration_of(judge, 0.04), abstention=None)
    with pytest.raises(ValueError, match="abstain= needs calibration= a file with a selective-judging threshold: "
                                         "make one with tpb calibrate ... --epsilon E --delta D"):
        PAEReward(Calibrated(judge, without), abstain="mean")
    with pytest.raises(ValueError, match="abstain= needs calibration="):
        PAEReward(judge, abstain="mean")
    with pytest.raises(ValueError, match="scale='percentile' reads the people's scores of a calibration's images"):
        PAEReward(Calibrated(judge, dataclasses.replace(without, human_quality=None)), scale="percentile")
    assert not served_judge(abstain=None).abstains(made(served_judge(), 0.1, 0.9))  # not asked: never


def test_a_percentile_reward_is_bounded_and_its_fill_on_the_same_scale():
    """scale='percentile': each kept reward is its quality's percentile among the people's scores (here 0, 0.5 and
    1 weighing 1/4, 1/2, 1/4: mid-ranks 0.125, 0.5, 0.875, linear between), and a mean fill is the mean of those."""
    rewards, _, _ = rewards_of(served_judge(abstain="mean", scale="percentile"))
    p = {0.8: 0.5 + 0.3 / 0.5 * 0.375, 0.6: 0.5 + 0.1 / 0.5 * 0.375, 0.4: 0.125 + 0.4 / 0.5 * 0.375}
    assert rewards == pytest.approx([p[0.8], (p[0.8] + p[0.6]) / 2, p[0.6], p[0.4], p[0.4], p[0.4]])
    assert np.all((rewards >= 0) & (rewards <= 1))


def test_a_call_that_abstains_on_most_of_a_group_warns_once(caplog):
    import logging

    reward = served_judge(abstain="mean")
    poems = [sample_poems()[g] for g in GROUPS]
    with caplog.at_level(logging.WARNING, logger="tangpoetrybench.reward"):
        reward.tell_abstained(poems, np.array([False, True, False, False, True, False]))  # one of three each: quiet
        assert not caplog.messages
        for _ in range(2):
            reward.tell_abstained(poems, np.array([True, True, False, False, False, False]))
    assert len(caplog.messages) == 1 and caplog.messages[0].startswith(
        f"the judge abstained on most images of 1 of the call's 2 poems (e.g. {poems[0].poem_id})")


def assert_abstains_as_calibrated(reward: PAEReward, scores: np.ndarray, info: dict, poems: list[str]) -> None:
    """What every path of the reward (in-process, Flow-GRPO's and TRL's signatures, a served fleet) must show: each
    image abstained on exactly where `Calibration.abstains` says from its quality and spread, the share reported,
    and (abstain="mean") an abstained image's reward its poem's mean over the kept ones: its advantage in its
    group 0."""
    calibration = reward.evaluator.calibration
    expected = [calibration.abstains(None if math.isnan(q) else q, {"quality_sd": None if math.isnan(sd) else sd})
                for q, sd in zip(info["quality"], info["quality_sd"])]
    assert info["abstained"].tolist() == expected
    assert info["abstained_share"] == pytest.approx(np.mean(expected))
    assert info["quality_interval"].shape == (len(scores), 2)
    for i in np.flatnonzero(info["abstained"]):
        kept = [j for j, p in enumerate(poems) if p == poems[i] and not info["abstained"][j]]
        if kept:
            assert scores[i] == pytest.approx(np.mean(scores[kept]))
            group = [j for j, p in enumerate(poems) if p == poems[i]]
            assert scores[i] - np.mean(scores[group]) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.slow
def test_the_local_reward_abstains_through_flow_grpos_and_trls_signatures(tiny_models, tmp_path, caplog):
    """The tiny PAE (random weights) in-process: a threshold set between the spreads it reports (by hand, see
    `calibration_of`), Flow-GRPO's loop and TRL's signature abstain the same way, TRL's log_metric gets the share."""
    base = load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", poems=sample_poems(), batch_size=4)
    poems = [p.poem_id for p in sample_poems()[:2] for _ in range(3)]
    images = torch.rand(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    _, plain = base(images, poems)
    threshold = float(np.median(plain["quality_sd"]))
    path = calibration_of(base.evaluator, threshold).write(tmp_path / "calibration.json")
    reward = load_reward(model=str(tiny_models["qwen3-vl"]), device="cpu", poems=sample_poems(), batch_size=4,
                         calibration=path, abstain="mean")
    scores, info = reward(images, poems, [{"poem_id": p} for p in poems])  # Flow-GRPO's signature
    assert 0 < info["abstained"].sum() < 6 and np.allclose(info["quality"], plain["quality"])
    assert_abstains_as_calibrated(reward, scores, info, poems)
    logged, columns = [], {}
    trl = reward.trl(prompts=poems, completions=list(images), poem_id=poems,
                     log_metric=lambda name, value: logged.append((name, value)),
                     log_extra=lambda name, values: columns.update({name: values}))
    assert trl == pytest.approx(scores.tolist())
    assert logged == [(ABSTAINED_METRIC, info["abstained_share"])]
    assert columns == {"pae_abstained": info["abstained"].tolist()}


@pytest.mark.slow
@pytest.mark.parametrize("abstain", ["mean", "nan"])
def test_a_trl_grpo_loop_with_the_abstaining_reward(tiny_models, tmp_path, abstain):
    """A real `trl.GRPOTrainer` on the CPU, everything tiny and random: the policy (the tiny Qwen3-VL as a language
    model) writes a prompt for each poem, the tiny text-to-image pipeline paints it, and PAE rewards the painting
    through `reward.trl`, abstaining where its spread is above a threshold set by hand between the spreads it
    reports. Two poems, four generations each, three steps: the trainer's logs carry `pae/abstained`, the share
    abstained in that step, and an abstained completion's advantage is 0 — its poem's mean (`mean`), or masked by
    TRL, which leaves a completion whose every reward is NaN out of its group's mean and gives it no advantage
    (`nan`)."""
    from datasets import Dataset
    from diffusers import DiffusionPipeline
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    pipe = DiffusionPipeline.from_pretrained(tiny_models["text-to-image"])
    pipe.set_progress_bar_config(disable=True)
    poems = sample_poems()[:2]

    def paint(texts: list[str]) -> torch.Tensor:
        return pipe(texts, num_inference_steps=2, height=32, width=32, output_type="pt",
                    generator=torch.Generator().manual_seed(0)).images

    judge = str(tiny_models["qwen3-vl"])
    base = load_reward(model=judge, device="cpu", poems=poems, batch_size=8)
    _, before = base(paint([p.text + tail for p in poems for tail in ("", "月", "霜", "山")]),
                     [p.poem_id for p in poems for _ in range(4)])
    path = calibration_of(base.evaluator, float(np.median(before["quality_sd"]))).write(tmp_path / "cal.json")
    reward = load_reward(model=judge, device="cpu", poems=poems, batch_size=8, calibration=path, abstain=abstain)

    def pae(prompts, completions, poem_id, **kwargs):
        return reward.trl(prompts, paint(completions), poem_id=poem_id, **kwargs)

    steps = []

    class EachStep(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if "pae/abstained" in logs:  # the step's batch, as the trainer holds it for its completions table
                steps.append((logs["pae/abstained"], list(trainer._logs["extra"]["pae_abstained"]),
                              list(trainer._logs["advantages"]), list(trainer._logs["rewards"]["pae"])))

    args = GRPOConfig(output_dir=str(tmp_path / "grpo"), per_device_train_batch_size=8, num_generations=4,
                      max_completion_length=8, max_steps=3, logging_steps=1, use_cpu=True, report_to="none",
                      save_strategy="no", learning_rate=1e-5, bf16=False)
    trainer = GRPOTrainer(model=judge, reward_funcs=[pae], args=args, callbacks=[EachStep()],
                          train_dataset=Dataset.from_list([{"prompt": p.text, "poem_id": p.poem_id} for p in poems]))
    trainer.train()
    assert len(steps) == 3 and [h["pae/abstained"] for h in trainer.state.log_history[:3]] == [s[0] for s in steps]
    mixed = 0
    for share, abstained, advantages, rewards in steps:
        assert len(abstained) == len(advantages) == 8 and share == pytest.approx(np.mean(abstained))
        for group in (range(0, 4), range(4, 8)):
            gone = [i for i in group if abstained[i]]
            assert all(advantages[i] == pytest.approx(0.0, abs=1e-5) for i in gone), (abstained, advantages)
            assert all(math.isnan(rewards[i]) for i in gone) if abstain == "nan" else True
            mixed += 0 < len(gone) < 4
    assert mixed, "no group had both kept and abstained completions: the threshold split nothing"
