"""What the agreement statistics need of each bundled rubric, by name (the fields of `RubricScale`).

The evaluate module `metric/pae` reads it from here in a checkout; `tpb publish` writes the same dict into the
published module's folder as `rubrics.py`, so the published module needs nothing of this package."""

from __future__ import annotations

from dataclasses import asdict

from ..rubric import BUILTIN, rubric_for_tradition
from .agreement import RubricScale

SCALES = {name: asdict(RubricScale.of(rubric_for_tradition(name))) for name in BUILTIN}
