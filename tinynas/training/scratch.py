"""A training worker's own temporary folder, removed when the worker ends.

TensorFlow's AutoGraph writes each function it converts to a file in the temporary folder
(`__autograph_generated_file*.py`) and removes them at interpreter exit, which a multiprocessing worker never
reaches: it ends with `os._exit`. A 40 s `tinynas demo` left 47 such files in the temporary folder; a Pi searching
and recalibrating for months would pile up thousands (in memory where /tmp is a tmpfs). So a worker (and the
service's re-wear child) points `tempfile` at a folder of its own, named after its process id, and removes it
when it returns; the pool (the service) removes the folder of a worker (child) it killed or that died, and, before
its first worker (at start), those of processes that are gone (a study killed with its workers, a power cut).
Nothing else in the temporary folder is touched: only folders with this prefix whose process no longer runs.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from tinynas.atomic import process_alive

PREFIX = "tinynas-worker-"


def use_own() -> Path | None:
    """Make this process's temporary folder and point `tempfile` at it (None: the default could not hold one, and
    stays in use: a worker that cannot clean up after TensorFlow still trains)."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))
    except OSError:
        return None
    tempfile.tempdir = str(folder)
    return folder


def folders_of(pid: int) -> list[Path]:
    """The temporary folders of worker `pid`."""
    return list(Path(tempfile.gettempdir()).glob(f"{PREFIX}{pid}-*"))


def remove_of(pid: int) -> None:
    """Remove the temporary folders of worker `pid`, which has ended."""
    for folder in folders_of(pid):
        shutil.rmtree(folder, ignore_errors=True)


def remove_orphans() -> None:
    """Remove the temporary folders of workers whose process no longer runs (a zombie counts as ended)."""
    if os.name != "posix":  # `os.kill(pid, 0)` asks without signalling only on POSIX
        return
    try:
        folders = list(Path(tempfile.gettempdir()).glob(f"{PREFIX}*-*"))
    except OSError:
        return
    for folder in folders:
        pid = folder.name[len(PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
