"""The rating app with everything from above the annotation room: the agreement statistic (`stats.noise_floor`) and,
in a Space, the sealed release it serves (`hub.sealed`) and huggingface_hub's `CommitScheduler` appending the
campaign's exported files to a private dataset repo.

`annotation_app` is what `tpb annotate serve` and the Space both run. The Space (`annotation_space/app.py`, written by
`tpb publish --annotation RAW`) is configured by environment variables:

    TPB_ANNOTATE_RELEASE   the release folder it serves (default: `release` beside app.py)
    TPB_ANNOTATE_KEY       the key of a sealed release (`hub.sealed`): a folder, or the id of the private dataset
                           repo `tpb publish` wrote it to (downloaded with HF_TOKEN); it is unsealed at the start
    TPB_ANNOTATE_DB        the SQLite file (default: /data/annotations.sqlite on a Space with persistent storage,
                           else annotations.sqlite: lost when the Space restarts)
    TPB_ANNOTATE_OVERLAP   raters per image (default 1); TPB_ANNOTATE_PRIORITY: a priority list file (a relative path
                           is read in the key's folder, for a sealed release: it names images)
    TPB_ADMIN_TOKEN        the admin page's token (a Space secret); the admin is called `admin`
    TPB_ANNOTATE_REPO      a dataset repo id: every TPB_ANNOTATE_EVERY minutes (default 5) the campaign's files are
                           exported into a folder and the changed ones committed under `campaigns/<campaign id>/`
                           (HF_TOKEN, a Space secret, must be able to write to it). It is made private, and an
                           existing one that is public is refused, unless TPB_ANNOTATE_REPO_PUBLIC=1 asks otherwise.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..annotation.app import AnnotationApp
from ..annotation.assignment import Plan, read_priority
from ..annotation.campaign import Campaign, load_campaign
from ..annotation.export import write_campaign_files
from ..annotation.protocol import Protocol
from ..annotation.store import Store
from ..dataset.qc import QCConfig
from ..rubric import Rubric
from ..stats.agree import rating_table_of
from ..stats.noise_floor import noise_floor
from .publish import create_private_repo
from .sealed import SEALED, key_folder, unseal

ADMIN = "admin"


def table5(rows: list[dict], rubric: Rubric) -> dict:
    """The noise floor of rating rows: per dimension, within-one-level agreement among the raters of each image."""
    return noise_floor(rating_table_of(rows, rubric))


def annotation_app(campaign: Campaign, store: Store, plan: Plan, qc: QCConfig = QCConfig()) -> AnnotationApp:
    """The app over a campaign whose settings the store has taken (`Store.bind`)."""
    store.bind(campaign.settings(), campaign.supplied)
    return AnnotationApp(Protocol(campaign, store, plan), qc=qc, agreement=table5)


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
