"""Training PAE on the CPU: rows, rewards, recipes, and SFT then GRPO through `accelerate launch --cpu`
with the tiny model and the demo dataset (plumbing, not quality)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[1]
TRAINING = ROOT / "training"
sys.path.insert(0, str(TRAINING))

import rewards  # noqa: E402
from lora_setup import CHECKPOINTING, VISION, assert_vision_frozen  # noqa: E402
from data import grpo_row, has_target, load_images, sft_row, to_sft  # noqa: E402

from tangpoetrybench.judging.reading import parse_answer  # noqa: E402
from tangpoetrybench.judging.prompt import build_messages  # noqa: E402
from tangpoetrybench.rubric import load_rubric  # noqa: E402

RUBRIC = load_rubric("tang")
LAUNCH = [sys.executable, "-m", "accelerate.commands.launch", "--cpu", "--num_processes", "1", "--num_machines", "1",
          "--mixed_precision", "no", "--dynamo_backend", "no"]
TARGET = [1.0, 0.5, 0.67, 1.0, None, 1.0, 0.5, 0.67, 0.33, 0.75]


def assert_vision_unchanged(base: str, model) -> None:
    """The vision encoder and aligner of `model` (adapter merged) are bit-identical to the base checkpoint's."""
    import re

    from transformers import AutoModelForImageTextToText

    before, after = AutoModelForImageTextToText.from_pretrained(base).state_dict(), model.state_dict()
    vision = [k for k in before if re.match(VISION, "." + k)]
    assert vision and all(torch.equal(before[k], after[k]) for k in vision)


def answer(**overrides):
    scores = dict(zip(RUBRIC.keys, TARGET)) | overrides
    return [{"role": "assistant", "content": json.dumps(scores)}]


def test_accuracy_reward_hand_cases():
    exact = answer()
    off = answer(safety=0.5, overall_impression=0.25)     # errors 0.5 + 0.5 over 9 rated dimensions
    missing = answer(cultural_coherence=None)              # a rated dimension left null where it may be: error 1
    extra = answer(scene_consistency=0.9)                  # a dimension the human did not rate: ignored
    unreadable = answer(core_imagery=None)                 # null where the dimension always applies: no reading
    got = rewards.accuracy_reward([exact, off, missing, extra, unreadable,
                                   [{"role": "assistant", "content": "no idea"}]],
                                  targets=[TARGET] * 6, tradition=["tang"] * 6)
    assert got == pytest.approx([1.0, 1 - 1.0 / 9, 1 - 1.0 / 9, 1.0, 0.0, 0.0])


def test_format_reward_hand_cases():
    fenced = [{"role": "assistant", "content": "```json\n" + answer()[0]["content"] + "\n```"}]
    nine = answer()
    nine[0]["content"] = json.dumps({k: v for k, v in zip(RUBRIC.keys[:9], TARGET)})
    pairs = plain(json.dumps([[k, v] for k, v in zip(RUBRIC.keys, TARGET)]))  # a list of pairs, not the object
    got = rewards.format_reward([answer(), fenced, nine, "plain text", answer(beauty=1), pairs], tradition=["tang"] * 6)
    assert got == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert rewards.REWARD_WEIGHTS == (1.0, 0.2)


def plain(content: str):
    return [{"role": "assistant", "content": content}]


def test_rewards_give_nothing_for_answers_that_are_not_the_format():
    """Out of range, all null, or on another scale: the right keys are not enough for the format reward, and what
    the parser cannot read unambiguously earns no accuracy either."""
    sevens = plain(json.dumps({k: 7 for k in RUBRIC.keys}))                  # 0–10? 1–5? read neither way
    fives = plain(json.dumps({k: 5 for k in RUBRIC.keys}))                   # an all-5s answer on 1–5
    nulls = plain(json.dumps({k: None for k in RUBRIC.keys}))
    above = answer(safety=1.5)                                               # one value out of range
    stated = plain("On a 1-5 scale: " + json.dumps(dict(zip(RUBRIC.keys, [5, 3, 4, 5, None, 5, 3, 4, 2, 4]))))
    cases = [sevens, fives, nulls, above, stated]
    assert rewards.format_reward(cases, tradition=["tang"] * 5) == [0.0] * 5
    accuracy = rewards.accuracy_reward(cases, targets=[TARGET] * 5, tradition=["tang"] * 5)
    # none of them reads (a value off the 0–1 scale, a scale of the answer's own: no one reading): no accuracy either
    assert accuracy == [0.0] * 5


def test_rows(demo_built):
    ds = load_images(str(demo_built))
    row = ds["train"][0]
    sft = sft_row(row)
    assert sft["prompt"] == build_messages(_poem(row), RUBRIC)
    assert sft["images"][0].tobytes() == row["image"].convert("RGB").tobytes()  # within the pixel budget: unchanged
    big = dict(row, image=row["image"].resize((2048, 2048)))
    assert sft_row(big)["images"][0].size == grpo_row(big)["image"].size == (1024, 1024)  # as at inference
    target = sft["completion"][0]["content"][0]["text"]
    assert parse_answer(target, RUBRIC).status == "ok"
    assert parse_answer(target, RUBRIC).scores == {k: None if row[k] is None else round(row[k], 2) for k in RUBRIC.keys}
    g = grpo_row(row)
    assert g["prompt"] == sft["prompt"] and g["targets"] == [row[k] for k in RUBRIC.keys]
    assert all(has_target(r) for r in ds["train"])
    assert set(to_sft(ds["validation"]).column_names) == {"prompt", "completion", "images"}


def _poem(row):
    from data import poem_of

    return poem_of(row)


def test_every_recipe_parses_into_trl_configs():
    import grpo
    import sft
    from trl import TrlParser

    recipes = sorted((TRAINING / "recipes").glob("*.yaml"))
    assert len(recipes) == 10
    demo = TRAINING / "recipes" / "demo_tiny_sft.yaml"  # the README's main job, not the paper's
    script, args, model = TrlParser((sft.ScriptArguments, sft.PAESFTConfig, sft.ModelConfig)).parse_args_and_config(
        ["--config", str(demo)])
    assert (script.dataset_name, args.output_dir, args.max_steps, model.lora_r) == ("sample/dataset", "sample/pae-tiny",
                                                                                   200, 64)
    for recipe in [r for r in recipes if not r.name.startswith("demo_tiny")]:  # the paper-scale recipes
        module = grpo if "grpo" in recipe.name else sft
        config = module.PAEGRPOConfig if module is grpo else module.PAESFTConfig
        script_args = module.GRPOScriptArguments if module is grpo else module.ScriptArguments
        parser = TrlParser((script_args, config, module.ModelConfig))
        argv = ["--config", str(recipe), "--dataset_name", "x", "--output_dir", "/tmp/unused"]
        script, args, model = parser.parse_args_and_config(argv)
        assert (model.lora_r, model.lora_alpha, model.lora_dropout) == (16, 32, 0.05), recipe.name
        # bf16 and checkpointing on a GPU, plain fp32 without one, under either name transformers gives it
        assert args.bf16 == args.gradient_checkpointing == torch.cuda.is_available(), recipe.name
        assert getattr(args, "activation_checkpointing", args.gradient_checkpointing) == args.gradient_checkpointing
        flipped = parser.parse_args_and_config(argv + [f"--{CHECKPOINTING}", str(not torch.cuda.is_available())])[1]
        assert flipped.gradient_checkpointing != torch.cuda.is_available(), recipe.name
        if module is grpo:
            assert (args.num_generations, args.temperature, args.reward_weights) == (4, 0.7, [1.0, 0.2])
        else:
            assert args.learning_rate == 5e-6 and args.metric_for_best_model == "eval_loss"


def test_model_options_are_honoured_or_refused():
    """No trl.ModelConfig option is dropped silently."""
    import sft
    from lora_setup import check_model_args, lora_config
    from trl import TrlParser

    parser = TrlParser((sft.ScriptArguments, sft.PAESFTConfig, sft.ModelConfig))
    argv = ["--dataset_name", "x", "--output_dir", "/tmp/unused"]
    model = parser.parse_args_and_config(argv + ["--use_dora", "true", "--use_rslora", "true", "--lora_modules_to_save",
                                                 "lm_head", "--lora_target_parameters", "experts.gate_up_proj"])[2]
    config = lora_config(model)
    assert config.use_dora and config.use_rslora and config.modules_to_save == ["lm_head"]
    assert config.target_parameters == ["experts.gate_up_proj"]
    assert parser.parse_args_and_config(argv)[2].dtype is None  # bf16 on a GPU, fp32 on the CPU
    assert parser.parse_args_and_config(argv + ["--dtype", "bfloat16"])[2].dtype == "bfloat16"
    for flag, value, reason in (("--use_peft", "false", "full fine-tuning is not supported"),
                                ("--load_in_4bit", "true", r"quantized \(4-bit\) training")):
        with pytest.raises(SystemExit, match=reason):
            check_model_args(parser.parse_args_and_config(argv + [flag, value])[2])


def test_grpo_says_when_every_reward_ties(capsys):
    from grpo import TiedRewards
    from transformers import TrainerControl, TrainerState

    callback, state = TiedRewards(patience=3), TrainerState()
    for frac in (1.0, 1.0, 0.5, 1.0, 1.0):  # the run restarts after a step with some spread
        callback.on_log(None, state, TrainerControl(), logs={"frac_reward_zero_std": frac})
    assert capsys.readouterr().err == ""
    callback.on_log(None, state, TrainerControl(), logs={"frac_reward_zero_std": 1.0})
    callback.on_log(None, state, TrainerControl(), logs={"frac_reward_zero_std": 1.0})
    assert capsys.readouterr().err.count("GRPO learns nothing") == 1


def test_vision_check_catches_a_lora_on_the_vision_tower(tiny_models):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"])
    everywhere = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear"))
    with pytest.raises(AssertionError, match="outside the language model"):
        assert_vision_frozen(everywhere)
    model = AutoModelForImageTextToText.from_pretrained(tiny_models["qwen3-vl"])
    right = get_peft_model(model, LoraConfig(r=2, target_modules="all-linear", exclude_modules=VISION))
    assert assert_vision_frozen(right)


@pytest.mark.slow
def test_sft_then_grpo_then_score(tiny_models, demo_built, tmp_path):
    base = str(tiny_models["qwen3-vl"])
    sft_out, grpo_out = tmp_path / "sft", tmp_path / "grpo"
    common = ["--model_name_or_path", base, "--dataset_name", str(demo_built), "--max_steps", "2"]
    subprocess.run(LAUNCH + [str(TRAINING / "sft.py"), *common, "--output_dir", str(sft_out), "--eval_strategy",
                             "steps", "--eval_steps", "1", "--save_strategy", "steps", "--save_steps", "1"],
                   check=True, capture_output=True)
    assert (sft_out / "adapter_model.safetensors").is_file()
    from tangpoetrybench.dataset.reading import config_rubric
    from tangpoetrybench.models import CARD_HEADING, trained_on

    rubric = config_rubric(demo_built, "images").fingerprint
    assert trained_on(sft_out)["rubric"] == rubric and CARD_HEADING in (sft_out / "README.md").read_text()
    subprocess.run(LAUNCH + [str(TRAINING / "grpo.py"), *common, "--adapter_path", str(sft_out), "--output_dir",
                             str(grpo_out), "--num_generations", "2", "--per_device_train_batch_size", "2",
                             "--max_completion_length", "16", "--select_every", "1"], check=True, capture_output=True)
    adapter = load_file(grpo_out / "adapter_model.safetensors")
    assert adapter and all("lora_" in k and ".visual." not in k for k in adapter)
    selection = json.loads((grpo_out / "selection.json").read_text())
    assert [h["step"] for h in selection["history"]] == [1, 2]

    from tangpoetrybench.judging.evaluators import load_evaluator
    from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl

    pae = load_evaluator("pae", model=base, adapter=str(grpo_out), max_new_tokens=16)
    assert_vision_unchanged(base, pae.backend.model)
    summary = score_to_jsonl(pae, DatasetSource(demo_built, "images", "test"), tmp_path / "s.jsonl", progress=False)
    assert summary.scored == 12

    agree_json = tmp_path / "agree.json"
    subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "agree", "--dataset", str(demo_built), "--scores",
                    str(tmp_path / "s.jsonl"), "--bootstrap", "100", "--out", str(agree_json)], check=True,
                   capture_output=True)
    subprocess.run([sys.executable, "-m", "tangpoetrybench.cli", "model-card", "--agree", str(agree_json),
                    "--adapter", str(grpo_out), "--base-model", base], check=True, capture_output=True)
    records = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert trained_on(grpo_out)["rubric"] == rubric and all(r["settings"]["adapter_rubric"] == rubric for r in records)
    card = (grpo_out / "README.md").read_text(encoding="utf-8")
    assert "**Random weights.**" in card and "model-index" not in card and "library_name: peft" in card
    assert f"{CARD_HEADING}\n\nTrained (pointwise) on the rubric `{rubric}`" in card  # tpb model-card keeps it
    assert "The paper's numbers, for reference (not measured here)" in card


@pytest.mark.slow
def test_the_best_adapter_is_kept_by_every_process_together(tiny_models, tmp_path):
    """Two real processes (torchrun, gloo): the main process's validation τ decides for both, the trainer's own
    save_model writes the adapter of the best step, and it reloads equal to that step's weights (not the last)."""
    import os

    out = tmp_path / "grpo"
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                           str(ROOT / "tests" / "scripts" / "keep_best_adapter.py"), str(tiny_models["qwen3-vl"]),
                           str(out)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    reports = sorted((json.loads(line) for line in done.stdout.splitlines() if line.startswith("{\"rank\"")),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1]
    assert all(r["best"] == 0.6 and r["best_step"] == 2 for r in reports)  # process 1 follows the main process
    assert [h["kept"] for h in reports[1]["history"]] == [True, True, False]
    saved, expected = load_file(out / "adapter_model.safetensors"), load_file(out / "expected.safetensors")
    assert saved.keys() == expected.keys() and all(torch.equal(saved[k], expected[k]) for k in saved)
    assert json.loads((out / "selection.json").read_text())["best"] == 0.6


@pytest.mark.slow
def test_internvl_ablation_recipe_trains_and_scores(tiny_models, demo_built, tmp_path):
    """Table 6's InternVL3.5 backbone: its recipe (the 8B one differs only in the checkpoint) on the tiny
    transformers-native InternVL, then the adapter scores through PAE."""
    from tangpoetrybench.judging.evaluators import load_evaluator
    from tangpoetrybench.judging.scoring import DatasetSource, score_to_jsonl

    base, out = str(tiny_models["internvl"]), tmp_path / "sft"
    recipe = TRAINING / "recipes" / "ablation_sft_internvl3_5_2b.yaml"
    subprocess.run(LAUNCH + [str(TRAINING / "sft.py"), "--config", str(recipe),
                             "--model_name_or_path", base, "--dataset_name", str(demo_built), "--max_steps", "2",
                             "--output_dir", str(out), "--eval_strategy", "steps", "--eval_steps", "1",
                             "--save_strategy", "steps", "--save_steps", "1"], check=True, capture_output=True)
    adapter = load_file(out / "adapter_model.safetensors")
    assert adapter and all("lora_" in k and ".language_model." in k for k in adapter)

    pae = load_evaluator("pae", model=base, adapter=str(out), max_new_tokens=8)
    assert_vision_unchanged(base, pae.backend.model)
    summary = score_to_jsonl(pae, DatasetSource(demo_built, "images", "test"), tmp_path / "s.jsonl", progress=False)
    assert summary.scored == 12


def test_model_card_indexes_real_results():
    from tangpoetrybench.hub.model_card import render_model_card

    agree = {"dataset": "org/TangPoetryBench", "split": "test", "random_weights": False,
             "parse_status": {"ok": 250, "repaired": 5, "failed": 1},
             "agreement": {"n_images": 256, "n_poems": 64, "bootstrap": {"resamples": 10000},
                           "coverage": 0.99, "coverage_ci": [0.98, 1.0], "mae": 0.13, "mae_ci": [0.12, 0.14],
                           "within_0.05": 0.6, "within_one_anchor": 0.9, "kendall_tau": 0.4, "spearman": 0.5,
                           "per_dimension": {}},
             "noise_floor": {"per_dimension": {"safety": {"loo_deviation": 0.1, "within_one_level": 0.9,
                                                          "n_deviations": 30, "n_pairs": 20}},
                             "rater_vs_rest_tau": 0.5}}
    card = render_model_card(agree, base_model="Qwen/Qwen3-VL-8B-Instruct", adapter_ref="org/pae")
    assert "model-index:" in card and "value: 0.13" in card and "type: mae" in card
    assert "| mae | 0.130 | [0.120, 0.140] | 0.100 |" in card


def test_pairwise_rewards_hand_cases():
    right, wrong = plain('{"winner": "A", "reason": ""}'), plain('{"winner": "B", "reason": ""}')
    fenced = plain('```json\n{"winner": "A", "reason": ""}\n```')
    got = rewards.winner_reward([right, wrong, fenced, plain("A"), plain('{"winner": "tie"}')], winner=["A"] * 5)
    assert got == [1.0, 0.0, 1.0, 1.0, 0.0]  # a readable winner counts, whatever its form (a bare "A" too)
    assert rewards.pair_format_reward([right, wrong, fenced, plain("A")]) == [1.0, 1.0, 0.0, 0.0]


def test_pairwise_rows_are_the_human_pairs_in_both_orders(demo_built):
    from data import pair_rows, to_pairwise_sft

    from tangpoetrybench.judging.reading import parse_pair_answer
    from tangpoetrybench.judging.prompt import build_pair_messages

    train = load_images(str(demo_built))["train"]
    rows = pair_rows(train)
    quality = dict(zip(train["image_id"], train["quality"]))
    poem = dict(zip(train["image_id"], train["poem_id"]))
    assert rows and len(rows) % 2 == 0
    for first, second in zip(rows[::2], rows[1::2]):
        x, y = first["pair"].split("|")
        assert poem[x] == poem[y] and abs(quality[x] - quality[y]) >= 0.05 - 1e-9
        human = "A" if quality[x] > quality[y] else "B"
        assert first["winner"] == human and second["winner"] == {"A": "B", "B": "A"}[human]
        assert first["images"][0].tobytes() == second["images"][1].tobytes()
        assert first["prompt"] == build_pair_messages(_poem(next(r for r in train if r["image_id"] == x)), RUBRIC)
    sft = to_pairwise_sft(train)
    assert len(sft) == len(rows) and set(sft.column_names) == {"prompt", "completion", "images"}
    assert parse_pair_answer(sft[0]["completion"][0]["content"][0]["text"]).status == "ok"
    assert len(sft[0]["images"]) == 2


@pytest.mark.slow
def test_pairwise_sft_then_grpo_on_the_tiny_model(tiny_models, demo_built, tmp_path):
    base = str(tiny_models["qwen3-vl"])
    common = ["--model_name_or_path", base, "--dataset_name", str(demo_built), "--max_steps", "2", "--task", "pairwise"]
    sft_out, grpo_out = tmp_path / "sft", tmp_path / "grpo"
    subprocess.run(LAUNCH + [str(TRAINING / "sft.py"), *common, "--output_dir", str(sft_out), "--eval_strategy", "no",
                             "--save_strategy", "no", "--load_best_model_at_end", "false"], check=True, capture_output=True)
    subprocess.run(LAUNCH + [str(TRAINING / "grpo.py"), *common, "--adapter_path", str(sft_out), "--output_dir",
                             str(grpo_out), "--num_generations", "2", "--per_device_train_batch_size", "2",
                             "--max_completion_length", "24"], check=True, capture_output=True)
    adapter = load_file(grpo_out / "adapter_model.safetensors")
    assert adapter and all("lora_" in k and ".visual." not in k for k in adapter)
    from tangpoetrybench.judging.evaluators import load_evaluator

    judge = load_evaluator("pae", task="pairwise", model=base, adapter=str(grpo_out), constrained=True, max_new_tokens=32)
    assert judge.settings()["task"] == "pairwise"


@pytest.mark.slow
def test_the_tiny_pairwise_recipe_learns_the_answers_form(tiny_models, demo_built, tmp_path):
    """The tiny pairwise recipe (demo_tiny_pairwise_sft.yaml: 360 steps on the CPU) teaches the random tiny model the
    answer's form: decoding freely (no constraint), it writes exactly `{"winner": …, "reason": ""}` for its training
    pairs in both orders, where the untrained model writes no such answer. The form, not judgement (its choice of
    image is a coin it cannot see), and on its training pairs: a random 2-layer model generalises the form poorly to
    unseen images, which is what `--constrained` is for."""
    from datasets import load_dataset
    from data import pair_rows

    from tangpoetrybench.judging.evaluators import load_evaluator
    from tangpoetrybench.judging.pairwise import PairItem
    from tangpoetrybench.judging.prompt import format_pair_answer

    base, out = str(tiny_models["qwen3-vl"]), tmp_path / "pairwise"
    subprocess.run(LAUNCH + [str(TRAINING / "sft.py"), "--config", str(TRAINING / "recipes" /
                                                                        "demo_tiny_pairwise_sft.yaml"),
                             "--model_name_or_path", base, "--dataset_name", str(demo_built), "--output_dir", str(out)],
                   check=True, capture_output=True)
    train = load_dataset(str(demo_built), "images")["train"]
    poem_of_image = {row["image_id"]: _poem(row) for row in train}
    items = [PairItem(r["pair"], poem_of_image[r["pair"].split("|")[0]], *r["images"]) for r in pair_rows(train)[:8]]
    answers = load_evaluator("pae", task="pairwise", model=base, adapter=str(out), max_new_tokens=32).judge(items)
    assert len(answers) == 8
    for answer in answers:
        assert answer.status == "ok" and answer.raw == format_pair_answer(answer.winner), answer.raw
    untrained = load_evaluator("pae", task="pairwise", model=base, max_new_tokens=32).judge(items[:2])
    assert not any(a.raw == format_pair_answer(a.winner or "A") for a in untrained)


def test_an_adapter_records_its_rubric_and_a_judge_under_another_says_so_once(tiny_models, tiny_pae, tmp_path):
    """`trained_on.json` and the model card name the rubric the adapter was trained on (written as sft.py and
    grpo.py write it); PAE with that adapter keeps it in every record's settings, and under another rubric warns
    once (a Notice: one plain line on the command line)."""
    import shutil
    import warnings

    from conftest import tiny_pae_items
    from tangpoetrybench.errors import Notice
    from tangpoetrybench.judging.evaluators import load_evaluator
    from tangpoetrybench.models import CARD_HEADING, trained_on, write_trained_on

    adapter = tmp_path / "adapter"
    shutil.copytree(tiny_pae, adapter)
    assert trained_on(adapter) is None  # an adapter that records nothing: nothing to compare, nothing said
    write_trained_on(adapter, RUBRIC, "sample/dataset")
    write_trained_on(adapter, RUBRIC, "sample/dataset")  # again: the card keeps one section
    record = json.loads((adapter / "trained_on.json").read_text(encoding="utf-8"))
    assert record["rubric"] == RUBRIC.fingerprint and record["tradition"] == "tang" and record["task"] == "pointwise"
    card = (adapter / "README.md").read_text(encoding="utf-8")
    assert card.count(CARD_HEADING) == 1 and f"tpb_rubric: {RUBRIC.fingerprint}" in card
    assert f"on the rubric `{RUBRIC.fingerprint}` (Tang poetry: Safety, Technical quality" in card

    pae = load_evaluator("pae", model=str(tiny_models["qwen3-vl"]), adapter=str(adapter), constrained=True)
    items = tiny_pae_items()[:2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # under its own rubric: not a word
        results = pae.score(items)
    assert all(r.settings["adapter_rubric"] == r.settings["rubric"] == RUBRIC.fingerprint for r in results)
    song = load_rubric("song_ci")
    for item in items:
        item.rubric = song
    with pytest.warns(Notice) as said:
        results = pae.score(items) + pae.score(items)
    assert len(said) == 1 and f"trained on the rubric {RUBRIC.fingerprint} and scores under {song.fingerprint}" in str(
        said[0].message)
    assert all(r.settings["adapter_rubric"] == RUBRIC.fingerprint and r.settings["rubric"] == song.fingerprint
               for r in results)
