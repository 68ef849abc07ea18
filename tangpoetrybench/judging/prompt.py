"""The one prompt builder: inference, SFT and GRPO all ask PAE the same question in the same words.

The rubric goes in the system message and the image and poem in the user message, so every request
shares one long prefix (vLLM's prefix cache computes it once). The same poem, image and rubric always
give the same text.

    >>> messages = build_messages(poem, rubric, image)         # chat messages with one image part
    >>> target = format_answer(scores, rubric)                 # the assistant's JSON, for SFT
    >>> build_messages(poem, rubric, image, explain="en")      # explain mode: scores and a reason per dimension

Explain mode asks the same rubric question; only the answer format grows a `reasons` object, one sentence per
rubric dimension, in the poem's language (`explain="poem"`) or in English (`explain="en"`).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..rubric import FORMAT_1_FRAMING, Dimension, Rubric, format_title


REASON_LANGUAGES = ("poem", "en")  # the poem's own language (the rubric's), or English
MAX_REASON_CHARS = 120  # one sentence; constrained decoding stops a reason here


class PoemLike(Protocol):
    title: str
    author: str
    text: str


def _number(score: float) -> str:
    return f"{score:g}"


def reason_language(rubric: Rubric, explain: str) -> str:
    """The language explain mode's reasons are asked in, as the prompt names it."""
    if explain not in REASON_LANGUAGES:
        raise ValueError(f"unknown reason language {explain!r} (known: {', '.join(REASON_LANGUAGES)})")
    if explain == "en" or rubric.own_language == "en":
        return rubric.languages["en"]
    return f"{rubric.languages[rubric.own_language]}, the poem's language"


def _dimension_block(i: int, rubric: Rubric, dim: Dimension) -> str:
    options = "; ".join(
        f"{o.letter} = {rubric.in_languages(o.label, '{en} ({own})')}"
        + (" → null" if o.excluded else f" → {_number(o.score)}")
        for o in dim.options
    )
    lines = [
        f"{i}. {dim.key} — {rubric.in_languages(dim.name)}",
        f"   Judge: {rubric.in_languages(dim.description, '{en} {own}')}",
        f"   Anchors: {options}.",
    ]
    if any(o.excluded for o in dim.options):
        lines.append("   Answer null when the dimension does not apply to this image.")
    return "\n".join(lines)


def system_prompt(rubric: Rubric, explain: str | None = None) -> str:
    """The rubric as the judge's instructions; `explain` ("poem" or "en") asks for a reason per dimension too."""
    language = reason_language(rubric, explain) if explain is not None else None
    keys = ", ".join(rubric.keys)
    nullable = [d.key for d in rubric.dimensions if any(o.excluded for o in d.options)]
    blocks = "\n".join(_dimension_block(i, rubric, d) for i, d in enumerate(rubric.dimensions, start=1))
    schema = "{" + ", ".join(f'"{k}": <number{" or null" if k in nullable else ""}>' for k in rubric.keys) + "}"
    values = "Each value is a number from 0 to 1" + (
        f", or null for {', '.join(nullable)} when it does not apply" if nullable else "")
    scores = f"exactly these {len(rubric.keys)} keys, in this order: {keys}. {values}"
    fmt = f"Reply with one JSON object and nothing else: {scores}.\n{schema}"
    if explain is not None:
        fmt = (f'Reply with one JSON object and nothing else, with two keys. "scores": an object with {scores}. '
               '"reasons": an object with the same keys in the same order; each value is one sentence in '
               f"{language} (at most {MAX_REASON_CHARS} characters, no double quotes) saying what in "
               "the image earns that score.\n"
               + '{"scores": ' + schema + ', "reasons": {' + ", ".join(f'"{k}": "<sentence>"' for k in rubric.keys)
               + "}}")
    return (
        f"You are an expert judge of illustrations of {_framing(rubric)}. You will see one image and the poem it "
        "illustrates. Score the image on every dimension of the rubric below, as a careful, well-read human rater "
        "would.\n\n"
        "Each dimension lists its anchors: an option letter, what it means, and its score. Give the score of the "
        "anchor that fits best, or a value between two anchors when the image falls between them.\n\n"
        f"Rubric\n{blocks}\n\n"
        f"Answer format\n{fmt}"
    )


def _framing(rubric: Rubric) -> str:
    """"classical Chinese poetry (Tang poetry, 唐诗)": what the poems are, and the tradition's name."""
    return f"{rubric.framing} ({rubric.in_languages(rubric.display, '{en}, {own}')})"


def user_prompt(poem: PoemLike, rubric: Rubric | None = None) -> str:
    """The poem, its title written as the rubric says (`rubric.format_title`)."""
    return (
        f"Poem: {format_title(poem.title, rubric)} {poem.author}\n{poem.text}\n\n"
        "Score this illustration of the poem. Answer with the JSON object only."
    )


def build_messages(poem: PoemLike, rubric: Rubric, image: Any = None, explain: str | None = None) -> list[dict]:
    """Chat messages for one image and poem. `image` fills the image part (a PIL image, or None for a placeholder
    that the processor fills from a separate `images` column, as TRL's vision trainers do); `explain` asks for
    reasons (see `system_prompt`)."""
    image_part: dict = {"type": "image"} if image is None else {"type": "image", "image": image}
    return [
        {"role": "system", "content": [{"type": "text", "text": system_prompt(rubric, explain)}]},
        {"role": "user", "content": [image_part, {"type": "text", "text": user_prompt(poem, rubric)}]},
    ]


def with_image_parts(messages: list[dict], part: Callable[[Any], dict]) -> list[dict]:
    """The messages with each image part replaced by `part(image)`: an engine's or a server's own image format."""
    return [{**m, "content": [part(p["image"]) if p["type"] == "image" else p for p in m["content"]]} for m in messages]


def _value(score: float | None) -> float | None:
    return None if score is None else round(float(score), 2)


def format_answer(scores: Mapping[str, float | None], rubric: Rubric,
                  reasons: Mapping[str, str] | None = None) -> str:
    """The answer PAE is trained to give: the JSON object with every key in rubric order, two decimals; with
    `reasons`, explain mode's `{"scores": {…}, "reasons": {…}}`."""
    values = {k: _value(scores.get(k)) for k in rubric.keys}
    if reasons is None:
        return json.dumps(values, ensure_ascii=False)
    return json.dumps({"scores": values, "reasons": {k: reasons.get(k, "") for k in rubric.keys}}, ensure_ascii=False)


def format_value(score: float | None) -> str:
    """One value as `format_answer` writes it: `1.0`, `0.67`, `null`."""
    return json.dumps(_value(score))


def answer_schema(rubric: Rubric, explain: bool = False) -> dict:
    """The JSON schema of an answer (for structured decoding): numbers in [0, 1], null where a dimension can be
    excluded, every key required, nothing else; with `explain`, those scores under "scores" beside a "reasons"
    object of one non-empty sentence per key."""
    number = {"type": "number", "minimum": 0, "maximum": 1}
    scores = _object({d.key: {"anyOf": [number, {"type": "null"}]} if any(o.excluded for o in d.options) else number
                      for d in rubric.dimensions})
    if not explain:
        return scores
    sentence = {"type": "string", "minLength": 1, "maxLength": MAX_REASON_CHARS}
    return _object({"scores": scores, "reasons": _object({k: sentence for k in rubric.keys})})


def _object(properties: dict) -> dict:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


LETTERS = "ABCDEFGH"

# The recognizability question (Phase 1): one image and four candidate poems; the answer a letter.
RECOGNIZE_SYSTEM = (
    "You are an expert reader of {framing}. You will see one image, made to illustrate one of the poems listed with "
    "it. Decide which poem the image illustrates, from what it shows. Reply with the poem's letter only (A, B, C or "
    "D), nothing else."
)


def recognize_user_prompt(candidates: Sequence[PoemLike], rubric: Rubric | None = None) -> str:
    letters = ", ".join(LETTERS[: len(candidates) - 1]) + f" or {LETTERS[len(candidates) - 1]}"
    listed = "\n\n".join(f"{LETTERS[i]}. {format_title(p.title, rubric)} {p.author}\n{p.text}"
                         for i, p in enumerate(candidates))
    return f"{listed}\n\nWhich poem does this image illustrate? Answer with one letter: {letters}."


def build_recognize_messages(candidates: Sequence[PoemLike], image: Any = None,
                             rubric: Rubric | None = None) -> list[dict]:
    """Chat messages for the recognizability question: the image and the candidates in the order given, lettered;
    the poems are framed as the rubric of their tradition says (default: classical Chinese poetry)."""
    image_part: dict = {"type": "image"} if image is None else {"type": "image", "image": image}
    framing = rubric.framing if rubric is not None else FORMAT_1_FRAMING
    return [
        {"role": "system", "content": [{"type": "text", "text": RECOGNIZE_SYSTEM.format(framing=framing)}]},
        {"role": "user", "content": [image_part,
                                     {"type": "text", "text": recognize_user_prompt(candidates, rubric)}]},
    ]


# --- the pairwise variant: two images of one poem, which is the better illustration ---------------------------------

PAIR_WINNERS = ("A", "B")


def pair_system_prompt(rubric: Rubric) -> str:
    """The same rubric as `system_prompt`, asked as a forced choice between two images."""
    blocks = "\n".join(_dimension_block(i, rubric, d) for i, d in enumerate(rubric.dimensions, start=1))
    return (
        f"You are an expert judge of illustrations of {_framing(rubric)}. You will see two images, A (first) and B "
        "(second), and the poem they illustrate. Judge both on every dimension of the rubric below, as a careful, "
        "well-read human rater would, and say which is the better illustration of the poem overall. You must choose "
        "one.\n\n"
        f"Rubric\n{blocks}\n\n"
        "Answer format\n"
        'Reply with one JSON object and nothing else: {"winner": "A" or "B", "reason": "<one sentence>"}.\n'
        '{"winner": "A", "reason": "..."}'
    )


def pair_user_prompt(poem: PoemLike, rubric: Rubric | None = None) -> str:
    return (
        f"Poem: {format_title(poem.title, rubric)} {poem.author}\n{poem.text}\n\n"
        "Image A is the first image, image B the second. Which is the better illustration of the poem? "
        "Answer with the JSON object only."
    )


def build_pair_messages(poem: PoemLike, rubric: Rubric, image_a: Any = None, image_b: Any = None) -> list[dict]:
    """Chat messages for two images of one poem, A first (None: placeholders filled from an `images` column)."""
    parts = [{"type": "image"} if image is None else {"type": "image", "image": image} for image in (image_a, image_b)]
    return [
        {"role": "system", "content": [{"type": "text", "text": pair_system_prompt(rubric)}]},
        {"role": "user", "content": [{"type": "text", "text": "Image A:"}, parts[0], {"type": "text", "text": "Image B:"},
                                     parts[1], {"type": "text", "text": pair_user_prompt(poem, rubric)}]},
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
