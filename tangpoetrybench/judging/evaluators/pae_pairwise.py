"""PAE asked which of two illustrations is better (`tpb compare --evaluator pae`): the pointwise PAE's model, batching,
per-item failure handling and constrained decoding, with the pairwise prompt (`prompt.build_pair_messages`), the
pairwise reader (`reading.parse_pair_answer`) and the pairwise constraint (`constrained.PairAnswerConstraint`).

`PairwiseMode` is what turns an evaluator of the PAE family into a pairwise judge (`pairwise.PairwiseJudge`): each
ordered question is a `PairScoringItem` (image A as the item's image, image B beside it), scored by the evaluator's
own `score`, and each result read back as a `pairwise.PairAnswer`. The api judge is the same mode over `APIJudge`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from PIL import Image

from ..constrained import PairAnswerConstraint
from ..pairwise import PairAnswer, PairItem
from ..prompt import build_pair_messages, pair_answer_schema
from ..reading import VERSIONS, parse_pair_answer
from ...models import fit_pixels
from ...rubric import Rubric
from .base import EvalResult, ScoringItem
from .pae import PAE
from .pae_vllm import PAEVLLM


@dataclass
class PairScoringItem(ScoringItem):
    """One ordered pairwise question as a scoring item: `image` is A (shown first), `image_b` is B."""

    image_b: Image.Image | None = None


class PairwiseMode:
    """Mixed in before an evaluator of the PAE family: the same machinery, asked the pairwise question."""

    task = "pairwise"

    def settings(self) -> dict[str, Any]:
        settings = {**super().settings(), "task": self.task, "parser": VERSIONS["winner"]}
        settings["rubric"] = sorted(self.rubric_fingerprints())
        return settings

    def messages(self, item: PairScoringItem) -> list[dict]:
        return build_pair_messages(item.poem, self.rubric_for(item), fit_pixels(item.image, self.max_pixels),
                                   fit_pixels(item.image_b, self.max_pixels))

    def answer_result(self, item: ScoringItem, answer: str) -> EvalResult:
        parsed = parse_pair_answer(answer)
        result = self.result(item, {}, None, answer, parsed.status, parsed.error)
        result.evidence = {"winner": parsed.winner, "reason": parsed.reason}  # read back by `pair_answer`
        return result

    def judge(self, items: list[PairItem]) -> list[PairAnswer]:
        """One answer per ordered question, in order; a failure of one question is its own failed answer."""
        scoring = [PairScoringItem(f"{i}:{it.pair_id}", it.image_a.convert("RGB"), it.poem, image_b=it.image_b.convert("RGB"))
                   for i, it in enumerate(items)]
        return [pair_answer(r) for r in self.score(scoring)]  # the compare machinery sizes the batch


def pair_answer(result: EvalResult) -> PairAnswer:
    """A scored pairwise item as the compare machinery's answer: the winner and reason `answer_result` read, which
    after a repair round are the repair's (the raw output stays the first answer)."""
    parsed = result.evidence or {}
    usage = result.usage
    # what a served judge's answer was constrained to, where it says (see `APIJudge._record`)
    extra = {k: result.settings[k] for k in ("response_format", "served_model") if k in result.settings}
    if parsed.get("winner") is None:
        return PairAnswer(None, result.raw_output, "failed", result.error, usage=usage, extra=extra,
                          error_kind=result.error_kind or "parse")
    return PairAnswer(parsed["winner"], result.raw_output, result.parse_status, result.error, parsed["reason"], usage,
                      extra)


class PAEPairwise(PairwiseMode, PAE):
    """PAE (transformers) as a pairwise judge. With `constrained`, every answer is in the pairwise form."""

    def __init__(self, **options):
        super().__init__(**options)
        if self.constrained:  # an answer budget too small for the form is an error now, not a failure per pair
            self.constraint([], 0, [])

    def constraint(self, rubrics: Sequence[Rubric], prompt_length: int, eos: list[int]):
        return PairAnswerConstraint(self.processor.tokenizer, prompt_length, eos, self.max_new_tokens)


class PAEVLLMPairwise(PairwiseMode, PAEVLLM):
    """PAE on vLLM as a pairwise judge: both images in one prompt, the answer held to the pairwise schema by vLLM's
    structured output (so always in form)."""

    images = 2

    def answer_schema(self, rubric: Rubric) -> dict:
        return pair_answer_schema()


def pae_pairwise_judge(backend: str = "transformers", **options) -> PAE:
    """The registry's `pae` pairwise judge (`pairwise.load_pairwise_judge("pae", model=..., adapter=...)`): on
    transformers, or on vLLM (always constrained: its structured output holds the answer to the pairwise schema)."""
    if backend == "vllm":
        options.pop("constrained", None)
        return PAEVLLMPairwise(**options)
    if backend != "transformers":
        raise ValueError(f"unknown backend {backend!r} for the pairwise PAE judge (transformers or vllm)")
    return PAEPairwise(**options)
