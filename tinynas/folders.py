"""Run and model folders: the name of every file they hold, the check of a folder tinynas will write, and the
files of a model's split and weights.

One owner for these names: a search writes them (`study`), a model folder is read back from them (`deploy.modeldir`,
`adaptation`), the service copies and serves them (`service`), and each finds them here. This module imports nothing
of tinynas but the error types and the atomic writer, so every layer may use it.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np

from firmware_bridge.safe_read import plain_name, read_regular
from tinynas.atomic import atomic_write_bytes
from tinynas.data.windows import is_zip_archive
from tinynas.errors import StorageError, TinynasError, UsageError
from tinynas.quiet import captured_fd

# A search's working files.
JOURNAL = "journal.sqlite"
WINDOWS = "windows.npz"
"""The training windows: the workers load them; a model folder keeps them for `adapt` and `recalibrate`."""
TEST_WINDOWS = "test-windows.npz"
"""The separate test set of `--test-data`, beside windows.npz (workers read it)."""
INCUMBENTS = "incumbents.json"
"""Best score per fidelity so far, for the workers' curve-stop rule."""
WEIGHTS_DIR = "weights"
"""Each trained candidate's best weights (`weights_path`)."""
BEST = "best.json"
"""The best candidate so far, rewritten as candidates finish."""
REPORT = "report.md"
TRIALS_PLOT = "trials.png"
SEARCH_LOG = "search.log"
"""A sweep cell's folder only: the search's output, which the sweep (either engine) writes beside the run's files."""

# A model: what `write_model_dir` and the export write.
MODEL = "model.tflite"
MODEL_C = "model.c"
MODEL_H = "model.h"
COMPILED_C = "model_compiled.c"
COMPILED_H = "model_compiled.h"
PREPARE_C = "model_prepare.c"
"""The input preparation (normalization) in C, when the model has one."""
CARD = "card.json"
MODEL_WEIGHTS = "model.weights.h5"
"""The exported model's float weights."""
SPLIT = "split.npz"
"""Indices of the training, validation and test windows (of windows.npz) the model was made with."""
FIRMWARE_ZIP = "firmware.zip"
"""Made on request by the service from a model folder's C files (not stored)."""

MODEL_FILES = (MODEL, MODEL_C, MODEL_H, COMPILED_C, COMPILED_H, PREPARE_C, CARD, MODEL_WEIGHTS)
"""A model folder's own files (`write_model_dir` writes them; some are absent for some models)."""
TRAINING_DATA = (WINDOWS, SPLIT)
"""What a model folder keeps of its training data, so that it can be adapted or recalibrated."""
RUN_OUTPUTS = (BEST, *MODEL_FILES, REPORT, TRIALS_PLOT, SPLIT)
"""What a run leaves in its folder: with these present and no journal, the folder is a finished (or
abandoned) run that a new search must not overwrite."""


class FolderError(TinynasError, ValueError):
    """A file of a run or model folder that is not what tinynas wrote (damaged, or of another program)."""


MAX_MODEL_FILE_BYTES = 64 << 20
"""The largest file a model folder serves or bundles (the .tflite, the generated C of the largest flash budget)."""


def read_model_file(folder: str | os.PathLike, name: str, limit: int = MAX_MODEL_FILE_BYTES) -> bytes:
    """A file of a model folder, read as untrusted input: `name` a plain file name (what a card says is checked,
    but a caller may pass one on), the file a regular one of at most `limit` bytes and not a link (which could
    lead out of the folder). FolderError in one line otherwise."""
    if not plain_name(name):
        raise FolderError(f"{folder}: {name!r} is not a plain file name of the folder (refused)")
    path = Path(folder) / name
    try:
        return read_regular(path, limit, "model file", follow_links=False)
    except FileNotFoundError:
        raise FolderError(f"{path}: no such file (the model folder is incomplete)") from None
    except OSError as exc:
        raise FolderError(f"{path}: cannot read it ({exc.strerror or exc})") from None


def best_name(study: str | os.PathLike) -> str | None:
    """The architecture a running study's best.json names (its progress), None when there is none yet or it is
    torn, damaged or not a regular file (the one reader of that file)."""
    try:
        name = json.loads(read_regular(Path(study) / BEST, 1 << 20, "study's best.json"))["name"]
    except (OSError, ValueError, KeyError, TypeError, RecursionError):
        return None
    return name if isinstance(name, str) else None


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def check_out_dir(path: str | Path, option: str = "--out") -> Path:
    """An output folder that exists as a writable folder or can be created; nothing is created here.

    The one check of every folder tinynas writes (a search's, a demo's, an adapted model's)."""
    path = Path(path)
    if path.is_symlink() and not path.exists():
        raise UsageError(f"{option} {path} is a broken symbolic link: choose another folder")
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path} is a file, not a folder: give a new folder or a search's folder")
    existing = path.absolute()
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        raise UsageError(f"{option} {path}: {existing} is a file, so the folder cannot be made there")
    if _read_only(existing):
        raise StorageError(f"{option} {path}: {existing} is on a read-only file system: choose a writable folder")
    # access() also says no for root on a read-only mount (EROFS), and for others without permission.
    if not os.access(existing, os.W_OK | os.X_OK):
        raise StorageError(f"{option} {path}: cannot write in {existing} (permission denied): "
                           f"choose a writable folder")
    return path


def weights_path(out_dir: Path, number: int) -> Path:
    """Where trial `number`'s best weights are kept (trained with the final recipe: exported as they are)."""
    folder = out_dir / WEIGHTS_DIR
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"trial-{number}.weights.h5"


def save_weights(model, path: str | os.PathLike) -> None:
    """A Keras model's weights, written whole or not at all (a temporary file, then a rename)."""
    # Keras picks the format by suffix, so the temporary file keeps it.
    temporary = f"{path}.partial.weights.h5"
    # h5py prints a traceback of its own for every handle it cannot close when the disk fills under it (its
    # finalizers write straight to the terminal): kept off the user's terminal; the failure itself still raises.
    with captured_fd(2):
        model.save_weights(temporary)
    os.replace(temporary, path)


def save_split(path: str | os.PathLike, split) -> None:
    """Write a split's indices atomically (train, val, test; the protocol as text)."""
    buffer = io.BytesIO()
    np.savez(buffer, train=np.asarray(split.train, np.int64), val=np.asarray(split.val, np.int64),
             test=np.asarray(split.test, np.int64), protocol=np.array(split.protocol))
    atomic_write_bytes(path, buffer.getvalue())


def load_split(path: str | os.PathLike, windows: int) -> dict[str, np.ndarray]:
    """The split's indices, checked against the number of windows they index."""

    if not is_zip_archive(path):
        raise FolderError(f"{path}: not a split file tinynas wrote (not a NumPy .npz archive; damaged?)")
    try:
        with np.load(path, allow_pickle=False) as stored:
            sides = {side: np.asarray(stored[side], dtype=np.int64) for side in ("train", "val", "test")}
    except (OSError, ValueError, KeyError) as exc:
        raise FolderError(f"{path}: not a split file ({exc}; damaged?)") from None
    for side, index in sides.items():
        if index.ndim != 1:
            raise FolderError(f"{path}: its {side} indices are a {index.ndim}-D array, not a list of window numbers "
                              f"(not a split tinynas wrote; damaged?)")
        if index.size and (index.min() < 0 or index.max() >= windows):
            raise FolderError(f"{path}: {side} indices beyond the {windows} stored windows (files of two runs?)")
    return sides
