"""The study's journal: every trial state change, committed to SQLite before the search moves on."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

from tinynas.trial import Trial
from tinynas.errors import TinynasError

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


class JournalError(TinynasError, RuntimeError):
    """A journal that cannot be opened or does not belong to this study."""


class Journal:
    """SQLite storage of a study's settings and trials (WAL, synchronous=FULL: a commit survives
    a power cut)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(_SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(trials)")}
            if "details" not in columns:  # journals written before trials had details
                self._db.execute("ALTER TABLE trials ADD COLUMN details TEXT NOT NULL DEFAULT '{}'")
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"cannot open journal {self.path}: {exc}") from None
        self._db.row_factory = sqlite3.Row

    def close(self) -> None:
        """Close the database (safe to call twice)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def get_meta(self, key: str) -> Any:
        """A JSON value stored under `key`, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return json.loads(row["value"]) if row else None

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON value under `key`."""
        self._db.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                         (key, json.dumps(value, sort_keys=True)))

    def put(self, trial: Trial) -> None:
        """Insert or replace a trial (one committed transaction)."""
        row = trial.to_row()
        row["updated"] = time.time()
        columns = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        self._db.execute(f"INSERT OR REPLACE INTO trials ({columns}) VALUES ({marks})", tuple(row.values()))

    def trials(self) -> list[Trial]:
        """All trials in the order they were created."""
        rows = self._db.execute("SELECT * FROM trials ORDER BY number").fetchall()
        return [Trial.from_row(dict(row)) for row in rows]
