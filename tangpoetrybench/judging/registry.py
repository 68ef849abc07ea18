"""One registry of evaluators: each name with its spec — the tasks it answers, the backends it runs on, the options it
takes — read by `tpb score` and `tpb compare` (their choices and options), the Space, the `evaluate` module, the
lmms-eval harness and the tiny-model builder.

    >>> from tangpoetrybench.judging.registry import load_evaluator
    >>> pae = load_evaluator("pae", model="Qwen/Qwen3-VL-8B-Instruct", adapter="path/to/pae", constrained=True)
    >>> judge = load_evaluator("semjudge", task="pairwise", model="Qwen/Qwen3-VL-8B-Instruct")

**Options** are declared once, in `JudgeOptions` (a dataclass, as TRL declares its arguments): the command line
builds its options from its fields, and `load_evaluator` refuses an option the evaluator does not take, naming
the evaluators that do.

**Plugins**: a distribution's entry point in the group `tangpoetrybench.evaluators` names a factory; its name is the
evaluator's. The factory is called with the options a user gave that its signature names (`model=`, `device=`,
`max_pixels=`, …; a `task=` parameter gets the task asked for) and returns an evaluator
(`evaluators.base.Evaluator`; for `task="pairwise"`, an object with `judge(items)`). A factory may say which tasks
it answers in a `tasks` attribute (default: `("scores",)`). A plugin whose factory does not load is left out of
every list of evaluators, with a warning that names it and why; choosing it says why. See docs/plugins.md.

A new built-in evaluator is one module and one row in `BUILTIN`; a new backend is one module and one row in
`backends.BACKENDS` (its class carries the options it takes and how a judge treats it), and every evaluator that runs
on any backend, or on any local or served one, runs on it.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import import_module, metadata
from pathlib import Path
from typing import Any, Callable

from ..errors import Notice
from ..rubric import BUILTIN as BUNDLED_RUBRICS
from .backends import BACKENDS, backend_class, constructor_options, load_backend
from .records import POINTWISE, record_type

PLUGIN_GROUP = "tangpoetrybench.evaluators"
SERVED_GROUP = "served judge"  # the options of a served judge (refused on a local backend)


def _option(help: str, group: str = "judge", **cli) -> Any:
    return field(default=None, metadata={"help": help, "group": group, **cli})


def _backend_help() -> str:
    """--backend's help, from the rows of `backends.BACKENDS`."""
    rows = [f"{name} ({row.summary})" for name, row in BACKENDS.items()]
    return (f"who answers: {', '.join(rows[:-1])} or {rows[-1]}" if len(rows) > 1 else f"who answers: {rows[0]}") + \
        " (default: the evaluator's first)"


@dataclass
class JudgeOptions:
    """Every option an evaluator takes, declared once (the command line's `--max-pixels` is `max_pixels` here)."""

    model: str | None = _option("the checkpoint (Hub id or local folder; default: the evaluator's), or for a served "
                                "judge the model name the server knows")
    adapter: str | None = _option("a LoRA adapter for the base model (PAE's; Hub id or local folder; without it: "
                                  "zero-shot)")
    backend: str | None = _option(_backend_help(), choices=tuple(BACKENDS))
    device: str | None = _option("cpu, cuda, cuda:1 ... (default: the GPU when there is one)")
    max_pixels: int | None = _option("shrink larger images to this many pixels before asking (default: 1024×1024)",
                                     type=int)
    max_new_tokens: int | None = _option("the answer's length limit in tokens (default: the task's)", type=int)
    rubric: str | None = _option(f"a rubric: a bundled name ({', '.join(BUNDLED_RUBRICS)}) or a rubric YAML file "
                                 "(docs/rubrics.md): with --images, the rubric of the poems' tradition where it is not "
                                 "bundled; with --dataset, in place of the rubric the dataset carries (default: each "
                                 "poem's tradition's)")
    constrained: bool | None = _option("on transformers: decode only answers in the task's JSON form, so every "
                                       "answer reads (vllm and a server get the JSON schema anyway)", flag=True)
    explain: str | None = _option("a one-sentence reason per dimension too, in the poem's language or English (kept "
                                  "in each record's reasons; the default answer length grows to 1536 tokens)",
                                  choices=("poem", "en"), nargs="?", const="poem", metavar="LANGUAGE")
    readout: str | None = _option("expected: read each dimension's score from the anchors' probabilities (expected "
                                  "score, distribution, confidence) instead of decoding (default: decode)",
                                  choices=("decode", "expected"))
    quantize: str | None = _option("on transformers: load the language model quantised by bitsandbytes (a CUDA GPU or "
                                   "the CPU)", choices=("8bit", "4bit"))
    question: str | None = _option("vqascore: t2v_metrics' question, comparable with published VQAScore, or this "
                                   "project's own (title, author and full text) (default: t2v_metrics)",
                                   choices=("t2v_metrics", "poem"))
    candidates: Path | None = _option("recognize: each poem's four candidates (tpb distractors POEMS --out FILE)",
                                      type=Path, metavar="FILE")
    orders: str | None = _option("recognize: ask in the four cyclic rotations of the candidates, or in all 24 orders "
                                 "(default: rotations)", choices=("rotations", "all"))
    cache_dir: Path | None = _option("semjudge: a folder of graphs kept between runs (default: none)", type=Path,
                                     flags=("--cache",), metavar="DIR")
    boxes: str | None = _option("semjudge: how the image graph's boxes are asked for: relative, on the 0-1000 grid the "
                                "Qwen3-VL family grounds on, or pixels of the image as sent (Qwen2.5-VL's); read back "
                                "in pixels either way (default: relative)", choices=("relative", "pixels"))
    base_url: list[str] | None = _option("an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; several (repeat "
                                         "the option, or a comma list) make a fleet (default: Hugging Face Inference "
                                         "Providers)", SERVED_GROUP, action="extend", nargs=1, metavar="URL")
    api_key_env: str | None = _option("the environment variable that holds the API key; the key itself is never an "
                                      "argument (default: HF_TOKEN for Hugging Face's own hosts, no key elsewhere)",
                                      SERVED_GROUP, metavar="NAME")
    concurrency: int | None = _option("requests in flight at once, per server (default: 8)", SERVED_GROUP, type=int)
    timeout: float | None = _option("seconds a request may take, whole, before it is retried (default: 120)",
                                    SERVED_GROUP, type=float)
    retries: int | None = _option("retries of a request on 429, 5xx, timeouts and lost connections (default: 5)",
                                  SERVED_GROUP, type=int)
    backoff: float | None = _option("seconds before the first retry, doubled at each (default: 1)", SERVED_GROUP,
                                    type=float)
    repair: int | None = _option("repair rounds for an answer that does not read: asked again in the same "
                                 "conversation (default: 1 for a served judge, 0 for a local one)", SERVED_GROUP,
                                 type=int, choices=(0, 1))


OPTION_NAMES = tuple(f.name for f in dataclasses.fields(JudgeOptions))
SERVED = tuple(f.name for f in dataclasses.fields(JudgeOptions) if f.metadata["group"] == SERVED_GROUP)
KINDS = ("any", "local", "served")  # what an evaluator may run on, besides a model of its own


def backends_of_kind(kind: str) -> tuple[str, ...]:
    """The backends of `backends.BACKENDS` of a kind (`KINDS`), in its order: local and served by their `served`."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind of backend {kind!r} (known: {', '.join(KINDS)})")
    return tuple(n for n in BACKENDS if kind == "any" or backend_class(n).served == (kind == "served"))


@dataclass(frozen=True)
class EvaluatorSpec:
    """An evaluator: its factory ("module:attribute", imported on first use), the tasks it answers (the first is
    the default), the options it takes, the backends it runs on (`runs_on`: any backend, any local or any served one
    (`KINDS`); empty: a model of its own), the tiny models that stand in for its checkpoints in tests (`tpb
    tiny-models` builds them: `tiny_models.models()`), how it is shown (`scale`: the range of its quality, where it
    is a number of its own; `model_variable`: the environment variable that names its checkpoint in the Space;
    `label`: how tables name its estimates, where not by its name), where it comes from, and for a plugin that does
    not load, why."""

    name: str
    summary: str
    factory: str
    tasks: tuple[str, ...]
    options: tuple[str, ...]
    runs_on: str = ""
    tiny_models: tuple[str, ...] = ()
    scale: str | None = None
    model_variable: str | None = None
    source: str = "built in"
    error: str | None = None
    label: str | None = None

    def load(self) -> Callable[..., Any]:
        module, _, attribute = self.factory.partition(":")
        return getattr(import_module(module), attribute)

    def backends(self) -> tuple[str, ...]:
        """The backends it runs on, its default first (none: a model of its own)."""
        return backends_of_kind(self.runs_on) if self.runs_on else ()


_MODEL = ("model", "device", "max_pixels")
_QWEN = ("model", "adapter", "backend", "device", "max_pixels", "max_new_tokens", "rubric", "constrained", "quantize")
BUILTIN = (
    EvaluatorSpec("pae", "PAE: the rubric's scores (or the pairwise choice) from Qwen3-VL with its adapter",
                  "tangpoetrybench.judging.registry:pae", ("scores", "pairwise"), _QWEN + ("explain", "readout"),
                  "local", ("qwen3-vl",), label="PAE"),
    EvaluatorSpec("api", "PAE's question asked of a served or hosted model (any OpenAI-compatible server)",
                  "tangpoetrybench.judging.registry:api", ("scores", "pairwise"),
                  ("model", "max_pixels", "max_new_tokens", "rubric", "explain", "readout") + SERVED, "served"),
    EvaluatorSpec("recognize", "which of four candidate poems the image shows (the paper's Phase 1), in several "
                  "orders", "tangpoetrybench.judging.registry:recognize", ("letter",),
                  ("model", "adapter", "backend", "device", "max_pixels", "max_new_tokens", "rubric", "candidates",
                   "orders") + SERVED, "any", ("qwen3-vl",)),
    EvaluatorSpec("semjudge", "SemJudge: semiosis graphs of the poem and both images, then the choice",
                  "tangpoetrybench.judging.semjudge:from_options", ("pairwise",),
                  ("model", "backend", "device", "max_pixels", "max_new_tokens", "cache_dir", "boxes") + SERVED,
                  "any", ("qwen3-vl",)),
    EvaluatorSpec("clipscore", "CLIPScore: image-text embedding similarity (CLIP or Chinese-CLIP)",
                  "tangpoetrybench.judging.evaluators.clipscore:CLIPScore", ("scalar",), ("model", "device"),
                  tiny_models=("clip", "chinese-clip"), scale="0 – 2.5", model_variable="CLIP_MODEL"),
    EvaluatorSpec("blipscore", "BLIPScore: BLIP's image-text matching probability",
                  "tangpoetrybench.judging.evaluators.blipscore:BLIPScore", ("scalar",), ("model", "device"),
                  tiny_models=("blip",), scale="0 – 1", model_variable="BLIP_MODEL"),
    EvaluatorSpec("vqascore", "VQAScore: the probability that Qwen3-VL answers yes to a question about the poem",
                  "tangpoetrybench.judging.evaluators.vqascore:VQAScore", ("scalar",), _MODEL + ("question",),
                  tiny_models=("qwen3-vl",), scale="0 – 1", model_variable="VQA_MODEL"),
    EvaluatorSpec("text-ocr", "text integrity from a real OCR model, with the text it found as evidence (CPU, "
                  "offline)", "tangpoetrybench.judging.ocr.evaluator:TextOCR", ("text",),
                  ("device", "max_pixels", "rubric")),
)


@lru_cache(maxsize=1)
def plugins() -> tuple[EvaluatorSpec, ...]:
    """The evaluators installed distributions add (entry point group `tangpoetrybench.evaluators`), with what each
    factory answers and takes. A factory that does not load (its module fails to import, say) is kept with its
    `error`, and a warning names it: left out of every list, it breaks no command, and choosing it says why."""
    found = []
    for entry in metadata.entry_points(group=PLUGIN_GROUP):
        source = entry.dist.name if entry.dist else entry.value
        try:
            factory = entry.load()
            parameters = inspect.signature(factory).parameters
            tasks = tuple(getattr(factory, "tasks", ("scores",)))
        except Exception as exc:  # a plugin's own bug, whatever its kind
            error = f"{type(exc).__name__}: {exc}"
            warnings.warn(f"the evaluator plugin {entry.name!r} of {source} ({entry.value}) does not load and is left "
                          f"out: {error}", Notice, stacklevel=2)
            found.append(EvaluatorSpec(entry.name, f"a plugin that does not load ({entry.value})", entry.value, (), (),
                                       source=source, error=error))
            continue
        takes_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        options = OPTION_NAMES if takes_all else tuple(n for n in OPTION_NAMES if n in parameters)
        found.append(EvaluatorSpec(entry.name, f"a plugin's evaluator ({entry.value})", entry.value, tasks, options,
                                   source=source))
    return tuple(found)


def specs() -> dict[str, EvaluatorSpec]:
    """Every evaluator by name: the built-in ones, then the plugins' (a plugin never replaces a built-in name), but
    a plugin that does not load."""
    table = {s.name: s for s in BUILTIN}
    for spec in plugins():
        if spec.error is None:
            table.setdefault(spec.name, spec)
    return table


def evaluator_names(task: str | None = None) -> list[str]:
    """The evaluators that answer `task` ("pointwise" for any task `tpb score` runs); all of them with None."""
    wanted = POINTWISE if task == "pointwise" else (task,) if task else None
    return [name for name, spec in specs().items() if wanted is None or set(spec.tasks) & set(wanted)]


def evaluator_spec(name: str) -> EvaluatorSpec:
    table = specs()
    if name not in table:
        broken = next((s for s in plugins() if s.name == name and s.error), None)
        if broken is not None:
            raise ValueError(f"the evaluator {name!r} of the plugin {broken.source} ({broken.factory}) does not load: "
                             f"{broken.error}")
        raise ValueError(f"unknown evaluator {name!r} (known: {', '.join(table)})")
    return table[name]


def label_of(name: str) -> str:
    """How a table names an evaluator's estimates: its spec's label ("PAE"), else its name (a plugin's, or one not
    installed here)."""
    spec = specs().get(name)
    return spec.label if spec is not None and spec.label else name


def who_takes(option: str) -> list[str]:
    return [s.name for s in BUILTIN if option in s.options]


def load_evaluator(name: str, task: str | None = None, **options) -> Any:
    """Build an evaluator by name (see the module's docstring); None-valued options are left to its defaults.
    `task` picks one of the evaluator's tasks (default: its first)."""
    spec = evaluator_spec(name)
    task = task or spec.tasks[0]
    if task not in spec.tasks:
        raise ValueError(f"{name} answers {' and '.join(spec.tasks)}, not {task}")
    given = {k: v for k, v in options.items() if v is not None and v is not False}
    for key in given:
        if key not in OPTION_NAMES:
            raise ValueError(f"unknown option {key!r} (known: {', '.join(OPTION_NAMES)})")
        if key not in spec.options:
            takes = [n for n in who_takes(key) if n != name]
            raise ValueError(f"--{key.replace('_', '-')} does not apply to {name}" +
                             (f" (it applies to {', '.join(takes)})" if takes else ""))
    factory = spec.load()
    made = factory(**given, **({"task": task} if "task" in inspect.signature(factory).parameters else {}))
    if record_type(task).per == "image":
        _answers(made, name, task)
    return made


def _answers(evaluator, name: str, task: str) -> None:
    """An evaluator writes records of the task it was asked for: one that does not say what it answers (a plugin's)
    is given the task's record type; one that answers another task is refused."""
    wanted = record_type(task)
    if getattr(evaluator, "record_type", None) is None:
        evaluator.record_type = wanted
    elif evaluator.record_type is not wanted:
        raise ValueError(f"{name} was asked for the {task} task but writes {evaluator.record_type.task} records: its "
                         f"factory's `tasks` must name what its evaluator answers")


# --- the built-in factories: a task joined to a backend -------------------------------------------------------------


def backend_of(spec_name: str, options: dict) -> str:
    """The backend an evaluator runs on: the one named (taken out of `options`), else its first served one where a
    base URL is given, else its first; refused where an option given is not that backend's (see `check_backend`)."""
    names = evaluator_spec(spec_name).backends()
    backend = _chosen(names, options)
    options.pop("backend", None)
    if backend not in names:
        raise ValueError(f"{spec_name} runs on {', '.join(names)}, not {backend}")
    check_backend(backend, options)
    return backend


def _chosen(names: tuple[str, ...], options: dict) -> str:
    return options.get("backend") or next((n for n in names if options.get("base_url") and backend_class(n).served),
                                          names[0])


def chosen_backend(name: str, options: dict) -> type | None:
    """The class of the backend the evaluator `name` would run on with these options (`JudgeOptions`' names), where
    it is one of `backends.BACKENDS` (None: a model of its own), for what a caller asks of its capabilities."""
    names = evaluator_spec(name).backends()
    backend = _chosen(names, options) if names else None
    return backend_class(backend) if backend in BACKENDS else None


def asks_server(name: str, options: dict) -> bool:
    """Whether the evaluator `name` with these options asks a server (a served backend)."""
    backend = chosen_backend(name, options)
    return backend is not None and backend.served


def check_backend(backend: str, options: dict) -> None:
    """Refuse an option given that `backend` cannot take: a served judge's (`SERVED`) on a local backend,
    `--constrained` where decoding cannot be held to the answer's form, and an option only other backends'
    constructors take (a local model's `--adapter`, `--device`, ... on a server; `--quantize` on vLLM)."""
    cls = backend_class(backend)
    takes = constructor_options(cls)
    for key in [k for k, v in options.items() if v is not None and v is not False and k not in takes]:
        flag = f"--{key.replace('_', '-')}"
        if key in SERVED and not cls.served:
            raise ValueError(f"{flag} applies to a served judge: give --base-url (or --backend "
                             f"{backends_of_kind('served')[0]})")
        if key == "constrained" and not cls.constrains:
            constraining = [n for n in BACKENDS if backend_class(n).constrains]
            raise ValueError(f"--constrained applies to the {' and '.join(constraining)} backend, not {backend} (it "
                             "is asked for the task's JSON schema without it)")
        takers = [n for n in BACKENDS if key in constructor_options(backend_class(n))]
        if takers and cls.served:
            raise ValueError("--adapter does not apply to a served model: serve the adapter and name it in --model"
                             if key == "adapter" else f"{flag} applies to a local backend ({', '.join(takers)}), "
                             "not to a served model")
        if takers:
            raise ValueError(f"{flag} applies to the {' and '.join(takers)} backend, not {backend}")


def build_backend(backend: str, options: dict, images_per_prompt: int = 1):
    """The backend an evaluator's options describe: its class called with the options its constructor names (taken
    out of `options`; without a model, the backend's default) and `images_per_prompt` where it names that."""
    cls = backend_class(backend)
    takes = constructor_options(cls)
    given = {k: options.pop(k) for k in [k for k in options if k in takes and k in OPTION_NAMES]}
    return load_backend(backend, **given,
                        **({"images_per_prompt": images_per_prompt} if "images_per_prompt" in takes else {}))


def _judge(name: str, make_task: Callable[[], Any], task_name: str, options: dict, images_per_prompt: int = 1):
    """The evaluator `name`: the backend's options checked, then the task made (its own checks, before any model
    loads), then the backend built and joined to it."""
    from .judge import Judge

    which = backend_of(name, options)
    task = make_task()
    if getattr(task, "constrained", False):
        check_backend(which, {"constrained": True})
    backend = build_backend(which, options, images_per_prompt)
    judge = Judge(name, task, backend, **{k: options.pop(k) for k in ("max_pixels", "max_new_tokens", "rubric",
                                                                       "repair") if k in options})
    if options:
        raise ValueError(f"{name} takes no {', '.join(options)} on the {backend.name} backend")
    if task_name == "pairwise":
        task.fingerprints = sorted(judge.rubric_fingerprints())
    return judge


def pae_on(backend, task: str = "scores", constrained: bool = False, explain: str | None = None,
           readout: str = "decode", name: str = "pae", **judge_options):
    """PAE's question asked of a backend already built (a model in memory: the one being trained, or the Space's,
    shared by several judges), as the evaluator `name`; `judge_options` are the Judge's (max_pixels, max_new_tokens,
    rubric, repair)."""
    from .judge import Judge
    from .tasks.pairwise import Pairwise
    from .tasks.scores import RubricScores

    if task == "pairwise":
        judge = Judge(name, Pairwise(constrained=constrained), backend, **judge_options)
        judge.task.fingerprints = sorted(judge.rubric_fingerprints())
        return judge
    return Judge(name, RubricScores(constrained=constrained, explain=explain, readout=readout), backend,
                 **judge_options)


def pae(task: str = "scores", explain: str | None = None, readout: str | None = None, constrained: bool = False,
        **options):
    """PAE on transformers or vLLM: the rubric's scores, or the pairwise choice."""
    return _rubric_judge("pae", task, explain, readout, constrained, options)


def api(task: str = "scores", explain: str | None = None, readout: str | None = None, **options):
    """PAE's question to a served model."""
    return _rubric_judge("api", task, explain, readout, False, options)


def _rubric_judge(name: str, task: str, explain: str | None, readout: str | None, constrained: bool, options: dict):
    from .tasks.pairwise import Pairwise
    from .tasks.scores import RubricScores

    if task == "pairwise":
        if explain or readout:
            raise ValueError("--explain and --readout apply to the rubric's scores, not the pairwise choice")
        return _judge(name, lambda: Pairwise(constrained=constrained), task, options, images_per_prompt=2)
    return _judge(name, lambda: RubricScores(constrained=constrained, explain=explain, readout=readout or "decode"),
                  task, options)


def recognize(task: str = "letter", candidates: str | Path | None = None, orders: str | None = None, **options):
    """The Phase-1 question on any backend."""
    from .tasks.letter import Recognize

    return _judge("recognize", lambda: Recognize(candidates, orders or "rotations"), task, options)

