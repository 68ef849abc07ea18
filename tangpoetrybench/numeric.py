"""Small number helpers shared by the aggregation, the parser, the agreement statistics, the report and the
model card: means that skip nulls, numbers as the tables print them, and the statistics' defaults (here, so that the
command line's options read them without loading scipy). Standard library only: the published `evaluate` module
carries this file as it is."""

from __future__ import annotations

import math
from typing import Iterable, Sequence

DEFAULT_BOOTSTRAP = 10_000  # resamples of poems for a 95 % interval
DEFAULT_MARGIN = 0.05  # a human pair's two images differ in human quality by at least this (one twentieth)


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """The mean of the non-null values; None when there are none."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def whole_mean(values: Sequence[float | None], required: Sequence[bool]) -> float | None:
    """The mean of the non-null values, or None unless every required value is present: a partial answer's mean
    is not comparable with a whole one's. (An evaluator's quality: `required` marks the dimensions that always
    apply.)"""
    if any(v is None for v, needed in zip(values, required) if needed):
        return None
    return mean_or_none(values)


def fmt(value: float | None, digits: int = 3) -> str:
    """A number with `digits` decimals; "—" for a null or non-finite one."""
    return "—" if value is None or not math.isfinite(float(value)) else f"{value:.{digits}f}"


def fmt_ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    """An interval as "[low, high]"; "—" when there is none."""
    return "—" if not ci else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """"1 poem", "2 poems", "1 (poem, rater) case": the noun in the number's form."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


ZERO_WIDTH = "‡"
ZERO_WIDTH_NOTE = ("‡ Every resample gave the same value (for instance every image at 100): an interval of zero width "
                   "says nothing about uncertainty.")


def fmt_interval(ci: Sequence[float] | None, digits: int = 3, scale: float = 1.0) -> str:
    """An interval for a report table: "[low, high]" (times `scale`), "‡" where it has zero width (see
    ZERO_WIDTH_NOTE), "—" when there is none."""
    if not ci:
        return "—"
    if ci[0] == ci[1]:
        return ZERO_WIDTH
    return fmt_ci([scale * ci[0], scale * ci[1]], digits)
