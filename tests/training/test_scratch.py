"""A worker's own temporary folder: made, and removed once its process is gone (never another's)."""

import os
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tinynas.training import scratch


@pytest.fixture
def temporary(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def _folder(root: Path, name: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "__autograph_generated_file0.py").write_text("")
    return folder


def test_own_folder_is_where_temporary_files_go(temporary):
    own = scratch.use_own()
    assert own is not None and own.parent == temporary and own.name.startswith(f"{scratch.PREFIX}{os.getpid()}-")
    with tempfile.NamedTemporaryFile(prefix="__autograph_generated_file", delete=False) as file:
        assert Path(file.name).parent == own


def test_only_folders_of_processes_that_are_gone_are_removed(temporary):
    ended = subprocess.Popen(["true"])
    ended.wait()
    zombie = subprocess.Popen(["true"])  # ended, not yet collected: the child of a killed service
    deadline = time.monotonic() + 30
    while Path(f"/proc/{zombie.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the child did not end"
        time.sleep(0.01)
    try:
        gone = [_folder(temporary, f"{scratch.PREFIX}{pid}-abc") for pid in (ended.pid, zombie.pid)]
        running = _folder(temporary, f"{scratch.PREFIX}{os.getpid()}-abc")
        others = [_folder(temporary, name) for name in (f"{scratch.PREFIX}x-abc", "tinynas-work-1-abc", "other")]
        scratch.remove_orphans()
        assert not any(folder.exists() for folder in gone)
        assert running.exists() and all(folder.exists() for folder in others)
        scratch.remove_of(os.getpid())
        assert not running.exists() and all(folder.exists() for folder in others)
    finally:
        zombie.wait()
