"""What a rating campaign rates: a raw release's images and poems, each poem's four Phase-1 candidates, and the rubric
whose questions raters answer, with the texts shown in the rater's language.

    >>> campaign = load_campaign("sample/raw")                       # candidates from RAW/candidates.jsonl or ratings
    >>> campaign = load_campaign("raw", rubric="haiku.yaml", candidates="candidates.jsonl")  # poems of tradition haiku
    >>> campaign.rubric("p1").keys                                   # the questions of an image of poem p1

The candidates come from a `tpb distractors` file (`--candidates`, else `RAW/candidates.jsonl` where it exists), or
else from the `phase1_candidates` the release's own ratings.csv gives each poem. Every candidate must be a poem of the
release, so that the exported ratings name known poems. The rubric is the one of each poem's tradition, the one
`tpb build` will rate the poem on: the release's (bundled, or in its rubrics/ folder), or a rubric file given for a
tradition the release brings no rubric for (`rubric=`; the export then writes it into the release's rubrics/). A
rubric file of a tradition none of the rated poems has, or one that differs from the release's own, is refused: its
ratings could not be built. The app asks whatever questions the rubric holds.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..dataset.distractors import CandidateSet, read_candidates, write_candidates
from ..dataset.raw_release import (DEFAULT_MAX_IMAGE_PIXELS, N_PHASE1_CANDIDATES, ImageFile, Release, outside_link,
                                   read_release)
from ..errors import DataError, Problem
from ..files import link_outside
from ..poems import Poem
from ..rubric import Dimension, Rubric, load_rubric

CANDIDATES_FILE = "candidates.jsonl"
DEFAULT_LANGUAGE = "en"


def text_in(texts: Mapping[str, str], lang: str) -> str:
    """A rubric text in the rater's language: `lang`'s where the rubric has it, else English, else the first given."""
    return texts.get(lang) or texts.get(DEFAULT_LANGUAGE) or next(iter(texts.values()), "")


def dimension_name(dim: Dimension, lang: str) -> str:
    return text_in(dim.name, lang)


def dimension_description(dim: Dimension, lang: str) -> str:
    return text_in(dim.description, lang)


def option_labels(dim: Dimension, lang: str) -> list[tuple[str, str]]:
    """(label, letter) of every option in the rubric's order, as a radio shows them; excluded options are marked as
    "does not apply" by their own label."""
    return [(f"{o.letter}. {text_in(o.label, lang)}", o.letter) for o in dim.options]


@dataclass(frozen=True)
class Campaign:
    release: Release
    candidates: dict[str, tuple[str, ...]]  # poem_id -> its four candidates' poem ids (the file's order)
    max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS  # an image over it is refused before it is decoded

    def rubric(self, poem_id: str) -> Rubric:
        return self.release.rubric(poem_id)

    @property
    def keys(self) -> tuple[str, ...]:
        """The questions (the rubric's dimension keys), the rating columns of the export."""
        return self.release.keys

    @property
    def supplied(self) -> dict[str, str]:
        """The rubric files given beside the release (tradition → YAML text), which the export writes into it."""
        return {t: self.release.rubrics[t].yaml_text for t in self.release.supplied}

    @property
    def images(self) -> dict[str, ImageFile]:
        return self.release.images

    def poem(self, poem_id: str) -> Poem:
        return self.release.poems[poem_id]

    def settings(self) -> dict:
        """What an answer means, fixed at a campaign's first start: the release's poems and images, the rubric of
        each image and the candidates (a digest of each)."""
        def digest(value) -> str:
            return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()[:16]

        poems = {pid: [p.title, p.author, p.text] for pid, p in sorted(self.release.poems.items())}
        return {"release": digest({"poems": poems, "images": sorted(self.images)}),
                "rubric": sorted({self.rubric(pid).fingerprint for pid in self.release.poems}),
                "candidates": digest(self.candidates), "keys": list(self.keys)}

    def write_candidates(self, path: Path | str) -> Path:
        """The candidates as a `tpb distractors` file (what a Space serving this campaign reads)."""
        poems = list(self.release.poems.values())
        sets = [CandidateSet(pid, ids, (), "release") for pid, ids in sorted(self.candidates.items())]
        return write_candidates(sets, poems, path, {"source": "tpb annotate"})


def load_campaign(raw: Path | str, rubric: Path | str | None = None, candidates: Path | str | None = None,
                  max_image_pixels: int = DEFAULT_MAX_IMAGE_PIXELS) -> Campaign:
    """Read a release to rate (its ratings.csv may be missing), its candidates and its rubric; every problem is
    reported at once, by file and line."""
    given = load_rubric(rubric) if rubric is not None else None
    release = read_release(raw, max_image_pixels=max_image_pixels, ratings_required=False,
                           rubrics={given.tradition: given} if given else None)
    rated = sorted({release.poems[img.poem_id].tradition for img in release.images.values()})
    if given is not None and given.tradition not in rated:
        raise DataError(Problem(str(rubric), f"the rubric {given.name!r} is for tradition {given.tradition!r}, and "
                                f"the release's images illustrate poems of {', '.join(map(repr, rated))}: `tpb build` "
                                "rates each poem on its own tradition's rubric, so these ratings could not be built; "
                                "give the rubric of the poems' tradition, or no --rubric (the release's own is read)",
                                field="tradition"))
    given = Path(candidates) if candidates is not None else release.root / CANDIDATES_FILE
    if candidates is None and link_outside(release.root, given):  # it would be published with the release's Space
        raise DataError(outside_link(release.root, given))
    if candidates is not None or given.is_file():
        sets = {pid: tuple(p.poem_id for p in poems) for pid, poems in read_candidates(given).items()}
        source = str(given)
    else:
        sets = {}
        for r in sorted(release.ratings, key=lambda r: r.line):
            if r.phase1_candidates:
                sets.setdefault(r.poem_id, r.phase1_candidates)
        source = f"{release.root / 'ratings.csv'} (phase1_candidates)"
    problems = []
    for pid in sorted({img.poem_id for img in release.images.values()}):
        if pid not in sets:
            problems.append(Problem(source, f"no Phase-1 candidates for poem {pid!r}, which has images: make them with "
                                    f"`tpb distractors {release.root / 'poems.jsonl'} --out "
                                    f"{release.root / CANDIDATES_FILE}`", field=pid))
        elif len(sets[pid]) != N_PHASE1_CANDIDATES or pid not in sets[pid]:
            problems.append(Problem(source, f"expected {N_PHASE1_CANDIDATES} candidates including the poem itself, "
                                    f"got {list(sets[pid])}", field=pid))
        else:
            unknown = [c for c in sets[pid] if c not in release.poems]
            if unknown:
                problems.append(Problem(source, f"candidates {unknown} are not poems of the release: the exported "
                                        "ratings could not name them", field=pid))
    if problems:
        raise DataError(problems)
    return Campaign(release, sets, max_image_pixels)
