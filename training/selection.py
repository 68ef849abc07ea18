"""Checkpoint selection for GRPO: validation per-poem Kendall τ, computed with the package's PAE evaluator
and agreement statistics on the model being trained; the best adapter is kept in the output folder.

Under ZeRO-3 or FSDP2 each process holds a shard of the weights, so the adapter is saved through the trainer's
`save_model`, called on every process: it gathers the weights (accelerate's `get_state_dict`) and the main process
writes them. Every process follows the main process's τ, so all of them save at the same steps."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from accelerate.utils import broadcast_object_list
from transformers import TrainerCallback

from tangpoetrybench.stats.agreement import AgreementData, agreement
from tangpoetrybench.judging.backends.transformers import TransformersBackend
from tangpoetrybench.judging.registry import pae_on
from tangpoetrybench.rubric import Rubric

from data import poem_of, rubric_of


class TauSelection(TrainerCallback):
    """Every `every` steps and at the last step: score the validation rows greedily, compute per-poem τ
    of quality against the human quality, and save the adapter when τ improves (`selection.json` says when)."""

    def __init__(self, rows, processor, every: int, batch_size: int = 8, max_new_tokens: int = 256,
                 rubric: Rubric | None = None):
        """`rubric`: the dataset's (`data.dataset_rubric`); None: the rows' bundled one."""
        self.rows, self.processor, self.every, self.rubric = rows, processor, max(1, every), rubric
        self.batch_size, self.max_new_tokens = batch_size, max_new_tokens
        self.best: float | None = None
        self.history: list[dict] = []
        self.trainer = None

    def bind(self, trainer) -> "TauSelection":
        """The trainer whose `save_model` keeps the best adapter (a callback is not given its trainer)."""
        self.trainer = trainer
        return self

    def validation_tau(self, model) -> float | None:
        rubric = self.rubric or rubric_of(self.rows[0])
        side = self.processor.tokenizer.padding_side
        self.processor.tokenizer.padding_side = "left"
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                pae = pae_on(TransformersBackend.from_loaded(model, self.processor), max_new_tokens=self.max_new_tokens,
                             rubric=rubric)
                results = pae([r["image"] for r in self.rows], [poem_of(r) for r in self.rows], batch_size=self.batch_size)
        finally:
            self.processor.tokenizer.padding_side = side
            model.train(was_training)
        data = AgreementData.from_lists([[res.scores[k] for k in rubric.keys] for res in results],
                                        [[r[k] for k in rubric.keys] for r in self.rows],
                                        [r["poem_id"] for r in self.rows], rubric)
        return agreement(data, n_bootstrap=0)["kendall_tau"]

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step % self.every and state.global_step != state.max_steps:
            return
        self.record(args, state, self.validation_tau(model))

    def record(self, args, state, tau: float | None) -> None:
        """Keep the adapter if τ improved (every process saves together), and write `selection.json`."""
        [tau] = broadcast_object_list([tau], from_process=0)
        improved = tau is not None and (self.best is None or tau > self.best)
        self.history.append({"step": state.global_step, "validation_tau": tau, "kept": improved})
        if improved:
            self.best = tau
            self.trainer.save_model(args.output_dir)
        if state.is_world_process_zero:
            Path(args.output_dir).mkdir(parents=True, exist_ok=True)
            (Path(args.output_dir) / "selection.json").write_text(json.dumps(
                {"metric": "validation per-poem kendall_tau", "best": self.best, "history": self.history}, indent=1))
