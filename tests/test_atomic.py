"""Whole-file and whole-folder writes (`tinynas.atomic`, `firmware_bridge.durable`): a failure or a power cut
leaves the old version or the new one, and written files get the modes plain files would."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from firmware_bridge.durable import current_umask
from tinynas import atomic
from tinynas.atomic import atomic_write_text, publish_folder, stage_folder


def test_an_atomic_write_gets_the_umask_mode_or_keeps_the_old_files(tmp_path):
    old = os.umask(0o027)
    try:
        assert current_umask() == 0o027
        atomic_write_text(tmp_path / "new.txt", "x")
        assert (tmp_path / "new.txt").stat().st_mode & 0o777 == 0o640
        (tmp_path / "kept.txt").write_text("old")
        os.chmod(tmp_path / "kept.txt", 0o604)
        atomic_write_text(tmp_path / "kept.txt", "new")
        assert (tmp_path / "kept.txt").stat().st_mode & 0o777 == 0o604
    finally:
        os.umask(old)


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2", "two renames"])
def test_publishing_replaces_a_folder_whole(tmp_path, monkeypatch, exchange):
    if not exchange:  # a file system without RENAME_EXCHANGE takes the two-rename path
        monkeypatch.setattr(atomic, "_exchange", lambda a, b: False)
    target = tmp_path / "model"
    for version in ("1", "2"):
        staging = stage_folder(target)
        (staging / "card.json").write_text(version)
        publish_folder(staging, target)
        assert (target / "card.json").read_text() == version
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_what_a_dead_writer_left_is_cleaned_and_a_folder_set_aside_is_put_back(tmp_path):
    target = tmp_path / "model"
    # A writer killed with SIGKILL in the middle of its staging folder.
    script = ("import os, sys; from pathlib import Path; from tinynas.atomic import stage_folder; "
              "s = stage_folder(Path(sys.argv[1])); (s / 'model.weights.h5').write_bytes(b'half'); "
              "os.kill(os.getpid(), 9)")
    killed = subprocess.run([sys.executable, "-c", script, str(target)])
    assert killed.returncode == -9
    assert [p.name for p in tmp_path.iterdir()][0].startswith(".model.staging-")
    # A power cut between the two renames of the fallback: the old folder is aside, none in place.
    aside = tmp_path / f".model{atomic.PREVIOUS}"
    aside.mkdir()
    (aside / "card.json").write_text("old")
    staging = stage_folder(target)
    assert (target / "card.json").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model", staging.name])  # the dead one gone
