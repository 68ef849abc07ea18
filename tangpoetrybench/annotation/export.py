"""The campaign's answers in the raw release format, so that `tpb build` takes them with no step between.

    RAW/ratings.csv                      every rated image: the Phase-1 candidates (in the order the rater saw them)
                                         and choice, the rating's seconds (Phase 1 and Phase 2) and every answer
    RAW/annotations-<campaign>.jsonl     every assignment, rated or not: each phase's time and each answer's
    RAW/rubrics/<tradition>.yaml         a rubric given with `tpb annotate serve --rubric` for a tradition the
                                         release brought none for (so `tpb build` rates the poems on it)

A rating's id is `<campaign>-<assignment>`. Exporting again replaces this campaign's rows and keeps every other row of
ratings.csv as it was (an earlier campaign's, the authors' own), so an export can be repeated at any time, and checks
the ratings.csv it is about to write as `tpb build` would. Files are written by the project's own writers
(`files.csv_text`, `write_csv`, `write_file`): whole, never through a symbolic link, and in ratings.csv every cell a
spreadsheet would run as a formula quoted (the release reads it back as it was).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

from ..dataset.raw_release import RATING_COLUMNS, Rating, check_ratings, read_release
from ..errors import DataError, Problem
from ..files import csv_text, private_folder, write_csv, write_file
from ..rubric import parse_rubric
from .store import Assignment, Person, Store


def rating_id(campaign: str, assignment: Assignment) -> str:
    return f"{campaign}-{assignment.id}"


def as_rating(assignment: Assignment, person: Person, campaign: str) -> Rating:
    """A rated assignment as the raw release's `Rating` (what QC and the export read)."""
    return Rating(rating_id=rating_id(campaign, assignment), rater_id=assignment.rater, rater_group=person.role,
                  generator=assignment.generator, poem_id=assignment.poem_id, seconds=round(assignment.seconds, 3),
                  phase1_candidates=assignment.candidates, phase1_choice=assignment.choice,
                  answers=dict(assignment.answers))


def campaign_ratings(store: Store) -> list[Rating]:
    """Every rating of the campaign, in the order they were given."""
    campaign, people = store.campaign_id(), store.people()
    done = sorted((a for a in store.assignments() if a.done), key=lambda a: (a.rated_at, a.id))
    return [as_rating(a, people[a.rater], campaign) for a in done]


def seconds_text(seconds: float) -> str:
    """Seconds as ratings.csv holds them: 60, 12.5 (every digit kept)."""
    text = repr(float(seconds))
    return text[:-2] if text.endswith(".0") else text


def rating_rows(ratings: Sequence[Rating], keys: Sequence[str]) -> list[dict[str, str]]:
    return [{"rating_id": r.rating_id, "rater_id": r.rater_id, "rater_group": r.rater_group, "generator": r.generator,
             "poem_id": r.poem_id, "seconds": seconds_text(r.seconds), "phase1_candidates": "|".join(r.phase1_candidates),
             "phase1_choice": r.phase1_choice or "", **{k: r.answers[k] for k in keys}} for r in ratings]


def annotation_lines(store: Store) -> str:
    """One JSON line per assignment: the record of each phase, with each answer's time."""
    campaign = store.campaign_id()
    lines = []
    for a in store.assignments():
        lines.append(json.dumps({
            "rating_id": rating_id(campaign, a), "rater_id": a.rater, "image_id": a.image_id, "phase": a.phase,
            "phase1_candidates": list(a.candidates), "phase1_choice": a.choice, "phase1_seconds": a.phase1_seconds,
            "answers": a.answers, "answer_seconds": a.answer_seconds, "seconds": a.seconds,
            "assigned_at": a.assigned_at, "rated_at": a.rated_at}, ensure_ascii=False, sort_keys=True))
    return "".join(line + "\n" for line in lines)


def write_campaign_files(store: Store, folder: Path | str) -> list[Path]:
    """This campaign's files alone into `folder` (what the Space's scheduler uploads): ratings.csv and the
    annotations, readable by their owner alone, as the database they come from (the folder made 0700)."""
    folder = Path(folder)
    private_folder(folder)
    keys, campaign = store.keys(), store.campaign_id()
    ratings = folder / "ratings.csv"
    annotations = folder / f"annotations-{campaign}.jsonl"
    write_csv(ratings, RATING_COLUMNS + keys, rating_rows(campaign_ratings(store), keys), root=folder, private=True)
    write_file(annotations, annotation_lines(store), root=folder, private=True)
    return [ratings, annotations]


def export_release(store: Store, raw: Path | str) -> tuple[Path, int, int]:
    """Write the campaign's ratings into the release `raw` (merged with the rows of ratings.csv that are not this
    campaign's) and its annotations beside them, and a rubric file given when the campaign was served into the
    release's rubrics/ (so `tpb build` rates on it). Returns (ratings.csv, this campaign's ratings, other rows kept).
    The release is read and checked first, and the ratings.csv about to be written goes through `tpb build`'s own
    check of every rating (`raw_release.check_ratings`): nothing is written unless it passes."""
    raw = Path(raw)
    supplied = {t: parse_rubric(text, source=f"{store.path} (the rubric given for {t})")
                for t, text in store.rubric_files().items()}
    release = read_release(raw, ratings_required=False, rubrics=supplied)
    keys, campaign = store.keys(), store.campaign_id()
    mine = campaign_ratings(store)
    unknown = sorted({r.image_id for r in mine} - set(release.images))
    if unknown:
        raise DataError(Problem(str(raw), f"{len(unknown)} rated images are not in this release (e.g. {unknown[0]}): "
                                "export into the release the campaign served"))
    if tuple(release.keys) != tuple(keys):
        raise DataError(Problem(str(raw / "ratings.csv"), f"the release's rubric rates {', '.join(release.keys)}, not "
                                f"the campaign's questions ({', '.join(keys)}): export into the release the campaign "
                                "served"))
    kept = [r for r in release.ratings if not r.rating_id.startswith(f"{campaign}-")]
    text = csv_text(RATING_COLUMNS + keys, rating_rows(kept + mine, keys))
    problems = check_ratings(release, text)
    if problems:
        raise DataError(problems)
    for tradition in release.supplied:
        write_file(raw / "rubrics" / f"{tradition}.yaml", release.rubrics[tradition].yaml_text, root=raw)
    path = write_file(raw / "ratings.csv", text.encode("utf-8"), root=raw)
    write_file(raw / f"annotations-{campaign}.jsonl", annotation_lines(store), root=raw)
    return path, len(mine), len(kept)
