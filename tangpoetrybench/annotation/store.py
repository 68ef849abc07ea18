"""The campaign's store: one SQLite file in WAL mode that loses no submitted answer and counts none twice.

    people        name, role (expert | crowd | admin), language, the keyed digest of their link's token
    assignments   one row per (rater, image): the candidates in the order shown, when it was shown, the Phase-1
                  choice and its time, when the poem was revealed, when the rater last chose each Phase-2 answer,
                  the Phase-2 answers and each one's time
    meta          the campaign's id, the settings fixed at its first start, the key of the token digests, and the
                  rubric files given beside the release (`tpb annotate serve --rubric`), which the export writes into it

Every submission is one `BEGIN IMMEDIATE` transaction, committed with `synchronous=FULL` before the rater is answered,
so a killed process keeps every answer it acknowledged. A submission is keyed by its assignment (the ticket the rater
was given): sent again (a retry after a lost answer, a second click) it finds its own row already written and changes
nothing, and a rater can hold an image once (`UNIQUE (rater, image_id)`). Each call opens its own connection, so the
app's worker threads never share one; concurrent writers wait for each other (`timeout`), readers never wait.
`backup` copies the file with sqlite3's online backup API, safe while the app writes.

The file holds every answer: it is made readable by its owner alone (0600, and SQLite gives its -wal and -shm files
the same mode; a file found wider is narrowed when the store opens it), and so is every backup. Tokens are stored
only as HMAC-SHA256 digests of their SHA-256 under a random key of the campaign's own: the database names no link
that works, and a digest matches nothing outside its campaign. A database of schema 1 (plain SHA-256 digests) is
moved to schema 2 when it is opened: each digest is keyed in place (the links keep working, as the key applies to
the SHA-256 that schema 1 kept), the overwritten pages are zeroed (`secure_delete`) and the file is vacuumed; its
older backups still hold the plain digests.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
import secrets
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ..errors import DataError, Problem
from ..files import atomic_path, file_mode, private_folder
from ..rubric import LANGUAGE_CODE

ROLES = ("expert", "crowd", "admin")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # matched whole (fullmatch: no final newline)
BUSY_TIMEOUT_S = 30.0  # how long a writer waits for another one's transaction
SCHEMA_VERSION = 2
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS people (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('expert', 'crowd', 'admin')),
    lang TEXT NOT NULL,
    token_digest TEXT NOT NULL UNIQUE,
    invited_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS assignments (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    rater TEXT NOT NULL REFERENCES people (name),
    image_id TEXT NOT NULL,
    poem_id TEXT NOT NULL,
    generator TEXT NOT NULL,
    candidates TEXT NOT NULL,
    assigned_at REAL NOT NULL,
    shown_at REAL NOT NULL,
    choice TEXT,
    phase1_seconds REAL,
    chosen_at REAL,
    revealed_at REAL,
    answer_marks TEXT,
    answers TEXT,
    answer_seconds TEXT,
    seconds REAL,
    rated_at REAL,
    UNIQUE (rater, image_id));
"""


class Refused(ValueError):
    """A submission the store will not take: `code` says why (`unknown_task`, `answered`, `phase1_first`)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Person:
    name: str
    role: str
    lang: str

    @property
    def admin(self) -> bool:
        return self.role == "admin"


@dataclass(frozen=True)
class Assignment:
    id: int
    rater: str
    image_id: str
    poem_id: str
    generator: str
    candidates: tuple[str, ...]  # in the order this rater sees them
    assigned_at: float
    shown_at: float
    choice: str | None = None
    phase1_seconds: float | None = None
    chosen_at: float | None = None
    revealed_at: float | None = None
    answers: dict[str, str] | None = field(default=None, hash=False)
    answer_seconds: dict[str, float] | None = field(default=None, hash=False)
    seconds: float | None = None  # Phase 1 and Phase 2 together: the rating's response time
    rated_at: float | None = None
    answer_marks: dict[str, float] | None = field(default=None, hash=False)  # Phase 2: when each answer was chosen

    @property
    def phase(self) -> str:
        return "phase1" if self.choice is None else "phase2" if self.answers is None else "done"

    @property
    def done(self) -> bool:
        return self.answers is not None


@dataclass(frozen=True)
class NewAssignment:
    """What the assignment rule picked for a rater."""

    image_id: str
    poem_id: str
    generator: str
    candidates: tuple[str, ...]


SIDECARS = ("", "-wal", "-shm", "-journal")  # the database file and those SQLite keeps beside it


def keyed_digest(key: str, sha256: str) -> str:
    """What `people` keeps of a token: HMAC-SHA256 under the campaign's key of the token's SHA-256 (hex)."""
    return hmac.new(bytes.fromhex(key), sha256.encode("ascii"), hashlib.sha256).hexdigest()


def token_digest(key: str, token: str) -> str:
    return keyed_digest(key, hashlib.sha256(token.encode("utf-8")).hexdigest())


def _assignment(row: sqlite3.Row) -> Assignment:
    values = dict(row)
    values["candidates"] = tuple(values["candidates"].split("|"))
    for key in ("answers", "answer_seconds", "answer_marks"):
        values[key] = None if values[key] is None else json.loads(values[key])
    return Assignment(**values)


class Store:
    """The campaign's SQLite file (created on first use)."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        if self.path.is_symlink():
            raise DataError(Problem(str(self.path), "is a symbolic link: give the database file itself"))
        private_folder(self.path.parent)
        self._private()
        with self.connect() as db:
            mode = db.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode != "wal":
                raise DataError(Problem(str(self.path), f"SQLite could not use WAL mode here (got {mode!r})"))
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if "meta" not in tables:
                db.executescript(SCHEMA)
                db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            version = int(db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
            if version == 1:
                self._from_schema_1(db)
            elif version != SCHEMA_VERSION:
                raise DataError(Problem(str(self.path), f"made by another version of tpb annotate (schema {version}, "
                                        f"this one reads {SCHEMA_VERSION})"))
            db.execute("INSERT OR IGNORE INTO meta VALUES ('token_key', ?)", (secrets.token_hex(32),))
        self._private()
        self.token_key = self.meta("token_key")

    def _private(self) -> None:
        """The database file (made here if new) and the files SQLite keeps beside it readable by their owner alone."""
        os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), file_mode(True)))
        for suffix in SIDECARS:
            found = self.path.with_name(self.path.name + suffix)
            if found.is_file() and not found.is_symlink() and found.stat().st_mode & 0o077:
                found.chmod(file_mode(True))

    def _from_schema_1(self, db: sqlite3.Connection) -> None:
        """A campaign of schema 1 moved to schema 2: each plain SHA-256 digest keyed in place (so every link keeps
        working), a column for the answers' marks; the overwritten pages zeroed and the file vacuumed."""
        key = secrets.token_hex(32)
        db.execute("PRAGMA secure_delete=ON")
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("ALTER TABLE people RENAME COLUMN token_sha256 TO token_digest")
            for name, digest in db.execute("SELECT name, token_digest FROM people").fetchall():
                db.execute("UPDATE people SET token_digest = ? WHERE name = ?", (keyed_digest(key, digest), name))
            db.execute("ALTER TABLE assignments ADD COLUMN answer_marks TEXT")
            db.execute("INSERT INTO meta VALUES ('token_key', ?)", (key,))
            db.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION),))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        for step in ("PRAGMA wal_checkpoint(TRUNCATE)", "VACUUM", "PRAGMA wal_checkpoint(TRUNCATE)"):
            db.execute(step)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A connection of its own, in autocommit mode: transactions are the explicit `transaction()` ones."""
        db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        try:
            db.row_factory = sqlite3.Row
            db.execute("PRAGMA synchronous=FULL")
            db.execute("PRAGMA foreign_keys=ON")
            yield db
        finally:
            db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction (`BEGIN IMMEDIATE`: writers queue at its start, never fail half-way), committed
        on success and rolled back on any error."""
        with self.connect() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

    # --- the campaign ---------------------------------------------------------------------------------------------

    def bind(self, settings: dict, rubric_files: dict[str, str] | None = None) -> str:
        """Fix the campaign's settings at its first start and return its id; a later start with other settings is
        refused, naming each that differs. `rubric_files` (tradition → YAML text): rubrics given beside the release,
        kept for the export to write into it (their content is fixed by the settings' fingerprints)."""
        with self.transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'settings'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta VALUES ('settings', ?)", (json.dumps(settings, sort_keys=True),))
                db.execute("INSERT INTO meta VALUES ('campaign', ?)", (secrets.token_hex(4),))
            else:
                stored = json.loads(row[0])
                differ = sorted(k for k in set(stored) | set(settings) if stored.get(k) != settings.get(k))
                if differ:
                    raise DataError([Problem(str(self.path), f"this campaign was started with another {k} (stored "
                                             f"{stored.get(k)!r}, now {settings.get(k)!r}): serve it as it was "
                                             "started, or start a new campaign with another --db", field=k)
                                     for k in differ])
            if rubric_files:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('rubric_files', ?)",
                           (json.dumps(rubric_files, ensure_ascii=False, sort_keys=True),))
            return db.execute("SELECT value FROM meta WHERE key = 'campaign'").fetchone()[0]

    def rubric_files(self) -> dict[str, str]:
        """The rubrics given beside the release when the campaign was served (`bind`), tradition → YAML text."""
        return json.loads(self.meta("rubric_files") or "{}")

    def meta(self, key: str) -> str | None:
        with self.connect() as db:
            row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def campaign_id(self) -> str:
        campaign = self.meta("campaign")
        if campaign is None:
            raise DataError(Problem(str(self.path), "no campaign started here yet (run `tpb annotate serve` first)"))
        return campaign

    def keys(self) -> tuple[str, ...]:
        """The questions of the campaign, in order (the rating columns)."""
        self.campaign_id()
        return tuple(json.loads(self.meta("settings"))["keys"])

    # --- people ---------------------------------------------------------------------------------------------------

    def invite(self, name: str, role: str, lang: str, now: float, reissue: bool = False,
               token: str | None = None) -> str:
        """A new person and their link's token (returned once: only its digest is kept). `reissue` gives an invited
        person a new token, and their old link stops working; `token` sets it (a Space's admin secret)."""
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ValueError(f"{name!r}: a name is 1 to 64 letters, digits, '.', '_' or '-' (it names the rater in "
                             "ratings.csv), starting with a letter or digit")
        if not LANGUAGE_CODE.fullmatch(lang):
            raise ValueError(f"{lang!r} is not a language code (en, zh, ja, ...)")
        if role not in ROLES:
            raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
        if token is not None and len(token) < 16:
            raise ValueError("a token of fewer than 16 characters is too easy to guess")
        token = token or secrets.token_urlsafe(24)
        with self.transaction() as db:
            known = db.execute("SELECT role FROM people WHERE name = ?", (name,)).fetchone()
            if known is not None and not reissue:
                raise ValueError(f"{name} is already invited (as {known[0]}): pass --reissue for a new link (the old "
                                 "one stops working)")
            if known is not None and known[0] != role:
                raise ValueError(f"{name} was invited as {known[0]}, not {role}: their ratings keep their group")
            db.execute("INSERT INTO people VALUES (?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET "
                       "token_digest = excluded.token_digest, lang = excluded.lang",
                       (name, role, lang, token_digest(self.token_key, token), now))
        return token

    def person(self, token: str | None) -> Person | None:
        if not token:
            return None
        with self.connect() as db:
            row = db.execute("SELECT name, role, lang FROM people WHERE token_digest = ?",
                             (token_digest(self.token_key, token),)).fetchone()
        return None if row is None else Person(*row)

    def people(self) -> dict[str, Person]:
        with self.connect() as db:
            return {r[0]: Person(*r) for r in db.execute("SELECT name, role, lang FROM people ORDER BY name")}

    # --- assignments ----------------------------------------------------------------------------------------------

    def assignments(self) -> list[Assignment]:
        with self.connect() as db:
            return [_assignment(r) for r in db.execute("SELECT * FROM assignments ORDER BY id")]

    def open_assignment(self, rater: str) -> Assignment | None:
        """The rater's image not yet rated, if any (a rater holds one at a time)."""
        with self.connect() as db:
            row = db.execute("SELECT * FROM assignments WHERE rater = ? AND answers IS NULL ORDER BY id LIMIT 1",
                             (rater,)).fetchone()
        return None if row is None else _assignment(row)

    def assign(self, rater: str, pick: Callable[[list[Assignment]], NewAssignment | None],
               now: float) -> Assignment | None:
        """The rater's open assignment, or a new one from `pick` (given every assignment so far, inside the same
        transaction, so two raters asking at once never both take an image's last place); None when `pick` finds
        nothing left for this rater."""
        with self.transaction() as db:
            rows = [_assignment(r) for r in db.execute("SELECT * FROM assignments ORDER BY id")]
            mine = [a for a in rows if a.rater == rater and not a.done]
            if mine:
                return mine[0]
            new = pick(rows)
            if new is None:
                return None
            cur = db.execute("INSERT INTO assignments (rater, image_id, poem_id, generator, candidates, assigned_at, "
                             "shown_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (rater, new.image_id, new.poem_id, new.generator, "|".join(new.candidates), now, now))
            return _assignment(db.execute("SELECT * FROM assignments WHERE id = ?", (cur.lastrowid,)).fetchone())

    def _mine(self, db: sqlite3.Connection, rater: str, ticket: int) -> Assignment:
        row = db.execute("SELECT * FROM assignments WHERE id = ? AND rater = ?", (ticket, rater)).fetchone()
        if row is None:
            raise Refused("unknown_task", f"assignment {ticket} is not {rater}'s")
        return _assignment(row)

    def shown(self, rater: str, ticket: int, now: float) -> Assignment:
        """The assignment was shown again (a reload, a return): its current phase's clock starts now (in Phase 2,
        with its questions shown unanswered again, their marks cleared)."""
        with self.transaction() as db:
            a = self._mine(db, rater, ticket)
            if a.phase == "phase1":
                db.execute("UPDATE assignments SET shown_at = ? WHERE id = ?", (now, ticket))
            elif a.phase == "phase2":
                db.execute("UPDATE assignments SET revealed_at = ?, answer_marks = NULL WHERE id = ?", (now, ticket))
            return self._mine(db, rater, ticket)

    def mark(self, rater: str, ticket: int, key: str, now: float) -> bool:
        """The rater chose an answer to question `key` at `now` (their last choice on it counts): kept in the
        assignment's row, question by question, each in its own transaction, so choices made at once never overwrite
        each other's. Outside Phase 2 (before the reveal, after the rating) it changes nothing and says so."""
        with self.transaction() as db:
            a = self._mine(db, rater, ticket)
            if a.phase != "phase2":
                return False
            marks = json.dumps({**(a.answer_marks or {}), key: now}, sort_keys=True)
            db.execute("UPDATE assignments SET answer_marks = ? WHERE id = ?", (marks, ticket))
            return True

    def record_choice(self, rater: str, ticket: int, choice: str, now: float) -> Assignment:
        """Phase 1's answer, in one transaction; the same answer sent again changes nothing, another is refused."""
        with self.transaction() as db:
            a = self._mine(db, rater, ticket)
            if a.choice is not None:
                if a.choice == choice:
                    return a
                raise Refused("answered", f"assignment {ticket}'s Phase 1 was already answered ({a.choice})")
            if choice not in a.candidates:
                raise Refused("unknown_task", f"{choice!r} is not one of assignment {ticket}'s candidates")
            db.execute("UPDATE assignments SET choice = ?, chosen_at = ?, phase1_seconds = ?, revealed_at = ? "
                       "WHERE id = ?", (choice, now, max(0.0, now - a.shown_at), now, ticket))
            return self._mine(db, rater, ticket)

    def record_rating(self, rater: str, ticket: int, answers: dict[str, str], answer_seconds: dict[str, float],
                      now: float) -> Assignment:
        """Phase 2's answers, in one transaction, after Phase 1's; the same answers sent again change nothing."""
        with self.transaction() as db:
            a = self._mine(db, rater, ticket)
            if a.choice is None:
                raise Refused("phase1_first", f"assignment {ticket}'s Phase 1 is not answered yet")
            if a.answers is not None:
                if a.answers == answers:
                    return a
                raise Refused("answered", f"assignment {ticket} was already rated")
            phase2 = max(0.0, now - a.revealed_at)
            db.execute("UPDATE assignments SET answers = ?, answer_seconds = ?, seconds = ?, rated_at = ? WHERE id = ?",
                       (json.dumps(answers, sort_keys=True), json.dumps(answer_seconds, sort_keys=True),
                        a.phase1_seconds + phase2, now, ticket))
            return self._mine(db, rater, ticket)

    # --- copies ---------------------------------------------------------------------------------------------------

    def backup(self, out: Path | str, overwrite: bool = False) -> Path:
        """A consistent copy of the database while the app runs (sqlite3's online backup), written into a new
        temporary file beside `out` and renamed into place (`files.atomic_path`: never through a link), readable by
        its owner alone, as the database is."""
        out = Path(out)
        if out.is_symlink() or (out.exists() and not overwrite):
            raise FileExistsError(f"{out} exists; choose another file or pass --overwrite")
        with atomic_path(out, private=True) as tmp, self.connect() as src:
            dst = sqlite3.connect(tmp)
            try:
                src.backup(dst)
                dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
            finally:
                dst.close()
        return out
