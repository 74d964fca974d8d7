"""The one error base of tinynas, and how the CLI turns any failure into one line.

Every error that a user can cause (a bad option, a foreign file, a full disk) is a `TinynasError`; the CLI
catches that base, not a hand-kept list, and prints `tinynas: error: ...` with exit code 2. Subclasses keep
the builtin they used to be (ValueError, RuntimeError) as a second base, so `except ValueError` callers in
library code keep working.

Anything else reaching the CLI is a bug: it still gets one line, plus the path of a log holding the
traceback (`crash_log`), and exit code 1.
"""

from __future__ import annotations

import datetime
import errno
import os
import sqlite3
import tempfile
import traceback
from pathlib import Path


class TinynasError(Exception):
    """Base of every error tinynas reports to its user as one line."""


class UsageError(TinynasError, ValueError):
    """An option or spec value out of its type or range (checked before anything is written)."""


class StorageError(TinynasError, OSError):
    """The disk refused a write or a read (full, read-only, permissions); nothing of ours was lost."""


class MissingDependencyError(TinynasError, ImportError):
    """An optional package that the chosen feature needs is not installed."""


# errno values that mean "the machine's storage said no", not "tinynas has a bug".
_STORAGE_ERRNOS = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "disk quota exceeded",
                   errno.EROFS: "read-only file system", errno.EACCES: "permission denied",
                   errno.EPERM: "operation not permitted", errno.ENOENT: "no such file or folder",
                   errno.ENOTDIR: "not a folder", errno.EISDIR: "is a folder", errno.EEXIST: "already exists",
                   errno.EIO: "input/output error", errno.ENAMETOOLONG: "file name too long",
                   errno.ELOOP: "too many symbolic links", errno.EMFILE: "too many open files"}


FULL_HINT = " (free some space, then run the same command again: nothing was written)"
RESUME_HINT = " (free some space, then run again with --resume: the journal is intact)"
"""What to do about a full disk: a command that keeps a journal (search) resumes; the others start again."""


def storage_message(exc: OSError, doing: str = "", resumable: bool = False) -> str:
    """One line for an OSError: what failed, on which path, and what to do when the disk is full."""
    reason = _STORAGE_ERRNOS.get(exc.errno or -1) or exc.strerror or str(exc)
    path = f" {exc.filename}" if exc.filename else ""
    what = f"{doing}{path}: " if (doing or path) else ""
    hint = ""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = RESUME_HINT if resumable else FULL_HINT
    return f"{what.lstrip()}{reason}{hint}"


def is_disk_full(exc: BaseException) -> bool:
    """True for ENOSPC and for SQLite's own way of saying the same thing."""
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(exc, sqlite3.Error) and "disk is full" in str(exc).lower()


def user_message(exc: BaseException, resumable: bool = False) -> str | None:
    """The one line for an error the user can fix, or None when `exc` is a bug (`resumable`: the command
    keeps a journal, so a full disk is continued with --resume)."""
    if isinstance(exc, TinynasError) and not isinstance(exc, OSError):
        return str(exc)
    if isinstance(exc, StorageError):
        if exc.args and not exc.errno:  # written when raised, for a command of either kind
            return str(exc).replace(FULL_HINT, RESUME_HINT) if resumable else str(exc)
        return storage_message(exc, resumable=resumable)
    if isinstance(exc, OSError) and (exc.errno in _STORAGE_ERRNOS or isinstance(exc, FileNotFoundError)):
        return storage_message(exc, resumable=resumable)
    if is_disk_full(exc):
        return "the disk is full" + (RESUME_HINT if resumable else FULL_HINT)
    if isinstance(exc, MemoryError):
        return "out of memory: use smaller data or fewer --workers"
    try:
        from firmware_bridge.errors import BridgeError
    except ImportError:  # pragma: no cover - firmware_bridge ships with tinynas
        return None
    if isinstance(exc, BridgeError):
        return str(exc)
    return None


def crash_log(exc: BaseException) -> Path | None:
    """Write the traceback of an unexpected error to a log file and return its path (None if impossible)."""
    text = "".join(traceback.format_exception(exc))
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    folders = []
    if os.environ.get("XDG_STATE_HOME"):
        folders.append(Path(os.environ["XDG_STATE_HOME"]) / "tinynas")
    folders += [Path.home() / ".local" / "state" / "tinynas", Path(tempfile.gettempdir())]
    for folder in folders:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"tinynas-crash-{stamp}-{os.getpid()}.log"
            path.write_text(text, encoding="utf-8")
            return path
        except OSError:
            continue
    return None
