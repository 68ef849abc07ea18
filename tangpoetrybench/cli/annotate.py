"""`tpb annotate`: collect ratings with the paper's two-phase protocol (a Gradio app over a raw release), watch QC live,
and export them as the release's ratings.csv for `tpb build`."""

from __future__ import annotations

import argparse
import signal
import time
from pathlib import Path

from .base import Help, add_qc_arguments, qc_config
from ..numeric import counted
from ..annotation.assignment import DEFAULT_HOLD_S
from ..dataset.raw_release import DEFAULT_MAX_IMAGE_PIXELS

SUMMARY = "collect ratings with the two-phase protocol (Phase 1, then the rubric), watch QC live, export for tpb build"
EXAMPLE = ("tpb annotate invite alice --db campaign.sqlite            # prints alice's personal link\n"
           "tpb annotate invite lead --admin --db campaign.sqlite     # the QC page's link\n"
           "tpb annotate serve sample/raw --db campaign.sqlite --overlap 2\n"
           "tpb annotate export campaign.sqlite sample/raw && tpb build sample/raw sample/dataset")
DEFAULT_DB = Path("annotations.sqlite")
DEFAULT_URL = "http://127.0.0.1:7860"


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)

    def action(name: str, summary: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=summary[0].upper() + summary[1:] + ".",
                              prog=f"tpb annotate {name}", formatter_class=Help)

    serve = action("serve", "serve the rating app over a raw release")
    serve.add_argument("raw", type=Path, help="the raw release to rate: poems.jsonl, images/ (ratings.csv optional)")
    serve.add_argument("--db", type=Path, default=DEFAULT_DB, help="the campaign's SQLite file (made at first start)")
    serve.add_argument("--rubric", type=Path, help="the rubric YAML of the poems' tradition, for a release that "
                                                   "brings none (the export writes it into RAW/rubrics/); default: "
                                                   "the release's own rubric of each poem's tradition (RAW/rubrics/, "
                                                   "else the bundled one)")
    serve.add_argument("--candidates", type=Path, help="a tpb distractors file (default: RAW/candidates.jsonl, else "
                                                       "the phase1_candidates of RAW/ratings.csv)")
    serve.add_argument("--overlap", type=int, default=1, help="raters per image")
    serve.add_argument("--priority", type=Path, help="images to rate first: image ids one a line, or JSON Lines with "
                                                     "image_id (e.g. the judge's least certain first)")
    serve.add_argument("--hold-minutes", type=float, default=DEFAULT_HOLD_S / 60,
                       help="an image taken and not rated this long is offered to another rater too")
    serve.add_argument("--seed", type=int, default=0, help="draws the candidates' order per rater and the ties")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (0.0.0.0: every interface)")
    serve.add_argument("--port", type=int, default=7860)
    serve.add_argument("--max-image-pixels", type=int, default=DEFAULT_MAX_IMAGE_PIXELS,
                       help="refuse larger images before decoding them")
    add_qc_arguments(serve)
    invite = action("invite", "a rater's personal link (or, with --admin, the QC page's)")
    invite.add_argument("name", help="the rater's id in ratings.csv: letters, digits, '.', '_', '-'")
    role = invite.add_mutually_exclusive_group()
    role.add_argument("--expert", action="store_true", help="an expert rater (rater_group expert; default crowd)")
    role.add_argument("--admin", action="store_true", help="a coordinator: opens the QC page, rates nothing")
    invite.add_argument("--lang", default="en", help="the rater's language: one of the rubric's (its `languages`; "
                        "a text it lacks is shown in English)")
    invite.add_argument("--db", type=Path, default=DEFAULT_DB, help="the campaign's SQLite file")
    invite.add_argument("--reissue", action="store_true", help="a new link for someone invited (the old one stops)")
    invite.add_argument("--url", default=DEFAULT_URL, help="the app's public address, for the printed link")
    export = action("export", "write the campaign's ratings into RAW/ratings.csv (safe while serving)")
    export.add_argument("db", type=Path, help="the campaign's SQLite file")
    export.add_argument("raw", type=Path, help="the raw release the campaign served")
    backup = action("backup", "a consistent copy of the campaign's database (safe while serving)")
    backup.add_argument("db", type=Path, help="the campaign's SQLite file")
    backup.add_argument("out", type=Path, help="the copy to write")
    backup.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def existing(db: Path) -> Path:
    if not db.is_file():
        raise FileNotFoundError(f"{db}: no such campaign database (it is made by `tpb annotate serve` or `invite`)")
    return db


def run(args: argparse.Namespace) -> None:
    from ..annotation.store import Store

    if args.action == "serve":
        serve(args)
    elif args.action == "invite":
        role = "admin" if args.admin else "expert" if args.expert else "crowd"
        token = Store(args.db).invite(args.name, role, args.lang, time.time(), reissue=args.reissue)
        print(f"{args.name} ({role}): {args.url.rstrip('/')}/?token={token}")
        print("Send it to them alone: the link is their login (only its digest is stored, so it is shown once).")
    elif args.action == "export":
        from ..annotation.export import export_release

        path, mine, kept = export_release(Store(existing(args.db)), args.raw)
        kept_too = f", {kept} other rows kept" if kept else ""
        print(f"Wrote {path}: {counted(mine, 'rating')} of this campaign{kept_too}")
        print(f"Next: tpb build {args.raw} OUT")
    else:
        out = Store(existing(args.db)).backup(args.out, overwrite=args.overwrite)
        print(f"Wrote {out}")


def serve(args: argparse.Namespace) -> None:
    from ..annotation.app import launch
    from ..annotation.assignment import Plan, read_priority
    from ..annotation.campaign import load_campaign
    from ..annotation.store import Store
    from ..hub.annotation_space import annotation_app

    campaign = load_campaign(args.raw, rubric=args.rubric, candidates=args.candidates,
                             max_image_pixels=args.max_image_pixels)
    store = Store(args.db)
    priority = read_priority(args.priority, campaign.images) if args.priority else ()
    plan = Plan(overlap=args.overlap, priority=priority, hold_s=args.hold_minutes * 60, seed=args.seed)
    app = annotation_app(campaign, store, plan, qc_config(args))
    people = store.people().values()
    raters = sum(not p.admin for p in people)
    print(f"Campaign {store.campaign_id()} in {args.db}: {counted(len(campaign.images), 'image')}, "
          f"{counted(len(campaign.keys), 'question')}, {counted(raters, 'rater')} invited, overlap {plan.overlap}")
    if not any(p.admin for p in people):
        print(f"No admin yet: `tpb annotate invite NAME --admin --db {args.db}` makes the QC page's link")
    demo = app.blocks()
    _, url, _ = launch(demo, server_name=args.host, server_port=args.port, prevent_thread_lock=True, quiet=True)
    print(f"Serving on {url} (each rater opens their own link: {url.rstrip('/')}/?token=...)", flush=True)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # stopped as by Ctrl-C: gradio deletes its files
    try:
        demo.block_thread()
    finally:
        demo.close()
