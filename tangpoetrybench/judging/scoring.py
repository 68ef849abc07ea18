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
from dataclasses import dataclass, field, fields
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping, Protocol, TypeVar

import torch
from PIL import Image
from tqdm.auto import tqdm

from ..dataset.reading import dataset_identity, dataset_rows, row_image
from ..errors import DataError, ImageError, Problem, SystematicFailure
from ..files import DEFAULT_MAX_IMAGE_PIXELS, data_folder, link_outside, local_or_hub, write_file
from .evaluators.base import Evaluator, Prepared, ScoringItem, rgb_item
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
    rather than streaming the split again; the folder is taken absolute (`files.data_folder`). Images are read by
    `row_image`: over `max_image_pixels`, or a path-only row whose path leaves the dataset's folder, is a failed
    result of kind `input`."""

    def __init__(self, dataset: str | Path, config: str = "images", split: str = "test",
                 max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
        if not Path(local_or_hub(dataset, "dataset", repo_type="dataset")).exists():
            from huggingface_hub import snapshot_download

            dataset = snapshot_download(str(dataset), repo_type="dataset",
                                        allow_patterns=["README.md", f"data/{config}/*"])
        self.dataset, self.config, self.split = str(data_folder(dataset)), config, split
        self.max_image_pixels = max_image_pixels
        dataset_rows(self.dataset, config, split)  # a wrong folder, config or split fails here, before any model loads

    def ids(self) -> list[str]:
        return [row["image_id"] for row in dataset_rows(self.dataset, self.config, self.split, columns=["image_id"])]

    def identity(self) -> dict:
        return dataset_identity(self.dataset, self.config, self.split)

    def files(self) -> list[str]:
        """The split's Parquet files, in order (what an engine that reads Parquet itself reads: Ray Data)."""
        import datasets

        return list(datasets.load_dataset_builder(self.dataset, self.config).config.data_files[self.split])

    def __iter__(self) -> Iterator[SourceItem]:
        for row in dataset_rows(self.dataset, self.config, self.split, columns=list(ROW_COLUMNS)):
            yield row_item(row, self.dataset, self.max_image_pixels)


ROW_COLUMNS = ("image_id", "poem_id", "title", "author", "poem", "tradition", "image")


def row_item(row: Mapping, root: str | Path, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> SourceItem:
    """An item from a row in the built dataset's form (`ROW_COLUMNS`, the image as {"bytes", "path"}, undecoded): what
    both sources stream, and what a Ray Data worker is given. A path-only image must lie inside `root` (the dataset's
    folder, or the images folder), and the pixel bound is checked before decoding (`dataset.reading.row_image`)."""
    return SourceItem(row["image_id"], row_poem(row), partial(row_image, row["image"], root, max_image_pixels))


def row_poem(row: Mapping) -> Poem:
    return Poem(poem_id=row["poem_id"], title=row["title"], author=row["author"], text=row["poem"],
                tradition=row["tradition"])


class FolderSource:
    """Images named by poem: `DIR/<generator>/<poem_id>.png`, or `DIR/<poem_id>.png` (a flat folder).

    The image_id is the path below DIR without its extension (`generator/poem_id`, what the leaderboard ranks); a flat
    folder's ids are `generator/poem_id` when `generator` says whose images they are, else the poem_id alone
    (`names_no_generator`). Every image must name a poem of the file; a symbolic link (to a file or a folder) that
    leaves DIR is refused, by name. An image over `max_image_pixels` is a failed result of kind `input`, refused
    before it is decoded. DIR is taken absolute (`files.data_folder`), and the rows name their images below it."""

    def __init__(self, images: Path | str, poems_file: Path | str, generator: str | None = None,
                 max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS):
        root = data_folder(images)
        self.root = str(root)
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
            raise DataError(Problem(str(images), f"no images ({', '.join(IMAGE_EXTENSIONS)})"))
        flat = [p for p in files if p.parent == root]
        if generator is not None:
            check_generator(generator, "--generator")
            if len(flat) != len(files):
                raise ValueError(f"--generator names the generator of a flat folder (DIR/<poem_id>.png), but "
                                 f"{images} has generator folders (DIR/<generator>/<poem_id>.png): give no --generator")
        self.names_no_generator = bool(flat) and generator is None
        prefix = f"{generator}/" if generator else ""
        self.files = [(prefix + str(p.relative_to(root).with_suffix("")), p) for p in files]

    def ids(self) -> list[str]:
        return [image_id for image_id, _ in self.files]

    def identity(self) -> None:
        return None  # a folder of images is no built dataset

    def rows(self) -> Iterator[dict]:
        """The images as rows in the built dataset's form (`ROW_COLUMNS`), each image by its path below `root`."""
        for image_id, path in self.files:
            poem = self.poems[path.stem]
            yield {"image_id": image_id, "poem_id": poem.poem_id, "title": poem.title, "author": poem.author,
                   "poem": poem.text, "tradition": poem.tradition,
                   "image": {"bytes": None, "path": str(path.relative_to(self.root))}}

    def __iter__(self) -> Iterator[SourceItem]:
        return (row_item(row, self.root, self.max_image_pixels) for row in self.rows())


@dataclass
class Tally:
    """What a run wrote, counted from its records (one process's, or every process's summed)."""

    scored: int = 0
    failed: int = 0  # unreadable or refused images, model errors, answers that did not parse
    retryable: int = 0  # of the failed, those a rerun tries again (failures in the model)
    prompt_tokens: int = 0  # tokens a served model reported
    completion_tokens: int = 0
    repair_rounds: int = 0  # answers of a served judge that did not parse and got a repair round
    repair_parsed: int = 0  # of those, read from the second answer
    truncated: int = 0  # texts the evaluator's text encoder saw only in part
    readout_fallbacks: int = 0  # answers asked for the readout that were decoded instead (a server without logprobs)
    failed_answers: list[FailedAnswer] = field(default_factory=list)  # a sample of this process's unreadable answers

    def add(self, records: list[dict]) -> None:
        self.scored += len(records)
        self.failed += sum(r["parse_status"] == "failed" for r in records)
        self.retryable += sum(r.get("error_kind") in MODEL_FAILURES for r in records)
        self.prompt_tokens += sum(r["usage"]["prompt_tokens"] for r in records if r.get("usage"))
        self.completion_tokens += sum(r["usage"]["completion_tokens"] for r in records if r.get("usage"))
        self.repair_rounds += sum(r.get("repair") is not None for r in records)
        self.repair_parsed += sum(r.get("repair") is not None and r["parse_status"] != "failed" for r in records)
        self.truncated += sum(bool((r.get("evidence") or {}).get("text_seen", {}).get("truncated")) for r in records)
        self.readout_fallbacks += sum(readout_fallback(r) is not None for r in records)
        self.failed_answers.extend(FailedAnswer.of(r.get("raw_output"), r.get("error"), r.get("usage"),
                                                   (r.get("settings") or {}).get("max_new_tokens"))
                                   for r in records if r.get("error_kind") == "parse")
        del self.failed_answers[KEEP:]

    def counts(self) -> tuple[int, ...]:
        """The counts, which processes sum (the sample of failed answers stays each process's own)."""
        return tuple(getattr(self, f.name) for f in fields(self) if f.type == "int")


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
    """Holds records back until a batch shows that the model works, and stops the run when it does not: when every
    item that reached the model in the first `batches` batches (or in all of them, if fewer) failed in the model."""

    def __init__(self, trusted: bool, batches: int = SYSTEMATIC_BATCHES):
        self.trusted, self.batches = trusted, batches
        self.held: list[dict] = []
        self.failed_batches = 0

    def admit(self, records: list[dict]) -> list[dict]:
        """The records that may be written now."""
        if self.trusted:
            return records
        self.held += records
        reached = [r for r in records if r.get("error_kind") != "input"]
        if not reached:
            return []
        if all(r.get("error_kind") in MODEL_FAILURES for r in reached):
            self.failed_batches += 1
            if self.failed_batches >= self.batches:
                self.stop()
            return []
        self.trusted = True
        released, self.held = self.held, []
        return released

    def finish(self) -> list[dict]:
        if self.failed_batches and not self.trusted:
            self.stop()
        released, self.held = self.held, []
        return released

    def stop(self) -> None:
        first = next(r for r in self.held if r.get("error_kind") in MODEL_FAILURES)
        raise SystematicFailure(f"every image of the first {self.failed_batches} batch(es) failed in the model "
                                f"({first['error']}); nothing was written for them. {what_to_fix(first['error'] or '')}")


def what_to_fix(error: str) -> str:
    """The advice that follows from a failure that stopped a run: memory, a server's refusal, or the cause named."""
    if "out of memory" in error.lower():
        return "It is out of memory: lower --batch-size or --max-pixels and run again"
    if re.search(r"\bHTTP 4\d\d\b", error):
        return ("The server refused every request: its message is above (a --model it does not serve, or an option "
                "it does not take); fix that and run again")
    return "Fix the cause and run again"


@dataclass
class Run:
    """A scoring run as every engine starts it: the source's ids (after `limit`), its results file resumed and checked
    against the evaluator (`results.Resume`, with the part files of a data-parallel run), what is left to score (this
    process's share), and the guard against a model that fails on everything."""

    out: Path
    ids: list[str]
    order: dict[str, int]  # image_id → its place in the source
    resume: Resume
    done: set[str]  # ids already in the output
    todo: list[str]  # ids this process scores, in source order
    parts: list[Path]
    retry: bool  # some record in the output failed in the model: this run asks it again
    guard: FailureGuard
    identity: dict | None  # what a dataset source says it is (every record carries it); None for a folder
    tally: Tally

    @classmethod
    def start(cls, evaluator, source: Source, out: Path | str, limit: int | None = None, rank: int = 0,
              world: int = 1) -> "Run":
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        ids = source.ids()[:limit]
        order = {image_id: i for i, image_id in enumerate(ids)}
        if len(order) != len(ids):
            raise ValueError("the source has repeated image_ids")
        # Part files: this run's (one per process) and any a killed run with another process count left behind.
        target = out.with_name(f"{out.name}.part{rank}") if world > 1 else out
        parts = sorted(set(out.parent.glob(f"{out.name}.part*")) | ({target} if world > 1 else set()))
        resume = Resume(evaluator, out, target=target, parts=parts)  # what is done, checked against this run
        done = {i for i in resume.done if i in order}
        # Items belong to processes by their place in the source, so no item falls between two processes
        # however far apart in time they read what is done.
        todo = [i for i in ids if i not in done and order[i] % world == rank]
        guard = FailureGuard(trusted=any(line.record.get("error_kind") not in (*MODEL_FAILURES, "input")
                                         for line in resume.lines))
        identity = getattr(source, "identity", lambda: None)()
        return cls(out, ids, order, resume, done, todo, parts, resume.retry, guard, identity, Tally())

    def record(self, result: dict) -> dict:
        """A result's record as written: with the dataset's identity where the source has one."""
        return {**result, "dataset": self.identity} if self.identity else result

    def writer(self, append: Callable[[list[dict]], None]) -> Callable[[list[dict]], None]:
        """`write(records)`: through the guard, appended (`Resume.appending`'s `append`) and counted."""
        def write(records: list[dict]) -> None:
            admitted = self.guard.admit(records)
            append(admitted)
            self.tally.add(admitted)

        return write

    def finish(self, append: Callable[[list[dict]], None]) -> None:
        """The records the guard still holds, written (or the run stopped)."""
        released = self.guard.finish()
        append(released)
        self.tally.add(released)

    def summary(self, tally: Tally, process_scored: int, rank: int = 0, world: int = 1) -> ScoreSummary:
        return ScoreSummary(out=self.out, total=len(self.ids), skipped=len(self.done), **vars(tally),
                            process_scored=process_scored, process_index=rank, num_processes=world)


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
    state = process_state()
    rank, world = (state.process_index, state.num_processes) if state else (0, 1)
    batch_size = max(batch_size or DEFAULT_BATCH_SIZE, evaluator.min_batch_size)
    run = Run.start(evaluator, source, out, limit, rank, world)
    workers = default_num_workers(evaluator, world) if num_workers is None else num_workers
    loader = torch.utils.data.DataLoader(
        PreparedBatches(evaluator, source, set(run.todo), batch_size, limit), batch_size=None, collate_fn=_unchanged,
        num_workers=workers, pin_memory=evaluator.device is not None and evaluator.device.type == "cuda",
        multiprocessing_context=evaluator.worker_start_method if workers else None,
    )
    with run.resume.appending() as append, tqdm(
        total=len(run.todo), desc=f"Scoring ({evaluator.name})", unit="image", disable=not progress or rank != 0
    ) as bar:
        write, seen = run.writer(append), 0
        for batch in loader:
            write([run.record(r.to_json()) for r in evaluator.run(batch)])
            bar.update(len(batch.items))
            seen += len(batch.items)
        run.finish(append)
    if seen != len(run.todo):  # a source whose stream and ids disagree must not pass for a finished run
        raise RuntimeError(f"the source gave {seen} of the {len(run.todo)} items to score; rerun to score the rest")
    tally = run.tally
    if run.parts or run.retry:
        tally = _merge(state, run.out, run.order, tally)
    return run.summary(tally, run.tally.scored, rank, world)


def _merge(state, out: Path, order: dict[str, int], tally: Tally) -> Tally:
    """After every process is done: the main process writes the output in source order (`write_in_order`). Returns
    the run's counts summed over all processes."""
    world = state.num_processes if state else 1
    if world > 1:
        import torch.distributed as dist

        total = torch.tensor(tally.counts(), device=state.device)
        dist.all_reduce(total)
        tally = Tally(*(int(c) for c in total), failed_answers=tally.failed_answers)
        state.wait_for_everyone()
    if state is None or state.is_main_process:
        write_in_order(out, order)
    if world > 1:
        state.wait_for_everyone()
    return tally


def write_in_order(out: Path, order: dict[str, int]) -> None:
    """`out` and its part files rewritten as one file in source order, one record per image (`final_records`: a
    retried failure replaced), atomically; the part files dropped."""
    parts = sorted(out.parent.glob(f"{out.name}.part*"))
    records = final_records(line.record for path in [out, *parts] for line in read_lines(path, partial="drop"))
    write_file(out, "".join(json.dumps(records[i], ensure_ascii=False) + "\n"
                            for i in sorted(records, key=lambda i: order.get(i, len(order)))))
    for path in parts:
        path.unlink(missing_ok=True)


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
