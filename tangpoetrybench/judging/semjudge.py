"""SemJudge (Jiang & Chen 2026) as a pairwise judge: a multimodal model builds a Hierarchical Semiosis Graph (HSG)
for the poem and for each image, then chooses between two images from the three graphs.

    >>> judge = load_evaluator("semjudge", model="Qwen/Qwen3-VL-8B-Instruct", base_url="http://127.0.0.1:8000/v1",
    ...                        cache_dir="graphs/")
    >>> [answer] = judge.judge([PairItem("p1/g1-g2", poem, image_a, image_b)])
    >>> answer.winner, answer.reason, answer.extra["graphs"]["A"]

Three steps, each one request with its own JSON schema, read and validated by `reading.steps` (jsonschema):

1. `poem_graph`: the poem's HSG — a root (sign, object, interpretant, expected grounds: iconic, indexical or
   symbolic) and 3–5 sub-signs with their relation to the root. Asked once per poem, and cached on disk keyed by
   the poem, the model and the prompts' version.
2. `image_graph`: each image's HSG, its sub-signs with up to three bounding boxes. The Qwen3-VL family grounds on a
   relative grid, 0 to 1000 over the image whatever its size (Qwen2.5-VL gave pixels of the resized image), so
   that is what is asked by default (`boxes="relative"`; `boxes="pixels"` asks for pixels of the image as sent, its
   size in the prompt). A box outside the grid (or the image) or without area is refused; the boxes read are
   converted to pixels of the image as sent, in which every graph is kept, cached and drawn. Cached the same way,
   keyed by the image's pixels, so asking a pair in both orders asks each image once.
3. `judgment`: from the poem and the three graphs, `{"discussion": …, "winner": "A" | "B"}`.

A step's answer that is not JSON, or not in its schema, gets one repair round (the answer, then "Reply with valid
JSON only, in the schema above" with what was wrong); if the second answer fails too, the item fails with the step
named in its error, never a guess. A request that fails (the server down, retries spent) fails the item the same
way. The steps are asked through the machinery every judge uses (`judge.ask`, the one repair round) of any backend:
a local Qwen3-VL on transformers (its base model), vLLM (each step's schema as structured output), or a served
model (the schema as the response format). The prompts are data (`prompts/semjudge.yaml`), versioned.

A random-weight model cannot build a meaningful graph: every answer and graph from one says so.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml
from PIL import Image

from ..files import write_file
from ..models import DEFAULT_MAX_PIXELS, fit_pixels, fitted_size, image_refusal
from ..poems import Poem
from .backends import Backend, Question
from .judge import Attempt, ask
from .reading import VERSIONS, read_json, schema_problems
from .tasks import Reading
from .tasks.pairwise import PairAnswer, PairItem

GROUNDS = ("iconic", "indexical", "symbolic")
BOX_CONVENTIONS = ("relative", "pixels")  # the boxes asked for: on Qwen3-VL's 0–1000 grid, or in pixels
GRID = 1000  # Qwen3-VL's grounding grid: a relative coordinate x is x / 1000 of the image's width
DEFAULT_MAX_NEW_TOKENS = 1536  # a graph of five sub-signs with boxes is about 800 Qwen tokens
RANDOM_WEIGHTS_NOTE = "random weights: a plumbing check, not an interpretation"


# ---- prompts and schemas ----

@lru_cache(maxsize=1)
def prompts() -> dict:
    """The prompts file: its version, the repair line, and each step's system and user templates."""
    return yaml.safe_load(resources.files("tangpoetrybench").joinpath("prompts/semjudge.yaml").read_text("utf-8"))


def _text(min_length: int = 1) -> dict:
    return {"type": "string", "minLength": min_length}


def _object(properties: dict, optional: Sequence[str] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": [k for k in properties if k not in optional],
            "additionalProperties": False}


def graph_schema(boxes: bool) -> dict:
    """An HSG: `hsg_root` with its semiosis and 3–5 children, each with its relation to the root and, for an image,
    up to three boxes [x_min, y_min, x_max, y_max]."""
    semiosis = _object({"sign_description": _text(), "inferred_object": _text(), "interpretant": _text(),
                        "expected_grounds": {"type": "array", "items": {"enum": list(GROUNDS)}, "minItems": 1,
                                             "maxItems": 3}})
    child = {"node_id": _text(), "semiosis": semiosis, "relation_to_root": _text()}
    if boxes:
        box = {"type": "array", "items": {"type": "number"}, "minItems": 4, "maxItems": 4}
        child["bounding_boxes"] = {"type": "array", "items": box, "maxItems": 3}
    root = _object({"node_id": _text(), "semiosis": semiosis,
                    "children": {"type": "array", "items": _object(child), "minItems": 3, "maxItems": 5}})
    return _object({"hsg_root": root})


JUDGMENT_SCHEMA = _object({"discussion": _text(), "winner": {"enum": ["A", "B"]}})
SCHEMAS = {"poem_graph": graph_schema(False), "image_graph": graph_schema(True), "judgment": JUDGMENT_SCHEMA}


def box_problems(graph: dict, size: tuple[int, int], boxes: str = "pixels") -> list[str]:
    """The boxes of an image graph that are not boxes in `boxes`' convention: outside the image of `size` (pixels)
    or the 0–1000 grid (relative), or without area (0 ≤ x_min < x_max ≤ width, likewise for y)."""
    width, height = (GRID, GRID) if boxes == "relative" else size
    where = f"the 0–{GRID} grid of relative coordinates" if boxes == "relative" else f"the {width}×{height} image"
    problems = []
    for i, child in enumerate(graph["hsg_root"]["children"]):
        for j, (x0, y0, x1, y1) in enumerate(child.get("bounding_boxes", [])):
            box = f"$.hsg_root.children[{i}].bounding_boxes[{j}]: [{x0:g}, {y0:g}, {x1:g}, {y1:g}]"
            if not (0 <= min(x0, x1) and max(x0, x1) <= width and 0 <= min(y0, y1) and max(y0, y1) <= height):
                problems.append(f"{box} is not inside {where}")
            elif not (x0 < x1 and y0 < y1):
                problems.append(f"{box} has no area (it needs x_min < x_max and y_min < y_max)")
    return problems


def in_pixels(graph: dict, size: tuple[int, int], boxes: str) -> dict:
    """The graph with its boxes in pixels of the image as sent (of `size`): relative ones scaled by size / 1000."""
    if boxes == "pixels":
        return graph
    width, height = size
    scale = (width / GRID, height / GRID) * 2
    children = [{**child, "bounding_boxes": [[round(v * f, 1) for v, f in zip(box, scale)]
                                             for box in child["bounding_boxes"]]}
                if "bounding_boxes" in child else child for child in graph["hsg_root"]["children"]]
    return {**graph, "hsg_root": {**graph["hsg_root"], "children": children}}


def check(step: str, text: str, size: tuple[int, int] | None = None, boxes: str = "pixels") -> tuple[Any, list[str]]:
    """(value, problems) of one step's answer: valid when there are no problems; an image graph's boxes in
    `boxes`' convention, read back in pixels of the image of `size`."""
    value, error = read_json(text)
    if error:
        return None, [error]
    problems = schema_problems(value, SCHEMAS[step])
    if not problems and size is not None:
        problems = box_problems(value, size, boxes)
        value = in_pixels(value, size, boxes) if not problems else value
    return value, problems


def system_message(step: str, **fields) -> str:
    return prompts()["steps"][step]["system"].format(schema=json.dumps(SCHEMAS[step], ensure_ascii=False), **fields)


def poem_messages(poem: Poem) -> list[dict]:
    user = prompts()["steps"]["poem_graph"]["user"].format(title=poem.title, author=poem.author, text=poem.text)
    return _messages(system_message("poem_graph"), [{"type": "text", "text": user}])


def image_messages(image: Image.Image, boxes: str = "relative") -> list[dict]:
    width, height = image.size
    asked = prompts()["boxes"][boxes].format(width=width, height=height)
    return _messages(system_message("image_graph", width=width, height=height, boxes=asked),
                     [{"type": "image", "image": image}, {"type": "text", "text": prompts()["steps"]["image_graph"]["user"]}])


def judgment_messages(poem: Poem, poem_graph: dict, graph_a: dict, graph_b: dict) -> list[dict]:
    shown = [json.dumps(g, ensure_ascii=False, indent=1) for g in (poem_graph, graph_a, graph_b)]
    user = prompts()["steps"]["judgment"]["user"].format(
        title=poem.title, author=poem.author, text=poem.text, poem_graph=shown[0], graph_a=shown[1], graph_b=shown[2])
    return _messages(system_message("judgment"), [{"type": "text", "text": user}])


def _messages(system: str, user: list[dict]) -> list[dict]:
    return [{"role": "system", "content": [{"type": "text", "text": system}]}, {"role": "user", "content": user}]


def read_step(step: str, text: str, size: tuple[int, int] | None = None, boxes: str = "pixels") -> Reading:
    """A step's answer read: its value when valid, else failed with what was wrong (the repair round says it)."""
    value, problems = check(step, text, size, boxes)
    return Reading(value, "ok") if not problems else Reading(None, "failed", "; ".join(problems[:10]))


def step_result(step: str, attempt: Attempt) -> "StepResult":
    """A step's result from its attempt: the value, every raw answer, ok / repaired / failed and why."""
    if attempt.reading is None:
        return StepResult(step, None, [], "failed", f"{step}: the request failed: {attempt.answer.error}")
    raw = [attempt.answer.text] + ([attempt.repair.text] if attempt.repair is not None and attempt.repaired else [])
    usage = attempt.usage or {}
    if attempt.status == "failed":
        why = (f"the request failed: {attempt.repair.error}" if attempt.repaired is None else attempt.repaired.error)
        return StepResult(step, None, raw, "failed", f"{step}: still invalid after the repair round: {why}", usage)
    return StepResult(step, attempt.value, raw, attempt.status, None, usage)


# ---- the cache ----

def fingerprint(*parts: Any) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else json.dumps(part, ensure_ascii=False).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


class GraphCache:
    """Graphs on disk, one JSON file each under `root/<poem|image>/<key>.json`, written atomically; None as the
    root keeps them in memory only (for one run)."""

    def __init__(self, root: str | Path | None):
        self.root = Path(root) if root is not None else None
        self.memory: dict[str, dict] = {}

    def get(self, kind: str, key: str) -> dict | None:
        if f"{kind}/{key}" in self.memory or self.root is None:
            return self.memory.get(f"{kind}/{key}")
        path = self.root / kind / f"{key}.json"
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None

    def put(self, kind: str, key: str, record: dict) -> None:
        self.memory[f"{kind}/{key}"] = record
        if self.root is not None:
            write_file(self.root / kind / f"{key}.json", json.dumps(record, ensure_ascii=False, indent=1),
                       root=self.root)


# ---- the judge ----

@dataclass
class StepResult:
    """One step for one input: its value (None when it failed), every raw answer, ok/repaired/failed, why."""

    step: str
    value: Any
    raw: list[str]
    status: str
    error: str | None = None
    usage: dict[str, int] = field(default_factory=dict)
    cached: bool = False


def _add(usage: dict[str, int], more: dict[str, int] | None) -> dict[str, int]:
    for k, v in (more or {}).items():
        usage[k] = usage.get(k, 0) + v
    return usage


class SemJudge:
    """The pairwise judge of the contract: `name`, `model_name`, `random_weights`, `settings()`, `judge(items)`. It
    asks any backend (`judging.backends`): a local Qwen3-VL (its base model: a kept-apart adapter is disabled), vLLM,
    or a served model."""

    name = "semjudge"

    def __init__(self, backend: Backend, cache_dir: str | Path | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
                 max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, boxes: str = "relative"):
        if boxes not in BOX_CONVENTIONS:
            raise ValueError(f"--boxes {boxes!r}: one of {', '.join(BOX_CONVENTIONS)}")
        self.boxes = boxes
        self.backend = backend.without_adapter() if hasattr(backend, "without_adapter") else backend
        self.cache, self.max_pixels, self.max_new_tokens = GraphCache(cache_dir), max_pixels, max_new_tokens
        self.model_name, self.random_weights = backend.model_name, backend.random_weights  # None: served
        self.requests = 0  # sent by this judge, repairs included

    def settings(self) -> dict[str, Any]:
        return {"prompt_version": prompts()["version"], "parser": VERSIONS["steps"], "max_pixels": self.max_pixels,
                "backend": self.backend.name, "max_new_tokens": self.max_new_tokens, "boxes": self.boxes,
                **self.backend.settings()}

    def ask(self, step: str, conversations: list[list[dict]],
            sizes: Sequence[tuple[int, int] | None] | None = None) -> list[StepResult]:
        """One step for each conversation: asked, validated, repaired once where it failed, else failed."""
        sizes = sizes or [None] * len(conversations)
        questions = [Question(c, self.max_new_tokens, schema=SCHEMAS[step], schema_name=step, meta={"size": size})
                     for c, size in zip(conversations, sizes)]
        attempts = ask(self.backend, questions, lambda q, a: read_step(step, a.text, q.meta["size"], self.boxes),
                       lambda q, reading: prompts()["repair"] + " What was wrong: " + reading.error)
        self.requests += len(attempts) + sum(a.repair is not None for a in attempts)
        return [step_result(step, a) for a in attempts]

    def graphs(self, kind: str, keys: list[str], make: Callable[[int], list[dict]], step: str,
               sizes: Sequence[tuple[int, int] | None] | None = None, meta: Sequence[dict] = ()) -> list[StepResult]:
        """The graph for each key, in order, each distinct key asked at most once: from the cache, or asked (the
        successes then cached)."""
        found: dict[str, StepResult] = {}
        todo: dict[str, int] = {}  # key → the first index that needs it
        for i, key in enumerate(keys):
            if key in found or key in todo:
                continue
            cached = self.cache.get(kind, key)
            if cached is None:
                todo[key] = i
            else:
                found[key] = StepResult(step, cached["graph"], cached["raw"], cached["status"], cached=True)
        asked = self.ask(step, [make(i) for i in todo.values()], [(sizes or [None] * len(keys))[i] for i in todo.values()])
        for (key, i), result in zip(todo.items(), asked):
            found[key] = result
            if result.value is not None:
                self.cache.put(kind, key, {
                    "graph": result.value, "raw": result.raw, "status": result.status, "usage": result.usage,
                    "model": self.model_name, "prompt_version": prompts()["version"], **(meta[i] if meta else {}),
                    **({"random_weights": True, "note": RANDOM_WEIGHTS_NOTE} if self.random_weights else {})})
        return [found[key] for key in keys]

    def poem_key(self, poem: Poem) -> str:
        return fingerprint("poem", [poem.poem_id, poem.title, poem.author, poem.text], self.model_name,
                           prompts()["version"])

    def image_key(self, sent: Image.Image) -> str:
        return fingerprint("image", list(sent.size), sent.tobytes(), self.model_name, prompts()["version"], self.boxes)

    def sent_image(self, image: Image.Image) -> Image.Image:
        """The image as the model sees it (RGB, within the pixel budget): boxes are in its coordinates."""
        return fit_pixels(image.convert("RGB"), self.max_pixels)

    def sent_size(self, image: Image.Image) -> tuple[int, int]:
        """The size of `sent_image(image)`, where the boxes are, without resizing the image."""
        return fitted_size(image.size, self.max_pixels)

    def poem_graphs(self, poems: Sequence[Poem]) -> list[StepResult]:
        return self.graphs("poem", [self.poem_key(p) for p in poems], lambda i: poem_messages(poems[i]), "poem_graph",
                           meta=[{"poem_id": p.poem_id} for p in poems])

    def image_graphs(self, images: Sequence[Image.Image]) -> list[StepResult]:
        """Each image's graph; an image its model's processor would refuse (`models.image_refusal`) fails unasked."""
        sent = [self.sent_image(image) for image in images]
        refused = [image_refusal(image.size) for image in sent]
        asked = [image for image, why in zip(sent, refused) if not why]
        graphs = iter(self.graphs("image", [self.image_key(image) for image in asked],
                                  lambda i: image_messages(asked[i], self.boxes), "image_graph",
                                  sizes=[image.size for image in asked],
                                  meta=[{"size": list(image.size), "boxes": self.boxes} for image in asked]))
        return [StepResult("image_graph", None, [], "failed", f"image_graph: {why}") if why else next(graphs)
                for why in refused]

    def judge(self, items: Sequence[PairItem]) -> list[PairAnswer]:
        """One ordered 2AFC answer per item: the three graphs (cached where they were made before), then the
        judgment."""
        poems = self.poem_graphs([it.poem for it in items])
        images = self.image_graphs([img for it in items for img in (it.image_a, it.image_b)])
        steps = [(poems[i], images[2 * i], images[2 * i + 1]) for i in range(len(items))]
        ready = [i for i, s in enumerate(steps) if all(r.value is not None for r in s)]
        judged = dict(zip(ready, self.ask("judgment", [
            judgment_messages(items[i].poem, *(r.value for r in steps[i])) for i in ready])))
        return [self._answer(steps[i], judged.get(i)) for i in range(len(items))]

    def _answer(self, graphs: tuple[StepResult, StepResult, StepResult], judgment: StepResult | None) -> PairAnswer:
        parts = [*graphs, *([judgment] if judgment else [])]
        usage: dict[str, int] = {}
        for part in parts:
            if not part.cached:
                _add(usage, part.usage)
        extra = {"graphs": dict(zip(("poem", "A", "B"), (g.value for g in graphs))),
                 "steps": {name: {"status": g.status, "cached": g.cached} for name, g in
                           zip(("poem_graph", "image_graph_A", "image_graph_B"), graphs)}}
        if judgment:
            extra["steps"]["judgment"] = {"status": judgment.status, "cached": False}
        if self.random_weights:
            extra["random_weights"] = RANDOM_WEIGHTS_NOTE
        raw = [text for part in parts if not part.cached for text in part.raw]
        failed = next((p for p in parts if p.status == "failed"), None)
        note = f" ({RANDOM_WEIGHTS_NOTE})" if self.random_weights else ""
        if failed is not None:
            return PairAnswer(None, raw, "failed", failed.error + note, None, usage or None, extra)
        status = "repaired" if any(p.status == "repaired" and not p.cached for p in parts) else "ok"
        reason = (f"[{RANDOM_WEIGHTS_NOTE}] " if self.random_weights else "") + judgment.value["discussion"]
        return PairAnswer(judgment.value["winner"], raw, status, None, reason, usage or None, extra)


def from_options(task: str = "pairwise", cache_dir: str | Path | None = None, boxes: str | None = None, **options):
    """The registry's factory: SemJudge on any backend (on transformers, the base model), from `JudgeOptions`."""
    from .registry import backend_of, build_backend

    backend = build_backend(backend_of(SemJudge.name, options), options)
    if options.pop("repair", 1) != 1:
        raise ValueError("SemJudge always has its one repair round: give no --repair")
    return SemJudge(backend, cache_dir, **{k: options.pop(k) for k in ("max_pixels",) if k in options},
                    max_new_tokens=options.pop("max_new_tokens", None) or DEFAULT_MAX_NEW_TOKENS,
                    boxes=boxes or "relative")


# ---- showing a graph ----

def graph_tree(graph: dict, title: str = "") -> str:
    """An HSG as an indented tree: the root's triad and grounds, then each sub-sign with its relation and boxes."""
    root = graph["hsg_root"]
    lines = [title] if title else []
    lines += _node_lines(root, "", f"{root['node_id']} (root)")
    for child in root["children"]:
        lines += _node_lines(child, "    ", f"{child['node_id']} — {child['relation_to_root']}")
        for box in child.get("bounding_boxes", []):
            lines.append("        box: [" + ", ".join(f"{v:g}" for v in box) + "]")
    return "\n".join(lines)


def _node_lines(node: dict, indent: str, head: str) -> list[str]:
    s = node["semiosis"]
    return [f"{indent}{head}", f"{indent}  sign: {s['sign_description']}", f"{indent}  object: {s['inferred_object']}",
            f"{indent}  interpretant: {s['interpretant']}", f"{indent}  grounds: {', '.join(s['expected_grounds'])}"]
