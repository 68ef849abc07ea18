"""Writing a folder all at once: readers never see a half-written dataset or release; reading JSON Lines."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


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


def json_lines(path: Path | str) -> Iterator[tuple[int, dict]]:
    """(line number, record) of each non-blank line of a JSON Lines file; a line that is not JSON is an error naming
    the file and line."""
    for lineno, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
