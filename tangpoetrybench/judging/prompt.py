"""The one prompt builder: inference, SFT and GRPO all ask PAE the same question in the same words.

The rubric goes in the system message and the image and poem in the user message, so every request
shares one long prefix (vLLM's prefix cache computes it once). The same poem, image and rubric always
give the same text.

    >>> messages = build_messages(poem, rubric, image)         # chat messages with one image part
    >>> target = format_answer(scores, rubric)                 # the assistant's JSON, for SFT
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Protocol

from ..rubric import Dimension, Rubric


class PoemLike(Protocol):
    title: str
    author: str
    text: str


def _number(score: float) -> str:
    return f"{score:g}"


def _dimension_block(i: int, dim: Dimension) -> str:
    options = "; ".join(
        f"{o.letter} = {o.label['en']} ({o.label['zh']})" + (" → null" if o.excluded else f" → {_number(o.score)}")
        for o in dim.options
    )
    lines = [
        f"{i}. {dim.key} — {dim.name['en']} / {dim.name['zh']}",
        f"   Judge: {dim.description['en']} {dim.description['zh']}",
        f"   Anchors: {options}.",
    ]
    if any(o.excluded for o in dim.options):
        lines.append("   Answer null when the dimension does not apply to this image.")
    return "\n".join(lines)


def system_prompt(rubric: Rubric) -> str:
    keys = ", ".join(rubric.keys)
    nullable = [d.key for d in rubric.dimensions if any(o.excluded for o in d.options)]
    blocks = "\n".join(_dimension_block(i, d) for i, d in enumerate(rubric.dimensions, start=1))
    schema = "{" + ", ".join(f'"{k}": <number{" or null" if k in nullable else ""}>' for k in rubric.keys) + "}"
    return (
        f"You are an expert judge of illustrations of classical Chinese poetry ({rubric.display['en']}, "
        f"{rubric.display['zh']}). You will see one image and the poem it illustrates. Score the image on every "
        "dimension of the rubric below, as a careful, well-read human rater would.\n\n"
        "Each dimension lists its anchors: an option letter, what it means, and its score. Give the score of the "
        "anchor that fits best, or a value between two anchors when the image falls between them.\n\n"
        f"Rubric\n{blocks}\n\n"
        "Answer format\n"
        f"Reply with one JSON object and nothing else: exactly these {len(rubric.keys)} keys, in this order: "
        f"{keys}. Each value is a number from 0 to 1"
        + (f", or null for {', '.join(nullable)} when it does not apply" if nullable else "")
        + f".\n{schema}"
    )


def user_prompt(poem: PoemLike) -> str:
    return (
        f"Poem: 《{poem.title}》 {poem.author}\n{poem.text}\n\n"
        "Score this illustration of the poem. Answer with the JSON object only."
    )


def build_messages(poem: PoemLike, rubric: Rubric, image: Any = None) -> list[dict]:
    """Chat messages for one image and poem. `image` fills the image part (a PIL image, or None for a placeholder
    that the processor fills from a separate `images` column, as TRL's vision trainers do)."""
    image_part: dict = {"type": "image"} if image is None else {"type": "image", "image": image}
    return [
        {"role": "system", "content": [{"type": "text", "text": system_prompt(rubric)}]},
        {"role": "user", "content": [image_part, {"type": "text", "text": user_prompt(poem)}]},
    ]


def with_image_parts(messages: list[dict], part: Callable[[Any], dict]) -> list[dict]:
    """The messages with each image part replaced by `part(image)`: an engine's or a server's own image format."""
    return [{**m, "content": [part(p["image"]) if p["type"] == "image" else p for p in m["content"]]} for m in messages]


def format_answer(scores: Mapping[str, float | None], rubric: Rubric) -> str:
    """The answer PAE is trained to give: the JSON object with every key in rubric order, two decimals."""
    return json.dumps(
        {k: None if scores.get(k) is None else round(float(scores[k]), 2) for k in rubric.keys},
        ensure_ascii=False,
    )


def answer_schema(rubric: Rubric) -> dict:
    """The JSON schema of an answer (for structured decoding): numbers in [0, 1], null where a dimension can be
    excluded, every key required, nothing else."""
    number = {"type": "number", "minimum": 0, "maximum": 1}
    return {
        "type": "object",
        "properties": {
            d.key: {"anyOf": [number, {"type": "null"}]} if any(o.excluded for o in d.options) else number
            for d in rubric.dimensions
        },
        "required": list(rubric.keys),
        "additionalProperties": False,
    }


# --- the pairwise variant: two images of one poem, which is the better illustration ---------------------------------

PAIR_WINNERS = ("A", "B")


def pair_system_prompt(rubric: Rubric) -> str:
    """The same rubric as `system_prompt`, asked as a forced choice between two images."""
    blocks = "\n".join(_dimension_block(i, d) for i, d in enumerate(rubric.dimensions, start=1))
    return (
        f"You are an expert judge of illustrations of classical Chinese poetry ({rubric.display['en']}, "
        f"{rubric.display['zh']}). You will see two images, A (first) and B (second), and the poem they illustrate. "
        "Judge both on every dimension of the rubric below, as a careful, well-read human rater would, and say which "
        "is the better illustration of the poem overall. You must choose one.\n\n"
        f"Rubric\n{blocks}\n\n"
        "Answer format\n"
        'Reply with one JSON object and nothing else: {"winner": "A" or "B", "reason": "<one sentence>"}.\n'
        '{"winner": "A", "reason": "..."}'
    )


def pair_user_prompt(poem: PoemLike) -> str:
    return (
        f"Poem: 《{poem.title}》 {poem.author}\n{poem.text}\n\n"
        "Image A is the first image, image B the second. Which is the better illustration of the poem? "
        "Answer with the JSON object only."
    )


def build_pair_messages(poem: PoemLike, rubric: Rubric, image_a: Any = None, image_b: Any = None) -> list[dict]:
    """Chat messages for two images of one poem, A first (None: placeholders filled from an `images` column)."""
    parts = [{"type": "image"} if image is None else {"type": "image", "image": image} for image in (image_a, image_b)]
    return [
        {"role": "system", "content": [{"type": "text", "text": pair_system_prompt(rubric)}]},
        {"role": "user", "content": [{"type": "text", "text": "Image A:"}, parts[0], {"type": "text", "text": "Image B:"},
                                     parts[1], {"type": "text", "text": pair_user_prompt(poem)}]},
    ]


def format_pair_answer(winner: str, reason: str = "") -> str:
    """The pairwise answer PAE is trained to give."""
    if winner not in PAIR_WINNERS:
        raise ValueError(f"a pairwise answer's winner is 'A' or 'B', not {winner!r}")
    return json.dumps({"winner": winner, "reason": reason}, ensure_ascii=False)


def pair_answer_schema() -> dict:
    """The JSON schema of a pairwise answer (for structured decoding)."""
    return {"type": "object",
            "properties": {"winner": {"type": "string", "enum": list(PAIR_WINNERS)}, "reason": {"type": "string"}},
            "required": ["winner", "reason"], "additionalProperties": False}
