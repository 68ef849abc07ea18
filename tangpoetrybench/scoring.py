"""Batch scoring to JSON Lines (`tpb score`): resumable, deterministic, data-parallel under accelerate.

- Items come from a built dataset (a local folder or a Hub id; config and split) or from a folder of
  images plus a poems file. Images are decoded only for the items still to score.
- Results are appended as they are made and flushed after every batch. A rerun skips every image_id
  already in the file, so a killed run resumes where it stopped and no image is written twice. A line cut
  short by a kill is dropped on resume.
- Under `accelerate launch`, each process scores every n-th remaining item into its own part file; when all
  are done the main process merges the parts into the output in source order, which is then the same file a
  single process writes (but for the `seconds` timings).
"""

from __future__ import annotations

import io
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from PIL import Image
from tqdm.auto import tqdm

from .dataset_io import dataset_rows
from .evaluators.base import Evaluator, ScoringItem
from .poems import Poem, read_poems
from .release import IMAGE_EXTENSIONS


@dataclass
class SourceItem:
    """An item before its image is decoded: `load()` makes the `ScoringItem`."""

    image_id: str
    poem: Poem
    load_image: Callable[[], Image.Image]

    def load(self) -> ScoringItem:
        try:
            image = self.load_image()
            image.load()
            return ScoringItem(self.image_id, image.convert("RGB"), self.poem)
        except Exception as exc:  # an unreadable image is one failed result, not a failed run
            return ScoringItem(self.image_id, None, self.poem, f"unreadable image: {exc}")


@dataclass
class ScoreSummary:
    out: Path
    total: int  # items in the source (after --limit)
    skipped: int  # already in the output before this run
    scored: int  # scored by this run (all processes)
    failed: int  # of those, failed parses or unreadable images
    main_process: bool = True  # False on the other processes of a data-parallel run


def dataset_items(dataset: str | Path, config: str = "images", split: str = "test") -> Iterator[SourceItem]:
    """Items of a built dataset, streamed (no cache copy; nothing decoded until needed). A wrong folder,
    config or split fails here, before any model is loaded."""
    rows_ = dataset_rows(dataset, config, split, decode=False)

    def rows() -> Iterator[SourceItem]:
        for row in rows_:
            poem = Poem(poem_id=row["poem_id"], title=row["title"], author=row["author"], text=row["poem"],
                        tradition=row["tradition"])
            image = row["image"]
            yield SourceItem(row["image_id"], poem, _image_loader(image.get("bytes"), image.get("path")))

    return rows()


def _image_loader(data: bytes | None, path: str | None) -> Callable[[], Image.Image]:
    return (lambda: Image.open(io.BytesIO(data))) if data is not None else (lambda: Image.open(path))


def folder_items(images: Path | str, poems_file: Path | str) -> list[SourceItem]:
    """Items of a folder of images named by poem: `DIR/<poem_id>.png` or `DIR/<generator>/<poem_id>.png`.

    The image_id is the path below DIR without its extension. Every image must name a poem of the file."""
    from .errors import DataError, Problem

    images = Path(images)
    poems = {p.poem_id: p for p in read_poems(poems_file)}
    files = sorted(p for p in images.rglob("*") if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS
                   and not any(part.startswith(".") for part in p.relative_to(images).parts))
    unknown = [Problem(str(p.relative_to(images)), f"no poem {p.stem!r} in {poems_file}") for p in files
               if p.stem not in poems]
    if unknown:
        raise DataError(unknown)
    if not files:
        raise DataError(Problem(str(images), f"no images ({', '.join(IMAGE_EXTENSIONS)})"))
    return [SourceItem(str(p.relative_to(images).with_suffix("")), poems[p.stem], lambda p=p: Image.open(p))
            for p in files]


def read_done(path: Path, repair: bool = True) -> list[dict]:
    """The complete records of a results file. With `repair`, a trailing partial line (from a kill) is cut off
    the file; only the process about to append to a file repairs it."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if repair and end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    return [json.loads(line) for line in data[:end].decode("utf-8").splitlines() if line.strip()]


def _check_same_run(records: list[dict], evaluator: Evaluator, out: Path) -> None:
    """Resuming appends to a file: it must hold results of the same evaluator and model."""
    others = {(r.get("evaluator"), r.get("model")) for r in records} - {(evaluator.name, evaluator.model_name)}
    if others:
        name, model = sorted(others, key=str)[0]
        raise ValueError(f"{out} holds results of {name} ({model}), not {evaluator.name} ({evaluator.model_name}): "
                         "choose another --out, or delete it to start over")


def _batches(items: list[SourceItem], size: int) -> Iterator[list[SourceItem]]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _state():
    try:
        from accelerate import PartialState
    except ImportError:
        return None
    return PartialState()


def score_to_jsonl(
    evaluator: Evaluator,
    source: Iterable[SourceItem],
    out: Path | str,
    batch_size: int = 8,
    limit: int | None = None,
    progress: bool = True,
) -> ScoreSummary:
    """Score every item of `source` not yet in `out`, appending SPEC §6 records as JSON Lines."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = _state()
    rank, world = (state.process_index, state.num_processes) if state else (0, 1)
    items = list(source)
    if limit is not None:
        items = items[:limit]
    order = {it.image_id: i for i, it in enumerate(items)}
    if len(order) != len(items):
        raise ValueError("the source has repeated image_ids")
    # Part files: this run's (one per process) and any a killed run with another process count left behind.
    target = out.with_name(f"{out.name}.part{rank}") if world > 1 else out
    parts = sorted(set(out.parent.glob(f"{out.name}.part*")) | ({target} if world > 1 else set()))
    records = [r for path in [out, *parts] for r in read_done(path, repair=path == target)]
    _check_same_run(records, evaluator, out)
    done = {r["image_id"] for r in records}
    # Items belong to processes by their place in the source, so no item falls between two processes
    # however far apart in time they read what is done.
    todo = [it for it in items if it.image_id not in done and order[it.image_id] % world == rank]

    scored = failed = 0
    with open(target, "a", encoding="utf-8") as f, tqdm(
        total=len(todo), desc=f"Scoring ({evaluator.name})", unit="image", disable=not progress or rank != 0
    ) as bar:
        for batch in _batches(todo, batch_size):
            results = evaluator.score([it.load() for it in batch])
            f.write("".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in results))
            f.flush()
            os.fsync(f.fileno())
            scored += len(results)
            failed += sum(r.parse_status == "failed" for r in results)
            bar.update(len(batch))
    if parts:
        scored, failed = _merge(state, out, order, scored, failed)
    return ScoreSummary(out=out, total=len(items), skipped=len(done), scored=scored, failed=failed,
                        main_process=rank == 0)


def _merge(state, out: Path, order: dict[str, int], scored: int, failed: int) -> tuple[int, int]:
    """After every process is done: the main process writes out + all part files in source order, then drops
    the parts. Returns the run's totals over all processes."""
    world = state.num_processes if state else 1
    if world > 1:
        import torch
        import torch.distributed as dist

        counts = torch.tensor([scored, failed], device=state.device)
        dist.all_reduce(counts)
        scored, failed = int(counts[0]), int(counts[1])
        state.wait_for_everyone()
    if state is None or state.is_main_process:
        parts = sorted(out.parent.glob(f"{out.name}.part*"))
        records = {r["image_id"]: r for path in [out, *parts] for r in read_done(path, repair=False)}
        tmp = out.with_name(out.name + ".merging")
        tmp.write_text("".join(json.dumps(records[i], ensure_ascii=False) + "\n"
                               for i in sorted(records, key=lambda i: order.get(i, len(order)))), encoding="utf-8")
        os.replace(tmp, out)
        for path in parts:
            path.unlink(missing_ok=True)
    if world > 1:
        state.wait_for_everyone()
    return scored, failed
