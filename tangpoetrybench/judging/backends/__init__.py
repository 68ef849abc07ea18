"""Who answers: the backends a judge's questions go to, behind one protocol.

    transformers  a local Qwen3-VL (with or without a LoRA adapter), loaded once (`backends.transformers`)
    vllm          the same model on vLLM's engine, on a GPU (`backends.vllm`)
    api           any OpenAI-compatible server: vLLM's or `transformers serve`, TGI, Inference Providers, a fleet of
                  replicas (`backends.served`)

A task (`judging.tasks`) turns an item into `Question`s; a backend turns a batch of questions into `Answer`s, in
two steps so that data-loader workers can do the first while the model does the second: `prepare` (CPU only, no
model) and `answer`. A question says what its answer must be, and each backend keeps to it as far as it can:

- `constraint`: decoding held to the task's answer form (transformers: the task's logits processor);
- `schema`: the answer's JSON schema (vLLM: structured output; a server: the response format);
- `choices`: the answer is one of these one-token strings (transformers: their probabilities at the first answer
  token; vLLM: one token constrained to them, with log-probabilities; a server: text, read by the task);
- `anchors`: the probability readout of a rubric's anchors instead of decoding (transformers and vLLM read them
  directly; a server is asked for token log-probabilities, which the task reads where they hold the anchors).

Nothing one question does stops its batch: a request that fails is an `Answer` with an `error` and its kind
(`model`, `transient`), which a rerun asks again.

A new backend is one module with a class following `Backend` (subclass it for the defaults), and one row in
`BACKENDS`. The class carries what the registry and the tasks need to build, check and ask it: the judge options it
takes are the ones its constructor names (beside `images_per_prompt`, given where it is named), and its class
attributes are its capabilities — whether it asks a server (`served`), how many repair rounds a judge gives an
unread answer by default (`default_repair`), whether it can hold decoding to a task's answer form (`constrains`,
with the `tokenizer` the form is built on), how it reads one-token choices (`reads_choices`), whether its engine
must run as one process (`one_process`) and the Ray Data stage that runs it on a cluster (`ray_stage`). Tasks, the
command line, the Space and the Ray engine ask for these, never for a backend's name; every evaluator that runs on
any backend (or on any local or served one) then runs on it, and `--backend` offers it.
"""

from __future__ import annotations

import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Hashable, Protocol, Sequence


@dataclass(frozen=True)
class BackendRow:
    """A backend: its class ("module:class", imported when first used) and what it is, in a few words (the
    command line's `--backend` help, read without importing it)."""

    factory: str
    summary: str


BACKENDS: dict[str, BackendRow] = {
    "transformers": BackendRow("tangpoetrybench.judging.backends.transformers:TransformersBackend",
                               "a local Qwen3-VL, with or without an adapter"),
    "vllm": BackendRow("tangpoetrybench.judging.backends.vllm:VLLMBackend",
                       "the same on vLLM's engine: its own environment and a GPU"),
    "api": BackendRow("tangpoetrybench.judging.backends.served:ServedBackend",
                      "an OpenAI-compatible server; implied by --base-url"),
}


class Constraint(Protocol):
    """Decoding held to a task's answer form on the transformers backend. Questions whose constraints share a
    `group` are decoded together, under one logits processor built from all of their constraints."""

    group: Hashable

    def processor(self, constraints: Sequence["Constraint"], tokenizer, prompt_length: int, eos: list[int],
                  budget: int): ...


@dataclass
class Question:
    """One request to a model: the prompt builder's chat messages (images as PIL images in `image` parts) and what
    the answer must be (see the module's docstring). `meta` is the task's own (read back by its reader)."""

    messages: list[dict]
    max_new_tokens: int
    schema: dict | None = None
    schema_name: str = "answer"
    constraint: Constraint | None = None
    choices: tuple[str, ...] | None = None
    anchors: Any = None  # a Rubric: read its anchors' probabilities instead of decoding
    meta: dict = field(default_factory=dict)


@dataclass
class Answer:
    """A backend's answer to one question, or why there is none (`error`, of `error_kind` model or transient)."""

    text: str = ""
    usage: dict[str, int] | None = None  # tokens a server reported: prompt_tokens, completion_tokens
    error: str | None = None
    error_kind: str | None = None
    logprobs: Any = None  # a server's token log-probabilities (asked for with `anchors`)
    probs: list[float] | None = None  # with `choices`: each choice's probability, renormalised over the choices
    mass: float | None = None  # with `choices`: how much of the next-token probability the choices held
    readout: Any = None  # with `anchors`: the `readout.Readout` a local backend read
    meta: dict[str, Any] = field(default_factory=dict)  # what a server says of its answer (served_model, format)


class Backend(Protocol):
    """What a judge needs of whoever answers. Its constructor takes the judge options it names (`model`, `adapter`,
    `device`, `base_url`, ...: `registry.JudgeOptions`) and, where it names it, `images_per_prompt`. A class that
    subclasses this protocol gets the defaults below (a local backend that constrains nothing and reads choices as
    text)."""

    name: str  # recorded as settings["backend"]: the row of `BACKENDS` it was built from (`load_backend` sets it)
    model_name: str
    served: bool = False  # it asks a server, a request per answer: a base URL chooses it, a run reports the tokens
    default_repair: int = 0  # a judge's repair rounds for an answer that does not read, unless told (0 or 1)
    constrains: bool = False  # it holds decoding to a question's `constraint` (`--constrained`)
    reads_choices: str | None = None  # how it reads a question's one-token `choices`: "logits" (their probabilities
    # at the first answer token), "logprobs" (one token held to them, its log-probabilities); None: it answers in text
    one_process: bool = False  # its engine uses the GPUs itself, from one process (never under accelerate launch)
    ray_stage: str | None = None  # "module:class" of the Ray Data stage that runs it on a cluster (`.of(name, opts)`)
    random_weights: bool | None = False  # None: nobody can vouch for a served model's weights
    min_batch_size: int = 1  # an engine that schedules its own batches wants many questions at once
    device: Any = None  # the torch device the model runs on, or None
    worker_start_method: str | None = None  # how data-loader workers start (None: the platform's default)

    @property
    def tokenizer(self) -> Any:
        """The tokenizer a question's `constraint` is built on and its `choices` are read with, where the backend
        constrains decoding or reads choices' probabilities at a token (None where it has none here)."""
        return None

    def check_choices(self, choices: Sequence[str]) -> None:
        """Refuse, before anything is asked, choices this backend cannot read (one its tokenizer splits, where it
        reads the first answer token's probabilities)."""

    def settings(self) -> dict[str, Any]:
        """What, besides the model and the task, shapes an answer (recorded, checked on resume)."""
        return {}

    def prepare(self, questions: Sequence[Question]) -> Any:
        """The model inputs of a batch of questions, on the CPU (no model: data-loader workers run this)."""

    def answer(self, prepared: Any, questions: Sequence[Question]) -> list[Answer]:
        """One answer per question, in order."""


def choice_token_ids(tokenizer, choices: Sequence[str]) -> list[int]:
    """The token id of each choice as the answer's first token; a tokenizer without single-token choices is refused
    (reading their probabilities would be ambiguous)."""
    ids = []
    for choice in choices:
        encoded = tokenizer.encode(choice, add_special_tokens=False)
        if len(encoded) != 1:
            raise ValueError(f"the tokenizer splits the option {choice!r} into {len(encoded)} tokens: reading the "
                             "options' probabilities needs one token per option")
        ids.append(encoded[0])
    return ids


def backend_class(name: str) -> type:
    """The class of the backend `name` (its module imported now)."""
    if name not in BACKENDS:
        raise ValueError(f"unknown backend {name!r} (known: {', '.join(BACKENDS)})")
    module, _, attribute = BACKENDS[name].factory.partition(":")
    return getattr(importlib.import_module(module), attribute)


def constructor_options(cls: type) -> tuple[str, ...]:
    """The keywords a backend's constructor takes."""
    return tuple(inspect.signature(cls).parameters)


def load_backend(name: str, *args, **options) -> Backend:
    """Build the backend of the row `name`; its options go to its class (`model`, `adapter`, `device`, ... for the
    local ones, `base_url`, `api_key_env`, ... for a server). It is named after its row, whatever its class inherits:
    a subclass registered under a name of its own is recorded (settings["backend"]) as what the user chose."""
    backend = backend_class(name)(*args, **options)
    backend.name = name
    return backend


__all__ = ["Answer", "BACKENDS", "Backend", "BackendRow", "Constraint", "Question", "backend_class",
           "choice_token_ids", "constructor_options", "load_backend"]
