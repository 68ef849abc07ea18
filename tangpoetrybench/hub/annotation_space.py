"""The rating app with everything from above the annotation room: the agreement statistic (`stats.noise_floor`), the
sealed release a published Space serves, and, in a Space, huggingface_hub's `CommitScheduler` appending the campaign's
exported files to a private dataset repo.

`annotation_app` is what `tpb annotate serve` and the Space both run. The Space (`annotation_space/app.py`, written by
`tpb publish --annotation RAW`) is configured by environment variables:

    TPB_ANNOTATE_RELEASE   the release folder it serves (default: `release` beside app.py)
    TPB_ANNOTATE_KEY       the key of a sealed release (see below): a folder, or the id of the private dataset repo
                           `tpb publish` wrote it to (downloaded with HF_TOKEN)
    TPB_ANNOTATE_DB        the SQLite file (default: /data/annotations.sqlite on a Space with persistent storage,
                           else annotations.sqlite: lost when the Space restarts)
    TPB_ANNOTATE_OVERLAP   raters per image (default 1); TPB_ANNOTATE_PRIORITY: a priority list file (a relative path
                           is read in the key's folder, for a sealed release: it names images)
    TPB_ADMIN_TOKEN        the admin page's token (a Space secret); the admin is called `admin`
    TPB_ANNOTATE_REPO      a dataset repo id: every TPB_ANNOTATE_EVERY minutes (default 5) the campaign's files are
                           exported into a folder and the changed ones committed under `campaigns/<campaign id>/`
                           (HF_TOKEN, a Space secret, must be able to write to it). It is made private, and an
                           existing one that is public is refused, unless TPB_ANNOTATE_REPO_PUBLIC=1 asks otherwise.

**A sealed release** is how a published Space holds its release without giving the answers away (its files are
public wherever the Space is): `seal` writes the poems, `release.json`, the rubrics that are not bundled and each
image's pixels alone (`files.pixels_only`, as PNG) under a random name into the Space's `release/`, and into the *key*
(kept out of the Space: a private dataset repo) which image each name is and the Phase-1 candidates (each poem's set
would name the poem it was drawn for). `unseal` makes the raw release back from both, at the Space's start.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..annotation.app import AnnotationApp
from ..annotation.assignment import Plan, read_priority
from ..annotation.campaign import CANDIDATES_FILE, Campaign, load_campaign
from ..annotation.export import write_campaign_files
from ..annotation.protocol import Protocol
from ..annotation.store import Store
from ..dataset.qc import QCConfig
from ..errors import DataError, Problem
from ..files import json_lines, local_or_hub, open_image, pixels_only, write_file
from ..poems import is_name
from ..rubric import Rubric, is_bundled
from ..stats.agree import rating_table_of
from ..stats.noise_floor import noise_floor
from .publish import create_private_repo

ADMIN = "admin"
SEALED = "sealed.json"  # in a sealed release: says it is one
SEALED_FORMAT = "tangpoetrybench-sealed-release/1"
KEY_IMAGES = "images.jsonl"  # in the key: {"file": <random name>, "image_id": <generator/poem_id>} per image
OPAQUE = re.compile(r"[0-9a-f]{32}\.png")


def table5(rows: list[dict], rubric: Rubric) -> dict:
    """The noise floor of rating rows: per dimension, within-one-level agreement among the raters of each image."""
    return noise_floor(rating_table_of(rows, rubric))


def annotation_app(campaign: Campaign, store: Store, plan: Plan, qc: QCConfig = QCConfig()) -> AnnotationApp:
    """The app over a campaign whose settings the store has taken (`Store.bind`)."""
    store.bind(campaign.settings(), campaign.supplied)
    return AnnotationApp(Protocol(campaign, store, plan), qc=qc, agreement=table5)


def seal(campaign: Campaign, release: Path, key: Path) -> None:
    """Write the campaign's release sealed (see the module's docstring) into the new folder `release` (for the Space)
    and the folder `key` (kept out of it)."""
    root = campaign.release.root
    (release / "images").mkdir(parents=True)
    key.mkdir(parents=True, exist_ok=True)
    for name in ("poems.jsonl", "release.json"):
        if (root / name).is_file():
            shutil.copyfile(root / name, release / name)
    for tradition, rubric in campaign.release.rubrics.items():
        if not is_bundled(rubric):  # a bundled rubric travels in the wheel; this one is written as read and checked
            write_file(release / "rubrics" / f"{tradition}.yaml", rubric.yaml_text)
    names = {}
    for image_id, image in campaign.images.items():
        name = f"{secrets.token_hex(16)}.png"
        with open_image(image.path, campaign.max_image_pixels) as im:
            pixels_only(im).save(release / "images" / name, format="PNG")
        names[name] = image_id
    write_file(release / SEALED, json.dumps({"format": SEALED_FORMAT, "images": len(names)}) + "\n")
    write_file(key / KEY_IMAGES, "".join(json.dumps({"file": name, "image_id": image_id}) + "\n"
                                         for name, image_id in sorted(names.items())))
    campaign.write_candidates(key / CANDIDATES_FILE)


def unseal(release: Path, key: Path, into: Path) -> Path:
    """The raw release that a sealed `release` and its `key` stand for, made in `into` (a folder not yet there): the
    images linked (copied where they cannot be) back to `images/<generator>/<poem_id>.png`, the candidates from the
    key. Every problem is reported at once, by file and line."""
    found = json.loads((release / SEALED).read_text(encoding="utf-8"))
    if found.get("format") != SEALED_FORMAT:
        raise DataError(Problem(str(release / SEALED), f"not a sealed release of this version ({SEALED_FORMAT})",
                                field="format"))
    problems, names = [], {}
    for line, record in json_lines(key / KEY_IMAGES):
        name, image_id = (record.get(k) if isinstance(record, dict) else None for k in ("file", "image_id"))
        parts = image_id.split("/") if isinstance(image_id, str) else []
        if not (isinstance(name, str) and OPAQUE.fullmatch(name)) or len(parts) != 2 or not all(map(is_name, parts)):
            problems.append(Problem(f"{key / KEY_IMAGES}:{line}", "expected a file (32 hex digits .png) and an "
                                    "image_id (generator/poem_id)"))
        else:
            names[name] = image_id
    images = release / "images"
    held = {p.name for p in images.iterdir()}
    problems += [Problem(str(images / n), "not in the key") for n in sorted(held - set(names))]
    problems += [Problem(str(key / KEY_IMAGES), f"{n} is not in {images}") for n in sorted(set(names) - held)]
    problems += [Problem(str(images / n), "is a symbolic link") for n in sorted(held) if (images / n).is_symlink()]
    if problems:
        raise DataError(problems)
    into.mkdir(parents=True)
    for name in ("poems.jsonl", "release.json", "rubrics"):
        if (release / name).is_dir():
            shutil.copytree(release / name, into / name, symlinks=True)  # a link stays one, and read_release refuses it
        elif (release / name).is_file():
            shutil.copyfile(release / name, into / name)
    for name, image_id in names.items():
        target = into / "images" / f"{image_id}.png"
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(images / name, target)
        except OSError:
            shutil.copyfile(images / name, target)
    shutil.copyfile(key / CANDIDATES_FILE, into / CANDIDATES_FILE)
    return into


def key_folder(value: str) -> Path:
    """TPB_ANNOTATE_KEY as a folder: itself, or the private dataset repo it names, downloaded (with HF_TOKEN)."""
    value = local_or_hub(value, "TPB_ANNOTATE_KEY", repo_type="dataset")
    if Path(value).is_dir():
        return Path(value)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(value, repo_type="dataset"))


@dataclass(frozen=True)
class SpaceSettings:
    release: Path
    db: Path
    overlap: int = 1
    priority: Path | None = None
    admin_token: str | None = None
    repo: str | None = None
    every_minutes: float = 5.0
    key: str | None = None  # a sealed release's key: a folder or a private dataset repo id
    public_repo: bool = False  # TPB_ANNOTATE_REPO_PUBLIC: the answers' repo may be public

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ, here: Path = Path(".")) -> "SpaceSettings":
        def get(name: str, default=None):
            return env.get(name) or default

        persistent = Path("/data")
        db_default = persistent / "annotations.sqlite" if persistent.is_dir() else here / "annotations.sqlite"
        return cls(release=Path(get("TPB_ANNOTATE_RELEASE", here / "release")), db=Path(get("TPB_ANNOTATE_DB",
                   db_default)), overlap=int(get("TPB_ANNOTATE_OVERLAP", 1)),
                   priority=Path(env["TPB_ANNOTATE_PRIORITY"]) if env.get("TPB_ANNOTATE_PRIORITY") else None,
                   admin_token=get("TPB_ADMIN_TOKEN"), repo=get("TPB_ANNOTATE_REPO"),
                   every_minutes=float(get("TPB_ANNOTATE_EVERY", 5)), key=get("TPB_ANNOTATE_KEY"),
                   public_repo=get("TPB_ANNOTATE_REPO_PUBLIC", "0").strip().lower() in ("1", "true", "yes", "on"))


def export_folder(db: Path) -> Path:
    """Where the Space exports the campaign's files for the scheduler: beside the database."""
    return db.parent / "export"


def scheduler_arguments(store: Store, folder: Path, repo: str, every_minutes: float, public: bool = False) -> dict:
    """The `CommitScheduler`'s arguments: the campaign's folder committed to the dataset repo `repo` under
    `campaigns/<campaign id>/`, the repo created private unless `public` is asked for."""
    return {"repo_id": repo, "repo_type": "dataset", "folder_path": folder, "every": every_minutes,
            "path_in_repo": f"campaigns/{store.campaign_id()}", "ignore_patterns": ["*.tmp"], "private": not public}


def commit_scheduler(store: Store, folder: Path, repo: str, every_minutes: float, public: bool = False, api=None):
    """A `CommitScheduler` that exports the campaign's files into `folder` (under its lock) before each commit, then
    uploads those that changed to `repo` (`scheduler_arguments`). Unless `public`, the repo is made private before the
    scheduler starts, and an existing one that is public is refused (`create_private_repo`): rater ids, choices and
    times would be published. `api`: the `HfApi` to use (default: one with the Space's token)."""
    from huggingface_hub import CommitScheduler, HfApi

    class ExportingScheduler(CommitScheduler):
        def push_to_hub(self):
            with self.lock:
                write_campaign_files(store, self.folder_path)
            return super().push_to_hub()

    api = api or HfApi()
    if not public:
        create_private_repo(api, repo, "dataset", what="the campaign's answers (rater ids, choices, times)",
                            asked="or set TPB_ANNOTATE_REPO_PUBLIC=1")
    return ExportingScheduler(**scheduler_arguments(store, folder, repo, every_minutes, public), hf_api=api)


def space_app(env: Mapping[str, str] = os.environ, here: Path = Path(".")):
    """The Space's app from its settings: (the Gradio Blocks, the scheduler or None without a repo). A sealed release
    is unsealed with its key into a private temporary folder first."""
    settings = SpaceSettings.from_env(env, here)
    release, priority = settings.release, settings.priority
    if (release / SEALED).is_file():
        if not settings.key:
            raise ValueError(f"{release} is sealed (its images under random names): set TPB_ANNOTATE_KEY to its key, "
                             "the private dataset repo (or a folder) that tpb publish wrote beside it")
        key = key_folder(settings.key)
        release = unseal(release, key, Path(tempfile.mkdtemp(prefix="tpb-release-")) / "release")
        priority = key / priority if priority and not priority.is_absolute() else priority
    campaign = load_campaign(release)
    store = Store(settings.db)
    order = read_priority(priority, campaign.images) if priority else ()
    app = annotation_app(campaign, store, Plan(overlap=settings.overlap, priority=order))
    if settings.admin_token:
        store.invite(ADMIN, "admin", "en", time.time(), reissue=True, token=settings.admin_token)
    scheduler = None
    if settings.repo:
        scheduler = commit_scheduler(store, export_folder(settings.db), settings.repo, settings.every_minutes,
                                     public=settings.public_repo)
    return app.blocks(), scheduler
