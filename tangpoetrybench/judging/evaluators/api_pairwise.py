"""A served or hosted model asked which of two illustrations is better (`tpb compare --evaluator api`): `APIJudge`'s
requests, retries and key handling, with the pairwise question, and the pairwise answer's JSON schema as the
response format (a server that refuses it is asked without, once, as for scoring)."""

from __future__ import annotations

from ..prompt import pair_answer_schema
from .api import APIJudge, json_format
from .base import ScoringItem
from .pae_pairwise import PairwiseMode


class APIPairwise(PairwiseMode, APIJudge):
    def response_format(self, item: ScoringItem) -> dict:
        return json_format("pae_pair_answer", pair_answer_schema())
