"""Reading SemJudge's steps: each answer is one JSON value in its step's schema, read strictly (a step's answer is
asked under its schema, and a failed read gets the repair round instead of a guess).

`read_json` drops the thinking (the core's one behaviour) and unwraps an answer that is one code fence, then loads
the JSON; prose around it is a failed read, never fished out. `schema_problems` checks the value against the step's
JSON Schema with `jsonschema`, one line per problem, each with its JSON path (`$.hsg_root.children[0]: …`). One
keyword reads as the steps mean it: `minLength` counts a string's text, not the whitespace around it.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from .core import drop_thinking, whole_fence


def read_json(text: str) -> tuple[Any, str | None]:
    """(value, None) for an answer that is one JSON value (a code fence or a thinking block around it removed),
    else (None, why)."""
    body, _ = drop_thinking(text or "")
    try:
        return json.loads(whole_fence(body.strip())), None
    except ValueError as exc:
        return None, f"not valid JSON ({exc})"


def schema_problems(value: Any, schema: dict) -> list[str]:
    """What in `value` breaks `schema`, one line each, with its JSON path, in the schema's order; [] when nothing
    does."""
    return [f"{error.json_path}: {_message(error)}" for error in _validator(json.dumps(schema))
            .iter_errors(value)]


def _text_length(validator, minimum, instance, schema):
    if validator.is_type(instance, "string") and len(instance.strip()) < minimum:
        yield ValidationError("empty" if not instance.strip() else f"{instance!r} is shorter than {minimum}")


StepValidator = validators.extend(Draft202012Validator, {"minLength": _text_length})


@functools.lru_cache(maxsize=16)
def _validator(schema: str):
    return StepValidator(json.loads(schema))


def _message(error: ValidationError) -> str:
    """jsonschema's message, made short: a list's length rather than the whole list, each missing or unexpected key
    named."""
    instance, rule, given = error.instance, error.validator, error.validator_value
    if rule in ("minItems", "maxItems"):
        return f"{len(instance)} items, not {error.schema.get('minItems', 0)}–{error.schema.get('maxItems', 'any')}"
    if rule == "enum":
        return f"{instance!r} is not one of {', '.join(map(str, given))}"
    if rule == "type":
        return f"expected {'an' if given[0] in 'aeiou' else 'a'} {given}, got {type(instance).__name__}"
    if rule == "required":
        return "missing " + (m.group(1) if (m := re.match(r"(.+) is a required property$", error.message)) else
                             error.message)
    if rule == "additionalProperties":
        return "; ".join(f"unexpected {k!r}" for k in instance if k not in error.schema.get("properties", {}))
    return " ".join(error.message.split())[:200]
