"""Run by tests/test_training.py under `torchrun --nproc_per_node 2` on the CPU: a real Trainer trains a LoRA on the
tiny Qwen3-VL for three steps while `TauSelection` keeps the best adapter. The validation τ is scripted (random
weights give no τ) and differs between the processes: every process must follow the main process's τ and save
at its best step. Prints one JSON line per process."""

import json
import sys
from pathlib import Path

import torch
from peft import LoraConfig, get_peft_model, get_peft_model_state_dict
from safetensors.torch import save_file
from transformers import AutoModelForImageTextToText, Trainer, TrainingArguments

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "training"))
from selection import TauSelection  # noqa: E402

MODEL, OUT = sys.argv[1], sys.argv[2]
TAUS = {0: [0.2, 0.6, 0.4], 1: [0.9, 0.1, 0.95]}  # the main process's best is step 2; process 1's would differ


class Scripted(TauSelection):
    def __init__(self, rank: int):
        super().__init__(rows=[], processor=None, every=1)
        self.taus, self.snapshots = iter(TAUS[rank]), {}

    def validation_tau(self, model):
        return next(self.taus)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.snapshots[state.global_step] = {k: v.detach().clone() for k, v in get_peft_model_state_dict(model).items()}
        super().on_step_end(args, state, control, model=model, **kwargs)


torch.manual_seed(0)
model = get_peft_model(AutoModelForImageTextToText.from_pretrained(MODEL),
                       LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", exclude_modules=r".*\.visual\..*"))
args = TrainingArguments(OUT, max_steps=3, per_device_train_batch_size=2, learning_rate=0.05, use_cpu=True,
                         report_to="none", save_strategy="no", logging_strategy="no", seed=0)
ids = torch.randint(10, 200, (12, 24), generator=torch.Generator().manual_seed(0))
rows = [{"input_ids": r, "attention_mask": torch.ones_like(r), "labels": r} for r in ids]
selection = Scripted(args.process_index)
trainer = Trainer(model=model, args=args, train_dataset=rows, callbacks=[selection])
selection.bind(trainer)
trainer.train()
best_step = next(h["step"] for h in selection.history if h["validation_tau"] == selection.best)
print(json.dumps({"rank": args.process_index, "best": selection.best, "history": selection.history,
                  "best_step": best_step}), flush=True)
if args.process_index == 0:
    save_file({k: v.contiguous() for k, v in selection.snapshots[best_step].items()}, Path(OUT) / "expected.safetensors")
