"""The vLLM backend against the real vLLM library, on the CPU: everything short of running the engine.

vLLM pins its own torch and transformers, so these tests run in an environment of their own (`.ci/run` makes
one: `pip install -e ".[vllm,train]" pytest`); elsewhere they skip. They check that vLLM turns our requests into
exactly the tokens the transformers backend feeds the model, that the structured-output backend vLLM picks
accepts every well-formed answer and nothing else, and that vLLM reads the adapter `training/` writes.
Generation itself needs a GPU (see the README's GPU checks).
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import sys
from pathlib import Path

import pytest
from PIL import Image

vllm = pytest.importorskip("vllm", reason="vLLM is not installed (it needs an environment of its own)")

from conftest import without_engine  # noqa: E402
from tangpoetrybench.judging.evaluators.base import ScoringItem  # noqa: E402
from tangpoetrybench.models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels  # noqa: E402
from tangpoetrybench.judging.backends import Question  # noqa: E402
from tangpoetrybench.judging.backends.vllm import (  # noqa: E402
    MAX_LORA_RANK,
    engine_kwargs,
    pil_parts,
    sampling_params,
)
from tangpoetrybench.judging.tasks.scores import RubricScores  # noqa: E402
from tangpoetrybench.poems import sample_poems  # noqa: E402
from tangpoetrybench.judging.prompt import (  # noqa: E402
    answer_schema,
    build_messages,
    build_pair_messages,
    format_answer,
    format_pair_answer,
    pair_answer_schema,
    system_prompt,
)
from tangpoetrybench.rubric import load_rubric  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def qwen(tiny_models):
    from transformers import AutoProcessor
    from vllm.config import ModelConfig

    path = str(tiny_models["qwen3-vl"])
    return ModelConfig(model=path), AutoProcessor.from_pretrained(path)


@pytest.mark.parametrize("rubric_name,poem_index,size", [("tang", 0, (640, 480)), ("song_ci", -1, (2048, 1536))])
def test_vllm_feeds_the_model_the_same_tokens_as_transformers(qwen, rubric_name, poem_index, size):
    model_config, processor = qwen
    rubric, poem = load_rubric(rubric_name), sample_poems()[poem_index]
    image = Image.new("RGB", size, "white")
    _, [messages], _ = without_engine(RubricScores(), rubric)._prepare([ScoringItem("x", image, poem)])
    prompt, vllm_ids = vllm_prompt(qwen, messages)
    reference = chat_inputs(processor, [build_messages(poem, rubric, fit_pixels(image, DEFAULT_MAX_PIXELS))])
    assert vllm_ids == reference["input_ids"][0].tolist()
    # The rubric (the system message) comes before the image, so prefix caching shares it across requests.
    assert prompt.index(system_prompt(rubric)) < prompt.index("<|vision_start|>")


def vllm_prompt(qwen, messages: list[dict]) -> tuple[str, list[int]]:
    """The prompt text and token ids vLLM's own chat parsing and multimodal processor make of our messages."""
    from vllm.multimodal import MULTIMODAL_REGISTRY
    from vllm.renderers.chat_utils.chat_message import parse_chat_messages
    from vllm.renderers.hf import resolve_chat_template_content_format, safe_apply_chat_template

    model_config, processor = qwen
    content_format = resolve_chat_template_content_format(
        chat_template=None, tools=None, given_format="auto", tokenizer=processor.tokenizer, model_config=model_config)
    conversation, mm_data, _ = parse_chat_messages(messages, model_config, content_format=content_format)
    prompt = safe_apply_chat_template(model_config, processor.tokenizer, conversation, tokenize=False,
                                      add_generation_prompt=True)
    mm_processor = MULTIMODAL_REGISTRY.create_processor(model_config)
    return prompt, mm_processor(prompt, mm_processor.info.parse_mm_data(mm_data))["prompt_token_ids"]


def vllm_grammar(qwen, schema: dict, max_tokens: int = 200):
    """`accepted(answer)`: whether the structured output vLLM builds for `schema` lets the answer through, compiled
    as vLLM's xgrammar backend compiles it (any whitespace is its default), after vLLM's own validation."""
    import xgrammar
    from vllm.config import StructuredOutputsConfig

    model_config, processor = qwen
    params = sampling_params(Question([], max_tokens, schema=schema))
    params._validate_structured_outputs(model_config, StructuredOutputsConfig(), processor.tokenizer)
    assert params.structured_outputs._backend == "xgrammar" and params.max_tokens == max_tokens
    info = xgrammar.TokenizerInfo.from_huggingface(processor.tokenizer, vocab_size=model_config.get_vocab_size())
    grammar = xgrammar.GrammarCompiler(info).compile_json_schema(json.dumps(schema), any_whitespace=True)

    def accepted(answer: str) -> bool:
        matcher = xgrammar.GrammarMatcher(grammar, terminate_without_stop_token=True)
        return matcher.accept_string(answer) and matcher.is_terminated()

    return accepted


def test_the_pairwise_judge_feeds_vllm_the_same_tokens_and_holds_its_answer_to_the_form(qwen):
    """`--task pairwise` on vLLM: both images of the pair prompt reach the model as transformers' pairwise PAE feeds
    them, and the structured output accepts the pairwise answer and nothing else."""
    from vllm.engine.arg_utils import EngineArgs

    model_config, processor = qwen
    rubric, poem = load_rubric("tang"), sample_poems()[0]
    a, b = Image.new("RGB", (640, 480), "white"), Image.new("RGB", (300, 500), "black")
    sent = [fit_pixels(image, DEFAULT_MAX_PIXELS) for image in (a, b)]
    reference = chat_inputs(processor, [build_pair_messages(poem, rubric, *sent)])
    assert vllm_prompt(qwen, pil_parts(build_pair_messages(poem, rubric, *sent)))[1] == reference["input_ids"][0].tolist()
    accepted = vllm_grammar(qwen, pair_answer_schema(), 96)
    assert accepted(format_pair_answer("A", "远山如黛，更近诗意。")) and accepted(format_pair_answer("B"))
    for wrong in ({"winner": "C", "reason": ""}, {"winner": "A"}, {"winner": "A", "reason": "", "extra": 1}):
        assert not accepted(json.dumps(wrong, ensure_ascii=False)), wrong
    pairwise = EngineArgs(**engine_kwargs(str(model_config.model), None, 8, images=2)).create_model_config()
    assert pairwise.multimodal_config.limit_per_prompt["image"].count == 2


@pytest.mark.parametrize("rubric_name", ["tang", "song_ci"])
def test_structured_output_accepts_every_answer_and_nothing_else(qwen, rubric_name):
    rubric = load_rubric(rubric_name)
    accepted = vllm_grammar(qwen, answer_schema(rubric))
    nullable = [d.key for d in rubric.dimensions if any(o.excluded for o in d.options)]
    scores = {d.key: d.options[-1].score for d in rubric.dimensions} | {k: None for k in nullable}
    assert accepted(format_answer(scores, rubric))
    assert accepted(json.dumps({k: 1 for k in rubric.keys}, indent=2))
    required = next(k for k in rubric.keys if k not in nullable)
    for wrong in ({required: 1.5}, {required: -0.1}, {required: None}, {required: "0.5"}, {"extra": 0.5}):
        assert not accepted(json.dumps(scores | wrong)), wrong
    assert not accepted(json.dumps({k: v for k, v in scores.items() if k != required}))


def test_engine_arguments_and_the_training_adapter_are_what_vllm_reads(tiny_models, tmp_path):
    import torch
    from peft import get_peft_model
    from transformers import AutoModelForImageTextToText
    from vllm import LLM
    from vllm.config.lora import LoRAConfig
    from vllm.engine.arg_utils import EngineArgs
    from vllm.lora.lora_model import LoRAModel
    from vllm.lora.peft_helper import PEFTHelper
    from vllm.lora.request import LoRARequest
    from vllm.model_executor.models.qwen3_vl import Qwen3VLForConditionalGeneration

    sys.path.insert(0, str(ROOT))
    from training.lora_setup import ModelConfig, lora_config

    path, adapter = str(tiny_models["qwen3-vl"]), tmp_path / "adapter"
    kwargs = engine_kwargs(path, str(adapter), max_num_seqs=8)
    assert set(kwargs) <= {f.name for f in dataclasses.fields(EngineArgs)}
    model_config = EngineArgs(**kwargs).create_model_config()
    assert model_config.multimodal_config.limit_per_prompt["image"].count == 1
    inspect.signature(LLM.chat).bind(None, [], sampling_params=[], lora_request=LoRARequest("pae", 1, str(adapter)),
                                     use_tqdm=False)

    # The adapter exactly as training/ makes it: the paper's LoRA on the language model only.
    model_args = ModelConfig(model_name_or_path=path)
    get_peft_model(AutoModelForImageTextToText.from_pretrained(path), lora_config(model_args)).save_pretrained(adapter)
    helper = PEFTHelper.from_local_dir(str(adapter), model_config.max_model_len)
    helper.validate_legal(LoRAConfig(max_lora_rank=MAX_LORA_RANK, max_loras=1))
    mapping = Qwen3VLForConditionalGeneration.packed_modules_mapping
    language_modules = {m for packed in ("qkv_proj", "gate_up_proj") for m in mapping[packed]} | {"o_proj", "down_proj"}
    mapper = Qwen3VLForConditionalGeneration.hf_to_vllm_mapper.get_rename_mapper()  # as vLLM's LoRA worker does
    lora = LoRAModel.from_local_checkpoint(str(adapter), language_modules, helper, lora_model_id=1, device="meta",
                                           dtype=torch.bfloat16, weights_mapper=mapper)
    layers = model_config.hf_config.text_config.num_hidden_layers
    assert len(lora.loras) == layers * len(language_modules)
    assert all(name.startswith("language_model.model.layers.") for name in lora.loras)
    assert {lw.rank for lw in lora.loras.values()} == {model_args.lora_r}


def test_explain_mode_on_vllm_feeds_the_same_tokens_and_holds_the_reasons_to_the_form(qwen):
    """`--explain` on vLLM: the explain prompt reaches the model as transformers' PAE feeds it, and the structured
    output accepts scores with a sentence per dimension, refusing an empty or missing reason."""
    rubric, poem = load_rubric("tang"), sample_poems()[0]
    image = Image.new("RGB", (640, 480), "white")
    _, processor = qwen
    reference = chat_inputs(processor, [build_messages(poem, rubric, fit_pixels(image, DEFAULT_MAX_PIXELS), "en")])
    _, [messages], _ = without_engine(RubricScores(explain="en"), rubric)._prepare([ScoringItem("x", image, poem)])
    _, ids = vllm_prompt(qwen, messages)
    assert ids == reference["input_ids"][0].tolist()
    accepted = vllm_grammar(qwen, answer_schema(rubric, explain=True), 600)
    scores = {d.key: d.options[0].score for d in rubric.dimensions}
    reasons = {k: "The moon is drawn where the poem puts it." for k in rubric.keys}
    assert accepted(format_answer(scores, rubric, reasons))
    assert not accepted(format_answer(scores, rubric, reasons | {rubric.keys[0]: ""}))
    assert not accepted(format_answer(scores, rubric))  # the plain answer is not explain mode's form
