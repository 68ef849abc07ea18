"""GRPO rewards (paper, Appendix G): score accuracy, weighted 1.0, and answer format, weighted 0.2.

TRL calls each with the batch's `completions` (conversational: a list of messages per completion) and
every dataset column as a keyword argument; here `targets` (the human scores in rubric order, None where
not applicable) and `tradition` (which bundled rubric, where no `rubric` is bound with `for_rubric`: the dataset's)."""

from __future__ import annotations

import functools

from tangpoetrybench.judging.reading import parse_answer, parse_pair_answer
from tangpoetrybench.rubric import DEFAULT_TRADITION, Rubric, rubric_for_tradition

REWARD_WEIGHTS = (1.0, 0.2)  # accuracy, format


def completion_text(completion) -> str:
    if isinstance(completion, str):
        return completion
    return "".join(m["content"] if isinstance(m["content"], str) else
                   "".join(part.get("text", "") for part in m["content"]) for m in completion)


def for_rubric(reward, rubric: Rubric):
    """`reward` under `rubric` (a dataset's own), keeping its name, which TRL logs."""
    return functools.update_wrapper(functools.partial(reward, rubric=rubric), reward)


def _rubric(rubric: Rubric | None, tradition, i: int) -> Rubric:
    return rubric or rubric_for_tradition(tradition[i] if tradition else DEFAULT_TRADITION)


def accuracy_reward(completions, targets, tradition=None, rubric: Rubric | None = None, **kwargs) -> list[float]:
    """1 − mean |predicted − human| over the dimensions a human rated; a dimension the answer leaves null (where the
    rubric lets it be excluded) counts as the largest error (1); an answer that does not read (docs/reading.md: a
    null where the dimension always applies is one) gets 0."""
    rewards = []
    for i, (completion, target) in enumerate(zip(completions, targets)):
        rubric_i = _rubric(rubric, tradition, i)
        parsed = parse_answer(completion_text(completion), rubric_i)
        rated = [(k, t) for k, t in zip(rubric_i.keys, target) if t is not None]
        if parsed.status == "failed" or not rated:
            rewards.append(0.0)
            continue
        errors = [1.0 if parsed.scores[k] is None else abs(parsed.scores[k] - t) for k, t in rated]
        rewards.append(1.0 - sum(errors) / len(errors))
    return rewards


def format_reward(completions, tradition=None, rubric: Rubric | None = None, **kwargs) -> list[float]:
    """1 when the parser reads the answer as `ok` — one JSON object with exactly the rubric's keys, each a number in
    [0, 1] or null where the dimension can be excluded, and nothing around it — else 0."""
    return [1.0 if parse_answer(completion_text(c), _rubric(rubric, tradition, i)).status == "ok" else 0.0
            for i, c in enumerate(completions)]


def winner_reward(completions, winner, **kwargs) -> list[float]:
    """Pairwise: 1 when the answer names the human winner ("A" or "B"), else 0 (also for an answer that does not
    parse)."""
    return [1.0 if parse_pair_answer(completion_text(c)).winner == w else 0.0 for c, w in zip(completions, winner)]


def pair_format_reward(completions, **kwargs) -> list[float]:
    """Pairwise: 1 when the parser reads the answer as `ok` — exactly {"winner": "A" or "B", "reason": text}."""
    return [1.0 if parse_pair_answer(completion_text(c)).status == "ok" else 0.0 for c in completions]
