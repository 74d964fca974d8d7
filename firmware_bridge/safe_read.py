"""Reading a file a user named: only a regular file, at most a stated size, never blocking.

`open()` on a FIFO waits for a writer for ever, `/dev/zero` never ends, a serial device may reset the board
behind it when opened, and a symbolic link in a model folder may lead anywhere. Every file read on a user's
word (a plan, a config, a board or architecture file, a model card and the files it names) goes through
`read_regular`: the name is looked at without opening it, then opened without blocking, and what was opened
is checked again (not what the name pointed at a moment before), then at most `limit` bytes are read.

The refusals are OSErrors whose `strerror` says why in words, so a caller's `except OSError` that already
turns a missing or unreadable file into one line says these too. This module imports nothing of tinynas: the
bridge reads its plans with it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

SETTINGS_FILE_BYTES = 1 << 20
"""The most a settings file may hold (a plan, a service config, a board or an architecture file: a few hundred
bytes each); a bigger file is the wrong file, and is not read."""


class NotRegularFile(OSError):
    """A name that is not a regular file: a pipe, a device, a socket (or, where links are refused, a link)."""


class FileTooLarge(OSError):
    """A regular file larger than the reader's stated cap."""


def size_words(limit: int) -> str:
    """`limit` bytes as people say it (64 KiB, 16 MiB)."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} B"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def _refuse(path: str, mode: int) -> None:
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "a folder, not a file", path)
    if not stat.S_ISREG(mode):
        raise NotRegularFile(errno.EINVAL, f"{_kind(mode)}, not a regular file", path)


def read_regular(path: str | os.PathLike, limit: int, what: str = "file", follow_links: bool = True) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes.

    `follow_links=False` refuses a symbolic link as the last part of the name (a model folder's files: a link
    could lead out of the folder). Raises FileNotFoundError, PermissionError, IsADirectoryError, NotRegularFile
    or FileTooLarge (`strerror` in words, e.g. "a named pipe (FIFO), not a regular file", "larger than 1 MiB,
    the most a plan file may be")."""
    name = os.fspath(path)
    shown = str(name)
    seen = os.stat(name, follow_symlinks=follow_links)  # looked at before it is opened: no open() of a device
    if not follow_links and stat.S_ISLNK(seen.st_mode):
        raise NotRegularFile(errno.EINVAL, "a symbolic link, which is not followed here", shown)
    _refuse(shown, seen.st_mode)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(name, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(errno.EINVAL, "a symbolic link, which is not followed here", shown) from None
        raise
    try:
        opened = os.fstat(fd)
        _refuse(shown, opened.st_mode)  # swapped for a pipe or a device between the two looks
        if opened.st_size > limit:
            raise FileTooLarge(errno.EFBIG, f"larger than {size_words(limit)}, the most a {what} may be", shown)
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:  # grew while read
                raise FileTooLarge(errno.EFBIG, f"larger than {size_words(limit)}, the most a {what} may be",
                                   shown)
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_regular(path: str | os.PathLike, what: str = "file") -> os.stat_result:
    """`read_regular`'s look at `path` without reading it, for a file a library opens itself (BrainFlow's playback
    file): FileNotFoundError, IsADirectoryError or NotRegularFile (`strerror` in words) unless a regular file."""
    name = os.fspath(path)
    seen = os.stat(name)
    _refuse(str(name), seen.st_mode)
    return seen


def read_regular_text(path: str | os.PathLike, limit: int, what: str = "file", follow_links: bool = True) -> str:
    """`read_regular` as UTF-8 text (UnicodeDecodeError, a ValueError, for bytes that are not)."""
    return read_regular(path, limit, what, follow_links).decode("utf-8")


def plain_name(name: object) -> bool:
    """Whether `name` is a plain file name: no folder part, not `.` or `..`, no NUL, not hidden.

    A name read from a file (a model card's C sources) must name a file in the same folder and nothing else."""
    return (isinstance(name, str) and 0 < len(name) <= 255 and name not in (".", "..") and not name.startswith(".")
            and "/" not in name and "\\" not in name and "\0" not in name and Path(name).name == name)
