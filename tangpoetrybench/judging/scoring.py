"""Batch scoring to JSON Lines (`tpb score`): resumable, deterministic, pipelined, data-parallel.

- Items come from a built dataset (a local folder or a Hub id; config and split) or from a folder of
  images plus a poems file, streamed: only the image ids are read up front, and an image is decoded only
  when its batch is prepared.
- Batches are prepared (decoded, resized, run through the processor) by `torch.utils.data.DataLoader`
  workers while the model scores the previous ones, then copied to the GPU from page-locked memory.
- Results are appended as they are made and flushed after every batch. A rerun skips every image already
  in the file, except those that failed in the model (out of memory, a timeout, an error of the model on that
  image alone): those are tried again and their new result replaces the old. A line cut short by a kill is
  dropped. Resuming with other settings (model, adapter, rubric, pixel budget, answer length, backend, parser)
  is refused, naming the setting (`results.Resume`, which `tpb compare` shares).
- An item that fails on its own is recorded as failed and the run goes on. If every item that reached the
  model in the first batches failed in the model, the run stops (`SystematicFailure`) and records nothing
  for them: that is not one item's problem.
- Under `accelerate launch` or `torchrun`, each process scores every n-th remaining item into its own part
  file; when all are done the main process merges the parts into the output in source order, which is then
  the same file a single process writes (but for the `seconds` timings).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, Protocol, TypeVar

import torch
from PIL import Image
from tqdm.auto import tqdm

from ..dataset.reading import dataset_identity, dataset_rows, row_image
from ..errors import DataError, ImageError, Problem, SystematicFailure
from ..files import DEFAULT_MAX_IMAGE_PIXELS, link_outside, local_or_hub, open_image, write_file
from .evaluators.base import EvalResult, Evaluator, Prepared, ScoringItem, rgb_item
from .failures import KEEP, FailedAnswer
from .results import MODEL_FAILURES, Resume, final_records, read_lines
from .tasks.scores import readout_fallback
from ..models import process_state
from ..poems import Poem, check_generator, read_poems
from ..dataset.raw_release import IMAGE_EXTENSIONS

DEFAULT_BATCH_SIZE = 8
SYSTEMATIC_BATCHES = 3  # the first batches that must not all fail in the model


@dataclass
class SourceItem:
    """An item before its image is decoded: `load()` makes the `ScoringItem`."""

    image_id: str
    poem: Poem
    load_image: Callable[[], Image.Image]

    def load(self) -> ScoringItem:
        try:
            image = self.load_image()
        except ImageError as exc:  # unreadable or refused (over the pixel limit): one failed result, not a failed run
            return ScoringItem(self.image_id, None, self.poem, str(exc))
        except Exception as exc:
            return ScoringItem(self.image_id, None, self.poem, f"unreadable image: {exc}")
        return rgb_item(self.image_id, image, self.poem)


class Source(Protocol):
    """Where items come from: their ids in order (cheap, no image read), and the items themselves, streamed.
    Sources are small picklable descriptions, so each data-loader worker can open its own stream."""

    def ids(self) -> list[str]: ...

    def __iter__(self) -> Iterator[SourceItem]: ...

    def identity(self) -> dict | None:
        """What every record of this source says it scored (`dataset_identity`), or None."""


class DatasetSource:
    """Items of a built dataset, streamed from its Parquet files (no cache copy). A Hub dataset is downloaded once
    (its card and this config's files), so that every data-loader worker and every process reads local files
    rather than streaming the split again. Images are read by `row_image`: over `max_image_pixels`, or a path-only
    row whose path leaves the dataset's folder, is a failed result of kind `input`."""

    def __init__(self, dataset: str | Path, config: str = "images", split: str = "test",
                 max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
        if not Path(local_or_hub(dataset, "dataset", repo_type="dataset")).exists():
            from huggingface_hub import snapshot_download

            dataset = snapshot_download(str(dataset), repo_type="dataset",
                                        allow_patterns=["README.md", f"data/{config}/*"])
        self.dataset, self.config, self.split = str(dataset), config, split
        self.max_image_pixels = max_image_pixels
        dataset_rows(self.dataset, config, split)  # a wrong folder, config or split fails here, before any model loads

    def ids(self) -> list[str]:
        return [row["image_id"] for row in dataset_rows(self.dataset, self.config, self.split, columns=["image_id"])]

    def identity(self) -> dict:
        return dataset_identity(self.dataset, self.config, self.split)

    def __iter__(self) -> Iterator[SourceItem]:
        for row in dataset_rows(self.dataset, self.config, self.split):
            poem = Poem(poem_id=row["poem_id"], title=row["title"], author=row["author"], text=row["poem"],
                        tradition=row["tradition"])
            yield SourceItem(row["image_id"], poem, partial(row_image, row["image"], self.dataset,
                                                            self.max_image_pixels))


class FolderSource:
    """Images named by poem: `DIR/<generator>/<poem_id>.png`, or `DIR/<poem_id>.png` (a flat folder).

    The image_id is the path below DIR without its extension (`generator/poem_id`, what the leaderboard ranks); a flat
    folder's ids are `generator/poem_id` when `generator` says whose images they are, else the poem_id alone
    (`names_no_generator`). Every image must name a poem of the file; a symbolic link (to a file or a folder) that
    leaves DIR is refused, by name. An image over `max_image_pixels` is a failed result of kind `input`, refused
    before it is decoded."""

    def __init__(self, images: Path | str, poems_file: Path | str, generator: str | None = None,
                 max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
        root = Path(images)
        self.poems = {p.poem_id: p for p in read_poems(poems_file)}
        self.max_image_pixels = max_image_pixels
        entries = [p for p in root.rglob("*") if not any(part.startswith(".") for part in p.relative_to(root).parts)]
        outside = [Problem(str(p.relative_to(root)), f"a symbolic link to {p.resolve()}, outside {root}: refused")
                   for p in entries if link_outside(root, p) == p]
        if outside:
            raise DataError(outside)
        files = sorted(p for p in entries if p.is_file() and p.suffix.lower() in IMAGE_EXTENSIONS)
        unknown = [Problem(str(p.relative_to(root)), f"no poem {p.stem!r} in {poems_file}") for p in files
                   if p.stem not in self.poems]
        if unknown:
            raise DataError(unknown)
        if not files:
            raise DataError(Problem(str(root), f"no images ({', '.join(IMAGE_EXTENSIONS)})"))
        flat = [p for p in files if p.parent == root]
        if generator is not None:
            check_generator(generator, "--generator")
            if len(flat) != len(files):
                raise ValueError(f"--generator names the generator of a flat folder (DIR/<poem_id>.png), but {root} "
                                 "has generator folders (DIR/<generator>/<poem_id>.png): give no --generator")
        self.names_no_generator = bool(flat) and generator is None
        prefix = f"{generator}/" if generator else ""
        self.files = [(prefix + str(p.relative_to(root).with_suffix("")), p) for p in files]

    def ids(self) -> list[str]:
        return [image_id for image_id, _ in self.files]

    def identity(self) -> None:
        return None  # a folder of images is no built dataset

    def __iter__(self) -> Iterator[SourceItem]:
        for image_id, path in self.files:
            yield SourceItem(image_id, self.poems[path.stem], partial(open_image, path, self.max_image_pixels))


@dataclass
class ScoreSummary:
    out: Path
    total: int  # items in the source (after --limit)
    skipped: int  # already in the output before this run
    scored: int  # scored by this run (all processes)
    failed: int  # of those, failed (unreadable or refused images, model errors, answers that did not parse)
    retryable: int = 0  # of the failed, those a rerun tries again (failures in the model)
    process_scored: int = 0  # scored by this process
    process_index: int = 0
    num_processes: int = 1
    prompt_tokens: int = 0  # tokens a served model reported for this run's requests (all processes)
    completion_tokens: int = 0
    repair_rounds: int = 0  # answers of a served judge that did not parse and got a repair round
    repair_parsed: int = 0  # of those, read from the second answer
    truncated: int = 0  # texts the evaluator's text encoder saw only in part (CLIP's 77 tokens, BLIP's 35, ...)
    readout_fallbacks: int = 0  # answers asked for the readout that were decoded instead (a server without logprobs)
    failed_answers: list[FailedAnswer] = field(default_factory=list)  # a sample of this process's unreadable answers

    @property
    def main_process(self) -> bool:
        return self.process_index == 0


T = TypeVar("T")


def chunks(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Lists of `size` items in order (the last one shorter), from any iterable."""
    iterator = iter(items)
    while chunk := list(islice(iterator, size)):
        yield chunk


class PreparedBatches(torch.utils.data.IterableDataset):
    """The batches still to score, each decoded and prepared where it is iterated: in a data-loader worker, worker
    w of n taking batches w, w + n, … (the loader hands them back in order)."""

    def __init__(self, evaluator: Evaluator, source: Source, todo: set[str], batch_size: int, limit: int | None):
        self.evaluator, self.source, self.todo, self.batch_size, self.limit = evaluator, source, todo, batch_size, limit

    def __iter__(self) -> Iterator[Prepared]:
        info = torch.utils.data.get_worker_info()
        worker, workers = (info.id, info.num_workers) if info else (0, 1)
        items = (it for it in islice(self.source, self.limit) if it.image_id in self.todo)
        for index, batch in enumerate(chunks(items, self.batch_size)):
            if index % workers == worker:
                yield self.evaluator.prepare([it.load() for it in batch])


def _unchanged(batch: Prepared) -> Prepared:
    return batch


def default_num_workers(evaluator: Evaluator, num_processes: int = 1) -> int:
    """Up to 4 preparing workers per process beside an accelerator; none when the model itself runs on the CPU."""
    if evaluator.device is not None and evaluator.device.type == "cpu":
        return 0
    return max(0, min(4, (os.cpu_count() or 1) // num_processes - 1))


class FailureGuard:
    """Holds results back until a batch shows that the model works, and stops the run when it does not: when every
    item that reached the model in the first `batches` batches (or in all of them, if fewer) failed in the model."""

    def __init__(self, trusted: bool, batches: int = SYSTEMATIC_BATCHES):
        self.trusted, self.batches = trusted, batches
        self.held: list[EvalResult] = []
        self.failed_batches = 0

    def admit(self, results: list[EvalResult]) -> list[EvalResult]:
        """The results that may be written now."""
        if self.trusted:
            return results
        self.held += results
        reached = [r for r in results if r.error_kind != "input"]
        if not reached:
            return []
        if all(r.error_kind in MODEL_FAILURES for r in reached):
            self.failed_batches += 1
            if self.failed_batches >= self.batches:
                self.stop()
            return []
        self.trusted = True
        released, self.held = self.held, []
        return released

    def finish(self) -> list[EvalResult]:
        if self.failed_batches and not self.trusted:
            self.stop()
        released, self.held = self.held, []
        return released

    def stop(self) -> None:
        first = next(r for r in self.held if r.error_kind in MODEL_FAILURES)
        raise SystematicFailure(f"every image of the first {self.failed_batches} batch(es) failed in the model "
                                f"({first.error}); nothing was written for them. {what_to_fix(first.error or '')}")


def what_to_fix(error: str) -> str:
    """The advice that follows from a failure that stopped a run: memory, a server's refusal, or the cause named."""
    if "out of memory" in error.lower():
        return "It is out of memory: lower --batch-size or --max-pixels and run again"
    if re.search(r"\bHTTP 4\d\d\b", error):
        return ("The server refused every request: its message is above (a --model it does not serve, or an option "
                "it does not take); fix that and run again")
    return "Fix the cause and run again"


def score_to_jsonl(
    evaluator: Evaluator,
    source: Source,
    out: Path | str,
    batch_size: int | None = None,
    limit: int | None = None,
    num_workers: int | None = None,
    progress: bool = True,
) -> ScoreSummary:
    """Score every item of `source` not yet in `out`, appending result records as JSON Lines (docs/scoring.md).

    `batch_size` defaults to 8 (an engine that schedules its own batches, vLLM, takes at least its
    `min_batch_size`); `num_workers` preparing processes default to `default_num_workers`."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    state = process_state()
    rank, world = (state.process_index, state.num_processes) if state else (0, 1)
    batch_size = max(batch_size or DEFAULT_BATCH_SIZE, evaluator.min_batch_size)
    ids = source.ids()[:limit]
    order = {image_id: i for i, image_id in enumerate(ids)}
    if len(order) != len(ids):
        raise ValueError("the source has repeated image_ids")
    # Part files: this run's (one per process) and any a killed run with another process count left behind.
    target = out.with_name(f"{out.name}.part{rank}") if world > 1 else out
    parts = sorted(set(out.parent.glob(f"{out.name}.part*")) | ({target} if world > 1 else set()))
    resume = Resume(evaluator, out, target=target, parts=parts)  # what is done, checked against this run
    done = {i for i in resume.done if i in order}
    retry = resume.retry
    # Items belong to processes by their place in the source, so no item falls between two processes
    # however far apart in time they read what is done.
    todo = [i for i in ids if i not in done and order[i] % world == rank]
    workers = default_num_workers(evaluator, world) if num_workers is None else num_workers
    loader = torch.utils.data.DataLoader(
        PreparedBatches(evaluator, source, set(todo), batch_size, limit), batch_size=None, collate_fn=_unchanged,
        num_workers=workers, pin_memory=evaluator.device is not None and evaluator.device.type == "cuda",
        multiprocessing_context=evaluator.worker_start_method if workers else None,
    )
    guard = FailureGuard(trusted=any(line.record.get("error_kind") not in (*MODEL_FAILURES, "input")
                                     for line in resume.lines))

    scored = failed = retryable = prompt_tokens = completion_tokens = repair_rounds = repair_parsed = truncated = 0
    fallbacks, failed_answers = 0, []
    identity = getattr(source, "identity", lambda: None)()  # what a dataset source says it is; None for others

    def with_identity(record: dict) -> dict:
        return {**record, "dataset": identity} if identity else record

    with resume.appending() as append, tqdm(
        total=len(todo), desc=f"Scoring ({evaluator.name})", unit="image", disable=not progress or rank != 0
    ) as bar:
        def write(results: list[EvalResult]) -> None:
            nonlocal scored, failed, retryable, prompt_tokens, completion_tokens
            nonlocal repair_rounds, repair_parsed, truncated, fallbacks
            append([with_identity(r.to_json()) for r in results])
            scored += len(results)
            failed += sum(r.parse_status == "failed" for r in results)
            retryable += sum(r.error_kind in MODEL_FAILURES for r in results)
            prompt_tokens += sum(r.usage["prompt_tokens"] for r in results if r.usage)
            completion_tokens += sum(r.usage["completion_tokens"] for r in results if r.usage)
            repair_rounds += sum(r.repair is not None for r in results)
            repair_parsed += sum(r.repair is not None and r.parse_status != "failed" for r in results)
            truncated += sum(bool(r.evidence and r.evidence.get("text_seen", {}).get("truncated")) for r in results)
            fallbacks += sum(readout_fallback(r) is not None for r in results)
            failed_answers.extend(FailedAnswer.of(r.raw_output, r.error, r.usage, r.settings.get("max_new_tokens"))
                                  for r in results if r.error_kind == "parse")
            del failed_answers[KEEP:]

        seen = 0
        for batch in loader:
            write(guard.admit(evaluator.run(batch)))
            bar.update(len(batch.items))
            seen += len(batch.items)
        write(guard.finish())
    if seen != len(todo):  # a source whose stream and ids disagree must not pass for a finished run
        raise RuntimeError(f"the source gave {seen} of the {len(todo)} items to score; rerun to score the rest")
    local = scored
    counts = (scored, failed, retryable, prompt_tokens, completion_tokens, repair_rounds, repair_parsed, truncated,
              fallbacks)
    if parts or retry:
        counts = _merge(state, out, order, counts)
    scored, failed, retryable, prompt_tokens, completion_tokens, repair_rounds, repair_parsed, truncated, fallbacks = \
        counts
    return ScoreSummary(out=out, total=len(ids), skipped=len(done), scored=scored, failed=failed, retryable=retryable,
                        process_scored=local, process_index=rank, num_processes=world, prompt_tokens=prompt_tokens,
                        completion_tokens=completion_tokens, repair_rounds=repair_rounds, repair_parsed=repair_parsed,
                        truncated=truncated, readout_fallbacks=fallbacks, failed_answers=failed_answers)


def _merge(state, out: Path, order: dict[str, int], counts: tuple[int, ...]) -> tuple[int, ...]:
    """After every process is done: the main process writes out + all part files in source order, one record per
    image (`final_records`), then drops the parts. Returns the run's counts summed over all processes."""
    world = state.num_processes if state else 1
    if world > 1:
        import torch.distributed as dist

        total = torch.tensor(counts, device=state.device)
        dist.all_reduce(total)
        counts = tuple(int(c) for c in total)
        state.wait_for_everyone()
    if state is None or state.is_main_process:
        parts = sorted(out.parent.glob(f"{out.name}.part*"))
        records = final_records(line.record for path in [out, *parts] for line in read_lines(path, partial="drop"))
        write_file(out, "".join(json.dumps(records[i], ensure_ascii=False) + "\n"
                                for i in sorted(records, key=lambda i: order.get(i, len(order)))))
        for path in parts:
            path.unlink(missing_ok=True)
    if world > 1:
        state.wait_for_everyone()
    return counts


def source_of(dataset: str | Path | None = None, images: Path | str | None = None, poems: Path | str | None = None,
              config: str = "images", split: str = "test", generator: str | None = None,
              max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> Source:
    """What to score: a built dataset's split (`dataset`, a folder or Hub id), or a folder of images named by
    poem (`images` with the `poems` file; `generator`: whose images a flat folder holds). Larger images than
    `max_image_pixels` are refused before decoding."""
    if (dataset is None) == (images is None):
        raise ValueError("give --dataset DIR, or --images DIR with --poems FILE")
    if images is not None and poems is None:
        raise ValueError("--images needs --poems FILE")
    if dataset is not None and generator is not None:
        raise ValueError("--generator applies to --images (a flat folder of one generator's images)")
    if dataset is not None:
        return DatasetSource(dataset, config, split, max_image_pixels)
    return FolderSource(images, poems, generator, max_image_pixels)


def score(evaluator: Evaluator, out: Path | str, dataset: str | Path | None = None, images: Path | str | None = None,
          poems: Path | str | None = None, config: str = "images", split: str = "test", generator: str | None = None,
          max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS, **kwargs) -> ScoreSummary:
    """Score a dataset's split or a folder of images (see `source_of`) into the JSON Lines file `out`, resuming
    what is already there. Other keyword arguments (batch_size, limit, num_workers, progress) go to
    `score_to_jsonl`."""
    return score_to_jsonl(evaluator, source_of(dataset, images, poems, config, split, generator, max_image_pixels),
                          out, **kwargs)
