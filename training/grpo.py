"""GRPO for PAE (paper, Appendix G), continuing the SFT adapter, rewarded for score accuracy (1.0) and
answer format (0.2); the adapter with the best validation per-poem Kendall τ is kept.

```bash
# 8 × H100, the paper's recipe, from the SFT adapter
accelerate launch --config_file training/configs/zero2.yaml training/grpo.py \
    --config training/recipes/grpo.yaml --dataset_name ORG/TangPoetryBench --adapter_path pae-sft --output_dir pae-grpo
# generation with vLLM on the training GPUs
accelerate launch --config_file training/configs/zero2.yaml training/grpo.py --config training/recipes/grpo.yaml \
    --dataset_name ORG/TangPoetryBench --adapter_path pae-sft --output_dir pae-grpo --use_vllm --vllm_mode colocate

# CPU smoke run
accelerate launch --cpu --num_processes 1 training/grpo.py --model_name_or_path sample/models/qwen3-vl \
    --dataset_name sample/dataset --adapter_path /tmp/sft --output_dir /tmp/grpo --max_steps 2 \
    --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 16
```

Defaults: 1 epoch at 1e-6, 4 generations per prompt at temperature 0.7, 4 per device (32 on 8 GPUs), answers
up to 256 tokens, rewards weighted 1.0 and 0.2, bf16 and gradient checkpointing on a GPU, fp32 without one.
Without `--adapter_path` GRPO starts from the base model with a fresh LoRA (the "GRPO only" ablation).
`--task pairwise` trains a pairwise adapter (continue a `--task pairwise` SFT adapter): rewarded for naming the human
winner (1.0) and for the answer's form (0.2); the last step is kept.
"""

import sys
from dataclasses import dataclass, field

from tangpoetrybench.models import quiet_expected_noise

quiet_expected_noise()  # before trl and peft load: what they say on every run of their own code

from peft import PeftModel
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer, TrlParser

from tangpoetrybench.files import local_or_hub
from lora_setup import (GPUDefaults, ModelConfig, ScriptArguments, assert_vision_frozen, load_model, lora_config,
                        record_rubric)
from data import dataset_rubric, load_images, training_rows
from rewards import REWARD_WEIGHTS, accuracy_reward, for_rubric, format_reward, pair_format_reward, winner_reward
from selection import TauSelection


@dataclass
class GRPOScriptArguments(ScriptArguments):
    adapter_path: str | None = field(default=None, metadata={"help": "the SFT adapter to continue"})
    select_every: int = field(default=50, metadata={"help": "steps between validation-τ checks"})


@dataclass
class PAEGRPOConfig(GPUDefaults, GRPOConfig):
    output_dir: str = "pae-grpo"
    learning_rate: float = 1e-6
    num_train_epochs: float = 1
    per_device_train_batch_size: int = 4
    num_generations: int = 4
    temperature: float = 0.7
    max_completion_length: int = 256
    reward_weights: list[float] = field(default_factory=lambda: list(REWARD_WEIGHTS))
    save_strategy: str = "no"  # TauSelection keeps the best adapter
    logging_steps: int = 10
    report_to: str = "none"


class TiedRewards(TrainerCallback):
    """Says so, once, when every group's rewards have tied for `patience` logged steps in a row: each advantage is
    then 0, so is the loss, and nothing is learned (training/README.md, "When GRPO learns nothing")."""

    def __init__(self, patience: int = 3):
        self.patience, self.run = patience, 0

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "frac_reward_zero_std" not in logs:
            return
        self.run = self.run + 1 if logs["frac_reward_zero_std"] >= 1 else 0
        if self.run == self.patience and state.is_world_process_zero:
            print(f"warning: the rewards of every group have tied for {self.patience} logged steps (frac_reward_zero_std"
                  " 1): the loss is 0 and GRPO learns nothing; see training/README.md", file=sys.stderr, flush=True)


def main(script_args: GRPOScriptArguments, training_args: PAEGRPOConfig, model_args: ModelConfig) -> None:
    dataset = load_images(script_args.dataset_name, script_args.dataset_config)
    rubric = dataset_rubric(script_args.dataset_name, script_args.dataset_config)
    model, processor = load_model(model_args)
    peft_config = None
    if script_args.adapter_path:  # continue the SFT adapter: pass the PeftModel alone
        model = PeftModel.from_pretrained(model, local_or_hub(script_args.adapter_path, "--adapter_path"),
                                          is_trainable=True)
    else:
        peft_config = lora_config(model_args)
    pairwise = script_args.task == "pairwise"  # the validation τ selects pointwise adapters only
    selection = (TauSelection(dataset[script_args.dataset_test_split], processor, script_args.select_every,
                              max_new_tokens=training_args.max_completion_length, rubric=rubric)
                 if script_args.dataset_test_split in dataset and not pairwise else None)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=([winner_reward, pair_format_reward] if pairwise
                      else [for_rubric(accuracy_reward, rubric), for_rubric(format_reward, rubric)]),
        args=training_args,
        train_dataset=training_rows(dataset[script_args.dataset_train_split], "grpo", script_args.task,
                                    script_args.pair_margin, rubric),
        processing_class=processor,
        peft_config=peft_config,
        callbacks=[TiedRewards(), *([selection] if selection else [])],
    )
    if selection:
        selection.bind(trainer)
    assert_vision_frozen(trainer.model)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    if selection is None or selection.best is None:  # no validation τ was ever defined: keep the last step
        trainer.save_model(training_args.output_dir)
    record_rubric(trainer, rubric, script_args)
    trainer.accelerator.print(f"Saved the adapter to {training_args.output_dir}")


if __name__ == "__main__":
    parser = TrlParser((GRPOScriptArguments, PAEGRPOConfig, ModelConfig))
    main(*parser.parse_args_and_config())
