"""A sealed release: how a published rating Space holds its release without giving the answers away (a Space's files
can be read by anyone who can open it).

`seal` writes the poems, `release.json`, the rubrics that are not bundled and each image's pixels alone
(`files.pixels_only`, as PNG) under a random name into the Space's `release/`, and into the *key* (kept out of the
Space: an always-private dataset repo) which image each name is and the Phase-1 candidates (each poem's set would name
the poem it was drawn for). `unseal` makes the raw release back from both, where the Space starts.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from pathlib import Path

from ..annotation.campaign import CANDIDATES_FILE, Campaign
from ..errors import DataError, Problem
from ..files import json_lines, local_or_hub, open_image, pixels_only, write_file
from ..poems import is_name
from ..rubric import is_bundled

SEALED = "sealed.json"  # in a sealed release: says it is one
SEALED_FORMAT = "tangpoetrybench-sealed-release/1"
KEY_IMAGES = "images.jsonl"  # in the key: {"file": <random name>, "image_id": <generator/poem_id>} per image
OPAQUE = re.compile(r"[0-9a-f]{32}\.png")


def seal(campaign: Campaign, release: Path, key: Path) -> None:
    """Write the campaign's release sealed into the new folder `release` (for the Space) and the folder `key` (kept
    out of it)."""
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
    copied = ("poems.jsonl", "release.json", "rubrics")
    problems += [Problem(str(p), "is a symbolic link") for p in [*(images / n for n in sorted(held)),
                                                                 *(release / n for n in copied)] if p.is_symlink()]
    if problems:
        raise DataError(problems)
    into.mkdir(parents=True)
    for name in copied:
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
