"""Rows of a built `images` config -> SFT and GRPO rows, with the package's one prompt builder.

SFT: a conversational `prompt` (system rubric, user image + poem) and `completion` (the assistant's answer:
the human scores as PAE's JSON, null where not applicable), with `images`; the loss is on the answer only.
Images are shrunk to the same pixel budget as at inference (`fit_pixels`), so training sees what scoring sees. GRPO: a conversational `prompt`, the `image`, and `targets`
(the human scores in rubric order) for the rewards. Images that QC left without a rating (null quality)
carry no target and are skipped.
"""

from __future__ import annotations

from typing import Any

import datasets

from tangpoetrybench.files import local_or_hub
from tangpoetrybench.models import DEFAULT_MAX_PIXELS, fit_pixels
from tangpoetrybench.poems import Poem
from tangpoetrybench.judging.prompt import build_messages, format_answer
from tangpoetrybench.rubric import Rubric, rubric_for_tradition


def poem_of(row: dict[str, Any]) -> Poem:
    return Poem(poem_id=row["poem_id"], title=row["title"], author=row["author"], text=row["poem"],
                tradition=row.get("tradition") or "tang")


def rubric_of(row: dict[str, Any], rubric: Rubric | None = None) -> Rubric:
    return rubric or rubric_for_tradition(row.get("tradition") or "tang")


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
            "tradition": row.get("tradition") or "tang", "poem_id": row["poem_id"], "image_id": row["image_id"]}


def load_images(dataset_name: str, config: str = "images") -> datasets.DatasetDict:
    """The built dataset's image config (a folder or a Hub id), rows without a human target dropped."""
    return datasets.load_dataset(local_or_hub(dataset_name, "--dataset_name", "dataset"), config).filter(has_target)


def to_sft(ds: datasets.Dataset, rubric: Rubric | None = None) -> datasets.Dataset:
    return ds.map(lambda row: sft_row(row, rubric), remove_columns=ds.column_names)


def to_grpo(ds: datasets.Dataset, rubric: Rubric | None = None) -> datasets.Dataset:
    return ds.map(lambda row: grpo_row(row, rubric), remove_columns=ds.column_names)
