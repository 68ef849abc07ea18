"""Rows of a built `images` config -> SFT and GRPO rows, with the package's one prompt builder.

`--task pairwise` makes pairwise rows instead: every pair of images of one poem whose human quality differs by at
least `--pair_margin` (the human pairs, `stats.agreement.human_pairs`), in both orders, the human winner as the
answer (`prompt.format_pair_answer`) or, for GRPO, as `winner` for the rewards.

SFT: a conversational `prompt` (system rubric, user image + poem) and `completion` (the assistant's answer:
the human scores as PAE's JSON, null where not applicable), with `images`; the loss is on the answer only.
Images are shrunk to the same pixel budget as at inference (`fit_pixels`), so training sees what scoring sees. GRPO: a conversational `prompt`, the `image`, and `targets`
(the human scores in rubric order) for the rewards. Images that QC left without a rating (null quality)
carry no target and are skipped.
"""

from __future__ import annotations

from typing import Any

import datasets
import numpy as np

from tangpoetrybench.dataset.reading import config_rubric
from tangpoetrybench.files import local_or_hub
from tangpoetrybench.models import DEFAULT_MAX_PIXELS, fit_pixels
from tangpoetrybench.poems import Poem
from tangpoetrybench.judging.prompt import build_messages, build_pair_messages, format_answer, format_pair_answer
from tangpoetrybench.stats.agreement import DEFAULT_MARGIN, human_pairs
from tangpoetrybench.rubric import DEFAULT_TRADITION, Rubric, rubric_for_tradition


def poem_of(row: dict[str, Any]) -> Poem:
    return Poem(poem_id=row["poem_id"], title=row["title"], author=row["author"], text=row["poem"],
                tradition=row.get("tradition") or DEFAULT_TRADITION)


def rubric_of(row: dict[str, Any], rubric: Rubric | None = None) -> Rubric:
    return rubric or rubric_for_tradition(row.get("tradition") or DEFAULT_TRADITION)


def has_target(row: dict[str, Any]) -> bool:
    return row["quality"] is not None


def sft_row(row: dict[str, Any], rubric: Rubric | None = None) -> dict[str, Any]:
    r = rubric_of(row, rubric)
    answer = format_answer({k: row[k] for k in r.keys}, r)
    return {"prompt": build_messages(poem_of(row), r),
            "completion": [{"role": "assistant", "content": [{"type": "text", "text": answer}]}],
            "images": [fit_pixels(row["image"], DEFAULT_MAX_PIXELS)]}


def grpo_row(row: dict[str, Any], rubric: Rubric | None = None) -> dict[str, Any]:
    r = rubric_of(row, rubric)
    return {"prompt": build_messages(poem_of(row), r), "image": fit_pixels(row["image"], DEFAULT_MAX_PIXELS), "targets": [row[k] for k in r.keys],
            "tradition": row.get("tradition") or DEFAULT_TRADITION, "poem_id": row["poem_id"],
            "image_id": row["image_id"]}


def load_images(dataset_name: str, config: str = "images") -> datasets.DatasetDict:
    """The built dataset's image config (a folder or a Hub id), rows without a human target dropped."""
    return datasets.load_dataset(local_or_hub(dataset_name, "--dataset_name", "dataset"), config).filter(has_target)


def dataset_rubric(dataset_name: str, config: str = "images") -> Rubric:
    """The rubric the dataset carries for the config's images: what the prompts, the targets and the rewards follow."""
    return config_rubric(local_or_hub(dataset_name, "--dataset_name", "dataset"), config)


def to_sft(ds: datasets.Dataset, rubric: Rubric | None = None) -> datasets.Dataset:
    return ds.map(lambda row: sft_row(row, rubric), remove_columns=ds.column_names)


def to_grpo(ds: datasets.Dataset, rubric: Rubric | None = None) -> datasets.Dataset:
    return ds.map(lambda row: grpo_row(row, rubric), remove_columns=ds.column_names)


def pair_rows(ds: datasets.Dataset, margin: float = DEFAULT_MARGIN, rubric: Rubric | None = None) -> list[dict]:
    """Both orders of every human pair of `ds`: the pairwise prompt (two image placeholders), the two images (A
    first) and the human winner."""
    poems = sorted(set(ds["poem_id"]))
    index = {p: i for i, p in enumerate(poems)}
    pairs = human_pairs(np.array([np.nan if q is None else q for q in ds["quality"]], dtype=float),
                        np.array([index[p] for p in ds["poem_id"]]), margin)
    rows = []
    for x, y, x_wins in zip(pairs.x.tolist(), pairs.y.tolist(), pairs.x_wins.tolist()):
        first, second = ds[x], ds[y]
        a, b = (fit_pixels(r["image"], DEFAULT_MAX_PIXELS) for r in (first, second))
        prompt = build_pair_messages(poem_of(first), rubric_of(first, rubric))
        for images, winner in (([a, b], "A" if x_wins else "B"), ([b, a], "B" if x_wins else "A")):
            rows.append({"prompt": prompt, "images": images, "winner": winner, "pair": f"{first['image_id']}|"
                         f"{second['image_id']}"})
    return rows


def to_pairwise_sft(ds: datasets.Dataset, margin: float = DEFAULT_MARGIN, rubric: Rubric | None = None
                    ) -> datasets.Dataset:
    return datasets.Dataset.from_list([
        {"prompt": r["prompt"], "images": r["images"],
         "completion": [{"role": "assistant", "content": [{"type": "text", "text": format_pair_answer(r["winner"])}]}]}
        for r in pair_rows(ds, margin, rubric)])


def to_pairwise_grpo(ds: datasets.Dataset, margin: float = DEFAULT_MARGIN, rubric: Rubric | None = None
                     ) -> datasets.Dataset:
    return datasets.Dataset.from_list(pair_rows(ds, margin, rubric))


def training_rows(ds: datasets.Dataset, trainer: str, task: str = "pointwise",
                  margin: float = DEFAULT_MARGIN, rubric: Rubric | None = None) -> datasets.Dataset:
    """The rows `trainer` ("sft" or "grpo") trains on for `task` ("pointwise" or "pairwise"), under `rubric` (None:
    each row's bundled rubric)."""
    if task not in ("pointwise", "pairwise"):
        raise SystemExit(f"--task {task!r}: pointwise or pairwise")
    if task == "pairwise":
        return (to_pairwise_sft if trainer == "sft" else to_pairwise_grpo)(ds, margin, rubric)
    return (to_sft if trainer == "sft" else to_grpo)(ds, rubric)
