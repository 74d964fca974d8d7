"""The service's status snapshot: what `status.json`, the status page and `tinynas service status` show."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from tinynas.process_memory import memory_bytes

if TYPE_CHECKING:
    from tinynas.service.runner import Service


def snapshot(service: Service) -> dict:
    """Everything the status page shows, JSON-ready."""
    state = service.state
    status = {"state": state.state, "user": state.user, "error": state.error, "time": time.time(),
              "deployed": state.deployed, "collection": dict(service.collection),
              "search": search_progress(service), "predictions": list(service.predictions.last),
              "link": service.link.counters.to_dict() if getattr(service, "link", None) else {},
              "memory": memory_bytes(), "pid": os.getpid(), "paused": state.paused, "rewear": state.rewear,
              "device": ({"channels": service.hello.channels, "sample_rate_hz": service.hello.sample_rate_hz}
                         if getattr(service, "hello", None) else {})}
    return status


def search_progress(service: Service) -> dict:
    """Trials so far, seconds of budget left and the best model of a running search ({} when none runs).

    Read from the study's journal (read-only, short timeout) and best.json while the search writes them: a
    locked or half-written file only leaves that figure out of this snapshot.
    """
    if service.state.state != "SEARCHING" or not service.state.study:
        return {}
    study = Path(service.state.study)
    result: dict = {"trials": 0}
    journal = study / "journal.sqlite"
    if journal.exists():
        import sqlite3

        try:
            with sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=1) as db:
                result["trials"] = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
                row = db.execute("SELECT value FROM meta WHERE key = 'search_seconds'").fetchone()
                spent = json.loads(row[0]) if row else 0.0
                from tinynas.study import parse_duration

                result["seconds_left"] = max(0.0, parse_duration(service.config.budget) - spent)
        except sqlite3.Error:
            pass
    best = study / "best.json"
    if best.exists():
        try:
            result["best"] = json.loads(best.read_text())["name"]
        except (OSError, ValueError, KeyError):
            pass
    return result
