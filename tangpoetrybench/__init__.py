"""TangPoetryBench: a benchmark and rubric-conditioned evaluator for illustrations of classical Chinese poetry.

The public API, for users who need not know the layout:

    >>> from tangpoetrybench import load_evaluator, score, agree
    >>> pae = load_evaluator("pae", adapter="path/to/adapter")
    >>> score(pae, "scores.jsonl", dataset="path/to/dataset")
    >>> agree("path/to/dataset", "scores.jsonl")["agreement"]["quality"]

The package is laid out as the pipeline, each room importing only from those before it: the core modules here
(rubric, poems, errors, numeric, files, fonts, models) → `dataset` → `annotation` → `generation` → `judging` →
`stats` → `reporting` → `hub`, with the command line (`cli`, or `python -m tangpoetrybench`) and the reward (`reward`:
PAE as a reinforcement-learning reward for image generators) on top. Names are imported on first use, so
`import tangpoetrybench` stays fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Public name → the module that defines it.
_API = {
    "DataError": "errors", "Problem": "errors",
    "Rubric": "rubric", "load_rubric": "rubric", "rubric_for_tradition": "rubric",
    "Poem": "poems", "read_poems": "poems",
    "build_dataset": "dataset.builder",
    "parse_answer": "judging.reading", "system_prompt": "judging.prompt", "user_prompt": "judging.prompt",
    "load_evaluator": "judging.evaluators", "EvalResult": "judging.evaluators.base",
    "score": "judging.scoring", "score_to_jsonl": "judging.scoring", "RayEngine": "judging.ray_scoring",
    "AgreementData": "stats.agreement", "agreement": "stats.agreement",
    "RatingTable": "stats.noise_floor", "noise_floor": "stats.noise_floor",
    "agree": "stats.agree", "rating_table": "stats.agree",
    "build_report": "reporting.report", "write_report": "reporting.report",
    "build_leaderboard": "reporting.leaderboard", "write_leaderboard": "reporting.leaderboard",
    "publish": "hub.publish",
}

__all__ = [  # every name of _API
    "__version__", "DataError", "Problem", "Rubric", "load_rubric", "rubric_for_tradition", "Poem", "read_poems",
    "build_dataset", "parse_answer", "system_prompt", "user_prompt", "load_evaluator", "EvalResult", "score",
    "score_to_jsonl", "RayEngine", "AgreementData", "agreement", "RatingTable", "noise_floor", "agree", "rating_table",
    "build_report", "write_report", "build_leaderboard", "write_leaderboard", "publish",
]


def __getattr__(name: str):
    if name not in _API:
        raise AttributeError(f"module 'tangpoetrybench' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_API[name]}", __name__), name)
    globals()[name] = value  # the next look-up is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_API))


if TYPE_CHECKING:  # for type checkers and editors; at run time the names load on first use
    from .dataset.builder import build_dataset
    from .errors import DataError, Problem
    from .hub.publish import publish
    from .judging.evaluators import load_evaluator
    from .judging.evaluators.base import EvalResult
    from .judging.reading import parse_answer
    from .judging.prompt import system_prompt, user_prompt
    from .judging.ray_scoring import RayEngine
    from .judging.scoring import score, score_to_jsonl
    from .poems import Poem, read_poems
    from .reporting.leaderboard import build_leaderboard, write_leaderboard
    from .reporting.report import build_report, write_report
    from .rubric import Rubric, load_rubric, rubric_for_tradition
    from .stats.agree import agree, rating_table
    from .stats.agreement import AgreementData, agreement
    from .stats.noise_floor import RatingTable, noise_floor
