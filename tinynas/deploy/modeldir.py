"""What a model folder holds, and reading it back to change the model (`adapt`, `recalibrate`).

A search's folder (and every folder `adapt` or `recalibrate` writes) holds the int8 model
(model.tflite, model.c/.h), its card, the float weights it was converted from
(model.weights.h5), the training windows (windows.npz) and which of them trained, validated and
tested it (split.npz). Changing a model starts from the float weights, replays the training
windows and checks the result on the same test windows the card's accuracy was measured on.
"""

from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinynas.atomic import atomic_write_bytes, storage_error
from tinynas.data.preprocess import Preprocessing
from tinynas.data.windows import Windows
from tinynas.errors import TinynasError
from tinynas.space import Architecture, SpecError
from tinynas.training.model import build_model

MODEL_WEIGHTS = "model.weights.h5"
"""The exported model's float weights."""
SPLIT_FILE = "split.npz"
"""Indices of the training, validation and test windows (of windows.npz) the model was made with."""
WINDOWS_FILE = "windows.npz"
MODEL_FILES = ("model.tflite", "model.c", "model.h", "model_compiled.c", "model_compiled.h", "card.json",
               MODEL_WEIGHTS)
"""What `write_model_dir` writes (plus the training windows and split, copied)."""


class ModelDirError(TinynasError, ValueError):
    """A model folder that cannot be adapted or recalibrated (files missing, or not ours)."""


def save_weights(model, path: str | os.PathLike) -> None:
    """A Keras model's weights, written whole or not at all (a temporary file, then a rename)."""
    # Keras picks the format by suffix, so the temporary file keeps it.
    temporary = f"{path}.partial.weights.h5"
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
    try:
        with np.load(path, allow_pickle=False) as stored:
            sides = {side: np.asarray(stored[side], dtype=np.int64) for side in ("train", "val", "test")}
    except (OSError, ValueError, KeyError) as exc:
        raise ModelDirError(f"{path}: not a split file ({exc}; damaged?)") from None
    for side, index in sides.items():
        if index.size and (index.min() < 0 or index.max() >= windows):
            raise ModelDirError(f"{path}: {side} indices beyond the {windows} stored windows (files of two runs?)")
    return sides


@dataclass
class ModelDir:
    """A model folder read back: card, preprocessing, architecture, float weights, training data."""

    path: Path
    card: dict
    preprocessing: Preprocessing
    architecture: Architecture
    _windows: Windows | None = field(default=None, repr=False)
    _split: dict | None = field(default=None, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike) -> ModelDir:
        """Read and check a model folder; every missing piece is one line saying what to do."""
        from tinynas.deploy.evaluate import model_files

        folder = Path(path)
        if folder.is_file():
            folder = folder.parent
        _, card = model_files(folder)
        preprocessing = Preprocessing.from_card(card)
        try:
            architecture = Architecture.from_dict(card.get("architecture"))
        except SpecError as exc:
            raise ModelDirError(f"{folder / 'card.json'}: {exc}") from None
        if not (folder / MODEL_WEIGHTS).is_file():
            raise ModelDirError(f"{folder} has no {MODEL_WEIGHTS} (the float weights): it was exported by an older "
                                f"tinynas; run the search again to adapt or recalibrate it")
        return cls(folder, card, preprocessing, architecture)

    @property
    def windows(self) -> Windows:
        """The windows the model was trained on (model-input units are NOT applied: raw windows)."""
        if self._windows is None:
            path = self.path / WINDOWS_FILE
            if not path.is_file():
                raise ModelDirError(f"{self.path} has no {WINDOWS_FILE} (the training windows) to replay")
            self._windows = Windows.load(path)
        return self._windows

    @property
    def has_training_data(self) -> bool:
        """Whether the training windows and their split are here (replay and forgetting checks)."""
        return (self.path / WINDOWS_FILE).is_file() and (self.path / SPLIT_FILE).is_file()

    @property
    def split(self) -> dict[str, np.ndarray]:
        """Indices of the windows that trained, validated and tested the model."""
        if self._split is None:
            path = self.path / SPLIT_FILE
            if not path.is_file():
                raise ModelDirError(f"{self.path} has no {SPLIT_FILE} (which windows tested the model)")
            self._split = load_split(path, len(self.windows))
        return self._split

    def keras_model(self):
        """The float Keras model with the exported weights."""
        model = build_model(self.architecture, seed=0)
        try:
            model.load_weights(str(self.path / MODEL_WEIGHTS))
        except (OSError, ValueError) as exc:
            raise ModelDirError(f"{self.path / MODEL_WEIGHTS}: cannot load the float weights ({exc}; "
                                f"damaged, or from another architecture?)") from None
        return model

    def target(self):
        """The target whose budget the model was made for."""
        from tinynas.cost.targets import Target

        stored = self.card.get("target")
        if not isinstance(stored, dict):
            raise ModelDirError(f"{self.path / 'card.json'} names no target: the budget cannot be checked")
        try:
            return Target(**stored)
        except (TypeError, TinynasError) as exc:
            raise ModelDirError(f"{self.path / 'card.json'}: its target is not readable ({exc})") from None


def check_new_folder(out: str | os.PathLike, source: Path) -> Path:
    """An output folder for a changed model: new, empty, or a folder this command wrote before.

    Never the source folder (its model keeps serving until the new one is checked) and never a
    folder holding files that are not a model's (nothing that is not ours is overwritten).
    """
    from tinynas.options import check_out_dir

    out = check_out_dir(Path(out))
    if out.exists() and out.resolve() == source.resolve():
        raise ModelDirError(f"--out {out} is the model's own folder: give a new folder (the old model stays as it is)")
    if out.exists():
        ours = set(MODEL_FILES) | {WINDOWS_FILE, SPLIT_FILE, "confusion.png"}
        foreign = sorted(p.name for p in out.iterdir() if p.name not in ours)
        if foreign:
            raise ModelDirError(f"--out {out} holds other files ({', '.join(foreign[:3])}"
                                f"{', ...' if len(foreign) > 3 else ''}): give a new or empty folder")
    return out


def write_model_dir(out: Path, source: ModelDir, model, tflite: bytes, card: dict) -> None:
    """Write a changed model: int8 files and card (`write_export`), float weights, and the source's
    training windows and split (copied, so the new folder can be changed again)."""
    from tinynas.deploy.export import write_export

    try:
        out.mkdir(parents=True, exist_ok=True)
        save_weights(model, out / MODEL_WEIGHTS)
        for name in (WINDOWS_FILE, SPLIT_FILE):
            if (source.path / name).is_file():
                temporary = out / f".{name}.partial"
                shutil.copyfile(source.path / name, temporary)
                os.replace(temporary, out / name)
    except OSError as exc:
        raise storage_error(exc, "writing the model", out) from None
    # The card last: a folder with a card is a complete model.
    write_export(out, source.architecture, tflite, card)
