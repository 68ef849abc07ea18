"""The logic of the Gradio Space (`space/app.py` only wires it to components).

Configuration comes from the environment: `PAE_MODEL` (default Qwen/Qwen3-VL-8B-Instruct), `PAE_ADAPTER`,
`PAE_BACKEND` (transformers | vllm), `PAE_DEVICE`, `CLIP_MODEL`, `BLIP_MODEL`, `VQA_MODEL` (default
PAE_MODEL; each evaluator's variable is its registry spec's `model_variable`), `PAE_POEMS` (a SPEC poems file; default the bundled poems), `PAE_MAX_IMAGE_BYTES`,
`PAE_MAX_IMAGE_PIXELS`, `PAE_CONCURRENCY`, `PAE_LEADERBOARD` (a `leaderboard.json` from `tpb leaderboard`, for
the Leaderboard tab), `PAE_DATASET` (a built dataset, folder or Hub id, whose rubrics the Space offers first, so a
tradition that is not bundled is scored with the rubric its dataset carries; its poems, examples and words follow
the dataset and that rubric), `PAE_CONSTRAINED` (default 1: PAE's
answer is decoded in the rubric's JSON form, as the vLLM backend always does, so even a small or untrained model
gives a readable answer; 0 turns it off),
`PAE_EXPLAIN`, `PAE_SEMJUDGE_URL` / `PAE_SEMJUDGE_MODEL` (the server the compare tab's SemJudge asks; default the
Space's own base model), `PAE_CALIBRATION` (a `tpb calibrate` file for PAE as set up here: an interval beside each
score); gradio reads `GRADIO_SERVER_NAME` / `GRADIO_SERVER_PORT`
itself. Models load on first use and stay loaded. Every problem a visitor can cause or meet is a
`UserError` with a plain message.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

import numpy as np
from PIL import Image, ImageDraw

from ..errors import DataError, ImageError, ImageTooLarge
from ..files import DEFAULT_MAX_IMAGE_PIXELS, open_image, pixels_only
from ..numeric import counted
from ..judging.backends import BACKENDS, backend_class, load_backend
from ..judging.backends.transformers import DEFAULT_MODEL, TransformersBackend
from ..judging.ocr.evaluator import TextOCR
from ..judging.calibrated import Calibrated, load_calibration
from ..judging.evaluators import Evaluator, ScoringItem, load_evaluator
from ..judging.evaluators.vqascore import VQAScore
from ..judging.pairwise import PairAnswer, PairItem, verdict
from ..judging.registry import evaluator_names, evaluator_spec, label_of, pae_on, specs
from ..judging.semjudge import SemJudge, graph_tree
from ..fonts import cjk_font
from ..reporting.plots import label, radar
from ..poems import Poem, read_poems, sample_poems
from ..rubric import BUILTIN, Dimension, Rubric, format_title, load_rubric


def rubric_label(rubric: Rubric) -> str:
    """How the Space names a rubric: "Tang poetry (唐诗)"."""
    return rubric.in_languages(rubric.display, "{en} ({own})")


RUBRICS = {rubric_label(load_rubric(t)): t for t in BUILTIN}  # the bundled rubrics, by label
UPLOADED = "Uploaded rubric file"


def baselines() -> list[str]:
    """The evaluators shown beside PAE: the scalar baselines, and every evaluator a plugin adds (its quality)."""
    return [n for n in evaluator_names("pointwise")
            if "scalar" in evaluator_spec(n).tasks or evaluator_spec(n).source != "built in"]
OCR = TextOCR.name
PAIR_MAX_NEW_TOKENS = 96  # the pairwise answer with a one-sentence reason
JUDGES = ("PAE", "SemJudge")  # the compare tab's judges
REGION_COLOURS = {"poem": (214, 39, 40), "garbled": (255, 127, 14), "other": (31, 119, 180), "seal": (148, 103, 189),
                  "noise": (150, 150, 150)}
SIGN_COLOURS = [(214, 39, 40), (31, 119, 180), (44, 160, 44), (148, 103, 189), (255, 127, 14)]  # one per sub-sign
VERDICT_TEXT = {"clean": "no text found", "leaked_poem_text": "the poem's own text is written in the picture",
                "garbled_characters": "fake or garbled characters", "other_text": "text that is not the poem",
                "seal_only": "only an artist's seal (not a text issue)"}


def ocr_available() -> bool:
    """Whether the text-ocr evaluator can load here (the `ocr` extra is installed)."""
    return importlib.util.find_spec("rapidocr") is not None and importlib.util.find_spec("onnxruntime") is not None


def draw_regions(image: Image.Image, evidence: Mapping) -> Image.Image:
    """The image with each text region the OCR found outlined in its kind's colour and labelled with what was read
    (in Chinese where a Chinese font is installed, else with the kind alone)."""
    out = image.convert("RGB")
    draw = ImageDraw.Draw(out)
    font = cjk_font()
    for region in evidence["regions"]:
        caption = f"{region['kind']} {region['confidence']:.2f}"
        _outline(draw, [tuple(p) for p in region["box"]], f"{region['text']} · {caption}" if font else caption,
                 REGION_COLOURS.get(region["kind"], REGION_COLOURS["noise"]), font)
    return out


def draw_sign_boxes(image: Image.Image, graph: Mapping, size: tuple[int, int] | None = None) -> Image.Image:
    """The image with each sub-sign's boxes from a SemJudge image graph outlined and labelled with the sub-sign's
    id and sign (in Chinese where a Chinese font is installed, else the id alone). `size` is the image's size as the
    judge saw it, where the boxes are (default: this image's)."""
    out = image.convert("RGB")
    draw = ImageDraw.Draw(out)
    font = cjk_font()
    sx, sy = (out.width / size[0], out.height / size[1]) if size else (1.0, 1.0)
    for i, child in enumerate(graph["hsg_root"]["children"]):
        colour = SIGN_COLOURS[i % len(SIGN_COLOURS)]
        caption = f"{child['node_id']}: {child['semiosis']['sign_description'][:40]}" if font else str(child["node_id"])
        for x0, y0, x1, y1 in child.get("bounding_boxes", []):
            corners = [(x0 * sx, y0 * sy), (x1 * sx, y0 * sy), (x1 * sx, y1 * sy), (x0 * sx, y1 * sy)]
            _outline(draw, corners, caption, colour, font)
    return out


def _outline(draw: ImageDraw.ImageDraw, corners: list[tuple[float, float]], caption: str, colour, font) -> None:
    """A polygon outlined in `colour`, its caption on a filled band above it (below it at the top edge), inside the
    picture."""
    size = draw.im.size
    draw.polygon(corners, outline=colour, width=max(2, min(size) // 200))
    face = font.at(max(12, min(size) // 32)) if font else None
    at, anchor = (min(p[0] for p in corners), min(p[1] for p in corners)), "lb"  # above the region ...
    if draw.textbbox(at, caption, font=face, anchor=anchor)[1] < 0:  # ... or below it, at the top edge
        at, anchor = (at[0], max(p[1] for p in corners)), "lt"
    right = draw.textbbox(at, caption, font=face, anchor=anchor)[2]
    at = (max(0, at[0] - max(0, right + 2 - size[0])), at[1])  # kept inside the right edge
    left, top, right, bottom = draw.textbbox(at, caption, font=face, anchor=anchor)
    draw.rectangle([left - 2, top - 2, right + 2, bottom + 2], fill=colour)
    draw.text(at, caption, font=face, fill=(255, 255, 255), anchor=anchor)


def comparison_rows(first: PairAnswer, second: PairAnswer) -> list[list]:
    """Each order's answer as [order, the uploaded image it chose, reason (or why it failed), parse status]."""
    shown = {("A", 0): "A", ("B", 0): "B", ("A", 1): "B", ("B", 1): "A"}  # (answer, order) → uploaded image
    return [[order, shown.get((answer.winner, k), "—"), answer.reason or answer.error or "", answer.status]
            for k, (order, answer) in enumerate((("A shown first", first), ("B shown first", second)))]


def comparison_sentence(outcome: str | None) -> str:
    return {"x": "**Illustration A is better**: chosen in both orders.",
            "y": "**Illustration B is better**: chosen in both orders.",
            "tie": "**No preference (a tie)**: each order chose the image in the same position, so the choice "
                   "followed the position, not the image.",
            None: "**No verdict**: an answer could not be read."}[outcome]


def reasons_markdown(reasons: Mapping[str, str] | None, rubric: Rubric) -> str:
    """Explain mode's reasons, one line per dimension in rubric order (empty without reasons)."""
    if not reasons:
        return ""
    return "\n".join(f"- **{rubric.in_languages(d.name)}**: {reasons[d.key]}" for d in rubric.dimensions
                     if d.key in reasons)


class UserError(Exception):
    """A problem to show the visitor as it is (no stack trace)."""


@dataclass
class SpaceConfig:
    model: str = DEFAULT_MODEL
    adapter: str | None = None
    backend: str = "transformers"
    device: str | None = None
    models: dict[str, str] = field(default_factory=dict)  # evaluator → checkpoint, from its spec's model_variable
    poems_file: str | None = None
    dataset: str | None = None  # PAE_DATASET: its rubrics come first among the choices
    max_image_bytes: int = 20 * 2**20
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS
    concurrency: int = 1
    leaderboard: str | None = None
    explain: str | None = None  # PAE_EXPLAIN=poem or en: a reason per dimension under the radar
    constrained: bool = True
    semjudge_url: str | None = None  # PAE_SEMJUDGE_URL: SemJudge asks this server; else the Space's own base model
    semjudge_model: str | None = None  # PAE_SEMJUDGE_MODEL: the model name the server knows (default PAE_MODEL)
    calibration: str | None = None  # PAE_CALIBRATION: a calibration file for PAE as set up here

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> "SpaceConfig":
        def get(name: str, default=None):
            return env.get(name) or default

        return cls(
            model=get("PAE_MODEL", DEFAULT_MODEL), adapter=get("PAE_ADAPTER"), backend=get("PAE_BACKEND", "transformers"),
            device=get("PAE_DEVICE"), poems_file=get("PAE_POEMS"), dataset=get("PAE_DATASET"),
            models={n: get(s.model_variable) for n, s in specs().items() if s.model_variable and get(s.model_variable)},
            max_image_bytes=int(get("PAE_MAX_IMAGE_BYTES", 20 * 2**20)),
            max_image_pixels=int(get("PAE_MAX_IMAGE_PIXELS", DEFAULT_MAX_IMAGE_PIXELS)),
            concurrency=int(get("PAE_CONCURRENCY", 1)), leaderboard=get("PAE_LEADERBOARD"), explain=get("PAE_EXPLAIN"),
            constrained=get("PAE_CONSTRAINED", "1").strip().lower() not in ("0", "false", "no", "off"),
            semjudge_url=get("PAE_SEMJUDGE_URL"), semjudge_model=get("PAE_SEMJUDGE_MODEL"),
            calibration=get("PAE_CALIBRATION"),
        )


@dataclass
class SpaceResult:
    table: list[list]  # dimension, score, nearest anchor, what it judges
    quality: float | None
    figure: object
    raw_output: str
    parse_status: str
    error: str | None = None  # why PAE's answer failed, when it did
    baselines: list[list] = field(default_factory=list)  # metric, score, scale, note (why a baseline has no score)
    reasons: str = ""  # explain mode: each dimension's reason, Markdown
    calibrated: dict | None = None  # with PAE_CALIBRATION: the result's intervals (`judging.calibrated`)


@dataclass
class Comparison:
    """The compare tab's outputs: the verdict in a sentence, each order's answer as [order, chosen image, reason,
    parse status], and with SemJudge each image with its sub-signs' boxes drawn and the poem's graph as a tree."""

    sentence: str
    rows: list[list]
    random_weights: bool  # the judge asked has random weights: its choice means nothing
    drawn: tuple[Image.Image | None, Image.Image | None] = (None, None)
    poem_graph: str = ""


def launch_options(config: SpaceConfig) -> dict:
    """What the Space is launched with: gradio refuses an upload over `PAE_MAX_IMAGE_BYTES` as it arrives (413),
    before it is stored (a rubric file is far smaller; `read_image` checks the size again)."""
    return {"max_file_size": config.max_image_bytes}


def read_image(path: str | Path | None, max_bytes: int, max_pixels: int) -> Image.Image:
    """An upload decoded by `files.open_image` (its pixels checked from the header first), after its size in bytes,
    as its pixels alone (`files.pixels_only`: what the Space shows back carries none of the file's metadata, such as
    a camera's location in its EXIF); a file that is not an image is named by the kind of error only (never the
    upload's temporary path)."""
    if not path:
        raise UserError("Upload an image first.")
    size = Path(path).stat().st_size
    if size > max_bytes:
        raise UserError(f"The file is {size / 2**20:.1f} MB; the limit is {max_bytes / 2**20:.0f} MB.")
    try:
        image = open_image(path, max_pixels)
    except ImageTooLarge as exc:
        raise UserError(f"The image is refused: {exc}.") from None
    except ImageError as exc:
        raise UserError(f"That file is not an image this app can read ({type(exc.__cause__).__name__}).") from None
    return pixels_only(image)


def rubric_choices(config: "SpaceConfig") -> dict[str, Rubric]:
    """The rubrics a visitor picks from, by label: those of the Space's dataset (PAE_DATASET) first, then the bundled
    ones it does not already hold."""
    from ..dataset.reading import dataset_rubrics

    carried = list(dataset_rubrics(config.dataset).values()) if config.dataset else []
    bundled = [load_rubric(t) for t in BUILTIN if t not in {r.tradition for r in carried}]
    return {rubric_label(r): r for r in [*carried, *bundled]}


def choose_rubric(choice: str, rubric_file: str | None, choices: Mapping[str, Rubric] | None = None) -> Rubric:
    """The rubric a visitor chose: an uploaded file, or one of `choices` (default: the bundled rubrics)."""
    choices = choices if choices is not None else {label: load_rubric(t) for label, t in RUBRICS.items()}
    if choice == UPLOADED:
        if not rubric_file:
            raise UserError(f"Choose a rubric YAML file to upload, or pick one of {', '.join(choices)}.")
        try:
            return load_rubric(rubric_file)
        except DataError as exc:
            raise UserError(f"The rubric file has problems: {exc}") from None
        except UnicodeDecodeError:
            raise UserError("The rubric file is not UTF-8 text.") from None
    if choice not in choices:
        raise UserError(f"Unknown rubric {choice!r}.")
    return choices[choice]


def nearest_anchor(rubric: Rubric, dim: Dimension, score: float | None, failed: bool = False) -> str:
    if failed:
        return "no score: the answer failed"
    if score is None:
        excluded = next((o for o in dim.options if o.excluded), None)
        return f"not applicable ({excluded.label['en']})" if excluded else "no score"
    nearest = dim.nearest_score(score)
    option = min((o for o in dim.options if o.score == nearest), key=lambda o: o.letter)
    return f"{option.letter}: {rubric.in_languages(option.label)}"


def dimension_table(scores: Mapping[str, float | None], rubric: Rubric, failed: bool = False,
                    intervals: Mapping[str, list[float] | None] | None = None) -> list[list]:
    """One row per dimension; with a calibration's `intervals`, each score is shown with its interval."""
    def score(key: str):
        value = None if scores.get(key) is None else round(scores[key], 2)
        interval = (intervals or {}).get(key)
        return value if value is None or not interval else f"{value:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"

    return [[rubric.in_languages(d.name), score(d.key), nearest_anchor(rubric, d, scores.get(d.key), failed),
             d.description["en"]] for d in rubric.dimensions]


def summary_line(result: "SpaceResult", name: str, random_weights: bool) -> str:
    """The Markdown line above the table: the quality, or that the answer failed and why."""
    note = " — random-weight test model: these numbers mean nothing" if random_weights else ""
    if result.parse_status == "failed":
        return (f"**{name}: the answer failed, so there are no scores** — {result.error or 'no reason given'}. "
                f"The raw answer is below.{note}")
    quality = "—" if result.quality is None else f"{result.quality:.3f}"
    block = result.calibrated or {}
    if block.get("quality"):
        low, high = block["quality"]
        quality += f", {100 * (1 - block['alpha']):.0f} % interval [{low:.3f}, {high:.3f}]"
    elif block.get("not_applied"):
        quality += f" (no interval: {block['not_applied']})"
    return (f"**{name}: quality {quality}** (mean of the applicable dimensions; answer parse: "
            f"{result.parse_status}){note}")


def poem_catalogue(config: SpaceConfig, rubric: Rubric | None = None) -> dict[str, Poem]:
    """The poems a visitor picks from, by "title — author": PAE_POEMS's; else, with PAE_DATASET, the dataset's poems of
    the tradition of `rubric` (the Space's first); else the bundled ones."""
    if config.poems_file:
        poems = read_poems(config.poems_file)
    elif config.dataset:
        from ..dataset.reading import config_rows

        rows = [r for part in config_rows(config.dataset, "poems").values() for r in part]
        poems = [Poem(**{k: r.get(k) for k in POEM_FIELDS}) for r in rows
                 if rubric is None or r["tradition"] == rubric.tradition]
    else:
        poems = sample_poems()
    return {f"{p.title} — {p.author}": p for p in poems}


POEM_FIELDS = ("poem_id", "title", "author", "text", "tradition", "form", "tune")
N_EXAMPLES = 3


@dataclass(frozen=True)
class Example:
    """An upload example: an image file, its poem, and what the gallery says under it."""

    path: Path
    poem: Poem
    caption: str


def examples(config: SpaceConfig, poems: Mapping[str, Poem], rubric: Rubric,
             folder: Path | None = None) -> list[Example]:
    """A few upload examples: with PAE_DATASET, images of the dataset's first poems (its own pictures, which people
    rated); else synthetic paintings (the demo release's painter) of the catalogue's first poems."""
    folder = folder or Path(tempfile.mkdtemp(prefix="tpb-space-examples-"))
    by_id = {p.poem_id: p for p in poems.values()}
    if config.dataset:
        return _dataset_examples(config, by_id, rubric, folder)
    from ..dataset.synthetic.demo_release import PAINTERS
    from ..dataset.synthetic.painting import paint

    found = []
    for i, poem in enumerate(list(by_id.values())[:N_EXAMPLES]):
        path = folder / f"{poem.poem_id}.png"
        paint(poem.text, PAINTERS[i % 4].style, np.random.default_rng(i), size=384).save(path)
        found.append(Example(path, poem, f"{format_title(poem.title, rubric)} {poem.author} (synthetic painting)"))
    return found


def _dataset_examples(config: SpaceConfig, poems: Mapping[str, Poem], rubric: Rubric, folder: Path) -> list[Example]:
    """The first image of each of the dataset's first poems (test split first), read until N_EXAMPLES are found."""
    from ..dataset.reading import dataset_rows, row_image

    found: list[Example] = []
    for split in ("test", "validation", "train"):
        try:
            rows = dataset_rows(config.dataset, "images", split, ["image", "image_id", "poem_id"])
        except ValueError:  # a dataset without this split
            continue
        for row in rows:
            poem = poems.get(row["poem_id"])
            if poem is None or any(e.poem.poem_id == poem.poem_id for e in found):
                continue
            try:
                image = row_image(row["image"], config.dataset, config.max_image_pixels)
            except ImageError:  # refused (too large, or a path outside the dataset): the next poem's
                continue
            path = folder / f"{len(found)}.png"
            image.convert("RGB").save(path)
            found.append(Example(path, poem, f"{format_title(poem.title, rubric)} {poem.author} "
                                             f"({row['image_id'].split('/')[0]})"))
            if len(found) == N_EXAMPLES:
                return found
    return found


def space_words(rubric: Rubric, poems: Mapping[str, Poem], from_dataset: bool) -> dict[str, str]:
    """What the app says that depends on its rubric and poems: the header, the poem box's placeholder (the first
    line of the first poem) and the examples' label."""
    dims = ", ".join(d.name["en"].lower() for d in rubric.dimensions)
    first = next(iter(poems.values()), None)
    return {
        "header": ("# Does this picture illustrate the poem?\n"
                   f"PAE scores an illustration of a poem of {rubric.framing} on the {len(rubric.dimensions)} "
                   f"dimensions of the {rubric.display['en']} rubric ({dims}), the way careful human raters did, or on "
                   "those of a rubric file you upload. CLIPScore, BLIPScore and VQAScore are shown beside it: they "
                   "measure literal text–image match, which is not what makes an illustration good."),
        "placeholder": f"{first.lines[0]} …" if first else "",
        "examples": ("Examples (images of the dataset): click one" if from_dataset
                     else "Examples (synthetic paintings): click one"),
    }


class Scorer:
    """Evaluators loaded once and kept: `preload` loads them all when the app starts (not inside a GPU call, which
    on ZeroGPU would load them again for every request). VQAScore shares PAE's Qwen3-VL when they name the same
    checkpoint; PAE then keeps its adapter apart, so VQAScore asks the base model."""

    def __init__(self, config: SpaceConfig):
        self.config = config
        self._loaded: dict[str, Evaluator] = {}
        self._failed: dict[str, str] = {}
        self.rubrics = rubric_choices(config)  # label → rubric, the first the default

    @property
    def rubric(self) -> Rubric:
        """The Space's own rubric: its dataset's (PAE_DATASET), else the default tradition's. The compare and OCR
        tabs ask under it; the score tab offers it first."""
        return next(iter(self.rubrics.values()))

    @property
    def shares_qwen(self) -> bool:
        c = self.config
        return self.in_process and self.model_of("vqascore") == c.model

    @property
    def in_process(self) -> bool:
        """Whether PAE_BACKEND holds its model in this process as transformers does (a subclass of its backend
        included): the one model PAE, its pairwise question, VQAScore and SemJudge can share."""
        backend = self.config.backend
        return backend in BACKENDS and issubclass(backend_class(backend), TransformersBackend)

    def model_of(self, name: str) -> str | None:
        """The checkpoint an evaluator loads here: PAE's is PAE_MODEL, and so is VQAScore's unless its own variable
        names another (they then share one model); any other's its variable's, else its own default."""
        c = self.config
        return c.model if name == "pae" else c.models.get(name) or (c.model if name == "vqascore" else None)

    @property
    def pae_label(self) -> str:
        """What the rubric scores are: PAE only with its adapter; without one, the zero-shot open baseline."""
        return "PAE" if self.config.adapter else "zero-shot base model (no PAE adapter)"

    def preload(self) -> None:
        for name in ("pae", *baselines(), *((OCR,) if ocr_available() else ())):
            try:
                self.evaluator(name)
            except UserError:
                pass  # kept in _failed: said on use

    def backend(self) -> TransformersBackend:
        """The Space's Qwen3-VL on transformers, loaded once and shared by PAE, its pairwise question, VQAScore and
        SemJudge; PAE's adapter is kept apart where the base model is asked too."""
        if "backend" not in self._loaded:
            c = self.config
            keep_apart = bool(c.adapter) and (self.shares_qwen or not c.semjudge_url)
            self._loaded["backend"] = load_backend(c.backend, c.model, c.adapter, c.device,
                                                   merge_adapter=not keep_apart)
        return self._loaded["backend"]

    def evaluator(self, name: str) -> Evaluator:
        if name in self._failed:
            raise UserError(self._failed[name])
        if name not in self._loaded:
            c = self.config
            model = self.model_of(name)
            takes = evaluator_spec(name).options
            kwargs = {k: v for k, v in (("model", model), ("device", c.device)) if v and k in takes and name != OCR}
            try:
                if name == "vqascore" and self.shares_qwen:
                    backend = self.backend()
                    self._loaded[name] = VQAScore.from_loaded(backend.model, backend.processor, model_name=c.model)
                elif name == "pae" and self.in_process:
                    self._loaded[name] = pae_on(self.backend(), constrained=c.constrained, explain=c.explain)
                elif name == "pae":
                    self._loaded[name] = load_evaluator(name, backend=c.backend, adapter=c.adapter, explain=c.explain,
                                                        **kwargs)
                else:
                    self._loaded[name] = load_evaluator(name, **kwargs)
                if name == "pae" and c.calibration:
                    self._loaded[name] = Calibrated(self._loaded[name], load_calibration(c.calibration))
            except UserError:
                raise
            except Exception as exc:  # any failure to load is reported, never a stack trace
                self._failed[name] = (f"The {name} model ({model or 'default'}) could not be loaded: "
                                      f"{type(exc).__name__}: {str(exc)[:300]}")
                raise UserError(self._failed[name]) from None
        return self._loaded[name]

    def score(self, image_path, poem_text: str, title: str = "", author: str = "", rubric_choice: str = "",
              rubric_file: str | None = None, with_baselines: bool = True) -> SpaceResult:
        if not poem_text or not poem_text.strip():
            raise UserError("Enter the poem's text (or choose a poem from the list).")
        rubric = choose_rubric(rubric_choice or next(iter(self.rubrics)), rubric_file, self.rubrics)
        image = read_image(image_path, self.config.max_image_bytes, self.config.max_image_pixels)
        poem = Poem(poem_id="uploaded", title=title.strip() or "无题", author=author.strip() or "佚名",
                    text=poem_text.strip(), tradition=rubric.tradition)
        item = ScoringItem("uploaded", image, poem, rubric=rubric)
        [result] = self.evaluator("pae").score([item])
        name = self.pae_label
        failed = result.parse_status == "failed"  # no scores, no radar: a failed answer is never drawn as zeros
        figure = None if failed else radar({name: result.scores}, rubric,
                                           title=label(f"{name} · {format_title(poem.title, rubric)} {poem.author}",
                                                       f"{name} profile"))
        shown = [self.baseline(name, image, poem) for name in baselines()] if with_baselines else []
        intervals = (result.calibrated or {}).get("scores")
        return SpaceResult(table=dimension_table({} if failed else result.scores, rubric, failed, intervals),
                           quality=None if result.quality is None else round(result.quality, 3), figure=figure,
                           raw_output=result.raw_output or "", parse_status=result.parse_status, error=result.error,
                           baselines=shown, reasons=reasons_markdown(result.reasons, rubric),
                           calibrated=result.calibrated)

    def pairwise_judge(self):
        """PAE's model asked the pairwise question (constrained to its form), sharing the loaded model."""
        if "pairwise" not in self._loaded:
            if not self.in_process:
                raise UserError("Comparing two illustrations needs PAE on the transformers backend.")
            self._loaded["pairwise"] = pae_on(self.backend(), task="pairwise", constrained=True,
                                              max_new_tokens=PAIR_MAX_NEW_TOKENS, rubric=self.rubric)
        return self._loaded["pairwise"]

    def semjudge(self) -> SemJudge:
        """SemJudge asking PAE_SEMJUDGE_URL's model where set, else the Space's own Qwen3-VL (its base model: PAE's
        adapter, kept apart, is disabled for it); graphs cached in memory for the Space's life."""
        if "semjudge" not in self._loaded:
            c = self.config
            if c.semjudge_url:
                self._loaded["semjudge"] = load_evaluator("semjudge", model=c.semjudge_model or c.model,
                                                          base_url=[c.semjudge_url])
            elif not self.in_process:
                raise UserError("SemJudge needs PAE_SEMJUDGE_URL (a served model) or PAE on the transformers backend.")
            else:
                self._loaded["semjudge"] = SemJudge(self.backend())
        return self._loaded["semjudge"]

    def compare(self, image_a, image_b, poem_text: str, title: str = "", author: str = "",
                judge: str = JUDGES[0]) -> Comparison:
        """Which of two illustrations is better, asked of `judge` (PAE or SemJudge) in both orders."""
        if not poem_text or not poem_text.strip():
            raise UserError("Enter the poem's text (or choose a poem from the list).")
        if judge not in JUDGES:
            raise UserError(f"Unknown judge {judge!r}: {' or '.join(JUDGES)}.")
        a, b = (read_image(p, self.config.max_image_bytes, self.config.max_image_pixels) for p in (image_a, image_b))
        poem = Poem(poem_id="uploaded", title=title.strip() or "无题", author=author.strip() or "佚名",
                    text=poem_text.strip(), tradition=self.rubric.tradition)
        asked = self.semjudge() if judge == "SemJudge" else self.pairwise_judge()
        first, second = asked.judge([PairItem("uploaded", poem, a, b), PairItem("uploaded", poem, b, a)])
        found = Comparison(comparison_sentence(verdict(first, second)), comparison_rows(first, second),
                           asked.random_weights)
        if judge == "SemJudge":
            graphs = (first.extra or {}).get("graphs", {})
            found.drawn = tuple(None if graphs.get(side) is None else
                                draw_sign_boxes(image, graphs[side], asked.sent_size(image))
                                for side, image in (("A", a), ("B", b)))
            found.poem_graph = (graph_tree(graphs["poem"], format_title(poem.title, self.rubric))
                                if graphs.get("poem") else "")
        return found

    def text_regions(self, image_path, poem_text: str, title: str = "", author: str = "") -> tuple[Image.Image, str]:
        """The image with the text regions the OCR found drawn on it, and the verdict in a sentence."""
        rubric = self.rubric
        if rubric.adjudicated_dimension is None:
            raise UserError(f"The rubric {rubric_label(rubric)} has no adjudicated text dimension: there is no text "
                            "verdict to give.")
        if not ocr_available():
            raise UserError('The OCR is not installed here (pip install "tangpoetrybench[ocr]").')
        if not poem_text or not poem_text.strip():
            raise UserError("Enter the poem's text (or choose a poem from the list): leaks are found against it.")
        image = read_image(image_path, self.config.max_image_bytes, self.config.max_image_pixels)
        poem = Poem(poem_id="uploaded", title=title.strip(), author=author.strip(), text=poem_text.strip(),
                    tradition=rubric.tradition)
        [result] = self.evaluator(OCR).score([ScoringItem("uploaded", image, poem, rubric=rubric)])
        if result.evidence is None:
            raise UserError(f"The OCR failed on this image: {result.error}")
        evidence = result.evidence
        key = rubric.adjudicated_dimension
        matched = f" (characters of the poem: {evidence['matched']})" if evidence["matched"] else ""
        summary = (f"**Text: {evidence['verdict']}** — {VERDICT_TEXT[evidence['verdict']]}{matched}; "
                   f"{rubric.dimension(key).name['en'].lower()} {result.scores[key]:g}; "
                   f"{counted(len(evidence['regions']), 'region')} read by the OCR.")
        return draw_regions(image, evidence), summary

    def baseline(self, name: str, image: Image.Image, poem: Poem) -> list:
        """[metric, score, scale, note]: a baseline that cannot load or score says why, and PAE's result stands."""
        try:
            [b] = self.evaluator(name).score([ScoringItem("uploaded", image, poem)])
        except UserError as exc:
            return [name, None, self.scale(name), f"unavailable: {exc}"]
        note = "" if b.quality is not None else f"failed: {b.error}"
        return [name, None if b.quality is None else round(b.quality, 3), self.scale(name), note]

    @staticmethod
    def scale(name: str) -> str:
        return evaluator_spec(name).scale or "—"

    @property
    def random_weights(self) -> bool:
        return any(e.random_weights for e in self._loaded.values() if e is not self._loaded.get("backend"))


LEADERBOARD_HEADERS = ["rank", "generator", "PAE quality ×100 [95 % CI]", "human quality ×100 [95 % CI]",
                       "rank stability %", "images"]


@dataclass
class LeaderboardView:
    summary: str  # Markdown: what the numbers are, and PAE's agreement with people
    rows: list[list]
    figure: object | None


def leaderboard_view(path: str | Path | None, rubrics: Mapping[str, Rubric] | None = None) -> LeaderboardView:
    """The Leaderboard tab, from a `leaderboard.json`; without one, a line saying how to make it. Its radar names the
    dimensions of the rubric the scores were made with, found among `rubrics` (default: the bundled ones)."""
    import json

    from ..reporting.leaderboard import leaderboard_rows

    if not path:
        return LeaderboardView("No leaderboard here yet: make one with `tpb leaderboard --out DIR` and set "
                               "`PAE_LEADERBOARD=DIR/leaderboard.json`.", [], None)
    try:
        numbers = json.loads(Path(path).read_text(encoding="utf-8"))
        board = numbers["leaderboard"]
    except (OSError, ValueError, KeyError) as exc:
        raise UserError(f"The leaderboard file {path} cannot be read ({type(exc).__name__}): make it again with "
                        "`tpb leaderboard`.") from None
    made_with = numbers.get("settings", {}).get("rubric")
    known = [*(rubrics or {}).values(), *(load_rubric(t) for t in BUILTIN)]
    keys = {k for k in (board[0]["judge"] if board else {}) if k != "quality" and not k.endswith("_ci")}
    rubric = next((r for r in known if r.fingerprint == made_with), None) or next(
        (r for r in known if set(r.keys) == keys), None)  # results whose rubric changed since: by its dimensions
    notes = []
    if numbers.get("random_weights"):
        notes.append("**Random-weight test model: these numbers mean nothing.**")
    if numbers.get("synthetic"):
        notes.append("**Synthetic dataset: its human scores are simulated.**")
    rated = [r["generator"] for r in board if r["human"]]
    agree = numbers.get("agreement_with_humans", {})
    tau = agree.get("kendall_tau")
    label = label_of(numbers["evaluator"])
    notes.append(f"Every generator scored by `{numbers['evaluator']}` (`{numbers['model']}`) on the same "
                 f"{numbers['poems']} poems of the `{numbers['split']}` split. {label} columns are estimates; human "
                 f"columns are people's ratings of the same images, for {', '.join(rated) or 'no generator here'}."
                 + (f" {label}'s ranking of the human-rated generators against the human one: Kendall τ-b "
                    f"{tau:.3f}." if tau is not None else ""))
    if rubric is None and board:
        notes.append(f"No profile chart: the scores' rubric ({made_with}) is not among this Space's rubrics (set "
                     "PAE_DATASET to the dataset they scored).")
    figure = radar({r["generator"]: {k: r["judge"][k] for k in rubric.keys} for r in board}, rubric,
                   title=f"{label} estimates") if board and rubric else None
    return LeaderboardView("\n\n".join(notes), leaderboard_rows(board, label), figure)
