"""SemJudge (Jiang & Chen 2026) as a pairwise judge: a multimodal model builds a Hierarchical Semiosis Graph (HSG)
for the poem and for each image, then chooses between two images from the three graphs.

    >>> judge = load_semjudge(model="Qwen/Qwen3-VL-8B-Instruct", base_url="http://127.0.0.1:8000/v1",
    ...                       cache_dir="graphs/")
    >>> [answer] = judge.judge([PairItem("p1/g1-g2", poem, image_a, image_b)])
    >>> answer.winner, answer.reason, answer.extra["graphs"]["A"]

Three steps, each one request with its own JSON schema, read and validated by `reading.steps` (jsonschema):

1. `poem_graph`: the poem's HSG — a root (sign, object, interpretant, expected grounds: iconic, indexical or
   symbolic) and 3–5 sub-signs with their relation to the root. Asked once per poem, and cached on disk keyed by
   the poem, the model and the prompts' version.
2. `image_graph`: each image's HSG, its sub-signs with up to three bounding boxes in the pixel coordinates of the
   image as sent (its size is in the prompt); a box outside the image is refused. Cached the same way, keyed by
   the image's pixels, so asking a pair in both orders asks each image once.
3. `judgment`: from the poem and the three graphs, `{"discussion": …, "winner": "A" | "B"}`.

A step's answer that is not JSON, or not in its schema, gets one repair round (the answer, then "Reply with valid
JSON only, in the schema above" with what was wrong); if the second answer fails too, the item fails with the step
named in its error, never a guess. A request that fails (the server down, retries spent) fails the item the same
way. The model is asked through the machinery the rubric judges use: a served or hosted model through the `api`
judge's client and retry policy, or a local Qwen3-VL on transformers through PAE's loading and generation. The
prompts are data (`prompts/semjudge.yaml`), versioned.

A random-weight model cannot build a meaningful graph: every answer and graph from one says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

import yaml
from PIL import Image

from ..models import DEFAULT_MAX_PIXELS, chat_inputs, fit_pixels, fitted_size
from ..poems import Poem
from .pairwise import PairAnswer, PairItem
from .reading import read_json, schema_problems

GROUNDS = ("iconic", "indexical", "symbolic")
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


def box_problems(graph: dict, size: tuple[int, int]) -> list[str]:
    """The boxes of an image graph that are not inside the image (0 ≤ x_min < x_max ≤ width, likewise for y)."""
    width, height = size
    problems = []
    for i, child in enumerate(graph["hsg_root"]["children"]):
        for j, (x0, y0, x1, y1) in enumerate(child.get("bounding_boxes", [])):
            if not (0 <= x0 < x1 <= width and 0 <= y0 < y1 <= height):
                problems.append(f"$.hsg_root.children[{i}].bounding_boxes[{j}]: [{x0:g}, {y0:g}, {x1:g}, {y1:g}] is "
                                f"not inside the {width}×{height} image")
    return problems


def check(step: str, text: str, size: tuple[int, int] | None = None) -> tuple[Any, list[str]]:
    """(value, problems) of one step's answer: valid when there are no problems."""
    value, error = read_json(text)
    if error:
        return None, [error]
    problems = schema_problems(value, SCHEMAS[step])
    if not problems and size is not None:
        problems = box_problems(value, size)
    return value, problems


def system_message(step: str, **fields) -> str:
    return prompts()["steps"][step]["system"].format(schema=json.dumps(SCHEMAS[step], ensure_ascii=False), **fields)


def poem_messages(poem: Poem) -> list[dict]:
    user = prompts()["steps"]["poem_graph"]["user"].format(title=poem.title, author=poem.author, text=poem.text)
    return _messages(system_message("poem_graph"), [{"type": "text", "text": user}])


def image_messages(image: Image.Image) -> list[dict]:
    width, height = image.size
    return _messages(system_message("image_graph", width=width, height=height),
                     [{"type": "image", "image": image}, {"type": "text", "text": prompts()["steps"]["image_graph"]["user"]}])


def judgment_messages(poem: Poem, poem_graph: dict, graph_a: dict, graph_b: dict) -> list[dict]:
    shown = [json.dumps(g, ensure_ascii=False, indent=1) for g in (poem_graph, graph_a, graph_b)]
    user = prompts()["steps"]["judgment"]["user"].format(
        title=poem.title, author=poem.author, text=poem.text, poem_graph=shown[0], graph_a=shown[1], graph_b=shown[2])
    return _messages(system_message("judgment"), [{"type": "text", "text": user}])


def _messages(system: str, user: list[dict]) -> list[dict]:
    return [{"role": "system", "content": [{"type": "text", "text": system}]}, {"role": "user", "content": user}]


def repair_messages(messages: list[dict], answer: str, problems: Sequence[str]) -> list[dict]:
    """The repair round: the conversation, the answer given, and the request for valid JSON with what was wrong."""
    text = prompts()["repair"] + " What was wrong: " + "; ".join(problems[:10])
    return messages + [{"role": "assistant", "content": [{"type": "text", "text": answer}]},
                       {"role": "user", "content": [{"type": "text", "text": text}]}]


# ---- asking a model: a served one through the api judge, a local one through PAE ----

@dataclass
class Answer:
    text: str
    usage: dict[str, int] | None = None
    error: str | None = None  # the request failed (no answer to repair)


class Chat(Protocol):
    model_name: str
    random_weights: bool

    def settings(self) -> dict: ...

    def complete(self, conversations: list[list[dict]], schema_name: str, schema: dict) -> list[Answer]: ...


class ServedChat:
    """Asks a served or hosted model with the `api` judge's client, retry policy and key handling
    (`evaluators.api.APIJudge`), the step's schema as the response format."""

    random_weights = False

    def __init__(self, model: str, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, **api_options):
        from .evaluators.api import APIJudge

        self.api = APIJudge(model, max_new_tokens=max_new_tokens, **api_options)
        self.model_name = self.api.model_name

    def settings(self) -> dict:
        return {"backend": "api", "max_new_tokens": self.api.max_new_tokens, "temperature": 0.0}

    def complete(self, conversations: list[list[dict]], schema_name: str, schema: dict) -> list[Answer]:
        from .evaluators.api import json_format, run_coroutine

        return run_coroutine(self._complete(conversations, json_format(schema_name, schema)))

    async def _complete(self, conversations: list[list[dict]], fmt: dict) -> list[Answer]:
        from .evaluators.api import wire_messages

        async def one(client, slots: asyncio.Semaphore, stopped: asyncio.Event, key: str | None, i: int) -> Answer:
            async with slots:
                reply = await self.api.request(client, stopped, wire_messages(conversations[i]), fmt, key,
                                               f"request {i}")
            if reply is None or reply.error is not None:
                return Answer("", None, reply.error if reply else "stopped")
            return Answer(reply.text, reply.usage)

        return await self.api.each(len(conversations), one)


class LocalChat:
    """Asks a local Qwen3-VL on transformers through PAE's machinery (`evaluators.pae.PAE`, decoding greedily); the
    schema is in the prompt (no constrained decoding for graphs). A model with a LoRA adapter kept apart (PAE's, in
    the Space) is asked with the adapter disabled: SemJudge asks the base model."""

    def __init__(self, pae, batch_size: int = 4):
        self.pae, self.batch_size = pae, batch_size
        self.model_name, self.random_weights = pae.model_name, pae.random_weights

    @classmethod
    def load(cls, model: str, device: str | None = None, max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS) -> "LocalChat":
        from .evaluators.pae import PAE

        return cls(PAE(model, device=device, max_new_tokens=max_new_tokens))

    def settings(self) -> dict:
        return {"backend": "transformers", "max_new_tokens": self.pae.max_new_tokens}

    def complete(self, conversations: list[list[dict]], schema_name: str, schema: dict) -> list[Answer]:
        answers = []
        with getattr(self.pae.model, "disable_adapter", nullcontext)():
            for start in range(0, len(conversations), self.batch_size):
                batch = conversations[start:start + self.batch_size]
                answers += [Answer(text) for text in self.pae.generate(chat_inputs(self.pae.processor, batch))]
        return answers


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
            path = self.root / kind / f"{key}.json"
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(record, ensure_ascii=False, indent=1), encoding="utf-8")
            os.replace(tmp, path)


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
    """The pairwise judge of the contract: `name`, `model_name`, `random_weights`, `settings()`, `judge(items)`."""

    name = "semjudge"

    def __init__(self, chat: Chat, cache_dir: str | Path | None = None, max_pixels: int = DEFAULT_MAX_PIXELS):
        self.chat, self.cache, self.max_pixels = chat, GraphCache(cache_dir), max_pixels
        self.model_name, self.random_weights = chat.model_name, chat.random_weights
        self.requests = 0  # sent by this judge, repairs included

    def settings(self) -> dict[str, Any]:
        return {"prompt_version": prompts()["version"], "max_pixels": self.max_pixels, **self.chat.settings()}

    def ask(self, step: str, conversations: list[list[dict]],
            sizes: Sequence[tuple[int, int] | None] | None = None) -> list[StepResult]:
        """One step for each conversation: asked, validated, repaired once where it failed, else failed."""
        sizes = sizes or [None] * len(conversations)
        first = self._complete(step, conversations)
        results, repairs = [], {}
        for i, answer in enumerate(first):
            if answer.error:
                results.append(StepResult(step, None, [], "failed", f"{step}: the request failed: {answer.error}"))
                continue
            value, problems = check(step, answer.text, sizes[i])
            results.append(StepResult(step, value, [answer.text], "ok", None, _add({}, answer.usage)))
            if problems:
                repairs[i] = repair_messages(conversations[i], answer.text, problems)
        second = self._complete(step, list(repairs.values())) if repairs else []
        for i, answer in zip(repairs, second):
            result = results[i]
            _add(result.usage, answer.usage)
            result.raw.append(answer.text)
            value, problems = (None, [f"the request failed: {answer.error}"]) if answer.error else check(
                step, answer.text, sizes[i])
            if problems:
                result.value, result.status = None, "failed"
                result.error = f"{step}: still invalid after the repair round: " + "; ".join(problems[:5])
            else:
                result.value, result.status = value, "repaired"
        return results

    def _complete(self, step: str, conversations: list[list[dict]]) -> list[Answer]:
        self.requests += len(conversations)
        return self.chat.complete(conversations, step, SCHEMAS[step])

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
        return fingerprint("image", list(sent.size), sent.tobytes(), self.model_name, prompts()["version"])

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
        sent = [self.sent_image(image) for image in images]
        return self.graphs("image", [self.image_key(image) for image in sent], lambda i: image_messages(sent[i]),
                           "image_graph", sizes=[image.size for image in sent],
                           meta=[{"size": list(image.size)} for image in sent])

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


def load_semjudge(model: str, base_url: str | None = None, cache_dir: str | Path | None = None,
                  local: bool = False, device: str | None = None, max_pixels: int = DEFAULT_MAX_PIXELS,
                  max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS, **api_options) -> SemJudge:
    """SemJudge asking `model`: a local Qwen3-VL on transformers with `local=True` (a Hub id or folder), else the
    model a server knows (`base_url`, and the `api` judge's options: api_key_env, concurrency, timeout, retries)."""
    if local:
        if base_url or api_options:
            raise ValueError("a local SemJudge takes no --base-url or api options")
        chat: Chat = LocalChat.load(model, device=device, max_new_tokens=max_new_tokens)
    else:
        chat = ServedChat(model, max_new_tokens=max_new_tokens, base_url=base_url, max_pixels=max_pixels,
                          **{k: v for k, v in api_options.items() if v is not None})
    return SemJudge(chat, cache_dir, max_pixels)


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
