"""Bad input through the real console entry: exit 2, one line `tinynas: error: ...`, no traceback, no file changed.

Each row runs the command in a fresh workspace folder and snapshots every name, size, mode and hash under it
before and after. Most rows run `tinynas.cli.main` in this process (the `cli_in_process` fixture: the console
entry's own logging on stderr, output captured at the file descriptors; a fresh interpreter per row cost about a
second each, 2 minutes of a worker for the table); a row that hides a module from the import system or starts the
search's worker processes runs `python -m tinynas.cli ...` in a fresh interpreter (`fresh`), as a user does.
`tests/cli/test_cli.py` runs other bad inputs through the real console entry. The table also holds rows
that other slices of issue 16 fixed (data loaders, journal safety, service config); a row for a fix
still in progress can name its slice in `owner` and is then xfail(strict=False) until it lands.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.bad_inputs import ROWS, SHARED_DATA, TIMEOUT, Assets, Row, Unavailable


def _param(row: Row):
    marks = [pytest.mark.xfail(strict=False, reason=f"fixed by the {row.owner} slice of issue 16")] if row.owner else []
    return pytest.param(row, id=row.id, marks=marks)


def snapshot(root: Path) -> dict[str, tuple]:
    """Every name under `root` with its kind, mode, size and content hash."""
    found = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            info = path.lstat()
            digest = ""
            if path.is_file() and not path.is_symlink():
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(root))] = (info.st_mode, info.st_size if digest else 0, digest)
    return found


def _fresh(row: Row, args: list[str], workspace: Path) -> subprocess.CompletedProcess:
    """The row through `python -m tinynas.cli` in a fresh interpreter."""
    if row.hide:  # the real import machinery refuses a module whose sys.modules entry is None
        command = [sys.executable, "-c", f"import sys; sys.modules.update(dict.fromkeys({list(row.hide)!r})); "
                   "from tinynas.cli import main; sys.exit(main(sys.argv[1:]))", *args]
    else:
        command = [sys.executable, "-m", "tinynas.cli", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=workspace, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    held = Assets(tmp_path_factory.mktemp)
    yield held
    for folder in held.mounts:
        subprocess.run(["umount", str(folder)], check=False)


@pytest.mark.parametrize("row", [_param(row) for row in ROWS])
def test_bad_input_is_one_line_and_changes_nothing(row: Row, tmp_path, assets, cli_in_process):
    if row.id.startswith("data-cwru") and not (SHARED_DATA / "cwru").is_dir():
        pytest.skip(f"CWRU data not at {SHARED_DATA / 'cwru'}")
    workspace = tmp_path / "w"
    workspace.mkdir()
    if row.setup:
        try:
            row.setup(workspace, assets)
        except Unavailable as exc:
            pytest.skip(str(exc))
    before = snapshot(workspace)
    args = [arg.replace("{w}", str(workspace)) for arg in row.args]
    try:
        if row.in_fresh_interpreter():
            run = _fresh(row, args, workspace)
        else:
            run = cli_in_process(*args, cwd=workspace)
        after = snapshot(workspace)  # while a read-only mount is still in place, as `before` saw it
    finally:
        assets.close_devices()  # a board a setup started on a pseudo-terminal
        for folder in [m for m in assets.mounts if workspace in m.parents]:
            subprocess.run(["umount", str(folder)], check=False)
            assets.mounts.remove(folder)
    assert "Traceback" not in run.stderr + run.stdout, run.stderr
    assert run.returncode == 2, f"exit {run.returncode}: {run.stderr}"
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tinynas: error: "), run.stderr
    assert row.message.replace("{w}", str(workspace)) in lines[0], lines[0]
    assert after == before, "files under the workspace changed"


def test_every_row_has_a_unique_id():
    ids = [row.id for row in ROWS]
    assert len(ids) == len(set(ids))
