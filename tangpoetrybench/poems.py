"""Poems: the poem record (docs/dataset.md), reading and checking a poems file, and converting the chinese-poetry
corpus.

A poems file is JSON Lines, one poem a line:
`{"poem_id", "title", "author", "text" (lines joined by "\\n"), "tradition" (a tradition with a rubric: "tang",
"song_ci" or one a release brings, docs/rubrics.md), "form"?, "tune"?, "split"?: "train"|"validation"|"test", "paraphrase"?}` (`paraphrase`: the poem in modern
language, shown to raters beside it once it is revealed).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

from .errors import DataError, Problem, quote
from .files import write_file

SPLITS = ("train", "validation", "test")
REQUIRED = ("poem_id", "title", "author", "text", "tradition")
OPTIONAL = ("form", "tune", "split", "paraphrase")
POEM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
"""What a poem id or a generator name may be (each names a file or a folder): check with `is_name`, which matches the
whole string (a `$` would let a final newline through)."""


def is_name(value: object) -> bool:
    """Whether `value` is a poem id or generator name: letters, digits, '.', '_' and '-', starting with a letter or
    digit (so never `..`, a path, or a hidden file)."""
    return isinstance(value, str) and POEM_ID.fullmatch(value) is not None


def check_generator(name: object, what: str = "generator") -> str:
    """`name` if it may name a generator's folder, else a ValueError saying why; `what` names where it came from
    (`--generator`, a scores file's image id)."""
    if not is_name(name):
        raise ValueError(f"{what} {quote(name)}: use letters, digits, '.', '_' and '-' only, starting with a letter or "
                         "digit (it names a folder)")
    return name


# Every block of CJK unified and compatibility ideographs (Unicode 15.1), so that a poem's rare characters
# (extension blocks) count as characters too.
HAN_BLOCKS = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2A6DF), (0x2A700, 0x2EE5F),
              (0x2F800, 0x2FA1F), (0x30000, 0x323AF))


def is_han(char: str) -> bool:
    code = ord(char)
    return any(low <= code <= high for low, high in HAN_BLOCKS)


def han_count(text: str) -> int:
    return sum(is_han(c) for c in text)


@dataclass(frozen=True)
class Poem:
    poem_id: str
    title: str
    author: str
    text: str
    tradition: str
    form: str | None = None
    tune: str | None = None
    split: str | None = None
    paraphrase: str | None = None

    @property
    def lines(self) -> list[str]:
        return self.text.split("\n")

    def to_json(self) -> str:
        return json.dumps({k: v for k, v in asdict(self).items() if v is not None}, ensure_ascii=False)


def content_id(title: str, author: str, text: str) -> str:
    """The id of a poem given without one, from its title, author and text: one poem, one id, wherever it stands in
    a call (the reward's fill for a failed image is the mean of its poem's images)."""
    digest = hashlib.sha256(json.dumps([title, author, text], ensure_ascii=False).encode("utf-8")).hexdigest()
    return f"poem-{digest[:16]}"


def read_poems(path: Path | str, display: str | None = None, traditions: Iterable[str] | None = None) -> list[Poem]:
    """Read and check a poems file; raises `DataError` listing every bad line and field. `traditions`: those with a
    rubric (None: any name; whoever knows the rubrics checks them)."""
    poems, problems = parse_poems(path, display, traditions)
    if problems:
        raise DataError(problems)
    return poems


def parse_poems(path: Path | str, display: str | None = None,
                traditions: Iterable[str] | None = None) -> tuple[list[Poem], list[Problem]]:
    """The good poems of a poems file and the problems of the bad lines (so one bad line hides nothing else);
    `traditions` as in `read_poems`."""
    traditions = None if traditions is None else tuple(traditions)
    path = Path(path)
    name = display or str(path)
    problems: list[Problem] = []
    poems: list[Poem] = []
    first_line: dict[str, int] = {}
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        return [], [Problem(name, f"cannot read: {exc}")]
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            problems.append(Problem(name, f"not valid JSON: {exc.msg}", line=lineno))
            continue
        if not isinstance(row, dict):
            problems.append(Problem(name, "expected a JSON object", line=lineno))
            continue
        bad = len(problems)
        for key in REQUIRED:
            value = row.get(key)
            if not isinstance(value, str) or not value.strip():
                problems.append(Problem(name, "required, a non-empty string", line=lineno, field=key))
        for key in OPTIONAL:
            if row.get(key) is not None and not isinstance(row[key], str):
                problems.append(Problem(name, f"expected a string, got {row[key]!r}", line=lineno, field=key))
        for key in sorted(set(row) - set(REQUIRED) - set(OPTIONAL)):
            problems.append(Problem(name, "unknown field", line=lineno, field=key))
        if isinstance(row.get("poem_id"), str) and row["poem_id"] and not is_name(row["poem_id"]):
            problems.append(Problem(name, f"{row['poem_id']!r}: use letters, digits, '.', '_' and '-' only "
                                    "(it names image files)", line=lineno, field="poem_id"))
        tradition = row.get("tradition")
        if isinstance(tradition, str) and tradition and traditions is not None and tradition not in traditions:
            problems.append(Problem(name, f"{tradition!r} is not one of {', '.join(traditions)} (a tradition that is "
                                    f"not bundled brings its rubric: rubrics/{tradition}.yaml)",
                                    line=lineno, field="tradition"))
        if row.get("split") is not None and row["split"] not in SPLITS:
            problems.append(Problem(name, f"{row['split']!r} is not one of {', '.join(SPLITS)}",
                                    line=lineno, field="split"))
        pid = row.get("poem_id")
        if isinstance(pid, str) and pid in first_line:
            problems.append(Problem(name, f"poem {pid!r} already on line {first_line[pid]}"
                                    + (" (a poem in two splits)" if _split_of(poems, pid) != row.get("split") else ""),
                                    line=lineno, field="poem_id"))
            continue
        if len(problems) > bad:
            continue
        first_line[pid] = lineno
        poems.append(Poem(**{k: row.get(k) for k in REQUIRED + OPTIONAL}))
    if not poems and not problems:
        problems.append(Problem(name, "no poems"))
    with_split = [p for p in poems if p.split is not None]
    if with_split and len(with_split) != len(poems):
        missing = next(p.poem_id for p in poems if p.split is None)
        problems.append(Problem(name, f"some poems have a split and others do not (e.g. {missing!r}): "
                                "give every poem a split or none", field="split"))
    return poems, problems


def _split_of(poems: list[Poem], poem_id: str) -> str | None:
    return next(p.split for p in poems if p.poem_id == poem_id)


def write_poems(poems: Iterable[Poem], path: Path | str) -> None:
    """A SPEC poems file, written whole and never through a symbolic link (`files.write_file`)."""
    write_file(path, "".join(p.to_json() + "\n" for p in poems))


def sample_poems() -> list[Poem]:
    """The poems bundled with the package: ones the paper quotes and a few more (see data/README.md)."""
    ref = resources.files("tangpoetrybench") / "data" / "sample_poems.jsonl"
    with resources.as_file(ref) as path:
        return read_poems(path, display="tangpoetrybench/data/sample_poems.jsonl")


# Inline notes of the chinese-poetry corpus: variants "(明年 一作：年年)" and equivalents "(唯 通：惟)".
# A note may run across two paragraphs, so notes are stripped from the joined text.
VARIANT_NOTE = re.compile(r"[(（][^()（）]*(?:一作|通)[^()（）]*[)）]")


def strip_variant_notes(text: str) -> str:
    """Remove the notes; keep the poem's lines, without blank ones."""
    lines = (line.strip() for line in VARIANT_NOTE.sub("", text).split("\n"))
    return "\n".join(line for line in lines if line)


def convert_chinese_poetry(path: Path | str) -> list[Poem]:
    """Convert the chinese-poetry files in shared data (`tang300.jsonl`, `songci_busuanzi.jsonl`) to `Poem`s.

    Tang poems become `tang300-NNN` (their index in the anthology) in simplified characters; Song Ci
    become `songci-FILE-INDEX` after their source file and position. Variant notes are stripped.
    """
    path = Path(path)
    poems: list[Poem] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), start=1):
        if not line.strip():
            continue
        row = json.loads(line)
        try:
            if "idx" in row:  # Three Hundred Tang Poems
                poems.append(Poem(
                    poem_id=f"tang300-{row['idx']:03d}",
                    title=row.get("title_simplified") or row["title"],
                    author=row.get("author_simplified") or row["author"],
                    text=strip_variant_notes("\n".join(row.get("paragraphs_simplified") or row["paragraphs"])),
                    tradition="tang",
                    form=row.get("form_simplified") or row.get("form"),
                ))
            else:  # Song Ci
                stem = Path(row["source_file"]).stem.rsplit(".", 1)[-1]
                lines = strip_variant_notes("\n".join(row["paragraphs"])).split("\n")
                poems.append(Poem(
                    poem_id=f"songci-{stem}-{row['index_in_file']}",
                    title=f"{row['rhythmic']}·{lines[0].rstrip('，。、；！？')}",
                    author=row["author"],
                    text="\n".join(lines),
                    tradition="song_ci",
                    form="词",
                    tune=row["rhythmic"],
                ))
        except (KeyError, TypeError, IndexError) as exc:
            raise DataError(Problem(str(path), f"not a chinese-poetry record: missing {exc}", line=lineno)) from None
    return poems
