"""The Hub's Eval Results: the `.eval_results/tangpoetrybench.yaml` a model repo carries, and what the dataset repo's
`eval.yaml` can (and cannot) say about this benchmark.

The format (hub-docs, `docs/hub/eval-results.md`, a work-in-progress feature): a model repo holds YAML files in
`.eval_results/`, each a list of items with exactly these fields (`EVAL_RESULT_FIELDS`):

    dataset:  id (required, the benchmark's dataset repo), task_id (required, a task of its eval.yaml),
              revision (optional, the dataset's revision hash)
    value:    required, the metric's value
    verifyToken, date (ISO-8601), source: {url (required with source), name, user}, notes: optional

A benchmark's task is one (config, headline metric) pair (`benchmark_tasks`): the generators' quality as the
evaluator estimates it, the human quality and recognizability where people rated the generator, and an
evaluator's agreement with people (for a judge's own model repo, e.g. PAE's) on any config, a tradition's test-only
config among them. Values are on the 0-1 scale the
dataset and the scores files use.

The dataset's `eval.yaml` names one `evaluation_framework` from the list Hugging Face keeps (huggingface.js
`packages/tasks/src/eval.ts`, `EVALUATION_FRAMEWORKS`); this benchmark runs in lmms-eval, which that list does not
name, so no valid `eval.yaml` can be written for it yet (`dataset_eval_yaml` says why instead of writing one).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ..errors import DataError, Problem
from ..files import write_file
from ..numeric import counted
from ..poems import check_generator
from ..dataset.raw_release import MAIN_IMAGE_CONFIGS
from ..reporting.leaderboard import read_score_files
from ..rubric import BUILTIN, DEFAULT_TRADITION, TRADITION_NAME

RESULTS_FILE = Path(".eval_results") / "tangpoetrybench.yaml"
HUB = "https://huggingface.co"
# field → (type, required); a dict type is a nested mapping with its own fields.
EVAL_RESULT_FIELDS: dict = {
    "dataset": ({"id": (str, True), "task_id": (str, True), "revision": (str, False)}, True),
    "value": ((int, float), True),
    "verifyToken": (str, False),
    "date": (str, False),
    "source": ({"url": (str, True), "name": (str, False), "user": (str, False)}, False),
    "notes": (str, False),
}
# huggingface.js packages/tasks/src/eval.ts (EVALUATION_FRAMEWORKS, as of commit 0589d13): the only values an
# eval.yaml's evaluation_framework may take.
LISTED_FRAMEWORKS = ("exgentic", "inspect-ai", "math-arena", "mteb", "olmocr-bench", "harbor", "archipelago",
                     "apex-evals", "screenspot-pro", "swe-bench", "swe-bench-pro", "nemo-evaluator", "yc-bench",
                     "open-asr-leaderboard", "mdpbench", "parsebench", "video-mme-v2", "claw-eval", "wildclawbench")
FRAMEWORK = "lmms-eval"  # where this benchmark runs as a task (harness/lmms_eval/tangpoetrybench/)


@dataclass(frozen=True)
class BenchmarkTask:
    """One leaderboard of the benchmark: a config of the dataset and a headline metric."""

    config: str
    metric: str
    split: str = "test"

    @property
    def id(self) -> str:
        return f"{self.config}_{self.metric}"


# A generator's: quality as PAE estimates it (the mean of the ten rubric scores), the human quality of its images,
# and recognizability (the share of raters who picked the right poem in Phase 1); all 0-1.
GENERATOR_METRICS = ("pae_quality", "human_quality", "recognizability")
# An evaluator's agreement with people: per-poem Kendall tau-b, Spearman rho over images, mean absolute error.
JUDGE_METRICS = ("judge_kendall_tau", "judge_spearman", "judge_mae")
# The benchmark's own dataset: its main tradition is the default one; every other bundled tradition is a
# test-only config of its name.
OWN_TEST_CONFIGS = tuple(t for t in BUILTIN if t != DEFAULT_TRADITION)


def benchmark_tasks(test_configs: tuple[str, ...] = OWN_TEST_CONFIGS) -> tuple[BenchmarkTask, ...]:
    """The tasks of a dataset whose other traditions are the test-only `test_configs`."""
    return tuple(BenchmarkTask(c, m) for c in MAIN_IMAGE_CONFIGS for m in GENERATOR_METRICS) + tuple(
        BenchmarkTask(c, m) for c in (*MAIN_IMAGE_CONFIGS, *test_configs) for m in JUDGE_METRICS)


TASK_IDS = frozenset(t.id for t in benchmark_tasks())


def is_task_id(task_id: str) -> bool:
    """A task of any dataset of this benchmark: a generator metric on a human config, or a judge metric on a human
    config or a tradition's config."""
    for metric in (*GENERATOR_METRICS, *JUDGE_METRICS):
        config = task_id.removesuffix(f"_{metric}")
        if config != task_id:
            return config in MAIN_IMAGE_CONFIGS or (metric in JUDGE_METRICS and bool(TRADITION_NAME.fullmatch(config)))
    return False


def _check_mapping(value, fields: dict, where: str, line: int, prefix: str = "") -> list[Problem]:
    if not isinstance(value, dict):
        return [Problem(where, f"expected a mapping, got {type(value).__name__}", line, prefix.rstrip(".") or None)]
    problems = [Problem(where, "not a documented field", line, prefix + key) for key in value if key not in fields]
    for key, (kind, required) in fields.items():
        name = prefix + key
        if key not in value:
            if required:
                problems.append(Problem(where, "required field is missing", line, name))
        elif isinstance(kind, dict):
            problems += _check_mapping(value[key], kind, where, line, name + ".")
        elif isinstance(value[key], bool) or not isinstance(value[key], kind):
            expected = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
            problems.append(Problem(where, f"expected {expected}, got {type(value[key]).__name__}", line, name))
    return problems


def validate_eval_results(items, where: str = "<eval results>") -> None:
    """Refuse anything but a list of items with exactly the documented fields and types, an ISO-8601 `date` and
    a task of this benchmark; every problem names the item (as `line`, 1-based) and the field."""
    if not isinstance(items, list) or not items:
        raise DataError(Problem(where, "an eval results file is a non-empty YAML list of results"))
    problems = []
    for n, item in enumerate(items, 1):
        found = _check_mapping(item, EVAL_RESULT_FIELDS, where, n)
        problems += found
        if found:
            continue
        if not is_task_id(item["dataset"]["task_id"]):
            problems.append(Problem(where, f"{item['dataset']['task_id']!r} is not a task of TangPoetryBench "
                                           f"(known: {', '.join(sorted(TASK_IDS))})", n, "dataset.task_id"))
        if "date" in item:
            try:
                dt.datetime.fromisoformat(item["date"])
            except ValueError:
                problems.append(Problem(where, f"{item['date']!r} is not an ISO-8601 date or datetime", n, "date"))
    if problems:
        raise DataError(problems)


def read_eval_results(path: Path | str) -> list[dict]:
    """An `.eval_results/*.yaml` file, parsed and validated."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no eval results file {path}")
    try:
        items = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise DataError(Problem(str(path), f"not YAML: {exc}")) from None
    validate_eval_results(items, str(path))
    return items


def dump_eval_results(items: list[dict]) -> str:
    validate_eval_results(items)
    return yaml.safe_dump(items, allow_unicode=True, sort_keys=False, width=110)


def result_item(dataset_id: str, task: str, value: float, notes: str, date: str, revision: str | None = None,
                source_url: str | None = None, source_name: str = "tpb") -> dict:
    """One documented item; values rounded to four places."""
    item = {"dataset": {"id": dataset_id, "task_id": task, **({"revision": revision} if revision else {})},
            "value": round(float(value), 4), "date": date,
            "source": {"url": source_url or f"{HUB}/datasets/{dataset_id}", "name": source_name}, "notes": notes}
    validate_eval_results([item])
    return item


def build_fingerprint(dataset: str | Path) -> str | None:
    """The content fingerprint `tpb build` writes into a local dataset folder's card (None for a Hub id)."""
    card = Path(dataset) / "README.md"
    if not card.is_file():
        return None
    found = re.search(r"content fingerprint `([0-9a-f]+)`", card.read_text(encoding="utf-8"))
    return found.group(1) if found else None


def today() -> str:
    return dt.datetime.now(dt.timezone.utc).date().isoformat()


def caveats(numbers: dict) -> str:
    """What the notes must say before anything else: results of random weights or of simulated people."""
    return (("RANDOM WEIGHTS: a plumbing check that measures nothing. " if numbers.get("random_weights") else "")
            + ("SYNTHETIC dataset: its human scores are simulated. " if numbers.get("synthetic") else ""))


def generator_results(numbers: dict, recognizability: dict[str, float], config_of: dict[str, str], dataset_id: str,
                      revision: str | None = None, date: str | None = None) -> dict[str, list[dict]]:
    """Per generator, its items from `tpb leaderboard`'s numbers (`leaderboard.json`): PAE-estimated quality, and
    the human quality and recognizability where people rated it. `config_of` names each rated generator's config."""
    from .. import __version__

    date = date or today()
    settings = ", ".join(f"{k} {v}" for k, v in numbers["settings"].items())
    fingerprint = build_fingerprint(numbers["dataset"])
    common = (f"split {numbers['split']}, the {counted(numbers['poems'], 'poem')} every generator was compared on; "
              f"tangpoetrybench {__version__}" + (f"; dataset build {fingerprint}" if fingerprint else "") + ".")
    out = {}
    for row in numbers["leaderboard"]:
        g, config = row["generator"], config_of.get(row["generator"], "images")
        items = []
        if row["judge"]["quality"] is not None:
            items.append(result_item(dataset_id, f"{config}_pae_quality", row["judge"]["quality"], caveats(numbers)
                                     + f"Evaluator {numbers['evaluator']} ({numbers['model']}; {settings}) on "
                                     f"{counted(row['images'], 'image')}; " + common, date, revision))
        if row["human"] and row["human"]["quality"] is not None:
            items.append(result_item(dataset_id, f"{config}_human_quality", row["human"]["quality"], caveats(numbers)
                                     + "Mean human quality of the same images; " + common, date, revision))
        if recognizability.get(g) is not None:
            items.append(result_item(dataset_id, f"{config}_recognizability", recognizability[g], caveats(numbers)
                                     + "Share of raters who picked the right poem in Phase 1; " + common, date,
                                     revision))
        out[g] = items
    return out


def mean_recognizability(rows: list[dict], poems: set[str]) -> tuple[dict[str, float], dict[str, str]]:
    """Per rated generator, the mean recognizability of its images of `poems`, and the config it was rated in."""
    values: dict[str, list[float]] = {}
    config_of = {}
    for r in rows:
        config_of[r["generator"]] = r["config"]
        if r["poem_id"] in poems and r["recognizability"] is not None:
            values.setdefault(r["generator"], []).append(r["recognizability"])
    return {g: sum(v) / len(v) for g, v in values.items()}, config_of


def write_eval_results(numbers: dict, out: Path | str, dataset_id: str, revision: str | None = None,
                       date: str | None = None, poems: set[str] | None = None) -> dict[str, Path]:
    """OUT/<generator>/.eval_results/tangpoetrybench.yaml for every generator of a leaderboard (its numbers),
    each validated; returns generator → file. `poems`: the poems the leaderboard compared every generator on (`tpb
    leaderboard` knows them); without them they are read from its score files again."""
    from ..dataset.reading import dataset_rows

    poems = _compared_poems(numbers) if poems is None else poems
    rows = []
    for config in MAIN_IMAGE_CONFIGS:
        try:
            rows += [{**r, "config": config} for r in dataset_rows(numbers["dataset"], config, numbers["split"],
                                                                   ["poem_id", "generator", "recognizability"])]
        except ValueError:
            if config == "images":
                raise
    rec, config_of = mean_recognizability(rows, poems)
    results = generator_results(numbers, rec, config_of, dataset_id, revision, date)
    for g in results:  # each names a folder of OUT: all checked before any is written
        check_generator(g, "a generator (from the scores files' image ids)")
    return {g: write_file(Path(out) / g / RESULTS_FILE, dump_eval_results(items), root=out)
            for g, items in results.items()}


def _compared_poems(numbers: dict) -> set[str]:
    """The poems the leaderboard compared every generator on (those each generator has a result for)."""
    scored = read_score_files([Path(p) for p in numbers["score_files"]]).records
    by_generator: dict[str, set[str]] = {}
    for image_id in scored:
        g, poem = image_id.split("/", 1)
        by_generator.setdefault(g, set()).add(poem)
    return set.intersection(*by_generator.values())


def judge_results(agree: dict, dataset_id: str, model: str, date: str | None = None) -> list[dict]:
    """The items an evaluator's own model repo carries (PAE's): its agreement with people from `tpb agree --out`,
    from the same numbers as its model card's model-index (`model_card.indexed_results`)."""
    from .model_card import indexed_results

    from ..reporting.report import is_synthetic

    config = agree.get("config", "images")
    synthetic = Path(agree["dataset"]).exists() and is_synthetic(agree["dataset"])
    note = (caveats({**agree, "synthetic": synthetic}) + f"{model} against people's scores on the {agree['split']} split "
            f"({counted(agree['agreement']['n_images'], 'image')}, {counted(agree['agreement']['n_poems'], 'poem')}); "
            f"tpb agree, {agree['agreement']['bootstrap']['resamples']} bootstrap resamples.")
    return [result_item(dataset_id, f"{config}_judge_{key}", value, note, date or today())
            for key, _, value in indexed_results(agree) if f"judge_{key}" in JUDGE_METRICS]


NAME = "TangPoetryBench"
DESCRIPTION = ("How well text-to-image models illustrate classical Chinese poetry: generated illustrations of Tang "
               "poems scored by PAE, a rubric-conditioned judge, beside human ratings of the same kind of images.")


def dataset_eval_yaml(name: str = NAME, description: str = DESCRIPTION,
                      framework: str = FRAMEWORK) -> tuple[str | None, str]:
    """(text, why): the dataset repo's eval.yaml when the documented format can describe this benchmark, else
    (None, the reason). The format names exactly one framework from Hugging Face's list; `inspect-ai` would also
    need a `field_spec` of input and target fields and scorers that compare an answer with a target, which a
    benchmark of generated images judged by a model against human ratings does not have."""
    if framework == "inspect-ai":
        return None, ("an inspect-ai eval.yaml needs field_spec.input/target and scorers that grade a model's answer "
                      "against a target; TangPoetryBench's models make images, judged against human ratings")
    if framework not in LISTED_FRAMEWORKS:
        return None, (f"eval.yaml's evaluation_framework must be one of Hugging Face's listed frameworks (huggingface.js "
                      f"packages/tasks/src/eval.ts), and {framework} is not among them: no eval.yaml is written, "
                      "since the Hub would refuse it at push")
    body = {"name": name, "description": description, "evaluation_framework": framework,
            "tasks": [{"id": t.id, "config": t.config, "split": t.split} for t in benchmark_tasks()]}
    return yaml.safe_dump(body, allow_unicode=True, sort_keys=False, width=110), "written"


@dataclass
class PullRequest:
    """What `tpb publish --eval-results` opens on a model repo: always a pull request, never a push to main."""

    repo_id: str
    title: str
    description: str
    files: dict[str, str]  # path in the repo → content

    def show(self) -> str:
        lines = [f"Pull request on https://huggingface.co/{self.repo_id} (model repo), not a push to main",
                 f"title: {self.title}", "description:", *("  " + line for line in self.description.splitlines())]
        for path, text in self.files.items():
            lines += [f"adds {path}:", *("  " + line for line in text.rstrip("\n").splitlines())]
        return "\n".join(lines)


def eval_results_pr(repo_id: str, folder: Path | str) -> PullRequest:
    """The pull request that adds FOLDER/.eval_results/tangpoetrybench.yaml to a model repo. Results of random
    weights or of a synthetic dataset are refused: they measure nothing about the model."""
    if repo_id.count("/") != 1 or repo_id.startswith(("/", ".")):
        raise ValueError(f"--eval-results {repo_id!r}: give the model repo as ORG/MODEL")
    path = Path(folder) / RESULTS_FILE
    if not path.is_file():
        raise ValueError(f"no {RESULTS_FILE} in {folder}: give a generator's folder written by "
                         "tpb leaderboard --eval-results DIR (DIR/<generator>)")
    items = read_eval_results(path)
    if any(item.get("notes", "").startswith(("RANDOM WEIGHTS", "SYNTHETIC")) for item in items):
        raise ValueError(f"{path} holds results of random weights or of a synthetic dataset: they measure nothing, "
                         "and are not published")
    tasks = ", ".join(f"{i['dataset']['task_id']} {i['value']}" for i in items)
    return PullRequest(repo_id, "Add TangPoetryBench evaluation results",
                       "TangPoetryBench results for this model, in the Hub's Eval Results format "
                       f"(https://huggingface.co/docs/hub/eval-results): {tasks}.\n\nMade with tpb leaderboard "
                       "--eval-results; see the notes of each result for the evaluator and settings.",
                       {RESULTS_FILE.as_posix(): path.read_text(encoding="utf-8")})


def open_pr(pr: PullRequest, token: str | None = None) -> str:
    """Open the pull request on the Hub (`create_commit(create_pr=True)`); returns its URL. Unverified here: no Hub."""
    from huggingface_hub import CommitOperationAdd, HfApi

    operations = [CommitOperationAdd(path_in_repo=path, path_or_fileobj=text.encode("utf-8"))
                  for path, text in pr.files.items()]
    info = HfApi(token=token).create_commit(pr.repo_id, operations, commit_message=pr.title,
                                            commit_description=pr.description, repo_type="model", create_pr=True)
    return info.pr_url


def write_judge_eval_results(agree: dict, folder: Path | str, dataset_id: str, model: str,
                             date: str | None = None) -> Path | None:
    """FOLDER/.eval_results/tangpoetrybench.yaml of an evaluator's model repo; None (nothing written) for results
    of random weights, which the model card also keeps out of its model-index."""
    items = judge_results(agree, dataset_id, model, date)
    if not items:
        return None
    return write_file(Path(folder) / RESULTS_FILE, dump_eval_results(items), root=folder)
