"""PAE on Ray Data's vLLM engine stage (`ray.data.llm`): `tpb score --engine ray --backend vllm`, a vLLM replica per
worker (`--workers`, `--worker-gpus` each: tensor parallel above 1), fed by Ray Data across the cluster.

    rows ─► request (a map: PAE's question, the image as vLLM's `image_pil` part; the sampling parameters of
            `backends.vllm.sampling_kwargs`, so the answer is held to the question's JSON schema by structured
            output, with token log-probabilities for `--readout expected`; the adapter as the row's LoRA model)
         ─► PrepareMultimodal ─► ChatTemplate ─► Tokenize ─► vLLM engine ─► Detokenize   (Ray Data's own stages)
         ─► record (a map: the task reads the answer — the readout from the log-probabilities the stage returns, as
            for a served judge — and makes the record `tpb score` writes; a row the engine failed on is a failed
            record of kind `model`, which a rerun asks again)

The driver writes the records as for every Ray run (`judging.ray_scoring`). The records name the backend `vllm` and
the engine (`settings.engine`), so a resume never mixes them with those of the in-process vLLM backend, whose readout
is exact (`readout.vllm_read`) where this one reads the anchors from the answer's top log-probabilities.

vLLM is imported only by Ray Data's stages, on the workers (a GPU each); this module builds the stage's configuration,
its request rows and the records from its output rows, which `tests/test_ray_scoring.py` checks against the real
`ray.data.llm` on the CPU. `benchmarks/ray_vllm_check.py` (a step of `benchmarks/gpu_checks.sh`) runs it on a GPU.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from ..models import model_label
from .backends import Answer, Backend
from .backends.transformers import DEFAULT_MODEL
from .backends.vllm import TOP_LOGPROBS, VLLMBackend, engine_kwargs, pil_parts, sampling_kwargs
from .evaluators.base import ScoringItem
from .judge import Attempt, Judge
from ..files import DEFAULT_MAX_IMAGE_PIXELS
from .scoring import row_item, row_poem

ENGINE = "ray.data.llm"
BATCH_SIZE = 32  # rows per stage batch (Ray's advice for vision models: small batches, several in flight)
MAX_NUM_SEQS = 64
STAGE_OPTIONS = ("model", "adapter", "max_pixels", "max_new_tokens", "rubric", "explain", "readout")
STAND_IN = [{"role": "user", "content": [{"type": "text", "text": "."}]}]  # the request of an unreadable image


class StageBackend(Backend):
    """The backend the records name on this path: vLLM, run by Ray Data's stage (nothing runs in this process)."""

    name = VLLMBackend.name

    def __init__(self, model: str, adapter: str | None = None):
        self.model, self.adapter = model, adapter
        self.model_name = model_label(model, adapter)

    def settings(self) -> dict[str, Any]:
        return {"engine": ENGINE}


def stage_logprobs(tokens, logprobs) -> dict | None:
    """The stage's log-probabilities (per answer token: token id → {logprob, rank, decoded_token}, the chosen token
    among them) in the chat completions form the readout reads (`readout.logprob_tokens`); None without them."""
    if logprobs is None or len(logprobs) == 0:
        return None
    content = []
    for token_id, alternatives in zip(tokens, logprobs):
        options = {int(k): v for k, v in (alternatives.items() if isinstance(alternatives, Mapping) else alternatives)
                   if v is not None}
        chosen = options[int(token_id)]
        content.append({"token": chosen["decoded_token"], "logprob": float(chosen["logprob"]),
                        "top_logprobs": [{"token": o["decoded_token"], "logprob": float(o["logprob"])}
                                         for o in options.values()]})
    return {"content": content}


@dataclass
class VLLMStage:
    """PAE's rubric scores as a Ray evaluator on Ray Data's vLLM stage: its judge (the task and the records; its
    backend names the model and the adapter), and vLLM engine arguments of the caller's (`engine_options`, e.g.
    `gpu_memory_utilization`) over PAE's."""

    judge: Judge
    engine_options: dict[str, Any] = field(default_factory=dict)
    random_weights = False
    repair = 0
    min_batch_size = 1
    default_batch_size = BATCH_SIZE

    @classmethod
    def of(cls, name: str, options: dict) -> "VLLMStage":
        """From `tpb score`'s evaluator options (`registry.JudgeOptions`), checked as the registry checks them."""
        from .registry import backend_of, evaluator_spec, pae_on

        given = {k: v for k, v in options.items() if v is not None and v is not False}
        if "scores" not in evaluator_spec(name).tasks:
            raise ValueError(f"Ray Data's vLLM stage asks the rubric's scores, which {name} does not answer: choose a "
                             "rubric judge (--evaluator pae), or another backend")
        backend_of(name, given)  # the backend's own refusals (--constrained, --device, a served judge's options)
        other = [k for k in given if k not in STAGE_OPTIONS]
        if other:
            raise ValueError(f"--{other[0].replace('_', '-')} does not apply to PAE on Ray Data's vLLM stage")
        backend = StageBackend(str(given.pop("model", DEFAULT_MODEL)), given.pop("adapter", None))
        return cls(pae_on(backend, explain=given.pop("explain", None), readout=given.pop("readout", "decode"),
                          name=name, **given))

    # what a resume and the summary ask of an evaluator
    @property
    def name(self) -> str:
        return self.judge.name

    @property
    def model_name(self) -> str:
        return self.judge.model_name

    def settings(self) -> dict[str, Any]:
        return self.judge.settings()

    def rubric_fingerprints(self) -> set[str]:
        return self.judge.rubric_fingerprints()

    @property
    def backend(self) -> StageBackend:
        return self.judge.backend

    def config(self, workers: int, worker_gpus: float, batch_size: int | None = None):
        """The stage's configuration (`ray.data.llm.vLLMEngineProcessorConfig`): `workers` replicas of
        `worker_gpus` GPUs each, the adapter enabled for LoRA requests, every row's failure kept to its row."""
        from ray.data.llm import PrepareMultimodalStageConfig, vLLMEngineProcessorConfig

        backend = self.backend
        kwargs = {k: v for k, v in engine_kwargs(backend.model, backend.adapter, MAX_NUM_SEQS).items() if k != "model"}
        return vLLMEngineProcessorConfig(
            model_source=backend.model,
            engine_kwargs={**kwargs, "tensor_parallel_size": max(1, int(worker_gpus)), **self.engine_options},
            batch_size=batch_size or BATCH_SIZE, concurrency=workers, should_continue_on_error=True,
            prepare_multimodal_stage=PrepareMultimodalStageConfig(enabled=True), log_engine_metrics=False)

    def request(self, row: dict, root: str | None = None, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> dict:
        """A row's request, in the stage's columns (`messages`, `sampling_params`, `model` for the LoRA): the image
        bytes are dropped from the row, which carries the rest (the ids and the poem) through to `record`. The stage
        takes every row, so an image that cannot be read goes through as a one-token text request and comes out as
        the failed record it is. A path-only image must lie inside `root` (the dataset's folder or the images
        folder)."""
        item = row_item(row, root or "", max_image_pixels).load()
        lora = {"model": self.backend.adapter} if self.backend.adapter else {}  # every row: Arrow fills a missing one
        if item.image is None:
            return {"image": None, "input_error": item.error, "messages": STAND_IN,
                    "sampling_params": {"temperature": 0.0, "max_tokens": 1}, **lora}
        [question] = self.judge.task.questions(item, self.judge)
        params = sampling_kwargs(question)
        if "structured_outputs" in params:  # the schema as JSON text: a nested schema does not survive Arrow's columns
            params["structured_outputs"] = {"json": json.dumps(params["structured_outputs"]["json"])}
        if question.anchors is not None:
            params["logprobs"] = TOP_LOGPROBS
        return {"image": None, "input_error": "", "messages": pil_parts(question.messages), "sampling_params": params,
                **lora}

    def record(self, row: dict) -> dict:
        """The record of a row the stage answered (or failed on), as `image_id` and `record` (its JSON)."""
        judge = self.judge
        item = ScoringItem(row["image_id"], None, row_poem(row))
        if row.get("input_error"):
            result = judge.result(item, {}, None, None, "failed", row["input_error"], kind="input")
        else:
            question = judge.task.question(judge.rubric_for(item), [], judge.max_new_tokens)
            error = row.get("__inference_error__") or None
            answer = (Answer(error=f"the vLLM engine failed on this image: {error}", error_kind="model") if error else
                      Answer(str(row["generated_text"]), logprobs=stage_logprobs(row.get("generated_tokens"),
                                                                                 row.get("logprobs"))))
            result = judge.task.record(judge, item, [Attempt(question, answer, None if error else
                                                             judge.task.read(question, answer))])
            result.seconds = round(max(0.0, float(row.get("time_taken_llm") or 0.0)), 4)
        return {"image_id": item.image_id, "record": json.dumps(result.to_json(), ensure_ascii=False)}

    def dataset(self, rows, engine, batch_size: int | None, source=None):
        """The records of `rows` (of `source`): Ray Data's vLLM processor between `request` and `record`."""
        from ray.data.llm import build_processor

        where = {} if source is None else {"root": getattr(source, "dataset", None) or source.root,
                                           "max_image_pixels": source.max_image_pixels}
        processor = build_processor(self.config(engine.workers, engine.worker_gpus, batch_size),
                                    preprocess=functools.partial(self.request, **where))
        return processor(rows).map(self.record)

