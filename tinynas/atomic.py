"""Crash-safe file writes: write a temp file, fsync it, rename over the target, fsync the folder.

The writing itself is `firmware_bridge.durable` (the lowest layer, which the session recorder uses too);
here its failures become tinynas's one-line StorageError.

A write the disk refuses (full, read-only, permissions) raises a one-line `StorageError` and leaves the
old file as it was; the temp file is removed.
"""

from __future__ import annotations

import os
from pathlib import Path

from firmware_bridge.durable import fsync_folder, write_durably
from tinynas.errors import StorageError, storage_message


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data` so that a power cut leaves either the old or the new file."""
    try:
        write_durably(path, data)
    except OSError as exc:
        if isinstance(exc, StorageError):
            raise
        raise storage_error(exc, "cannot write", Path(path)) from None


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
    fsync_folder(target.parent)
