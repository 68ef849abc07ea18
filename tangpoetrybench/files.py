"""Writing a folder all at once: readers never see a half-written dataset or release; reading JSON Lines."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


@contextmanager
def atomic_folder(out: Path) -> Iterator[Path]:
    """Yield a temporary folder beside `out`; on success it replaces `out`, on failure it is removed."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    tmp.chmod(0o755)  # mkdtemp makes it private; the dataset folder is meant to be shared
    try:
        yield tmp
        old = None
        if out.exists():
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.replace(out, old)
        os.replace(tmp, out)
        if old is not None:
            shutil.rmtree(old)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def ensure_free(out: Path, overwrite: bool) -> None:
    """Refuse to replace a non-empty folder unless asked to."""
    if out.exists() and not (overwrite or (out.is_dir() and not any(out.iterdir()))):
        raise FileExistsError(f"{out} exists; choose another folder or pass --overwrite")


def json_lines(path: Path | str, partial: str = "read") -> Iterator[tuple[int, Any]]:
    """(line number, value) of each non-blank line of a JSON Lines file, read in one open; a line that is not JSON
    is an error naming the file and line. Lines end at a newline only (a U+2028 inside a string is no line break).

    A last line without its newline is what a writer killed mid-line, or still writing, leaves. `partial` says what
    to do with it: "read" it as any other line (where it is cut short, the error says so), "drop" it, or "cut" it
    off the file and drop it (only the one process about to append to the file may cut it)."""
    if partial not in ("read", "drop", "cut"):
        raise ValueError(f"partial is read, drop or cut, not {partial!r}")
    data = Path(path).read_bytes()
    end = data.rfind(b"\n") + 1
    if partial == "cut" and end < len(data):
        with open(path, "r+b") as f:
            f.truncate(end)
    lines = (data if partial == "read" else data[:end]).split(b"\n")
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            raise ValueError(f"{path}:{lineno}: not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            if lineno == len(lines) and end < len(data):
                raise ValueError(f"{path}:{lineno}: a line cut short, with no newline (the run writing the file was "
                                 "killed, or is still running): resume it, or let it finish") from None
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None


HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
"""What the Hub accepts as a repo id: NAME or ORG/NAME."""


def looks_like_path(value: str) -> bool:
    """A value meant as a local path: `./`, `../`, `/` or `~` in front, a Windows separator, more than one `/`, or
    a folder that exists in front of its last part (`sample/datset` where `sample/` exists)."""
    if value.startswith(("./", "../", "/", "~", ".\\")) or value in (".", "..") or not HUB_ID.fullmatch(value):
        return True
    return "/" in value and Path(value).parent.is_dir()


def hub_offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def local_or_hub(value: str | os.PathLike, what: str, repo_type: str = "model") -> str:
    """`value` as given if it is an existing file or folder, or a Hub id that may be fetched; otherwise an error
    that names it, at once and before any network call.

    A path that does not exist is never sent to the Hub (it would answer, after retries, with an error that does
    not name the path). With `HF_HUB_OFFLINE=1` a Hub id must already be in the local Hub cache. `what` names the
    option in the error (`--model`, `--dataset`)."""
    text = str(value)
    if Path(text).expanduser().exists():
        return text
    if looks_like_path(text):
        raise FileNotFoundError(f"{what} {text}: no such file or folder (check the path)")
    if hub_offline():
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError

        try:
            snapshot_download(text, repo_type=repo_type, local_files_only=True)
        except (LocalEntryNotFoundError, OSError, ValueError):
            raise ValueError(f"{what} {text} is neither a local folder nor in the Hub cache, and HF_HUB_OFFLINE=1 "
                             "forbids downloading it: give the path of a local copy, or unset HF_HUB_OFFLINE"
                             ) from None
    return text
