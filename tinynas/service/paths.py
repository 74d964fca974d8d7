"""Where the service keeps its files, and the request files the CLI leaves for it.

Requests are files, not a socket: `tinynas onboard` works while the service is down or busy (it picks
them up when it reaches a phase that reads them), and a request survives a reboot.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from firmware_bridge.safe_read import read_regular
from tinynas.atomic import atomic_write_text, process_alive

log = logging.getLogger(__name__)


class ServicePaths:
    """Where a service keeps its files under `data_dir`."""

    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir)
        self.state = self.root / "state.json"
        self.status = self.root / "status.json"
        self.requests = self.root / "requests"
        self.pid = self.root / "service.pid"
        self.lock = self.root / "service.lock"
        self.predictions = self.root / "predictions.jsonl"

    def profile(self, user: str) -> Path:
        """The folder of one user's (or machine's) sessions, studies and models."""
        return self.root / "profiles" / user

    def latest_session(self, user: str) -> Path | None:
        """The user's newest onboarding session folder that holds a recording (None when there is none); a
        re-wear's short session (`<stamp>-rewear`) is not one to search on."""
        folder = self.profile(user) / "sessions"
        sessions = sorted(p for p in folder.glob("*") if (p / "manifest.json").is_file()
                          and not p.name.endswith("-rewear")) if folder.is_dir() else []
        return sessions[-1] if sessions else None


def running_pid(paths: ServicePaths) -> int | None:
    """The pid of the service running on these paths, None when none runs (no pid file, a pid of 0 or below, not
    a number, or no such process)."""
    try:
        pid = int(paths.pid.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if process_alive(pid) else None


STATUS_FILE_BYTES = 4 << 20
"""The most status.json may be: the page's whole state, kept small by the service (a larger one is not ours)."""


def read_status(paths: ServicePaths) -> dict:
    """What the running service last wrote to status.json ({} when there is none, or it is torn, damaged or not a
    regular file: the state file's part still shows). The one reader of that file outside the service."""
    try:
        value = json.loads(read_regular(paths.status, STATUS_FILE_BYTES, "status file"))
    except (OSError, ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def request_time_ns(path: Path) -> int | None:
    """When a request file was left (its name's prefix, `request`), None for a name not of that form."""
    head = path.name.split("-", 1)[0]
    return int(head) if head.isdigit() else None


REQUESTS = ("onboard", "recalibrate", "continue", "cancel", "redo", "serve", "condition", "stop")


def request(data_dir: str | Path, kind: str, **fields) -> Path:
    """Leave a request for a running service; it picks it up within a second.

    onboard (user, plan): collect, search and deploy for a new user; recalibrate (user, unlabelled, condition): the
    re-wear / new-condition flow for the user whose model is served; condition (user, condition): read the served
    classical scorer's windows under that kept condition (or `live`); continue / cancel (user): resume or
    drop a paused collection (its windows stay on disk), cancel also a running recalibration; redo (user): record
    again the window just kept, during the rest after it; serve (user, model,
    previous): serve another of the deployed models (`models.py`); stop: end the service cleanly.
    """
    folder = ServicePaths(data_dir).requests
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{time.time_ns()}-{kind}.json"
    atomic_write_text(path, json.dumps({"kind": kind, **fields}))
    return path


def pending_requests(folder: Path, kind: str) -> list[tuple[Path, dict]]:
    """Pending requests of one kind in `folder`, oldest first; unreadable ones are dropped with a log line."""
    found: list[tuple[Path, dict]] = []
    if not folder.exists():
        return found
    for path in sorted(folder.glob(f"*-{kind}.json")):
        try:
            wanted = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(wanted, dict):
                raise ValueError("not a JSON object")
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable request %s: %s", path.name, exc)
            path.unlink(missing_ok=True)
            continue
        found.append((path, wanted))
    return found
