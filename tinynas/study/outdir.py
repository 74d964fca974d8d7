"""A search's folder: what it holds, whether a new search or a resume may use it, and the journal.

Every refusal happens before anything is written, and names the folder and what to do.
"""

from __future__ import annotations

from pathlib import Path

from tinynas.atomic import storage_error
from tinynas.data.windows import Windows
from tinynas.errors import TinynasError
from tinynas.folders import JOURNAL, RUN_OUTPUTS, check_out_dir
from tinynas.study.journal import Journal
from tinynas.study.settings import StudyError


def open_journal(out_dir: Path, resume: bool) -> Journal:
    """The folder's journal, created for a new search or opened to resume one; refuses a folder that holds
    another run, or nothing to resume."""
    check_out_dir(out_dir)
    path = out_dir / JOURNAL
    if path.is_symlink():  # SQLite would follow it and create or write the file it points at, wherever that is
        raise StudyError(f"{path} is a symbolic link, not a tinynas journal: left untouched; choose another --out")
    exists = path.exists()
    outputs = [name for name in RUN_OUTPUTS if (out_dir / name).exists()]
    if outputs and (not exists or (path.is_file() and path.stat().st_size == 0)):
        raise StudyError(f"{out_dir} holds the outputs of a run ({', '.join(outputs)}) whose journal is "
                         f"{'missing' if not exists else 'empty'}: nothing to resume, and a new search would "
                         f"overwrite them; choose another --out")
    if resume and not exists:
        raise StudyError(f"nothing to resume: {path} does not exist")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise storage_error(exc, "cannot create", out_dir) from None
    journal = Journal(path)  # refuses, untouched, a file that is not a tinynas journal
    try:
        finished = bool(journal.get_meta("finished"))
        if finished and resume:
            raise StudyError(f"{out_dir} holds a finished search (its model and card.json are there): "
                             f"nothing to resume; choose another --out for a new search")
        count = len(journal.trials()) if exists and not resume else 0
        if count or finished:
            raise StudyError(f"{out_dir} already holds a search ({count} trials"
                             f"{', finished' if finished else ''}): "
                             + ("choose another --out" if finished else
                                "pass --resume to continue it or choose another --out"))
    except BaseException:
        journal.close()
        raise
    return journal


def save_windows(windows: Windows, path: Path) -> None:
    """Keep the workers' copy of the windows; a copy that cannot be read (a damaged disk) is rewritten."""
    try:
        if path.exists() and Windows.load(path).digest() == windows.digest():
            return
    except TinynasError:
        pass
    windows.save(path)
