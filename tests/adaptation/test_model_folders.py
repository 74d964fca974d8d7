"""Model folders written like journals and read only when their parts agree (issue 35).

`adapt` and `recalibrate` write into a staging folder that replaces `--out` in one step; a folder is
theirs only if it carries tinynas's card; every part of a folder they read is checked before any work.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import numpy as np
import pytest

from tests.support.armband import NEW_SESSION, shifted
from tinynas.adaptation.adapt import adapt
from tinynas.adaptation.common import AdaptationError
from tinynas.atomic import stage_folder
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError
from tinynas.deploy.modeldir import ModelDir, ModelDirError
from tinynas.errors import StorageError


def _digests(folder):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture
def new():
    return shifted(load_windows(NEW_SESSION))


def test_a_full_disk_mid_write_leaves_the_previous_folder_whole(model_dir, new, small_disk):
    out = small_disk / "adapted"
    adapt(model_dir, new, out, spec="first")
    before = _digests(out)
    # Leave room for a few of the new files, not for all of them.
    needed = sum((out / name).stat().st_size for name in before)
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    with open(small_disk / "filler", "wb") as filler:
        filler.write(b"\0" * max(0, free - needed // 2))
    with pytest.raises(StorageError, match="no space left.*run the same command again"):
        adapt(model_dir, new, out, spec="second")
    assert _digests(out) == before  # old card, old weights, old model: together
    assert sorted(p.name for p in small_disk.iterdir()) == ["adapted", "filler"]  # no partial file anywhere
    (small_disk / "filler").unlink()
    adapt(model_dir, new, out, spec="second")
    assert json.loads((out / "card.json").read_text())["history"][-1]["data"]["spec"] == "second"
    assert sorted(p.name for p in small_disk.iterdir()) == ["adapted"]


def test_a_writer_killed_mid_write_leaves_nothing_half_written(model_dir, new, tmp_path):
    import subprocess
    import sys

    out = tmp_path / "adapted"
    script = ("import os, sys; from pathlib import Path; from tinynas.atomic import stage_folder; "
              "s = stage_folder(Path(sys.argv[1])); (s / 'model.weights.h5').write_bytes(b'half'); "
              "os.kill(os.getpid(), 9)")
    assert subprocess.run([sys.executable, "-c", script, str(out)]).returncode == -9
    assert not out.exists()
    adapt(model_dir, new, out)  # the same command, not refused, and the dead writer's folder gone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["adapted"]
    assert ModelDir.open(out).has_training_data


def test_leftovers_of_an_older_interrupted_write_do_not_make_the_folder_foreign(model_dir, new, tmp_path):
    # tinynas before issue 35 wrote temporary files inside --out; a folder holding them is still ours, and
    # the next adapt replaces it whole, leftovers included.
    out = tmp_path / "adapted"
    adapt(model_dir, new, out)
    (out / ".windows.npz.partial").write_bytes(b"half")
    (out / "model.weights.h5.partial-123").write_bytes(b"half")
    adapt(model_dir, new, out)
    assert not [p.name for p in out.iterdir() if "partial" in p.name]
    (out / "notes.partial.txt").write_text("the user's")  # a name of no file of ours: still foreign
    with pytest.raises(ModelDirError, match="not a model's"):
        adapt(model_dir, new, out)
    assert (out / "notes.partial.txt").read_text() == "the user's"


def test_folders_that_are_not_ours_are_refused_and_untouched(model_dir, new, tmp_path):
    theirs = tmp_path / "firmware"
    theirs.mkdir()
    (theirs / "model.c").write_text("/* the user's own */")
    (theirs / "model.h").write_text("/* the user's own */")
    mixed = tmp_path / "mixed"
    adapt(model_dir, new, mixed)
    (mixed / "notes.txt").write_text("mine")
    inside = model_dir / "inside"
    cases = [(theirs, "holds no model of tinynas"), (mixed, "holds files that are not a model's (notes.txt)"),
             (inside, "inside the model's folder"), (model_dir.parent, "holds the model's folder"),
             (model_dir, "the model's own folder")]
    for out, message in cases:
        kept = _digests(out) if out.exists() else None
        with pytest.raises(ModelDirError, match=message.replace("(", r"\(").replace(")", r"\)")):
            adapt(model_dir, new, out)
        assert (_digests(out) if out.exists() else None) == kept
    assert not inside.exists()


def _copy(model_dir, tmp_path, name="copy"):
    copy = tmp_path / name
    shutil.copytree(model_dir, copy)
    return copy, json.loads((copy / "card.json").read_text())


@pytest.mark.parametrize("damage, file, message", [
    ("a class more in the card", "card.json", "names 5 classes"),
    ("a class named twice", "card.json", "names a class or channel twice"),
    ("architecture of longer windows", "card.json", "architecture takes 128 x 4 windows"),
    ("history not a list", "card.json", "'history' must be a list"),
    ("windows of other classes", "windows.npz", "holds classes"),
    ("random bytes as the split", "split.npz", "not a split file"),
    ("a 2-D split", "split.npz", "its train indices are a 2-D array"),
    ("truncated int8 model", "model.tflite", "model.tflite"),
])
def test_a_folder_whose_parts_disagree_is_refused_before_any_work(model_dir, new, tmp_path, damage, file, message):
    from dataclasses import replace

    copy, card = _copy(model_dir, tmp_path)
    if damage == "a class more in the card":
        card["classes"] = card["classes"] + ["extra"]
        card["preprocessing"]["class_names"] = card["classes"]
    elif damage == "a class named twice":
        card["classes"][1] = card["classes"][0]
        card["preprocessing"]["class_names"] = card["classes"]
    elif damage == "architecture of longer windows":
        card["architecture"]["input_length"] = 128
    elif damage == "history not a list":
        card["history"] = {"kind": "adapt"}
    elif damage == "windows of other classes":
        stored = ModelDir.open(copy).windows
        replace(stored, class_names=tuple(f"other{i}" for i in range(stored.classes))).save(copy / "windows.npz")
    elif damage == "random bytes as the split":
        (copy / "split.npz").write_bytes(np.random.default_rng(0).bytes(300))
    elif damage == "a 2-D split":
        with np.load(copy / "split.npz") as stored:
            sides = {side: stored[side] for side in stored.files}
        np.savez(copy / "split.npz", **{**sides, "train": sides["train"][:, None]})
    elif damage == "truncated int8 model":
        data = (copy / "model.tflite").read_bytes()
        (copy / "model.tflite").write_bytes(data[:len(data) // 2])
    (copy / "card.json").write_text(json.dumps(card))
    with pytest.raises((ModelDirError, DataError, Exception)) as info:
        adapt(copy, new, tmp_path / "out")
    text = str(info.value)
    assert isinstance(info.value, __import__("tinynas").TinynasError), text
    assert message in text and "\n" not in text and "allow_pickle" not in text, text
    assert file in text or file == "card.json", text
    assert not (tmp_path / "out").exists()


def test_weights_of_another_architecture_are_one_line(model_dir, new, tmp_path, capfd):
    from dataclasses import replace

    from tinynas.deploy.network import build_model

    copy, _ = _copy(model_dir, tmp_path)
    source = ModelDir.open(copy)
    other = replace(source.architecture, k=source.architecture.k + 2)
    build_model(other, seed=0).save_weights(str(copy / "model.weights.h5"))
    capfd.readouterr()
    with pytest.raises(ModelDirError, match="cannot load the float weights") as info:
        adapt(copy, new, tmp_path / "out")
    assert "\n" not in str(info.value)
    assert "UserWarning" not in capfd.readouterr().err


@pytest.mark.parametrize("scale, message", [(0.0, "flat"), (1e30, "times louder")])
def test_data_a_model_cannot_be_adapted_to_is_refused(model_dir, new, tmp_path, scale, message):
    from dataclasses import replace

    bad = replace(new, x=(new.x * np.float32(scale)).astype(np.float32))
    with pytest.raises(DataError, match=message):
        adapt(model_dir, bad, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_only_names_what_the_model_lacks(model_dir, new, tmp_path):
    from tinynas.cli import main

    with pytest.raises(AdaptationError, match="no per-channel input normalization .*--only batchnorm"):
        adapt(model_dir, new, tmp_path / "out", parts=("normalization",))
    assert main(["adapt", str(model_dir), "--data", NEW_SESSION, "--out", str(tmp_path / "o"), "--only", ""]) == 2
    assert not (tmp_path / "out").exists() and not (tmp_path / "o").exists()
    assert stage_folder  # the staging helper is the one under test in tests/test_atomic.py
