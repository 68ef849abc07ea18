"""`tpb publish`: the project's Hub repos, each self-contained, written from this checkout.

    OUT/dataset/   a built dataset; its card loads it by the real repo id
    OUT/model/     the PAE adapter with its model card (given --adapter)
    OUT/metric/    the `evaluate` module as a gradio Space: pae.py with the statistics it needs beside it
                   (agreement.py and numeric.py copied from this package, their one source; rubrics.py made
                   from the rubric files), so it loads with only evaluate, numpy and scipy installed
    OUT/space/     the demo Space, with this package as a wheel beside its requirements
    OUT/annotation/  the rating Space (`tpb annotate`'s app) over a raw release sealed beside it (its images' pixels
                   under random names, with the rubric of each tradition that is not bundled; given --annotation)
    OUT/annotation-key/  the sealed release's key: which image each name is, and the Phase-1 candidates

With `--push`, each goes to its repo (`dataset`, `model`, and the `space` repos with the gradio SDK). An upload
deletes the repo's files that are no longer in the folder (a rebuild with fewer shards leaves exactly the new
ones), and `private` is sent only when asked for, so an organisation's default visibility holds — but the key's
dataset repo is always private (an existing public one is refused): it is the answer to every Phase-1 question.
"""

from __future__ import annotations

import json
import pprint
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..stats.scales import SCALES
from ..dataset.dataset_card import DATASET_PLACEHOLDER
from ..files import atomic_folder
from .eval_results import dataset_eval_yaml, write_judge_eval_results

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parent
PLACEHOLDER_ORG = "ORG"
# What the metric carries of this package (its file → the name in the metric's flat folder): modules that import
# nothing of it beyond each other; their package-relative imports become flat ones.
METRIC_MODULES = {"stats/agreement.py": "agreement.py", "numeric.py": "numeric.py"}
# pae.py's top-level imports of the package (what it uses in a checkout) → the files beside it once published
METRIC_IMPORTS = {"tangpoetrybench.stats.agreement": "agreement", "tangpoetrybench.numeric": "numeric",
                  "tangpoetrybench.stats.scales": "rubrics"}
CHECKOUT_METRIC = '"metric/pae"'  # how the card loads the module from a checkout; published, it is the repo id
METRIC_FILES = ("pae.py", "app.py", "README.md", "requirements.txt")


@dataclass(frozen=True)
class Repo:
    folder: str
    name: str
    repo_type: str  # dataset | model | space
    private: bool = False  # always private, whatever --private says

    def repo_id(self, org: str) -> str:
        return f"{org}/{self.name}"


REPOS = (Repo("dataset", "TangPoetryBench", "dataset"), Repo("model", "PAE", "model"),
         Repo("metric", "pae", "space"), Repo("space", "TangPoetryBench-demo", "space"),
         Repo("annotation", "TangPoetryBench-rating", "space"),
         Repo("annotation-key", "TangPoetryBench-rating-key", "dataset", private=True))


def ids(org: str) -> dict[str, str]:
    return {r.folder: r.repo_id(org) for r in REPOS}


def checkout() -> Path:
    """The repository root: `tpb publish` reads metric/ and space/ beside the package."""
    if not (ROOT / "metric" / "pae" / "pae.py").is_file() or not (ROOT / "space" / "app.py").is_file():
        raise ValueError(f"tpb publish runs from a checkout of the repository (no metric/ and space/ beside {ROOT})")
    return ROOT


def flat_imports(text: str) -> str:
    """A module's `from ..numeric import` as `from .numeric import`: in the metric's folder they sit side by side."""
    return re.sub(r"^from \.+(\w+) import", r"from .\1 import", text, flags=re.M)


def published_imports(text: str) -> str:
    """pae.py's `from tangpoetrybench.numeric import` as `from .numeric import`: published, the files sit beside it
    (evaluate copies the files a module imports relatively at the top level; indented imports stay as they are)."""
    for module, name in METRIC_IMPORTS.items():
        text = re.sub(rf"^from {re.escape(module)} import", f"from .{name} import", text, flags=re.M)
    return text


def rubric_scales() -> str:
    """rubrics.py of the published metric: what the statistics need of each bundled rubric, made from the files."""
    return ('"""What the agreement statistics need of each TangPoetryBench rubric (written by `tpb publish` from the '
            'rubric files)."""\n\nSCALES = ' + pprint.pformat(SCALES, width=116, sort_dicts=False) + "\n")


def write_metric(out: Path, org: str) -> Path:
    root = checkout()
    with atomic_folder(out) as tmp:
        for name in METRIC_FILES:
            text = (root / "metric" / "pae" / name).read_text(encoding="utf-8")
            text = published_imports(text) if name == "pae.py" else text.replace(CHECKOUT_METRIC, f'"{org}/pae"')
            (tmp / name).write_text(text.replace(f"{PLACEHOLDER_ORG}/", f"{org}/"), encoding="utf-8")
        for source, name in METRIC_MODULES.items():
            (tmp / name).write_text(flat_imports((PACKAGE / source).read_text(encoding="utf-8")), encoding="utf-8")
        (tmp / "rubrics.py").write_text(rubric_scales(), encoding="utf-8")
    return out


def build_wheel(folder: Path) -> Path:
    """This package as a wheel in `folder` (pip builds it from the checkout)."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(folder),
                    str(checkout())], check=True)
    [wheel] = folder.glob("tangpoetrybench-*.whl")
    return wheel


def space_app_with_wheel(source: Path, tmp: Path) -> str:
    """A Space's app.py copied from `source` (a folder of the checkout), this package built as a wheel beside it,
    and its requirements naming the wheel; returns its card's text, for the caller to fill in."""
    shutil.copy(source / "app.py", tmp / "app.py")
    wheel = build_wheel(tmp)
    requirements = (source / "requirements.txt").read_text(encoding="utf-8")
    (tmp / "requirements.txt").write_text(requirements.replace("tangpoetrybench>=0.1", f"./{wheel.name}"),
                                          encoding="utf-8")
    return (source / "README.md").read_text(encoding="utf-8")


def write_space(out: Path, org: str, adapter: bool) -> Path:
    """The demo Space: app.py, its card with the real ids, and requirements naming the wheel beside them."""
    repos = ids(org)
    with atomic_folder(out) as tmp:
        card = space_app_with_wheel(checkout() / "space", tmp)
        card = card.replace(f"{PLACEHOLDER_ORG}/TangPoetryBench\n", f"{repos['dataset']}\n")
        if adapter:
            card = card.replace("models:\n", f"models:\n- {repos['model']}\n", 1)
        (tmp / "README.md").write_text(card.replace(f"{PLACEHOLDER_ORG}/", f"{org}/"), encoding="utf-8")
    return out


def write_annotation_space(out: Path, org: str, raw: Path, key: Path | None = None) -> Path:
    """The rating Space (`annotation_space/`): its app with the wheel, and the release it serves sealed under
    `release/` (`sealed.seal`: poems.jsonl, release.json, each image's pixels under a random name, the rubric of each
    tradition that is not bundled, written from what was read and checked), checked first; the key (which image each
    name is, the candidates) into `key` (default: `annotation-key` beside `out`), with a card saying to keep it
    private, never into the Space."""
    from ..annotation.campaign import load_campaign
    from .sealed import seal

    campaign = load_campaign(raw)
    key = key or out.parent / "annotation-key"
    repos = ids(org)
    with atomic_folder(out) as tmp, atomic_folder(key) as tmp_key:
        card = space_app_with_wheel(ROOT / "annotation_space", tmp)
        (tmp / "README.md").write_text(card.replace(f"{PLACEHOLDER_ORG}/", f"{org}/"), encoding="utf-8")
        seal(campaign, tmp / "release", tmp_key)
        (tmp_key / "README.md").write_text(
            f"# The key of {repos['annotation']}\n\nWhich image each of the Space's random names is, and each poem's "
            "Phase-1 candidates: the answer to every question the Space asks in Phase 1. Keep this repo private; the "
            f"Space reads it with its HF_TOKEN secret (TPB_ANNOTATE_KEY={repos['annotation-key']}).\n",
            encoding="utf-8")
    return out


def create_private_repo(api, repo_id: str, repo_type: str, what: str, asked: str = "") -> None:
    """Create `repo_id` private, or check that it is: `create_repo` leaves an existing repo's visibility as it is, so
    one that is public is refused, naming `what` it would publish (and `asked`: how to allow it)."""
    api.create_repo(repo_id, repo_type=repo_type, private=True, exist_ok=True)
    if not api.repo_info(repo_id, repo_type=repo_type).private:
        raise ValueError(f"{repo_id} exists and is public: it would publish {what}; make it private on the Hub, name "
                         f"another repo{', ' + asked if asked else ''}")


def write_dataset(out: Path, built: Path, org: str) -> Path:
    card = built / "README.md"
    if not card.is_file() or not any(built.glob("data/*/*.parquet")):
        raise ValueError(f"{built} is not a dataset folder made by `tpb build` (no README.md and data/)")
    with atomic_folder(out) as tmp:
        shutil.copytree(built, tmp, dirs_exist_ok=True)
        text = card.read_text(encoding="utf-8")
        (tmp / "README.md").write_text(text.replace(DATASET_PLACEHOLDER, ids(org)["dataset"]), encoding="utf-8")
        eval_yaml, _ = dataset_eval_yaml()  # None while the Hub's format cannot describe this benchmark
        if eval_yaml is not None:
            (tmp / "eval.yaml").write_text(eval_yaml, encoding="utf-8")
    return out


def write_model(out: Path, adapter: Path, org: str, agree: Path | None, base_model: str) -> Path:
    """The adapter's weights and config, and its model card: from `tpb agree --out` results when given, which
    then index the dataset by its real repo id."""
    from ..models import trained_on
    from .model_card import render_model_card

    if not (adapter / "adapter_config.json").is_file():
        raise ValueError(f"{adapter} is not a PEFT adapter folder (no adapter_config.json)")
    repos = ids(org)
    with atomic_folder(out) as tmp:
        for path in adapter.iterdir():
            if path.is_file() and (path.suffix in (".json", ".safetensors", ".md", ".jinja", ".txt")):
                shutil.copy(path, tmp / path.name)
        if agree is not None:
            results = json.loads(agree.read_text(encoding="utf-8"))
            card = render_model_card(results, base_model=base_model, adapter_ref=repos["model"],
                                     dataset=repos["dataset"], trained=trained_on(adapter))
            (tmp / "README.md").write_text(card, encoding="utf-8")
            write_judge_eval_results(results, tmp, repos["dataset"], "PAE")
    return out


def publish(out: Path | str, org: str = PLACEHOLDER_ORG, dataset: Path | str | None = None,
            adapter: Path | str | None = None, agree: Path | str | None = None,
            base_model: str = "Qwen/Qwen3-VL-8B-Instruct", annotation: Path | str | None = None) -> dict[str, Path]:
    """Write every repo folder that can be made from what is given; returns folder name → path."""
    out = Path(out)
    written = {"metric": write_metric(out / "metric", org), "space": write_space(out / "space", org, adapter is not None)}
    if dataset is not None:
        written["dataset"] = write_dataset(out / "dataset", Path(dataset), org)
    if adapter is not None:
        written["model"] = write_model(out / "model", Path(adapter), org, Path(agree) if agree else None, base_model)
    if annotation is not None:
        written["annotation"] = write_annotation_space(out / "annotation", org, Path(annotation),
                                                       out / "annotation-key")
        written["annotation-key"] = out / "annotation-key"
    return written


def upload(folder: Path | str, repo_id: str, repo_type: str, private: bool | None = None,
           token: str | None = None, always_private: bool = False) -> str:
    """Create the repo if needed and make it hold exactly `folder`: remote files no longer in it are deleted in
    the same commit (`.gitattributes` stays). `private=None` follows the owner's default visibility;
    `always_private` makes it private and refuses an existing public one (`create_private_repo`)."""
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    if always_private:
        create_private_repo(api, repo_id, repo_type, what=f"what {folder} holds")
    else:
        api.create_repo(repo_id, repo_type=repo_type, private=private, exist_ok=True,
                        space_sdk="gradio" if repo_type == "space" else None)
    return api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type=repo_type,
                             commit_message="Upload with tpb", delete_patterns=["*"]).commit_url


def push(written: dict[str, Path], org: str, private: bool | None = None, token: str | None = None) -> dict[str, str]:
    """Upload each written folder to its repo."""
    return {r.folder: upload(written[r.folder], r.repo_id(org), r.repo_type, private, token, r.private)
            for r in REPOS if r.folder in written}


def push_dataset(out: Path | str, repo_id: str, private: bool | None = None, token: str | None = None) -> str:
    """Upload a built dataset folder to the Hub as a dataset repo that then holds exactly this build (untested
    here: no Hub access)."""
    return upload(out, repo_id, "dataset", private=private, token=token)
