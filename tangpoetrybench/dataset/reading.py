"""Reading a built dataset (a folder or a Hub id) row by row."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from ..errors import DataError, ImageError, quote
from ..files import DEFAULT_MAX_IMAGE_PIXELS, inside, local_or_hub, open_image
from ..rubric import DEFAULT_TRADITION, Rubric, read_rubric_folder, rubric_for_tradition

if TYPE_CHECKING:
    from PIL import Image

ROWS_PER_READ = 64


def dataset_rows(dataset: str | Path, config: str, split: str, columns: list[str] | None = None) -> Iterator[dict]:
    """Rows streamed from the Parquet files: no cache copy, so a folder rebuilt in place is read afresh.

    Images are left as {"bytes", "path"} for the caller to decode when (and if) it needs them, with `row_image`
    (datasets' own decoding would open any local file a row's path names). A wrong folder, config or split fails
    here, not at the first row."""
    import datasets

    dataset = local_or_hub(dataset, "dataset", repo_type="dataset")
    refuse_raw_release(dataset)
    try:
        ds = datasets.load_dataset(str(dataset), config, split=split, streaming=True)
    except ValueError as exc:
        if "BuilderConfig" in str(exc) or "Unknown split" in str(exc) or "Bad split" in str(exc):
            raise ValueError(f"{dataset} has no config {config!r} with a split {split!r} ({str(exc).splitlines()[0]})"
                             ) from None
        raise
    if columns:
        ds = ds.select_columns(columns)
    return _rows(ds.decode(False))


def row_image(image: dict, dataset: str | Path, max_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> "Image.Image":
    """A row's image (`{"bytes", "path"}`, from `dataset_rows`) decoded by `files.open_image`: its bytes, or for a
    row without them the file its path names, which must lie inside the dataset's local folder (a relative path is
    taken from there). A path outside it (absolute, with `..`, or through a link), or a path-only row of a dataset
    that is no local folder, is refused (`ImageError`)."""
    if image.get("bytes") is not None:
        return open_image(image["bytes"], max_pixels)
    path = image.get("path")
    if not path or not Path(dataset).is_dir():
        raise ImageError(f"the row's image has no bytes, and its path {quote(path)} is not inside a local dataset "
                         "folder: refused")
    try:
        file = inside(dataset, path)
    except ValueError as exc:
        raise ImageError(f"the row's image has no bytes, and its path {exc}") from None
    return open_image(file, max_pixels)


def refuse_raw_release(dataset: str | Path) -> None:
    folder = Path(dataset)
    if (folder / "ratings.csv").is_file() and (folder / "poems.jsonl").is_file():
        raise ValueError(f"{dataset} is a raw release (poems.jsonl, images/, ratings.csv), not a built dataset: "
                         f"build it first with `tpb build {dataset} OUT`, then give OUT")
FINGERPRINT = re.compile(r"content fingerprint `([0-9a-f]{16})`")


def dataset_fingerprint(dataset: str | Path) -> str | None:
    """The content fingerprint `tpb build` writes into a built dataset's card (README.md), from a folder or a Hub
    id; None for a dataset without one (not built by tpb build)."""
    card = Path(dataset) / "README.md"
    if not Path(dataset).exists():
        from huggingface_hub import hf_hub_download

        try:
            card = Path(hf_hub_download(str(dataset), "README.md", repo_type="dataset"))
        except (OSError, ValueError):
            return None
    found = FINGERPRINT.search(card.read_text(encoding="utf-8")) if card.is_file() else None
    return found.group(1) if found else None


def dataset_identity(dataset: str | Path, config: str, split: str) -> dict:
    """What a scores record says it scored: the build's fingerprint, the config and the split."""
    return {"fingerprint": dataset_fingerprint(dataset), "config": config, "split": split}


def dataset_rubrics(dataset: str | Path) -> dict[str, Rubric]:
    """The rubrics a built dataset carries (`rubrics/<tradition>.yaml`, written by `tpb build`), by tradition, from a
    folder or a Hub id; a dataset built before datasets carried them has none, and its traditions are bundled."""
    folder = Path(dataset)
    if not folder.exists():
        from huggingface_hub import snapshot_download

        folder = Path(snapshot_download(str(local_or_hub(dataset, "dataset", repo_type="dataset")),
                                        repo_type="dataset", allow_patterns=["rubrics/*.yaml"]))
    found, problems = read_rubric_folder(folder / "rubrics", where=f"{dataset}/rubrics")
    if problems:
        raise DataError(problems)
    return found


def traditions_rubric(traditions: list[str], where: str, found: dict[str, Rubric]) -> Rubric:
    """The one rubric of rows of these traditions (one config holds one tradition): a dataset's own (`found`), else
    the bundled one; no rows: the one rubric the dataset carries, else the default tradition's."""
    if len(traditions) > 1:
        raise ValueError(f"{where} mixes traditions ({', '.join(traditions)}): score them one at a time")
    if not traditions:
        traditions = list(found) if len(found) == 1 else [DEFAULT_TRADITION]
    return rubric_for_tradition(traditions[0], found)


def dimension_keys(found: dict[str, Rubric]) -> tuple[str, ...]:
    """The dimension columns of a dataset that carries `found` (`dataset_rubrics`): every tradition of a dataset rates
    the same dimensions (`tpb build` refuses others); a dataset that carries none is the default tradition's."""
    return next(iter(found.values()), None).keys if found else rubric_for_tradition(DEFAULT_TRADITION).keys


def config_rubric(dataset: str | Path, config: str, split: str | None = None) -> Rubric:
    """The rubric of a config's images (of one split, or of every split), read from the dataset."""
    if split is None:
        rows = [r for part in config_rows(dataset, config, ["tradition"]).values() for r in part]
    else:
        rows = list(dataset_rows(dataset, config, split, ["tradition"]))
    return traditions_rubric(sorted({r["tradition"] for r in rows}), f"{config}/{split or 'every split'}",
                             dataset_rubrics(dataset))


def _rows(ds) -> Iterator[dict]:
    # Batches, not `iter(ds)`: inside a torch data-loader worker, iter(ds) yields only that worker's share of the
    # Parquet shards (none at all for a worker beyond the shard count); `.iter` always yields every row.
    for batch in ds.iter(batch_size=ROWS_PER_READ):
        columns = list(batch)
        for i in range(len(batch[columns[0]])):
            yield {c: batch[c][i] for c in columns}


def config_rows(dataset: str | Path, config: str, columns: list[str] | None = None,
                splits: tuple[str, ...] = ("train", "validation", "test"),
                optional: tuple[str, ...] = ()) -> dict[str, list[dict]]:
    """Every split of a config from one read of its Parquet files: split → rows, in `splits` order, for the
    splits the dataset has. Images are left undecoded. `optional`: columns read where the config has them (those of
    a rubric's roles, `features.role_columns`), else absent from the rows."""
    import datasets

    dataset = local_or_hub(dataset, "dataset", repo_type="dataset")
    refuse_raw_release(dataset)
    try:
        parts = datasets.load_dataset(str(dataset), config, streaming=True)
    except ValueError as exc:
        if "BuilderConfig" in str(exc):
            raise ValueError(f"{dataset} has no config {config!r} ({str(exc).splitlines()[0]})") from None
        raise
    out = {}
    for split in splits:
        if split in parts:
            has = set(parts[split].features or ())
            wanted = columns and [c for c in [*columns, *optional] if c in has or c not in optional]
            ds = parts[split].select_columns(wanted) if wanted else parts[split]
            out[split] = list(_rows(ds.decode(False)))
    return out
