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
        # mkstemp makes 0600 files; the file gets the mode a plain open() would give it (the old file's,
        # or 0666 less the umask), so a group that reads the folder still reads what was replaced.
        os.fchmod(fd, _mode_for(target))
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


def _mode_for(target: Path) -> int:
    try:
        return target.stat().st_mode & 0o7777
    except OSError:
        return 0o666 & ~current_umask()


def current_umask() -> int:
    """The process's umask, read without changing it where the system tells (Linux), else set and reset."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


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
