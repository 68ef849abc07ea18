"""Supervised fine-tuning of PAE (paper, Appendix G): LoRA on Qwen3-VL's language model, the human
per-dimension scores as the answer, the best validation loss kept.

```bash
# 8 × H100, the paper's recipe
accelerate launch --config_file training/configs/zero2.yaml training/sft.py \
    --config training/recipes/sft.yaml --dataset_name ORG/TangPoetryBench --output_dir pae-sft

# a pairwise adapter (which of two illustrations is better), from the same ratings
accelerate launch --config_file training/configs/zero2.yaml training/sft.py \
    --config training/recipes/pairwise_sft.yaml --dataset_name ORG/TangPoetryBench --output_dir pae-pairwise-sft

# CPU smoke run on the tiny model and the demo dataset
accelerate launch --cpu --num_processes 1 training/sft.py \
    --model_name_or_path sample/models/qwen3-vl --dataset_name sample/dataset --output_dir /tmp/sft --max_steps 2
```

The defaults are the paper's: LoRA r 16, α 32, dropout 0.05 on the language model's linear layers (the
vision encoder and aligner stay frozen, and the script checks it), 2 epochs at 5e-6, weight decay 0.05,
2 per device (16 on 8 GPUs), sequences up to 4096 tokens, bf16 and gradient checkpointing on a GPU, plain
fp32 on a machine without one. Any TRL / transformers flag overrides them.
"""

from dataclasses import dataclass

from tangpoetrybench.models import quiet_expected_noise

quiet_expected_noise()  # before trl and peft load: what they say on every run of their own code

from trl import SFTConfig, SFTTrainer, TrlParser

from lora_setup import (GPUDefaults, ModelConfig, ScriptArguments, assert_vision_frozen, load_model, lora_config,
                        record_rubric)
from data import dataset_rubric, load_images, training_rows


@dataclass
class PAESFTConfig(GPUDefaults, SFTConfig):
    output_dir: str = "pae-sft"
    learning_rate: float = 5e-6
    num_train_epochs: float = 2
    weight_decay: float = 0.05
    per_device_train_batch_size: int = 2
    per_device_eval_batch_size: int = 2
    max_length: int | None = 4096
    eval_strategy: str = "epoch"
    save_strategy: str = "epoch"
    load_best_model_at_end: bool = True
    metric_for_best_model: str = "eval_loss"
    greater_is_better: bool = False
    save_total_limit: int = 2
    logging_steps: int = 10
    report_to: str = "none"


def main(script_args: ScriptArguments, training_args: PAESFTConfig, model_args: ModelConfig) -> None:
    dataset = load_images(script_args.dataset_name, script_args.dataset_config)
    rubric = dataset_rubric(script_args.dataset_name, script_args.dataset_config)
    evaluate = training_args.eval_strategy != "no" and script_args.dataset_test_split in dataset
    training_args.load_best_model_at_end = training_args.load_best_model_at_end and evaluate
    model, processor = load_model(model_args)
    trainer = SFTTrainer(
        model=model,
        args=training_args,
        train_dataset=training_rows(dataset[script_args.dataset_train_split], "sft", script_args.task,
                                    script_args.pair_margin, rubric),
        eval_dataset=training_rows(dataset[script_args.dataset_test_split], "sft", script_args.task,
                                   script_args.pair_margin, rubric) if evaluate else None,
        processing_class=processor,
        peft_config=lora_config(model_args),
    )
    assert_vision_frozen(trainer.model)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    trainer.save_model(training_args.output_dir)  # the best validation loss when evaluating, else the last step
    record_rubric(trainer, rubric, script_args)
    trainer.accelerator.print(f"Saved the adapter to {training_args.output_dir}")


if __name__ == "__main__":
    parser = TrlParser((ScriptArguments, PAESFTConfig, ModelConfig))
    main(*parser.parse_args_and_config())
