"""`tpb compare`: which of two illustrations of one poem is better (two-alternative forced choice), asked of a
pairwise judge — any object following the pairwise contract (`tasks.pairwise`: `PairwiseJudge`, asked `PairItem`s,
answering `PairAnswer`s), PAE's and the api judge's (the pairwise task joined to a backend), SemJudge's, or a
plugin's.

Judges are built by name through the one registry of evaluators (`registry.load_evaluator(name, task="pairwise",
...)`): PAE's, the served judge's, SemJudge's, and any a plugin adds that answers the pairwise task.

The compare machinery asks every pair in **both orders** (x then y, y then x), so a judge that always picks the
first image cannot look right: consistent answers give the pair's verdict, opposite answers a tie ("tie"). The share
of answers that chose the first position is the judge's position bias (0.5: none). `compare_to_jsonl` appends one
JSON record per pair as it goes (both orders' answers, the verdict), flushed after every batch; a rerun skips every
pair already done except those that failed in the model, and refuses a file made with other settings (the resume
logic `tpb score` uses too: `results.Resume`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from PIL import Image

from ..dataset.reading import dataset_rows, row_image
from ..errors import ImageError
from ..files import DEFAULT_MAX_IMAGE_PIXELS
from ..poems import Poem
from .failures import KEEP, FailedAnswer
from .records import PairRecord
from .results import MODEL_FAILURES, Resume, weights_word
from .scoring import FolderSource, chunks
from .tasks.pairwise import PairAnswer, PairItem, PairwiseJudge

ORDERS = ("xy", "yx")  # x (the pair's first image id) shown first, then second
DEFAULT_BATCH_SIZE = 8


# --- pairs and verdicts ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pair:
    """Two images of one poem to compare, by id; `x` < `y` (so `pair_id` names the pair whichever way it came)."""

    poem: Poem
    x: str
    y: str

    @property
    def pair_id(self) -> str:
        return pair_id(self.x, self.y)


def pair_id(x: str, y: str) -> str:
    """The id of the unordered pair of two image ids (the same whichever comes first)."""
    a, b = sorted((x, y))
    return f"{a}|{b}"


def verdict(first: PairAnswer, second: PairAnswer) -> str | None:
    """The pair's verdict from its two orders (first: x shown as A; second: y shown as A): "x" or "y" when both
    answers choose the same image, "tie" when they choose opposite positions' images (each its first, or each its
    second), None when either failed."""
    if first.winner is None or second.winner is None:
        return None
    x_first = first.winner == "A"
    x_second = second.winner == "B"
    if x_first == x_second:
        return "x" if x_first else "y"
    return "tie"


def position_bias(records: Iterable[dict]) -> dict[str, Any]:
    """Over the answered orders of pair records: how many chose the first position, and the share (0.5: no bias);
    `consistent` is the share of fully answered pairs whose two orders agree."""
    first = answered = pairs = consistent = 0
    for record in records:
        winners = [o["winner"] for o in record["orders"]]
        first += sum(w == "A" for w in winners)
        answered += sum(w is not None for w in winners)
        if record.get("verdict") is not None:
            pairs += 1
            consistent += record["verdict"] != "tie"
    return {"answers": answered, "first_position": first, "first_position_share": first / answered if answered else None,
            "pairs": pairs, "consistent_share": consistent / pairs if pairs else None}


# --- resumable records ----------------------------------------------------------------------------------------------


def pair_record(pair: Pair, judge: PairwiseJudge, answers: Sequence[PairAnswer]) -> dict[str, Any]:
    """One JSON record (`records.PairRecord`): the pair, who judged it with what settings, both orders' answers and
    the verdict."""
    orders = [{"order": order, **asdict(answer)} for order, answer in zip(ORDERS, answers)]
    retry = next((a.error_kind for a in answers if a.error_kind in MODEL_FAILURES), None)
    return PairRecord(pair.pair_id, pair.poem.poem_id, pair.x, pair.y, judge.name, judge.model_name, judge.settings(),
                      weights_word(judge.random_weights), orders, verdict(*answers), retry).to_json()


@dataclass
class CompareSummary:
    out: Path
    total: int  # pairs asked for
    skipped: int  # already in the file
    judged: int  # by this run
    failed: int  # of those, with an order that gave no readable answer
    bias: dict[str, Any]  # position_bias over the whole file
    answers: int = 0  # ordered questions asked by this run (two per pair)
    unread: int = 0  # of those, answers that did not read (a failed parse, final)
    failed_answers: list[FailedAnswer] = field(default_factory=list)  # a sample of them


def compare_to_jsonl(judge: PairwiseJudge, pairs: Sequence[Pair], load: Callable[[str], Image.Image], out: Path | str,
                     batch_size: int = DEFAULT_BATCH_SIZE, progress: Callable[[int], None] | None = None) -> CompareSummary:
    """Ask `judge` every pair not yet in `out`, in both orders, appending one record per pair. `load` gives an
    image (RGB) by id."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    ids = [p.pair_id for p in pairs]
    if len(set(ids)) != len(ids):
        raise ValueError("the pairs to compare repeat a pair")
    resume = Resume(judge, out, pairwise=True)  # what is done, checked against this judge
    todo = [p for p in pairs if p.pair_id not in resume.done]
    judged = failed = unread = 0
    failed_answers: list[FailedAnswer] = []
    max_new_tokens = judge.settings().get("max_new_tokens")
    with resume.appending() as append:
        for batch in chunks(todo, batch_size):
            images = {i: load(i) for p in batch for i in (p.x, p.y)}
            items = [PairItem(p.pair_id, p.poem, images[a], images[b])
                     for p in batch for a, b in ((p.x, p.y), (p.y, p.x))]
            answers = judge.judge(items)
            if len(answers) != len(items):
                raise RuntimeError(f"{judge.name} gave {len(answers)} answers to {len(items)} questions")
            lines = [pair_record(p, judge, answers[2 * i:2 * i + 2]) for i, p in enumerate(batch)]
            append(lines)
            judged += len(lines)
            failed += sum(r["verdict"] is None for r in lines)
            unreadable = [a for a in answers if a.winner is None and a.error_kind in (None, "parse")]
            unread += len(unreadable)
            failed_answers += [FailedAnswer.of(a.raw, a.error, a.usage, max_new_tokens) for a in unreadable]
            del failed_answers[KEEP:]
            if progress:
                progress(len(lines))
    return CompareSummary(out, len(pairs), len(pairs) - len(todo), judged, failed,
                          position_bias(resume.final[i] for i in ids if i in resume.final), 2 * judged, unread,
                          failed_answers)


def dataset_pairs(dataset: str | Path, config: str = "images", split: str = "test",
                  selected: Sequence[tuple[str, str]] | None = None, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
                  ) -> tuple[list[Pair], Callable[[str], Image.Image]]:
    """The pairs to compare from a built dataset's config and split — `selected` (image id pairs, e.g. the human
    pairs), or every pair of images of one poem — and a loader of their images by id (the encoded images of those
    images only are held in memory, decoded when a batch needs them, by `row_image`: an image over
    `max_image_pixels`, or a path-only row whose path leaves the dataset's folder, is refused naming its id)."""
    rows = {r["image_id"]: r for r in dataset_rows(dataset, config, split)}
    if selected is None:
        selected = every_pair((image_id, row["poem_id"]) for image_id, row in rows.items())
    unknown = sorted({i for pair in selected for i in pair} - set(rows))
    if unknown:
        raise ValueError(f"{dataset} ({config}, {split}) has no image {unknown[0]!r}")
    pairs = []
    for a, b in selected:
        x, y = sorted((a, b))
        r = rows[x]
        if rows[y]["poem_id"] != r["poem_id"]:
            raise ValueError(f"{x} and {y} illustrate different poems: a pair is two images of one poem")
        pairs.append(Pair(Poem(r["poem_id"], r["title"], r["author"], r["poem"], r["tradition"]), x, y))
    wanted = {i for p in pairs for i in (p.x, p.y)}
    return pairs, row_loader({i: rows[i]["image"] for i in wanted}, dataset, max_image_pixels,
                             f"{dataset} ({config}, {split})")


def row_loader(images: dict[str, dict], root: str | Path, max_image_pixels: int, where: str
               ) -> Callable[[str], Image.Image]:
    """A loader of images by id, from their rows' images (`{"bytes", "path"}`, a path below `root`) by `row_image`,
    in RGB; a refused or unreadable image raises `ImageError` naming `where` and its id."""
    def load(image_id: str) -> Image.Image:
        try:
            opened = row_image(images[image_id], root, max_image_pixels)
        except ImageError as exc:
            raise ImageError(f"{where}: image {image_id}: {exc}") from None
        with opened:
            return opened.convert("RGB")

    return load


def every_pair(images: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every pair of image ids of one poem, from (image_id, poem_id) pairs: poem by poem, each pair in id order."""
    by_poem: dict[str, list[str]] = {}
    for image_id, poem_id in images:
        by_poem.setdefault(poem_id, []).append(image_id)
    return [(a, b) for ids in by_poem.values() for i, a in enumerate(sorted(ids)) for b in sorted(ids)[i + 1:]]


def folder_pairs(images: Path | str, poems_file: Path | str, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
                 ) -> tuple[list[Pair], Callable[[str], Image.Image]]:
    """Every pair of images of one poem in a folder of `<generator>/<poem_id>.png` files (`tpb score --images`'s
    layout, poems from `poems_file`), and a loader of the images by id: a user's own images, with no dataset."""
    source = FolderSource(images, poems_file, max_image_pixels=max_image_pixels)
    if source.names_no_generator:
        raise ValueError(f"{images} holds images directly (<poem_id>.png): a pair is two generators' images of one "
                         "poem, so give a folder of <generator>/<poem_id>.png")
    rows = {r["image_id"]: r for r in source.rows()}
    pairs = [Pair(source.poems[rows[x]["poem_id"]], x, y)
             for x, y in every_pair((i, r["poem_id"]) for i, r in rows.items())]
    if not pairs:
        raise ValueError(f"{images} holds no two images of one poem: a pair is two generators' images of one poem")
    return pairs, row_loader({i: r["image"] for i, r in rows.items()}, source.root, max_image_pixels, str(images))


def pair_choices(records: dict[str, dict]) -> dict[str, float | None]:
    """A judge's choice per pair id as the statistics read it: 1.0 when it prefers x, 0.0 for y, 0.5 for a tie,
    None when it gave no verdict."""
    value = {"x": 1.0, "y": 0.0, "tie": 0.5}
    return {i: value.get(r.get("verdict")) for i, r in records.items()}
