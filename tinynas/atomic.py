"""Crash-safe file writes: write a temp file, fsync it, rename over the target, fsync the folder.

The writing itself is `firmware_bridge.durable` (the lowest layer, which the session recorder uses too);
here its failures become tinynas's one-line StorageError.

A write the disk refuses (full, read-only, permissions) raises a one-line `StorageError` and leaves the
old file as it was; the temp file is removed.
"""

from __future__ import annotations

import errno
import os
import shutil
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


STAGING = ".staging-"
"""Infix of a folder being written beside the one it will become (`.NAME.staging-PID`)."""
PREVIOUS = ".previous"
"""Suffix of the folder a two-rename replacement set aside (`.NAME.previous`); put back if the new one never came."""


def stage_folder(target: Path) -> Path:
    """A fresh, empty folder beside `target` (the same file system, so publishing it is one rename).

    Staging folders left by a process that died (kill -9, a power cut) are removed first, and a folder a
    replacement set aside but never replaced is put back: nothing half-written survives, nothing whole is lost.
    """
    target = Path(target)
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        previous = parent / f".{target.name}{PREVIOUS}"
        if previous.is_dir() and not target.exists():
            os.replace(previous, target)
        prefix = f".{target.name}{STAGING}"
        for stale in parent.glob(prefix + "*"):
            owner = stale.name[len(prefix):]
            if not (owner.isdigit() and process_alive(int(owner))):
                shutil.rmtree(stale, ignore_errors=True)
        staging = parent / f"{prefix}{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir()
    except OSError as exc:
        raise storage_error(exc, "cannot prepare", target) from None
    return staging


def process_alive(pid: int) -> bool:
    """Whether a process `pid` exists (another user's counts). 0 and below name process groups, not a
    process, and are never alive; neither is a pid beyond the kernel's range. A process that has ended but
    whose parent has not collected it yet (a zombie: a child of a killed service, until init collects it)
    answers as if it ran: where /proc says so, it is not alive."""
    if not 0 < pid < 2 ** 31:
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True
    except OSError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] not in (["Z"], ["X"])


def publish_folder(staging: Path, target: Path) -> None:
    """Make the fully written `staging` folder `target` with its files flushed first. An existing `target`
    is exchanged with it in one step where the kernel can (Linux renameat2), else set aside, replaced and
    then removed: a power cut leaves the old folder or the new one, whole, never a mix."""
    staging, target = Path(staging), Path(target)
    for file in staging.iterdir():
        if file.is_file():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
    fsync_folder(staging)
    if not target.exists():
        os.replace(staging, target)
    elif _exchange(staging, target):
        shutil.rmtree(staging)  # now the old folder
    else:
        previous = target.parent / f".{target.name}{PREVIOUS}"
        shutil.rmtree(previous, ignore_errors=True)
        os.replace(target, previous)
        os.replace(staging, target)
        shutil.rmtree(previous, ignore_errors=True)
    fsync_folder(target.parent)


def discard_folder(staging: Path) -> None:
    """Remove a staging folder after a failure (whatever it holds is ours and incomplete)."""
    shutil.rmtree(staging, ignore_errors=True)


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically (renameat2 RENAME_EXCHANGE); False where the system or file system cannot."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(code, os.strerror(code), str(b))
