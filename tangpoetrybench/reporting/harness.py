"""What the lmms-eval task `tangpoetrybench` (harness/lmms_eval/tangpoetrybench/utils.py) computes, kept here so the
harness folder stays thin: its documents, its judge, and its metrics.

- Documents: one per poem of the dataset's split (`images` config: the main tradition's poems), with the human
  quality of each rated generator's image of it (`human`, JSON), so τ against people needs nothing but the document.
- The judge is chosen by environment variables, as lmms-eval's own judged tasks (WISE) choose theirs — lmms-eval
  0.7 has no per-task arguments on its command line: `TPB_JUDGE` (any evaluator `tpb score` runs; default pae)
  and one variable per option of the registry (`judging.registry.JudgeOptions`): `TPB_JUDGE_MODEL`,
  `TPB_JUDGE_ADAPTER`, `TPB_JUDGE_BACKEND`, `TPB_JUDGE_CONSTRAINED` (1: decode only answers in the rubric's form),
  `TPB_JUDGE_MAX_PIXELS`, `TPB_JUDGE_RUBRIC` (a rubric file, for a tradition that is not bundled), `TPB_JUDGE_BASE_URL`, `TPB_JUDGE_API_KEY_ENV`, ... They go to `load_evaluator` as
  `tpb score`'s options do; the judge loads once per process.
- Metrics: quality and every dimension of the judge's rubric (means over the images that have them, as
  `tpb leaderboard` averages; the bundled task file lists the default tradition's, `KEYS`), the images without a
  quality (failed answers: never a guess), and Kendall τ-b of the judge's image quality against the human quality
  of the same images, where people rated the generator.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from scipy import stats

from ..errors import ImageError
from ..files import open_image
from ..judging.evaluators import load_evaluator
from ..judging.registry import JudgeOptions
from ..judging.evaluators.base import Evaluator, ScoringItem, rgb_item
from ..poems import Poem
from ..rubric import DEFAULT_TRADITION, load_rubric, rubric_for_tradition

KEYS = tuple(load_rubric(DEFAULT_TRADITION).keys)  # the metrics harness/lmms_eval/tangpoetrybench/ lists
_judges: dict[tuple, Evaluator] = {}


def poem_docs(rows: Iterable[Mapping]) -> list[dict]:
    """One document per poem of the rows (images config), in poem order, with `human` the JSON of generator →
    the human quality of its image of the poem."""
    docs: dict[str, dict] = {}
    for r in rows:
        doc = docs.setdefault(r["poem_id"], {"poem_id": r["poem_id"], "title": r["title"], "author": r["author"],
                                             "text": r["poem"], "tradition": r["tradition"], "human": {}})
        if r["quality"] is not None:
            doc["human"][r["generator"]] = r["quality"]
    return [{**d, "human": json.dumps(d["human"], sort_keys=True)} for _, d in sorted(docs.items())]


def judge_options(environ: Mapping[str, str] = os.environ) -> tuple[str, dict]:
    """The judge's name and `load_evaluator` options from the environment: TPB_JUDGE_<OPTION> for each option."""
    name = environ.get("TPB_JUDGE", "pae")
    options: dict = {}
    for f in dataclasses.fields(JudgeOptions):
        value = environ.get(f"TPB_JUDGE_{f.name.upper()}", "")
        if not value:
            continue
        if f.metadata.get("flag"):
            options[f.name] = value.strip() not in ("0", "false", "no", "off")
        else:
            options[f.name] = f.metadata.get("type", str)(value)
    return name, options


def judge(environ: Mapping[str, str] = os.environ) -> Evaluator:
    """The judge the environment names, loaded once per process."""
    name, options = judge_options(environ)
    key = (name, tuple(sorted(options.items())))
    if key not in _judges:
        rubric = {"rubric": load_rubric(options["rubric"])} if "rubric" in options else {}
        _judges[key] = load_evaluator(name, **{**options, **rubric})
    return _judges[key]


def image_of(answer: str) -> tuple[str | None, str | None]:
    """(image path, generator) from a model's answer `{"text": "", "images": [PATH], "generator": KEY}`; (None,
    None) for an answer that names no image."""
    try:
        parsed = json.loads(answer)
    except (TypeError, json.JSONDecodeError):
        return None, None
    images = parsed.get("images") if isinstance(parsed, dict) else None
    if not images:
        return None, None
    return str(images[0]), parsed.get("generator")


def metric_values(evaluator: Evaluator, doc: Mapping, answer: str) -> dict:
    """The per-image values of every metric for one document and the model's answer (lmms-eval's
    process_results)."""
    path, generator = image_of(answer)
    poem = Poem(poem_id=doc["poem_id"], title=doc["title"], author=doc["author"], text=doc["text"],
                tradition=doc["tradition"])
    image_id = f"{generator}/{poem.poem_id}"
    if path is None or not Path(path).is_file():
        item = ScoringItem(image_id, None, poem, error=f"the model returned no image file ({answer[:200]!r})")
    else:
        try:
            item = rgb_item(image_id, open_image(path), poem)
        except ImageError as exc:  # unreadable, or over the pixel limit: refused before decoding
            item = ScoringItem(image_id, None, poem, error=str(exc))
    [result] = evaluator.score([item])
    human = json.loads(doc["human"]).get(generator)
    keys = (evaluator.rubric or rubric_for_tradition(poem.tradition)).keys
    return {"quality": result.quality, **{k: result.scores.get(k) for k in keys},
            "answers_without_quality": result.quality is None,
            "kendall_tau_human": {"judge": result.quality, "human": human}}


def kendall_tau_human(pairs: Iterable[Mapping]) -> float | None:
    """Kendall τ-b of the judge's image quality against the human one over the images that have both; None where
    people did not rate the generator (or fewer than two images have both)."""
    both = [(p["judge"], p["human"]) for p in pairs if p["judge"] is not None and p["human"] is not None]
    if len(both) < 2:
        return None
    tau = stats.kendalltau(*zip(*both)).statistic
    return None if tau != tau else float(tau)
