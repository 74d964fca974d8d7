"""Crash-safe file writes: write a temp file, fsync it, rename over the target, fsync the folder.

A write the disk refuses (full, read-only, permissions) raises a one-line `StorageError` and leaves the
old file as it was; the temp file is removed.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from tinynas.errors import StorageError, storage_message


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data` so that a power cut leaves either the old or the new file."""
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise storage_error(exc, "cannot write", target) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and not isinstance(exc, StorageError):
            raise storage_error(exc, "cannot write", target) from None
        raise
    _fsync_dir(target.parent)


def storage_error(exc: OSError, doing: str, path: str | os.PathLike) -> StorageError:
    """A one-line StorageError for an OSError met while `doing` something to `path` (the user's name for
    the file, not a temp file's). `strerror` keeps the plain reason for callers that print it."""
    named = OSError(exc.errno, exc.strerror, str(path)) if exc.errno else exc
    error = StorageError(storage_message(named, doing))
    error.strerror = exc.strerror
    return error


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Text variant of `atomic_write_bytes` (UTF-8)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def publish_folder(staging: Path, target: Path) -> None:
    """Move a fully written `staging` folder to `target` (which must not exist) in one rename, its files
    flushed first: a power cut leaves no `target` or a whole one (a served model, a recalibrated one)."""
    for file in staging.iterdir():
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
    os.replace(staging, target)
    _fsync_dir(target.parent)


def _fsync_dir(folder: Path) -> None:
    # The rename is durable only once the directory entry is flushed (POSIX); not possible on Windows.
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)

