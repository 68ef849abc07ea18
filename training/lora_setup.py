"""What sft.py and grpo.py share: the paper's LoRA (language model only), loading, the frozen-vision check, and the
record of the rubric the adapter was trained on."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import torch
import trl
from peft import LoraConfig
from transformers import AutoModelForImageTextToText, AutoProcessor, TrainingArguments

from tangpoetrybench.models import write_trained_on
from tangpoetrybench.files import local_or_hub
from tangpoetrybench.rubric import Rubric

CUDA = torch.cuda.is_available()
CHECKPOINTING = next(n for n in ("activation_checkpointing", "gradient_checkpointing")
                     if n in TrainingArguments.__dataclass_fields__)
# The vision encoder and the aligner (Qwen3-VL: model.visual.*, merger included; InternVL: vision_tower and
# multi_modal_projector) stay frozen: LoRA goes on the language model's linear layers only.
VISION = r".*\.(visual|vision_tower|vision_model|multi_modal_projector)\..*"


@dataclass
class ScriptArguments(trl.ScriptArguments):
    dataset_name: str = field(default=None, metadata={"help": "a built TangPoetryBench folder or Hub id"})
    dataset_config: str = "images"
    dataset_train_split: str = "train"
    dataset_test_split: str = "validation"
    task: str = field(default="pointwise", metadata={
        "help": "pointwise: the ten scores of one image; pairwise: which of two images of a poem is better",
        "choices": ["pointwise", "pairwise"]})
    pair_margin: float = field(default=0.05, metadata={
        "help": "pairwise: train on pairs whose human quality differs by at least this"})

    def __post_init__(self):
        if not self.dataset_name:
            raise SystemExit("--dataset_name is required (a built TangPoetryBench folder or Hub id)")


@dataclass
class ModelConfig(trl.ModelConfig):
    """The paper's LoRA on Qwen3-VL-8B-Instruct."""

    model_name_or_path: str = "Qwen/Qwen3-VL-8B-Instruct"
    dtype: str | None = field(default=None, metadata={
        "help": "the weights' dtype (default: bfloat16 on a GPU, float32 on the CPU)",
        "choices": ["auto", "bfloat16", "float16", "float32"]})
    use_peft: bool = True
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05


@dataclass
class GPUDefaults:
    """bf16, activation checkpointing and pinned memory on a GPU, plain fp32 without one; mixed in before TRL's
    config class.

    transformers renamed `gradient_checkpointing` to `activation_checkpointing` (the old name warns). Releases
    before the rename, which vLLM 0.31's pins hold for GRPO's `--use_vllm`, know only the old name, so the
    default goes to whichever name this transformers has."""

    bf16: bool = CUDA
    dataloader_pin_memory: bool = CUDA  # page-locked batches help a GPU only (torch warns of them on the CPU)
    if CHECKPOINTING == "activation_checkpointing":
        activation_checkpointing: bool | None = CUDA
    else:
        gradient_checkpointing: bool = CUDA


# trl.ModelConfig options these scripts cannot honour, with the value that would be ignored: refused, never dropped.
REFUSED = {
    "use_peft": (False, "PAE is a LoRA adapter: full fine-tuning is not supported (leave --use_peft true)"),
    "load_in_8bit": (True, "quantized (8-bit) training is not supported"),
    "load_in_4bit": (True, "quantized (4-bit) training is not supported"),
}


def check_model_args(model_args) -> None:
    """Every ModelConfig option is honoured or refused with a reason."""
    for name, (value, reason) in REFUSED.items():
        if getattr(model_args, name) == value:
            raise SystemExit(f"--{name} {value}: {reason}")


def lora_config(model_args) -> LoraConfig:
    return LoraConfig(
        r=model_args.lora_r, lora_alpha=model_args.lora_alpha, lora_dropout=model_args.lora_dropout,
        target_modules=model_args.lora_target_modules or "all-linear", exclude_modules=VISION,
        target_parameters=model_args.lora_target_parameters, modules_to_save=model_args.lora_modules_to_save,
        use_rslora=model_args.use_rslora, use_dora=model_args.use_dora,
        task_type=model_args.lora_task_type or "CAUSAL_LM",
    )


def load_model(model_args):
    """Model and processor from a Hub id or folder, at --model_revision: in --dtype when given, else bf16 on a GPU
    and fp32 on the CPU; never remote code."""
    check_model_args(model_args)
    local_or_hub(model_args.model_name_or_path, "--model_name_or_path")
    dtype = model_args.dtype if model_args.dtype not in (None, "auto") else torch.bfloat16 if CUDA else torch.float32
    processor = AutoProcessor.from_pretrained(model_args.model_name_or_path, revision=model_args.model_revision)
    model = AutoModelForImageTextToText.from_pretrained(
        model_args.model_name_or_path, revision=model_args.model_revision, dtype=dtype,
        attn_implementation=model_args.attn_implementation,
    )
    return model, processor


def assert_vision_frozen(model) -> list[str]:
    """Fail unless every trainable parameter is a LoRA weight (or a module to save) outside the vision encoder and
    aligner."""
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    wrong = [n for n in trainable if re.match(VISION, "." + n) or ("lora_" not in n and ".modules_to_save." not in n)]
    assert trainable, "no trainable parameters"
    assert not wrong, f"trainable parameters outside the language model's LoRA: {wrong[:5]}"
    return trainable


def record_rubric(trainer, rubric: Rubric, script_args) -> None:
    """Once the adapter is saved: the rubric it was trained on, in its folder's `trained_on.json` and model card
    (`tangpoetrybench.adapters`), written by the main process."""
    if trainer.accelerator.is_main_process:
        write_trained_on(trainer.args.output_dir, rubric, script_args.dataset_name, script_args.dataset_config,
                         script_args.task)
