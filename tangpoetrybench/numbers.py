"""Small number helpers shared by the aggregation, the evaluators, the agreement table, the report and the
model card: a mean that skips nulls, and numbers as the tables print them."""

from __future__ import annotations

import math
from typing import Iterable, Sequence


def mean_or_none(values: Iterable[float | None]) -> float | None:
    """The mean of the non-null values; None when there are none."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def fmt(value: float | None, digits: int = 3) -> str:
    """A number with `digits` decimals; "—" for a null or non-finite one."""
    return "—" if value is None or not math.isfinite(float(value)) else f"{value:.{digits}f}"


def fmt_ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    """An interval as "[low, high]"; "—" when there is none."""
    return "—" if not ci else f"[{ci[0]:.{digits}f}, {ci[1]:.{digits}f}]"
