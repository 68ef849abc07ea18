"""The vLLM backend (extra `vllm`, its own environment, a GPU): `LLM.chat` with PIL image parts, the question's JSON
schema as structured output (so every answer is in form), the adapter through `LoRARequest`, and prefix caching so
the shared system message is computed once. vLLM schedules its own batches, so it wants questions in chunks of at
least `MIN_CHUNK` (`tpb score` writes each chunk's results as soon as the chunk is done).

vLLM is imported only when the backend is built (and `sampling_params` when a request is made); the request-building
functions below are plain Python, tested without vLLM (`tests/test_vllm_backend.py` checks them against the real
library in vLLM's environment).
"""

from __future__ import annotations

from typing import Any, Sequence

from ...models import model_label, trained_rubric
from ..prompt import with_image_parts
from ..readout import vllm_read
from . import Answer, Backend, Question
from .transformers import DEFAULT_MODEL

MAX_LORA_RANK = 64
MAX_MODEL_LEN = 8192
MIN_CHUNK = 256  # requests per LLM.chat call: enough to keep max_num_seqs (64) full until the chunk's tail
TOP_LOGPROBS = 20


def pil_parts(messages: list[dict]) -> list[dict]:
    """Messages with their images as vLLM's `image_pil` parts."""
    return with_image_parts(messages, lambda image: {"type": "image_pil", "image_pil": image})


def engine_kwargs(model: str, adapter: str | None, max_num_seqs: int, seed: int = 0, images: int = 1) -> dict:
    """Arguments of `vllm.LLM` (`images` per prompt: 2 for a pairwise question)."""
    kwargs = dict(model=model, enable_prefix_caching=True, limit_mm_per_prompt={"image": images},
                  max_num_seqs=max_num_seqs, max_model_len=MAX_MODEL_LEN, seed=seed)
    if adapter:
        kwargs.update(enable_lora=True, max_lora_rank=MAX_LORA_RANK, max_loras=1)
    return kwargs


def sampling_kwargs(question: Question) -> dict:
    """Arguments of `vllm.SamplingParams` for a question: greedy; its answer held to its JSON schema, or to one of its
    choices (one token, with log-probabilities)."""
    if question.choices is not None:
        return dict(temperature=0.0, max_tokens=1, logprobs=TOP_LOGPROBS,
                    structured_outputs={"choice": list(question.choices)})
    kwargs: dict[str, Any] = dict(temperature=0.0, max_tokens=question.max_new_tokens)
    if question.schema is not None:
        kwargs["structured_outputs"] = {"json": question.schema}
    return kwargs


def sampling_params(question: Question):
    """`vllm.SamplingParams` from `sampling_kwargs` (imports vLLM)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kwargs = sampling_kwargs(question)
    if "structured_outputs" in kwargs:
        kwargs["structured_outputs"] = StructuredOutputsParams(**kwargs["structured_outputs"])
    return SamplingParams(**kwargs)


def choice_probs(logprobs: dict[str, float], choices: Sequence[str]) -> list[float] | None:
    """The choices' probabilities, renormalised over the choices, from log-probabilities by token text (a choice
    missing from a top-k list counts as 0); None when no choice is there."""
    import math

    best: dict[str, float] = {}
    for token, logprob in logprobs.items():
        if token.strip() in choices:
            best[token.strip()] = max(best.get(token.strip(), float("-inf")), logprob)
    if not best:
        return None
    top = max(best.values())
    weights = [math.exp(best[c] - top) if c in best else 0.0 for c in choices]
    return [round(w / sum(weights), 6) for w in weights]


class VLLMBackend(Backend):
    name = "vllm"
    constrains = False  # vLLM holds answers to the question's schema itself (structured output)
    reads_choices = "logprobs"  # one token held to the choices, with its log-probabilities
    one_process = True  # vLLM uses the GPUs it is given itself
    ray_stage = "tangpoetrybench.judging.ray_vllm:VLLMStage"  # Ray Data's own vLLM engine stage
    min_batch_size = MIN_CHUNK
    device = None  # vLLM places the model itself
    worker_start_method = "spawn"  # vLLM's engine runs threads in this process: never fork it

    def __init__(self, model: str = DEFAULT_MODEL, adapter: str | None = None, max_num_seqs: int = 64,
                 images_per_prompt: int = 1):
        try:
            from vllm import LLM
            from vllm.lora.request import LoRARequest
        except ImportError as exc:
            raise ImportError("the vLLM backend needs `pip install 'tangpoetrybench[vllm]'` and a GPU") from exc
        self.llm = LLM(**engine_kwargs(model, adapter, max_num_seqs, images=images_per_prompt))
        self.lora = LoRARequest("pae", 1, adapter) if adapter else None
        self.model_name = model_label(model, adapter)
        self.random_weights = False
        self.adapter_rubric = trained_rubric(adapter)  # the rubric the adapter was trained on, where it says

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "llm"}

    def settings(self) -> dict[str, Any]:
        return {"adapter_rubric": self.adapter_rubric} if self.adapter_rubric else {}

    def prepare(self, questions: Sequence[Question]) -> list[list[dict]]:
        return [pil_parts(q.messages) for q in questions]

    def answer(self, prepared: list[list[dict]], questions: Sequence[Question]) -> list[Answer]:
        answers: dict[int, Answer] = {}
        reads = [i for i, q in enumerate(questions) if q.anchors is not None]
        for fingerprint in dict.fromkeys(questions[i].anchors.fingerprint for i in reads):
            rows = [i for i in reads if questions[i].anchors.fingerprint == fingerprint]
            found = vllm_read(self.llm, self.llm.get_tokenizer(), [readout_prompt(self.llm, prepared[i]) for i in rows],
                              questions[rows[0]].anchors, self.lora)
            answers.update((i, Answer(r.answer, readout=r)) for i, r in zip(rows, found))
        asked = [i for i in range(len(questions)) if i not in answers]
        if asked:
            outputs = self.llm.chat([prepared[i] for i in asked],
                                    sampling_params=[sampling_params(questions[i]) for i in asked],
                                    lora_request=self.lora, use_tqdm=False)
            for i, out in zip(asked, outputs):
                choices = questions[i].choices
                probs = None
                if choices is not None:
                    first = (out.outputs[0].logprobs or [{}])[0]
                    probs = choice_probs({lp.decoded_token: lp.logprob for lp in first.values() if lp.decoded_token},
                                         choices)
                answers[i] = Answer(out.outputs[0].text, probs=probs)
        return [answers[i] for i in range(len(questions))]


def readout_prompt(llm, messages: list[dict]) -> tuple[str, Any]:
    """(chat prompt text with the image placeholder, the image) of a question, for `readout.vllm_read`."""
    image = next(p["image_pil"] for m in messages for p in m["content"] if p.get("type") == "image_pil")
    bare = [{**m, "content": [{"type": "image"} if p.get("type") == "image_pil" else p for p in m["content"]]}
            for m in messages]
    return llm.get_tokenizer().apply_chat_template(bare, tokenize=False, add_generation_prompt=True), image
