"""Crash-safe file writes: write a temp file, fsync it, rename it over the target, fsync the folder.

The lowest layer's copy of the one writer every package uses (`tinynas.atomic` builds on it and turns
its OSError into a one-line StorageError): a power cut leaves either the old file or the new one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def write_durably(path: str | os.PathLike, data: bytes) -> None:
    """Replace `path` with `data`; on any failure the old file is untouched and the temp file removed."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_folder(target.parent)


def fsync_folder(folder: str | os.PathLike) -> None:
    """Make a rename in `folder` durable (POSIX: the directory entry is flushed); a no-op where impossible."""
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
