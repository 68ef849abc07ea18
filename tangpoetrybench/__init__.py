"""TangPoetryBench: a benchmark and rubric-conditioned evaluator for illustrations of classical Chinese poetry."""

__version__ = "0.1.0"

from .errors import DataError, Problem  # noqa: E402
from .rubric import Rubric, load_rubric  # noqa: E402

__all__ = ["DataError", "Problem", "Rubric", "load_rubric", "__version__"]
