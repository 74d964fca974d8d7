"""The study's journal: every trial state change, committed to SQLite before the search moves on.

A tinynas journal says what it is: SQLite's `application_id` holds "TNAS" and `user_version` the
schema version. A file that is not one (another program's database, not SQLite at all, empty) is
inspected read-only and refused; it is never opened for writing. Journals written before the stamp
existed (application_id 0 but exactly our `meta` and `trials` tables) are adopted and stamped.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import time
import urllib.parse
from pathlib import Path
from typing import Any

from firmware_bridge.safe_read import NotRegularFile, check_regular
from tinynas.errors import StorageError, TinynasError, is_disk_full, storage_message
from tinynas.trial import Trial

APPLICATION_ID = int.from_bytes(b"TNAS", "big")
"""SQLite application_id of a tinynas journal (0x544E4153)."""
SCHEMA_VERSION = 1
"""SQLite user_version of the current journal schema."""
_SQLITE_MAGIC = b"SQLite format 3\x00"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trials (
    number INTEGER PRIMARY KEY, architecture TEXT NOT NULL, digest TEXT NOT NULL,
    fidelity TEXT NOT NULL, state TEXT NOT NULL, score REAL, val_loss TEXT NOT NULL,
    val_accuracy TEXT NOT NULL, costs TEXT NOT NULL, seconds REAL NOT NULL, error TEXT NOT NULL,
    attempts INTEGER NOT NULL, violations TEXT NOT NULL, updated REAL NOT NULL,
    details TEXT NOT NULL DEFAULT '{}'
);
"""
# The columns a journal of any tinynas version has (`details` came later and is added on adoption).
_META_COLUMNS = {"key", "value"}
_TRIAL_COLUMNS = {"number", "architecture", "digest", "fidelity", "state", "score", "val_loss", "val_accuracy",
                  "costs", "seconds", "error", "attempts", "violations", "updated"}


class JournalError(TinynasError, RuntimeError):
    """A journal that cannot be opened or does not belong to this study."""


def inspect_journal(path: str | Path) -> str:
    """What an existing file at `path` is, read without writing a byte: 'tinynas', 'legacy' (an older
    tinynas journal, to be stamped) or a JournalError/StorageError saying why it is not ours."""
    path = Path(path)
    try:
        check_regular(path, "journal")
        with open(path, "rb") as handle:
            header = handle.read(100)
    except NotRegularFile as exc:
        kind = str(exc.strerror).removesuffix(", not a regular file")
        raise JournalError(f"{path} is {kind}, not a tinynas journal: left untouched; choose another --out") \
            from None
    except IsADirectoryError:
        raise JournalError(f"{path} is a folder, not a tinynas journal: choose another --out") from None
    except OSError as exc:
        raise StorageError(storage_message(exc, "cannot read journal", resumable=True)) from None
    if not header:
        raise JournalError(f"{path} is empty (0 bytes), not a tinynas journal: left untouched; remove it "
                           f"if it is yours, or choose another --out")
    if not header.startswith(_SQLITE_MAGIC) or len(header) < 100:
        raise JournalError(f"{path} is not a tinynas journal (not an SQLite database): left untouched; "
                           f"choose another --out")
    header_id = int.from_bytes(header[68:72], "big")
    if header_id not in (0, APPLICATION_ID):
        raise _foreign(path, f"application_id {header_id:#x}")
    # Without a -wal file the main file is the whole database: `immutable` reads it with no locks and no
    # -shm/-wal files created. With one, its pages must be read too (an older journal killed mid-run).
    wal = path.with_name(path.name + "-wal")
    immutable = not (wal.exists() and wal.stat().st_size > 0)
    uri = f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro" + ("&immutable=1" if immutable else "")
    try:
        db = sqlite3.connect(uri, uri=True, timeout=30)
        try:
            application_id = db.execute("PRAGMA application_id").fetchone()[0]
            version = db.execute("PRAGMA user_version").fetchone()[0]
            tables = {name: {row[1] for row in db.execute(f'PRAGMA table_info("{name.replace(chr(34), chr(34) * 2)}")')}
                      for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table' "
                                                "AND name NOT LIKE 'sqlite_%'").fetchall()}
            # A damaged file (truncated, overwritten pages) must be refused before it is opened for writing.
            damage = db.execute("PRAGMA quick_check(1)").fetchone()[0] if tables else "ok"
        finally:
            db.close()
    except sqlite3.DatabaseError as exc:
        raise JournalError(f"{path} is not a readable tinynas journal (damaged or not ours: {exc}): left "
                           f"untouched; choose another --out") from None
    if damage != "ok" and application_id in (0, APPLICATION_ID):
        raise JournalError(f"{path} is a damaged tinynas journal ({damage}): left untouched; restore it from a "
                           f"copy, or choose another --out")
    if application_id == APPLICATION_ID:
        if version > SCHEMA_VERSION:
            raise JournalError(f"{path} was written by a newer tinynas (journal schema {version}, this one "
                               f"reads {SCHEMA_VERSION}): upgrade tinynas to resume it")
        return "tinynas"
    if application_id != 0:
        raise _foreign(path, f"application_id {application_id:#x}")
    if set(tables) == {"meta", "trials"} and tables["meta"] == _META_COLUMNS and \
            _TRIAL_COLUMNS <= tables["trials"] <= _TRIAL_COLUMNS | {"details"}:
        return "legacy"
    what = f"tables {', '.join(sorted(tables))}" if tables else "no tables"
    raise _foreign(path, what)


def _foreign(path: Path, what: str) -> JournalError:
    return JournalError(f"{path} belongs to another program ({what}), not a tinynas journal: left untouched; "
                        f"choose another --out")


def _sqlite_error(exc: sqlite3.Error, path: Path, doing: str) -> TinynasError:
    """A project error for an SQLite failure: a full or read-only disk is a StorageError."""
    if is_disk_full(exc):
        return StorageError(f"{doing} {path}: no space left on the device (free some space, then run again "
                            f"with --resume: the journal is intact)")
    if "readonly" in str(exc).lower() or "read-only" in str(exc).lower():
        return StorageError(f"{doing} {path}: read-only file system or folder (choose a writable --out)")
    return JournalError(f"{doing} {path}: {exc}")


def _reading(path: Path) -> sqlite3.Connection:
    """A read-only connection that waits at most a second for the study's lock (it writes as candidates finish)."""
    db = sqlite3.connect(f"file:{urllib.parse.quote(str(path.resolve()))}?mode=ro", uri=True, timeout=1)
    db.row_factory = sqlite3.Row
    return db


def peek(path: str | Path, meta: tuple[str, ...] = ()) -> tuple[list[Trial], dict[str, Any]] | None:
    """A running search's trials and some of its meta values, read without writing or waiting (for the device
    service's chart while the study writes): read-only, a one-second lock timeout, rows being written skipped.
    None when the journal is absent, locked or unreadable: the reader shows the last snapshot."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with contextlib.closing(_reading(path)) as db:
            rows = db.execute("SELECT * FROM trials ORDER BY number").fetchall()
            values = {}
            for key in meta:
                row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
                if row is not None:
                    values[key] = json.loads(row[0])
    except (sqlite3.Error, ValueError):
        return None
    trials = []
    for row in rows:
        try:
            trials.append(Trial.from_row(dict(row)))
        except (TinynasError, ValueError, TypeError, KeyError):
            continue  # a row being written: the next look shows it
    return trials, values


def progress(path: str | Path) -> tuple[int, float] | None:
    """How many trials a running search has and the search seconds it has saved, read as `peek` reads but
    without parsing a row (the service's status asks twice a second). None as for `peek`."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        with contextlib.closing(_reading(path)) as db:
            count = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
            row = db.execute("SELECT value FROM meta WHERE key = 'search_seconds'").fetchone()
            return int(count), float(json.loads(row[0]) or 0.0) if row is not None else 0.0
    except (sqlite3.Error, ValueError, TypeError):
        return None


def snapshot(path: str | Path) -> bytes:
    """A consistent copy of a journal a search may be writing (SQLite's online backup, its WAL included), as one
    file's bytes: what a sweep sends to another node to resume there."""
    uri = f"file:{urllib.parse.quote(str(Path(path).resolve()))}?mode=ro"
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=30)) as source, \
            contextlib.closing(sqlite3.connect(":memory:")) as copy:
        source.backup(copy)
        image = bytearray(copy.serialize())
    # The file format's read/write versions say "WAL" (2) as the source's did; the copy is one file with no log
    # beside it: say "rollback" (1), so that it also opens in memory (the search sets WAL again when it opens it).
    image[18:20] = b"\x01\x01"
    return bytes(image)


def finished_trials(image: bytes) -> int:
    """How many candidates of a journal's `snapshot` were trained to the end (an interrupted or running one is
    trained again on resume); 0 for bytes that are not a journal."""
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        try:
            db.deserialize(image)
            return db.execute("SELECT COUNT(*) FROM trials WHERE state IN ('complete', 'failed')").fetchone()[0]
        except sqlite3.Error:
            return 0


def checkpoint(path: str | Path) -> None:
    """Fold a journal's write-ahead log into its file (as a read-write connection's close does)."""
    with contextlib.closing(sqlite3.connect(path, timeout=30)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


class Journal:
    """SQLite storage of a study's settings and trials (WAL, synchronous=FULL: a commit survives
    a power cut)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        kind = inspect_journal(self.path) if self.path.exists() else "new"
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            if kind == "new":
                # Stamped before WAL is switched on, so the stamp is in the main file's header at once.
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            if kind == "legacy":
                columns = {row[1] for row in self._db.execute("PRAGMA table_info(trials)")}
                if "details" not in columns:  # journals written before trials had details
                    self._db.execute("ALTER TABLE trials ADD COLUMN details TEXT NOT NULL DEFAULT '{}'")
                self._db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
                self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except sqlite3.Error as exc:
            self._abandon(kind)
            raise _sqlite_error(exc, self.path, "cannot open journal") from None
        except OSError as exc:
            self._abandon(kind)
            raise StorageError(storage_message(exc, "cannot open journal", resumable=True)) from None
        self._db.row_factory = sqlite3.Row

    def _abandon(self, kind: str) -> None:
        # A journal this call was creating (e.g. on a full disk) is removed: an empty file left behind
        # would later be refused as "not a tinynas journal".
        self.close()
        if kind == "new":
            for suffix in ("", "-wal", "-shm", "-journal"):
                try:
                    self.path.with_name(self.path.name + suffix).unlink()
                except OSError:
                    pass

    def close(self) -> None:
        """Close the database (safe to call twice)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _execute(self, sql: str, parameters: tuple = ()) -> sqlite3.Cursor:
        if self._db is None:
            raise JournalError(f"{self.path} is closed")  # a use after close() is a bug, said in one line
        try:
            return self._db.execute(sql, parameters)
        except sqlite3.Error as exc:
            raise _sqlite_error(exc, self.path, "journal" if sql.startswith("SELECT") else
                                "cannot write journal") from None

    def get_meta(self, key: str) -> Any:
        """A JSON value stored under `key`, or None."""
        row = self._execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row["value"]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON value under `key`."""
        self._execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                      (key, json.dumps(value, sort_keys=True)))

    def put(self, trial: Trial) -> None:
        """Insert or replace a trial (one committed transaction)."""
        row = trial.to_row()
        row["updated"] = time.time()
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self._execute(f"INSERT OR REPLACE INTO trials ({columns}) VALUES ({marks})", tuple(row.values()))

    def trials(self) -> list[Trial]:
        """All trials in the order they were created."""
        rows = self._execute("SELECT * FROM trials ORDER BY number").fetchall()
        return [Trial.from_row(dict(row)) for row in rows]
