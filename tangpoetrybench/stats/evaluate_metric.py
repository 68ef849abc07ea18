"""The scoring configurations of the `evaluate` module (`metric/pae`): they run models, so they need this package.
The module's agreement configuration needs only the statistics it carries with it (see `publish.py`).

- scoring (`config_name` any evaluator of the registry that `tpb score` runs — pae, clipscore, blipscore, vqascore,
  a plugin's ...): `compute(images=..., poems=...)`, poems as {"title", "author", "text"} → per-image scores,
  quality, parse status and raw answers.
"""

from __future__ import annotations

from ..judging.evaluators import Evaluator, load_evaluator
from ..judging.registry import evaluator_spec
from ..rubric import load_rubric


def compute_scores(evaluator: Evaluator, images, poems, batch_size: int = 8) -> dict:
    results = evaluator(images, poems, batch_size=batch_size)
    return {
        "scores": [r.scores for r in results],
        "quality": [r.quality for r in results],
        "parse_status": [r.parse_status for r in results],
        "raw_output": [r.raw_output for r in results],
        "error": [r.error for r in results],
        "random_weights": evaluator.random_weights,
    }


def build_evaluator(config_name: str, model: str | None, adapter: str | None, backend: str, device: str | None,
                    rubric: str) -> Evaluator:
    """The model of a scoring configuration, loaded once per module instance: the options given that the evaluator
    takes (the module's defaults, such as its rubric, go only where they apply)."""
    takes = evaluator_spec(config_name).options
    given = {"model": model, "adapter": adapter, "backend": backend, "device": device, "rubric": rubric}
    if "rubric" in takes:
        given["rubric"] = load_rubric(rubric)  # a bundled rubric by name, or a rubric file
    return load_evaluator(config_name, **{k: v for k, v in given.items() if v is not None and k in takes})
