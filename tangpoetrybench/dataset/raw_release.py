"""The authors' raw release (SPEC §2): read it, check all of it, and report every problem at once.

```
RAW/
  release.json      optional: name, version, generators {key: {display, unseen}}, main_tradition, and the card's
                    synthetic, license (+ license_name, license_link for "other"), description, citation, homepage
  poems.jsonl
  images/<generator>/<poem_id>.(png|jpg|jpeg|webp)
  ratings.csv       the rating columns and one column per dimension of the rubric
  text_labels.csv   optional
  rubrics/<tradition>.yaml   optional: the rubric of a tradition that is not bundled (docs/rubrics.md)
```
Nothing is guessed and nothing is dropped silently: `read_release` either returns a `Release` whose
every rating points at an existing image of a known poem and generator, with an option of its rubric for every
dimension, or raises `DataError`.

The main tradition (`main_tradition` in release.json, else the tradition of most poems, the first in poems.jsonl
on a tie) fills the `images` config with its splits; each other tradition is a test-only config of its own name.
Traditions rated on different dimensions are refused: they are built apart, a release each.
"""

from __future__ import annotations

import csv
from collections import Counter
import io
import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Mapping

from ..errors import DataError, ImageError, Problem
from ..files import DEFAULT_MAX_IMAGE_PIXELS, link_outside, open_image, unquote_cell
from ..poems import Poem, parse_poems
from ..rubric import (BUILTIN, DEFAULT_TRADITION, Rubric, is_bundled, load_rubric, read_rubric_folder,
                      rubric_for_tradition)

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp")
RATER_GROUPS = ("expert", "crowd")
RATING_COLUMNS = (
    "rating_id", "rater_id", "rater_group", "generator", "poem_id", "seconds",
    "phase1_candidates", "phase1_choice",
)
TEXT_LABEL_COLUMNS = ("generator", "poem_id", "text_issue", "issue_type")
ISSUE_TYPES = ("none", "leakage", "fake_characters")
RELEASE_KEYS = ("name", "version", "generators", "main_tradition", "synthetic", "license", "license_name",
                "license_link", "description", "citation", "homepage")
CARD_KEYS = RELEASE_KEYS[4:]  # what release.json says for the dataset card
# The configs every built dataset may have; each tradition but the main one adds a test-only config of its name.
FIXED_CONFIGS = IMAGES_CONFIG, RATINGS_CONFIG, POEMS_CONFIG, UNSEEN_CONFIG = ("images", "ratings", "poems",
                                                                             "unseen_generator")
MAIN_IMAGE_CONFIGS = (IMAGES_CONFIG, UNSEEN_CONFIG)  # the main tradition's rated images: seen, then unseen generators
N_PHASE1_CANDIDATES = 4
RELEASE_FILES = ("release.json", "poems.jsonl", "ratings.csv", "text_labels.csv")  # read from the release's top


@dataclass(frozen=True)
class Generator:
    key: str
    display: str
    unseen: bool = False


@dataclass(frozen=True)
class ImageFile:
    generator: str
    poem_id: str
    path: Path

    @property
    def image_id(self) -> str:
        return f"{self.generator}/{self.poem_id}"


@dataclass(frozen=True)
class Rating:
    rating_id: str
    rater_id: str
    rater_group: str
    generator: str
    poem_id: str
    seconds: float
    phase1_candidates: tuple[str, ...]
    phase1_choice: str | None
    answers: dict[str, str] = field(hash=False)  # dimension key -> option letter
    line: int = 0

    @property
    def image_id(self) -> str:
        return f"{self.generator}/{self.poem_id}"

    @property
    def phase1_correct(self) -> bool | None:
        return None if self.phase1_choice is None else self.phase1_choice == self.poem_id


@dataclass(frozen=True)
class TextLabel:
    generator: str
    poem_id: str
    text_issue: int
    issue_type: str

    @property
    def image_id(self) -> str:
        return f"{self.generator}/{self.poem_id}"


@dataclass
class Release:
    root: Path
    name: str
    version: str
    generators: dict[str, Generator]
    poems: dict[str, Poem]
    images: dict[str, ImageFile]  # by image_id
    ratings: list[Rating]
    text_labels: dict[str, TextLabel]  # by image_id
    keys: tuple[str, ...]  # the rubric's dimension keys, the rating columns
    rubrics: dict[str, Rubric]  # the rubric of each tradition of the release, by tradition, the main one first
    metadata: dict = field(default_factory=dict)  # the card's fields from release.json
    supplied: tuple[str, ...] = ()  # traditions whose rubric was given beside the release (`rubrics=`), not in it

    @property
    def synthetic(self) -> bool:
        return bool(self.metadata.get("synthetic"))

    @property
    def main_tradition(self) -> str:
        return next(iter(self.rubrics))

    @property
    def main_rubric(self) -> Rubric:
        return self.rubrics[self.main_tradition]

    def rubric(self, poem_id: str) -> Rubric:
        return self.rubrics[self.poems[poem_id].tradition]



def read_release(raw: Path | str, max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS,
                 ratings_required: bool = True, rubrics: Mapping[str, Rubric] | None = None) -> Release:
    """Read and check a raw release; raises `DataError` with every problem found, by file and line.
    `ratings_required=False` reads a release still to be rated (`tpb annotate`): a ratings.csv that is missing or
    holds only its header is then no problem (one that has rows is checked all the same). `rubrics` are rubrics
    given beside the release (`tpb annotate serve --rubric`): one of a tradition the release has no rubric for is
    used as if it were in its rubrics/ folder (`Release.supplied` names them); one of a tradition it has must say
    what the release's says."""
    root, given_rubrics = Path(raw), dict(rubrics or {})
    if not root.is_dir():
        raise DataError(Problem(str(root), "not a folder (expected a raw release: poems.jsonl, images/, ratings.csv)"))
    problems: list[Problem] = [outside_link(root, link) for name in RELEASE_FILES
                               if (link := link_outside(root, root / name))]
    if problems:  # read no further: what the links point at would be read, and published, as the release's own
        raise DataError(problems)
    meta, declared = _read_release_json(root, problems)
    found, bad_rubrics = read_rubric_folder(root / "rubrics")
    problems += bad_rubrics
    supplied = _given_rubrics(given_rubrics, found, problems)
    for tradition in sorted(set(found) & set(FIXED_CONFIGS)):
        problems.append(Problem(f"rubrics/{tradition}.yaml", f"{tradition!r} names a config of every dataset: give "
                                "the tradition another name", field="tradition"))

    poems: dict[str, Poem] = {}
    if (root / "poems.jsonl").is_file():
        good, bad = parse_poems(root / "poems.jsonl", display="poems.jsonl", traditions=(*BUILTIN, *sorted(found)))
        poems = {p.poem_id: p for p in good}
        problems.extend(bad)
    else:
        problems.append(Problem("poems.jsonl", "missing"))

    images = _scan_images(root, declared, poems, problems)
    _check_images(images, max_image_pixels, root, problems)
    generators = declared if declared is not None else {
        key: Generator(key, key) for key in sorted({img.generator for img in images.values()})
    }
    rubrics = _rubrics(meta, poems, found, problems)
    keys = _dimension_keys(rubrics, problems)
    ratings = _read_ratings(root, rubrics, keys, generators, poems, images, problems, ratings_required)
    labels = _read_text_labels(root, generators, poems, images, problems)
    if problems:
        raise DataError(problems)
    return Release(
        root=root, name=str(meta.get("name") or root.name), version=str(meta.get("version") or "0"),
        generators=generators, poems=poems, images=images, ratings=ratings, text_labels=labels, keys=keys,
        rubrics=rubrics, metadata={k: meta[k] for k in CARD_KEYS if k in meta},
        supplied=tuple(t for t in supplied if t in rubrics),
    )


def _given_rubrics(given: Mapping[str, Rubric], found: dict[str, Rubric], problems: list[Problem]) -> list[str]:
    """Add the rubrics given beside the release to those `found` in it, and return the traditions they supplied."""
    supplied = []
    for tradition, rubric in given.items():
        own = found.get(tradition) or (load_rubric(tradition) if tradition in BUILTIN else None)
        if own is None:
            found[tradition] = rubric
            supplied.append(tradition)
        elif own.fingerprint != rubric.fingerprint:
            problems.append(Problem(rubric.source or "rubric", f"differs from the release's rubric of tradition "
                                    f"{tradition!r} ({_where(own)}), the one `tpb build` rates its poems on: give "
                                    "that one, or none", field="tradition"))
    return supplied


def _read_release_json(root: Path, problems: list[Problem]) -> tuple[dict, dict[str, Generator] | None]:
    path = root / "release.json"
    if not path.is_file():
        return {}, None
    try:
        meta = json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(Problem("release.json", f"not valid JSON: {exc}"))
        return {}, None
    if not isinstance(meta, dict):
        problems.append(Problem("release.json", "expected a JSON object"))
        return {}, None
    for key in sorted(set(meta) - set(RELEASE_KEYS)):
        problems.append(Problem("release.json", "unknown field", field=key))
    for key in ("name", "version", "main_tradition", "license", "license_name", "license_link", "description",
                "citation", "homepage"):
        if key in meta and not isinstance(meta[key], str):
            problems.append(Problem("release.json", f"expected a string, got {meta[key]!r}", field=key))
    if meta.get("license") == "other":  # the Hub shows an "other" licence by its name and link
        for key in ("license_name", "license_link"):
            if key not in meta:
                problems.append(Problem("release.json", 'required with "license": "other"', field=key))
    if "synthetic" in meta and not isinstance(meta["synthetic"], bool):
        problems.append(Problem("release.json", "expected true or false", field="synthetic"))
    if "generators" not in meta:
        return meta, None
    raw = meta["generators"]
    if not isinstance(raw, dict) or not raw:
        problems.append(Problem("release.json", "expected a non-empty object {key: {display, unseen}}",
                                field="generators"))
        return meta, None
    generators: dict[str, Generator] = {}
    for key, spec in raw.items():
        where = f"generators.{key}"
        if not isinstance(spec, dict) or set(spec) - {"display", "unseen"}:
            problems.append(Problem("release.json", "expected {display: str, unseen: bool}", field=where))
            continue
        display, unseen = spec.get("display", key), spec.get("unseen", False)
        if not isinstance(display, str) or not display:
            problems.append(Problem("release.json", "expected a non-empty string", field=f"{where}.display"))
        elif not isinstance(unseen, bool):
            problems.append(Problem("release.json", "expected true or false", field=f"{where}.unseen"))
        else:
            generators[key] = Generator(key, display, unseen)
    return meta, generators


def _scan_images(
    root: Path, declared: dict[str, Generator] | None, poems: dict[str, Poem], problems: list[Problem]
) -> dict[str, ImageFile]:
    folder = root / "images"
    if not folder.is_dir():
        problems.append(Problem("images/", "missing"))
        return {}
    images: dict[str, ImageFile] = {}
    if link := link_outside(root, folder):
        problems.append(outside_link(root, link))
        return {}
    for gen_dir in sorted(folder.iterdir()):
        rel = f"images/{gen_dir.name}"
        if gen_dir.name.startswith("."):
            continue
        if link_outside(root, gen_dir):
            problems.append(outside_link(root, gen_dir))
            continue
        if not gen_dir.is_dir():
            problems.append(Problem(rel, "expected a folder per generator: images/<generator>/<poem_id>.png"))
            continue
        if declared is not None and gen_dir.name not in declared:
            problems.append(Problem(rel, f"unknown generator {gen_dir.name!r} (release.json declares "
                                    f"{', '.join(sorted(declared))})"))
            continue
        for path in sorted(gen_dir.iterdir()):
            rel = f"images/{gen_dir.name}/{path.name}"
            if path.name.startswith("."):
                continue
            if link_outside(root, path):
                problems.append(outside_link(root, path))
                continue
            if not path.is_file() or path.suffix.lower() not in IMAGE_EXTENSIONS:
                problems.append(Problem(rel, f"not an image file (expected {', '.join(IMAGE_EXTENSIONS)})"))
                continue
            image = ImageFile(gen_dir.name, path.stem, path)
            if path.stem not in poems:
                problems.append(Problem(rel, f"no poem {path.stem!r} in poems.jsonl"))
            elif image.image_id in images:
                problems.append(Problem(rel, f"two files for image {image.image_id!r} "
                                        f"(also {images[image.image_id].path.name})"))
            else:
                images[image.image_id] = image
    if not images and not any(p.file.startswith("images") for p in problems):
        problems.append(Problem("images/", "no images"))
    return images


def outside_link(root: Path, link: Path) -> Problem:
    """A symbolic link that leaves the release: what it points at would be published as the release's own."""
    return Problem(str(link.relative_to(root)), f"a symbolic link to {link.resolve()}, outside the release: refused "
                   "(copy the file into the release instead)")


def _check_images(images: dict[str, ImageFile], max_pixels: int, root: Path, problems: list[Problem]) -> None:
    """Decode every image in full (a truncated file fails only then), refusing huge ones before decoding."""
    def check(image: ImageFile) -> Problem | None:
        try:
            open_image(image.path, max_pixels).close()
        except ImageError as exc:
            return Problem(str(image.path.relative_to(root)), str(exc))
        return None

    with ThreadPoolExecutor(max_workers=4) as pool:
        problems.extend(p for p in pool.map(check, images.values()) if p is not None)


def main_tradition(poems: Iterable[Poem]) -> str | None:
    """The tradition of most poems; on a tie, the first of them in the poems' order (None: no poems)."""
    counts = Counter(p.tradition for p in poems)  # in order of first appearance
    return max(counts, key=counts.get, default=None)


def _rubrics(meta: dict, poems: dict[str, Poem], found: dict[str, Rubric],
             problems: list[Problem]) -> dict[str, Rubric]:
    """The rubric of each tradition the poems name, the main tradition's first."""
    counts = Counter(p.tradition for p in poems.values())
    main = meta.get("main_tradition")
    if main is not None and (not isinstance(main, str) or main not in counts):
        problems.append(Problem("release.json", f"{main!r} is the tradition of no poem in poems.jsonl "
                                f"({', '.join(counts) or 'none'})", field="main_tradition"))
        main = None
    main = main or main_tradition(poems.values()) or DEFAULT_TRADITION  # no poems: the ratings are still read
    return {t: rubric_for_tradition(t, found) for t in [main, *(t for t in counts if t != main)]}


def _dimension_keys(rubrics: dict[str, Rubric], problems: list[Problem]) -> tuple[str, ...]:
    """The rating columns: the dimensions of the release's rubrics, which must be the same."""
    main = next(iter(rubrics.values()), None)
    for other in list(rubrics.values())[1:]:
        if other.keys != main.keys:
            problems.append(Problem("poems.jsonl", f"the rubrics {main.name} ({_where(main)}) and {other.name} "
                                    f"({_where(other)}) rate different dimensions, and one release has one set of "
                                    "rating columns: build each tradition apart, from a raw release of its own (its "
                                    "poems, images and ratings)"))
            break
    return main.keys if main else ()


def _where(rubric: Rubric) -> str:
    return "bundled" if is_bundled(rubric) else rubric.source


def _csv_rows(path: Path, name: str, columns: tuple[str, ...], problems: list[Problem],
             unknown_column: Callable[[str], str] | None = None, text: str | None = None) -> Iterator[tuple[int, dict]]:
    """Rows of a CSV with exactly `columns` (any order), each with its line number. BOM and CRLF are fine.
    `unknown_column(column)` says what is wrong with a header column that is not one of `columns`. `text`: the
    file's text as it is about to be written (the file is not read)."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(Problem(name, f"cannot read as UTF-8: {exc}"))
            return
    reader = csv.reader(io.StringIO(text, newline=""))
    header = next(reader, None)
    if header is None:
        problems.append(Problem(name, "empty file (expected a header line and one row per record)"))
        return
    header = [h.strip() for h in header]
    missing = [c for c in columns if c not in header]
    extra = [h for h in header if h not in columns]
    dupes = sorted({h for h in header if header.count(h) > 1})
    if missing or extra or dupes:
        parts = [f"missing {', '.join(missing)}" if missing else "",
                 f"unknown {', '.join(extra)}" if extra else "",
                 f"repeated {', '.join(dupes)}" if dupes else ""]
        problems.append(Problem(name, "header: " + "; ".join(p for p in parts if p), line=1))
        if unknown_column is not None:
            problems += [Problem(name, unknown_column(h), line=1, field=h) for h in extra]
        return
    for values in reader:
        line = reader.line_num
        if not values or all(not v.strip() for v in values):
            continue
        if len(values) != len(header):
            problems.append(Problem(name, f"{len(values)} fields, the header has {len(header)}", line=line))
            continue
        yield line, {h: unquote_cell(v.strip()) for h, v in zip(header, values)}


def _image_problem(
    row: dict, generators: dict[str, Generator], poems: dict[str, Poem], images: dict[str, ImageFile]
) -> tuple[str, str] | None:
    """(field, message) when a row's generator/poem_id do not name an existing image."""
    if row["generator"] not in generators:
        return "generator", f"unknown generator {row['generator']!r}"
    if row["poem_id"] not in poems:
        return "poem_id", f"unknown poem {row['poem_id']!r}"
    image_id = f"{row['generator']}/{row['poem_id']}"
    if image_id not in images:
        return "poem_id", f"no image file for {image_id!r} under images/"
    return None


def check_ratings(release: Release, text: str) -> list[Problem]:
    """The problems `read_release` would find in `text` as the release's ratings.csv: the same check, run on a file
    before it is written (`tpb annotate export`). A header alone is no problem here (a campaign not yet rated)."""
    problems: list[Problem] = []
    _read_ratings(release.root, release.rubrics, release.keys, release.generators, release.poems, release.images,
                  problems, required=False, text=text)
    return problems


def _read_ratings(
    root: Path, rubrics: dict[str, Rubric], keys: tuple[str, ...], generators: dict[str, Generator],
    poems: dict[str, Poem], images: dict[str, ImageFile], problems: list[Problem], required: bool = True,
    text: str | None = None,
) -> list[Rating]:
    path, name = root / "ratings.csv", "ratings.csv"
    if text is None and not path.is_file():
        if required:
            problems.append(Problem(name, "missing"))
        return []
    ratings: list[Rating] = []
    seen: dict[str, int] = {}
    n_before = len(problems)
    n_rows = 0
    main = next(iter(rubrics.values()), None)

    def unknown_column(column: str) -> str:
        return (f"{column!r} is neither a rating column nor a dimension of the rubric {main.name} ({_where(main)}), "
                f"whose dimensions are {', '.join(keys)}") if main else f"unknown column {column!r}"

    for line, row in _csv_rows(path, name, RATING_COLUMNS + keys, problems, unknown_column, text):
        n_rows += 1
        bad = len(problems)

        def bad_field(fld: str, message: str) -> None:
            problems.append(Problem(name, message, line=line, field=fld))

        for fld in ("rating_id", "rater_id"):
            if not row[fld]:
                bad_field(fld, "required")
        if row["rating_id"] in seen:
            bad_field("rating_id", f"duplicate rating_id {row['rating_id']!r} (first on line {seen[row['rating_id']]})")
        elif row["rating_id"]:
            seen[row["rating_id"]] = line
        if row["rater_group"] not in RATER_GROUPS:
            bad_field("rater_group", f"{row['rater_group']!r} is not one of {', '.join(RATER_GROUPS)}")
        image_problem = _image_problem(row, generators, poems, images)
        if image_problem:
            bad_field(*image_problem)
        try:
            seconds = float(row["seconds"])
            if not math.isfinite(seconds) or seconds < 0:
                raise ValueError
        except ValueError:
            bad_field("seconds", f"expected a non-negative number of seconds, got {row['seconds']!r}")
            seconds = math.nan
        candidates = tuple(row["phase1_candidates"].split("|")) if row["phase1_candidates"] else ()
        choice = row["phase1_choice"] or None
        if candidates:
            if len(candidates) != N_PHASE1_CANDIDATES or len(set(candidates)) != len(candidates):
                bad_field("phase1_candidates", f"expected {N_PHASE1_CANDIDATES} distinct poem_ids joined by '|', "
                          f"got {row['phase1_candidates']!r}")
            unknown = [c for c in candidates if c not in poems]
            if unknown:
                bad_field("phase1_candidates", f"unknown poem {', '.join(map(repr, unknown))}")
            if row["poem_id"] in poems and row["poem_id"] not in candidates:
                bad_field("phase1_candidates", f"the image's own poem {row['poem_id']!r} is not among the candidates")
        if choice is not None and choice not in candidates:
            bad_field("phase1_choice", f"{choice!r} is not among the candidates {row['phase1_candidates']!r}")
        rubric = rubrics[poems[row["poem_id"]].tradition] if row["poem_id"] in poems else main
        for key in keys:
            letters = rubric.dimension(key).letters
            if row[key] not in letters:
                bad_field(key, f"unknown option {row[key]!r} (the rubric {rubric.name} has {', '.join(letters)} for "
                          f"{key})")
        if len(problems) == bad:
            ratings.append(Rating(
                rating_id=row["rating_id"], rater_id=row["rater_id"], rater_group=row["rater_group"],
                generator=row["generator"], poem_id=row["poem_id"], seconds=seconds,
                phase1_candidates=candidates, phase1_choice=choice,
                answers={k: row[k] for k in keys}, line=line,
            ))
    if n_rows == 0 and len(problems) == n_before and required:
        problems.append(Problem(name, "no ratings (only a header)"))
    return ratings


def _read_text_labels(
    root: Path, generators: dict[str, Generator], poems: dict[str, Poem], images: dict[str, ImageFile],
    problems: list[Problem],
) -> dict[str, TextLabel]:
    path, name = root / "text_labels.csv", "text_labels.csv"
    if not path.is_file():
        return {}
    labels: dict[str, TextLabel] = {}
    first: dict[str, int] = {}
    for line, row in _csv_rows(path, name, TEXT_LABEL_COLUMNS, problems):
        bad = len(problems)
        image_problem = _image_problem(row, generators, poems, images)
        if image_problem:
            problems.append(Problem(name, image_problem[1], line=line, field=image_problem[0]))
        if row["text_issue"] not in ("0", "1"):
            problems.append(Problem(name, f"expected 0 or 1, got {row['text_issue']!r}", line=line, field="text_issue"))
        if row["issue_type"] not in ISSUE_TYPES:
            problems.append(Problem(name, f"{row['issue_type']!r} is not one of {', '.join(ISSUE_TYPES)}",
                                    line=line, field="issue_type"))
        elif row["text_issue"] in ("0", "1") and (row["text_issue"] == "1") != (row["issue_type"] != "none"):
            problems.append(Problem(name, f"text_issue {row['text_issue']} contradicts issue_type {row['issue_type']!r}",
                                    line=line, field="issue_type"))
        image_id = f"{row['generator']}/{row['poem_id']}"
        if image_id in first:
            problems.append(Problem(name, f"image {image_id!r} already labelled on line {first[image_id]}", line=line))
        if len(problems) == bad:
            first[image_id] = line
            labels[image_id] = TextLabel(row["generator"], row["poem_id"], int(row["text_issue"]), row["issue_type"])
    return labels
