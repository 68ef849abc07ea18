"""Selective judging's threshold as a calibration file holds it, the rule that says whether the judge keeps a score
(`keeps`: the one place), and the options that ask for one (`tpb calibrate --epsilon`). Fitting lives in
`stats.selective`; this module is light, so that the command line's parser and the reward read it without the
statistics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

ABSTAIN_TARGETS = ("mae", "pairwise")  # the error a threshold bounds: of quality scores, or of pairwise orders
DEFAULT_DELTA = 0.1
SPREAD_SLACK = 1e-9  # float slack where a spread is compared with the threshold
GRID: tuple[float | None, ...] = (*(round(0.01 * 2 ** (k / 2), 6) for k in range(13)), None)
"""The thresholds on the spread that `stats.selective` tries, fixed before any data are seen (None: every score),
written into the calibration file with the method."""
METHOD = "learn-then-test: Hoeffding-Bentkus p-values over poems, Bonferroni over the grid"
EPSILON_STEP = 1e-3  # the smallest ε certified is found to a thousandth
ABSTAIN_SETTING = "abstain"
"""The setting (true) of results scored with `tpb score --calibration FILE --abstain`: each record with a quality says
in its `calibrated` block whether the judge abstained on it (`records.EvalResult`), and a resume with or without
--abstain is refused like any other setting."""


@dataclass
class SelectiveOptions:
    """`tpb calibrate`'s options for selective judging, declared once (the command line's from these fields)."""

    epsilon: float | None = field(default=None, metadata={
        "help": "fit the threshold on the readout's spread beyond which the judge abstains, so that the error of the "
                "scores it keeps on a new poem (see --abstain-on) is at most this, with probability at least 1 − δ "
                "(refused, with the smallest it can, where the calibration poems cannot certify it)",
        "metavar": "ε", "type": float})
    delta: float = field(default=DEFAULT_DELTA, metadata={
        "help": "with --epsilon: the chance that the threshold misses ε (over the draw of calibration poems)",
        "metavar": "δ"})
    abstain_on: str = field(default="mae", metadata={
        "help": "with --epsilon: the error bounded: mae (of quality) or pairwise (wrong orders)",
        "choices": ABSTAIN_TARGETS})

    def check(self) -> None:
        for name in ("epsilon", "delta"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise ValueError(f"--{name} must lie strictly between 0 and 1, not {value}")
        if self.abstain_on not in ABSTAIN_TARGETS:
            raise ValueError(f"--abstain-on must be one of {', '.join(ABSTAIN_TARGETS)}, not {self.abstain_on!r}")


@dataclass
class Abstention:
    """A selective-judging threshold (`tpb calibrate --epsilon E --delta D`, fitted in `stats.selective`): the judge
    keeps a quality score whose readout spread (`quality_sd`) is at most `max_spread` (None: every score) and
    abstains on the rest. With probability at least 1 − δ over the calibration poems, on a new poem on which it keeps
    a score the expected error of its kept scores (`target`: their mean |human − score|, or the share of wrong
    orders among its pairs of kept images) is at most ε (docs/calibration.md)."""

    target: str  # one of ABSTAIN_TARGETS
    epsilon: float
    delta: float
    max_spread: float | None  # the chosen threshold, one of `grid`
    method: str
    grid: list[float | None]  # the thresholds tested, fixed before the data were seen (None: every score)
    p_value: float  # the chosen threshold's
    risk: float  # its error on the calibration poems, each poem weighing one
    n_poems: int  # the calibration poems with something kept there: the p-value's n
    kept: float  # the share of the calibration images kept there
    smallest_epsilon: float  # the smallest ε (to a thousandth) these poems certify at δ

    def keeps(self, spread: Any) -> Any:
        return keeps(spread, self.max_spread)


def keeps(spread: Any, max_spread: float | None) -> Any:
    """The abstention rule: whether scores with these spreads (a number, None, or an array with NaN for none) are
    kept under the threshold `max_spread` — a spread at most it; without a spread, only where every score is kept
    (`max_spread` None)."""
    if max_spread is None:
        return np.ones(np.shape(spread), dtype=bool) if np.ndim(spread) else True
    values = np.asarray(np.nan if spread is None else spread, dtype=float)
    with np.errstate(invalid="ignore"):
        kept = np.isfinite(values) & (values <= max_spread + SPREAD_SLACK)
    return kept if kept.ndim else bool(kept)
