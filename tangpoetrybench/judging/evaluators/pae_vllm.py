"""PAE on vLLM (extra `vllm`; needs a GPU): `LLM.chat` with PIL image parts, structured output from the
rubric's JSON schema, the adapter through `LoRARequest`, and prefix caching so the shared rubric prefix
(the system message) is computed once. The pairwise judge (`pae_pairwise.PAEVLLMPairwise`) is this evaluator
in `PairwiseMode`: two images per prompt and the pairwise answer's schema. vLLM schedules its own batches, so it gets requests in chunks of at
least `MIN_CHUNK` (`tpb score` writes each chunk's results as soon as the chunk is done).

vLLM is imported only when this evaluator is built. The request-building functions below are plain
Python and are tested without vLLM.
"""

from __future__ import annotations

from typing import Sequence

from ..prompt import answer_schema, build_messages, with_image_parts
from ..readout import check_readout, readout_results, vllm_read
from ...rubric import Rubric
from .base import EvalResult, Evaluator, ScoringItem
from ...models import DEFAULT_MAX_PIXELS, model_label
from .pae import DEFAULT_MAX_NEW_TOKENS, DEFAULT_MODEL, PAE, answer_length

MAX_LORA_RANK = 64
MAX_MODEL_LEN = 8192
MIN_CHUNK = 256  # requests per LLM.chat call: enough to keep max_num_seqs (64) full until the chunk's tail


def pil_parts(messages: list[dict]) -> list[dict]:
    """Messages with their images as vLLM's `image_pil` parts."""
    return with_image_parts(messages, lambda image: {"type": "image_pil", "image_pil": image})


def engine_kwargs(model: str, adapter: str | None, max_num_seqs: int, seed: int = 0, images: int = 1) -> dict:
    """Arguments of `vllm.LLM` for scoring (`images` per prompt: 2 for the pairwise judge)."""
    kwargs = dict(model=model, enable_prefix_caching=True, limit_mm_per_prompt={"image": images},
                  max_num_seqs=max_num_seqs, max_model_len=MAX_MODEL_LEN, seed=seed)
    if adapter:
        kwargs.update(enable_lora=True, max_lora_rank=MAX_LORA_RANK, max_loras=1)
    return kwargs


def sampling_kwargs(schema: dict, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> dict:
    """Arguments of `vllm.SamplingParams`: greedy, the answer constrained to a JSON schema (`prompt.answer_schema`
    for a rubric, `prompt.pair_answer_schema` for the pairwise answer)."""
    return dict(temperature=0.0, max_tokens=max_new_tokens, structured_outputs={"json": schema})


def sampling_params(schema: dict, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS):
    """`vllm.SamplingParams` from `sampling_kwargs` (imports vLLM)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kwargs = sampling_kwargs(schema, max_new_tokens)
    kwargs["structured_outputs"] = StructuredOutputsParams(**kwargs["structured_outputs"])
    return SamplingParams(**kwargs)


class PAEVLLM(PAE):
    backend = "vllm"
    min_batch_size = MIN_CHUNK
    _model_attributes = ("llm",)
    worker_start_method = "spawn"  # vLLM's engine runs threads in this process: never fork it
    images = 1  # per prompt

    def __init__(self, model: str = DEFAULT_MODEL, adapter: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_new_tokens: int | None = None, max_num_seqs: int = 64, rubric: Rubric | str | None = None,
                 explain: str | None = None, readout: str = "decode"):
        try:
            from vllm import LLM
            from vllm.lora.request import LoRARequest
        except ImportError as exc:
            raise ImportError("the vLLM backend needs `pip install 'tangpoetrybench[vllm]'` and a GPU") from exc
        Evaluator.__init__(self, rubric)
        self.readout = check_readout(readout)
        self.llm = LLM(**engine_kwargs(model, adapter, max_num_seqs, images=self.images))
        self.lora = LoRARequest("pae", 1, adapter) if adapter else None
        self.model_name = model_label(model, adapter)
        self.max_pixels = max_pixels
        self.max_new_tokens = answer_length(max_new_tokens, explain)
        self.explain = explain

    def _prepare(self, items: Sequence[ScoringItem]) -> list[list[dict]]:
        return [pil_parts(self.messages(it)) for it in items]

    def answer_schema(self, rubric: Rubric) -> dict:
        return answer_schema(rubric, bool(self.explain))

    def _run(self, inputs: list[list[dict]], items: Sequence[ScoringItem]) -> list[EvalResult]:
        rubrics = [self.rubric_for(it) for it in items]
        if self.readout == "expected":
            return self._read(inputs, items, rubrics)
        params = {r.fingerprint: sampling_params(self.answer_schema(r), self.max_new_tokens) for r in rubrics}
        outputs = self.llm.chat(inputs, sampling_params=[params[r.fingerprint] for r in rubrics],
                                lora_request=self.lora, use_tqdm=False)
        return [self.answer_result(it, out.outputs[0].text) for it, out in zip(items, outputs)]

    def _read(self, inputs: list[list[dict]], items: Sequence[ScoringItem], rubrics: list[Rubric]) -> list[EvalResult]:
        """The probability readout (`readout.vllm_read`), each rubric's items together."""
        tokenizer = self.llm.get_tokenizer()
        prompts = [(tokenizer.apply_chat_template(build_messages(it.poem, rubric), tokenize=False,  # image placeholder
                                                  add_generation_prompt=True),
                    next(p["image_pil"] for m in messages for p in m["content"] if p.get("type") == "image_pil"))
                   for it, rubric, messages in zip(items, rubrics, inputs)]
        return readout_results(self, items, lambda rows, rubric: vllm_read(
            self.llm, tokenizer, [prompts[i] for i in rows], rubric, self.lora))
