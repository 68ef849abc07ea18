"""The rating app with everything from above the annotation room: the agreement statistic (`stats.noise_floor`) and,
in a Space, huggingface_hub's `CommitScheduler` appending the campaign's exported files to a dataset repo.

`annotation_app` is what `tpb annotate serve` and the Space both run. The Space (`annotation_space/app.py`, written by
`tpb publish --annotation RAW`) is configured by environment variables:

    TPB_ANNOTATE_RELEASE   the release folder it serves (default: `release` beside app.py)
    TPB_ANNOTATE_DB        the SQLite file (default: /data/annotations.sqlite on a Space with persistent storage,
                           else annotations.sqlite: lost when the Space restarts)
    TPB_ANNOTATE_OVERLAP   raters per image (default 1); TPB_ANNOTATE_PRIORITY: a priority list file
    TPB_ADMIN_TOKEN        the admin page's token (a Space secret); the admin is called `admin`
    TPB_ANNOTATE_REPO      a dataset repo id: every TPB_ANNOTATE_EVERY minutes (default 5) the campaign's files are
                           exported into a folder and the changed ones committed under `campaigns/<campaign id>/`
                           (HF_TOKEN, a Space secret, must be able to write to it)
"""

from __future__ import annotations

import os
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
                   every_minutes=float(get("TPB_ANNOTATE_EVERY", 5)))


def export_folder(db: Path) -> Path:
    """Where the Space exports the campaign's files for the scheduler: beside the database."""
    return db.parent / "export"


def commit_scheduler(store: Store, folder: Path, repo: str, every_minutes: float):
    """A `CommitScheduler` that exports the campaign's files into `folder` (under its lock) before each commit, then
    uploads those that changed to `repo` under `campaigns/<campaign id>/`. Creates the repo if needed: needs the
    Hub (never run in the tests)."""
    from huggingface_hub import CommitScheduler

    class ExportingScheduler(CommitScheduler):
        def push_to_hub(self):
            with self.lock:
                write_campaign_files(store, self.folder_path)
            return super().push_to_hub()

    return ExportingScheduler(repo_id=repo, repo_type="dataset", folder_path=folder, every=every_minutes,
                              path_in_repo=f"campaigns/{store.campaign_id()}", ignore_patterns=["*.tmp"])


def space_app(env: Mapping[str, str] = os.environ, here: Path = Path(".")):
    """The Space's app from its settings: (the Gradio Blocks, the scheduler or None without a repo)."""
    settings = SpaceSettings.from_env(env, here)
    campaign = load_campaign(settings.release)
    store = Store(settings.db)
    priority = read_priority(settings.priority, campaign.images) if settings.priority else ()
    app = annotation_app(campaign, store, Plan(overlap=settings.overlap, priority=priority))
    if settings.admin_token:
        store.invite(ADMIN, "admin", "en", time.time(), reissue=True, token=settings.admin_token)
    scheduler = None
    if settings.repo:
        scheduler = commit_scheduler(store, export_folder(settings.db), settings.repo, settings.every_minutes)
    return app.blocks(), scheduler
