"""PAE on vLLM (extra `vllm`; needs a GPU): `LLM.chat` with PIL image parts, structured output from the
rubric's JSON schema, the adapter through `LoRARequest`, and prefix caching so the shared rubric prefix
(the system message) is computed once.

vLLM is imported only when this evaluator is built. The request-building functions below are plain
Python and are tested without vLLM.
"""

from __future__ import annotations

from typing import Sequence

from ..parsing import parse_answer
from ..prompt import answer_schema, build_messages
from ..rubric import Rubric
from ..numbers import mean_or_none
from .base import EvalResult, Evaluator, ScoringItem
from .loading import DEFAULT_MAX_PIXELS, fit_pixels, model_label
from .pae import DEFAULT_MAX_NEW_TOKENS, DEFAULT_MODEL

MAX_LORA_RANK = 64
MAX_MODEL_LEN = 8192


def vllm_messages(item: ScoringItem, rubric: Rubric, max_pixels: int = DEFAULT_MAX_PIXELS) -> list[dict]:
    """The prompt builder's messages, with the image as vLLM's `image_pil` part."""
    messages = build_messages(item.poem, rubric, fit_pixels(item.image, max_pixels))
    for message in messages:
        message["content"] = [
            {"type": "image_pil", "image_pil": part["image"]} if part["type"] == "image" else part
            for part in message["content"]
        ]
    return messages


def engine_kwargs(model: str, adapter: str | None, max_num_seqs: int, seed: int = 0) -> dict:
    """Arguments of `vllm.LLM` for scoring."""
    kwargs = dict(model=model, enable_prefix_caching=True, limit_mm_per_prompt={"image": 1},
                  max_num_seqs=max_num_seqs, max_model_len=MAX_MODEL_LEN, seed=seed)
    if adapter:
        kwargs.update(enable_lora=True, max_lora_rank=MAX_LORA_RANK, max_loras=1)
    return kwargs


def sampling_kwargs(rubric: Rubric, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> dict:
    """Arguments of `vllm.SamplingParams`: greedy, answer constrained to the rubric's JSON schema."""
    return dict(temperature=0.0, max_tokens=max_new_tokens, structured_outputs={"json": answer_schema(rubric)})


def sampling_params(rubric: Rubric, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS):
    """`vllm.SamplingParams` from `sampling_kwargs` (imports vLLM)."""
    from vllm import SamplingParams
    from vllm.sampling_params import StructuredOutputsParams

    kwargs = sampling_kwargs(rubric, max_new_tokens)
    kwargs["structured_outputs"] = StructuredOutputsParams(**kwargs["structured_outputs"])
    return SamplingParams(**kwargs)


class PAEVLLM(Evaluator):
    name = "pae"

    def __init__(self, model: str = DEFAULT_MODEL, adapter: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, max_num_seqs: int = 64, rubric: Rubric | str | None = None):
        try:
            from vllm import LLM
            from vllm.lora.request import LoRARequest
        except ImportError as exc:
            raise ImportError("the vLLM backend needs `pip install 'tangpoetrybench[vllm]'` and a GPU") from exc
        super().__init__(rubric)
        self.llm = LLM(**engine_kwargs(model, adapter, max_num_seqs))
        self.lora = LoRARequest("pae", 1, adapter) if adapter else None
        self.model_name = model_label(model, adapter)
        self.max_pixels = max_pixels
        self.max_new_tokens = max_new_tokens

    def _score(self, items: Sequence[ScoringItem]) -> list[EvalResult]:
        rubrics = [self.rubric_for(it) for it in items]
        params = {r.name: sampling_params(r, self.max_new_tokens) for r in rubrics}
        outputs = self.llm.chat([vllm_messages(it, r, self.max_pixels) for it, r in zip(items, rubrics)],
                                sampling_params=[params[r.name] for r in rubrics], lora_request=self.lora,
                                use_tqdm=False)
        results = []
        for it, rubric, out in zip(items, rubrics, outputs):
            answer = out.outputs[0].text
            parsed = parse_answer(answer, rubric)
            results.append(self.result(it, parsed.scores, mean_or_none(parsed.scores.values()), answer,
                                       parsed.status, parsed.error))
        return results
