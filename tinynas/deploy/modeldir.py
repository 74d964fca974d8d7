"""What a model folder holds, and reading it back to change the model (`adapt`, `recalibrate`).

A search's folder (and every folder `adapt` or `recalibrate` writes) holds the int8 model
(model.tflite, model.c/.h), its card, the float weights it was converted from
(model.weights.h5), the training windows (windows.npz) and which of them trained, validated and
tested it (split.npz). Changing a model starts from the float weights, replays the training
windows and checks the result on the same test windows the card's accuracy was measured on.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tinynas.atomic import discard_folder, publish_folder, stage_folder, storage_error
from tinynas.card import holds_our_card
from tinynas.cost.targets import Target
from tinynas.data.preprocess import Preprocessing
from tinynas.data.windows import DataError, Windows
from tinynas.deploy.evaluate import load_model, model_files
from tinynas.deploy.export import write_export
from tinynas.deploy.network import build_model
from tinynas.errors import StorageError, TinynasError
from tinynas.folders import (
    CARD,
    MODEL,
    MODEL_FILES,
    MODEL_WEIGHTS,
    SPLIT,
    TRAINING_DATA,
    WINDOWS,
    FolderError,
    check_out_dir,
    load_split,
    save_weights,
)
from tinynas.space import Architecture, SpecError


class ModelDirError(FolderError):
    """A model folder that cannot be adapted or recalibrated (files missing, or not ours)."""


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

        folder = Path(path)
        if folder.is_file():
            folder = folder.parent
        _, card = model_files(folder)
        preprocessing = Preprocessing.from_card(card)
        try:
            architecture = Architecture.from_dict(card.get("architecture"))
        except SpecError as exc:
            raise ModelDirError(f"{folder / CARD}: {exc}") from None
        if not (folder / MODEL_WEIGHTS).is_file():
            raise ModelDirError(f"{folder} has no {MODEL_WEIGHTS} (the float weights): it was exported by an older "
                                f"tinynas; run the search again to adapt or recalibrate it")
        opened = cls(folder, card, preprocessing, architecture)
        opened.check()
        return opened

    def check(self) -> None:
        """The folder's parts agree (card, architecture, preprocessing, int8 model, training windows),
        checked before any work: the first disagreement is one line naming the file at fault."""

        card_path, arch, pre = self.path / CARD, self.architecture, self.preprocessing
        if (arch.input_length, arch.input_channels) != (pre.window_length, pre.channels):
            raise ModelDirError(f"{card_path}: its architecture takes {arch.input_length} x {arch.input_channels} "
                                f"windows but its preprocessing gives {pre.window_length} x {pre.channels}: "
                                f"the card was edited or belongs to another model")
        if arch.classes != len(pre.class_names):
            raise ModelDirError(f"{card_path}: its architecture has {arch.classes} outputs but it names "
                                f"{len(pre.class_names)} classes: the card was edited or belongs to another model")
        history = self.card.get("history", [])
        if not (isinstance(history, list) and all(isinstance(entry, dict) for entry in history)):
            raise ModelDirError(f"{card_path}: 'history' must be a list of changes, got {type(history).__name__}")
        model = load_model(self.path / MODEL)  # a damaged .tflite is named now, not after the work
        if model.classes != arch.classes or tuple(model.window_shape) != (arch.input_length, arch.input_channels):
            raise ModelDirError(f"{self.path / MODEL} takes {tuple(model.window_shape)} windows into "
                                f"{model.classes} classes, its card says ({arch.input_length}, "
                                f"{arch.input_channels}) into {arch.classes}: files of two models")
        if (self.path / WINDOWS).is_file():
            stored = self.windows.class_names
            if tuple(stored) != tuple(pre.class_names):
                raise ModelDirError(f"{self.path / WINDOWS} holds classes {', '.join(stored)} but the model's "
                                    f"are {', '.join(pre.class_names)}: files of two models")
            if (self.windows.window_length, self.windows.channels) != (pre.window_length, pre.channels):
                raise ModelDirError(f"{self.path / WINDOWS} holds {self.windows.window_length} x "
                                    f"{self.windows.channels} windows, the model takes {pre.window_length} x "
                                    f"{pre.channels}: files of two models")
            if (self.path / SPLIT).is_file():
                self.split  # noqa: B018 - read now: indices beyond the windows are named before any work

    @property
    def windows(self) -> Windows:
        """The windows the model was trained on (model-input units are NOT applied: raw windows)."""
        if self._windows is None:
            path = self.path / WINDOWS
            if not path.is_file():
                raise ModelDirError(f"{self.path} has no {WINDOWS} (the training windows) to replay")
            try:
                self._windows = Windows.load(path)
            except DataError as exc:
                raise ModelDirError(f"{path}: {exc}") from None
        return self._windows

    @property
    def has_training_data(self) -> bool:
        """Whether the training windows and their split are here (replay and forgetting checks)."""
        return (self.path / WINDOWS).is_file() and (self.path / SPLIT).is_file()

    @property
    def split(self) -> dict[str, np.ndarray]:
        """Indices of the windows that trained, validated and tested the model."""
        if self._split is None:
            path = self.path / SPLIT
            if not path.is_file():
                raise ModelDirError(f"{self.path} has no {SPLIT} (which windows tested the model)")
            self._split = load_split(path, len(self.windows))
        return self._split

    def keras_model(self):
        """The float Keras model with the exported weights (weights of another architecture, or a damaged
        file, are one line: Keras's own warnings and its many-line layer dump are not shown)."""
        import warnings

        model = build_model(self.architecture, seed=0)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.load_weights(str(self.path / MODEL_WEIGHTS))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            raise ModelDirError(f"{self.path / MODEL_WEIGHTS}: cannot load the float weights of "
                                f"{self.architecture.name()} ({first}; damaged, or from another model?)") from None
        return model

    def target(self):
        """The target whose budget the model was made for."""

        stored = self.card.get("target")
        if not isinstance(stored, dict):
            raise ModelDirError(f"{self.path / CARD} names no target: the budget cannot be checked")
        try:
            return Target(**stored)
        except (TypeError, TinynasError) as exc:
            raise ModelDirError(f"{self.path / CARD}: its target is not readable ({exc})") from None


def is_model_folder(folder: Path) -> bool:
    """Whether `folder` holds a model card tinynas wrote (its schema marker, or an older card's exported
    architecture and quantization): what makes a folder ours, never its file names alone."""
    return holds_our_card(folder)


def _within(inner: Path, outer: Path) -> bool:
    return inner == outer or outer in inner.parents


def _ours_partial(name: str) -> str:
    """The file a temporary file name stands for (`.windows.npz.partial` -> `windows.npz`), or ''."""
    if ".partial" not in name:
        return ""
    return name.lstrip(".").split(".partial", 1)[0]


def check_new_folder(out: str | os.PathLike, source: Path) -> Path:
    """An output folder for a changed model: new, empty, or a model folder tinynas wrote before.

    Never the source folder, inside it or around it (its model keeps serving until the new one is
    checked), and never a folder holding anything that is not ours: the new model replaces the whole
    folder in one rename (`write_model_dir`), so whatever else it held would go with it.
    """

    out = check_out_dir(Path(out))
    mine, theirs = out.resolve(), Path(source).resolve()
    if mine == theirs:
        raise ModelDirError(f"--out {out} is the model's own folder: give a new folder (the old model stays as it is)")
    if _within(mine, theirs):
        raise ModelDirError(f"--out {out} is inside the model's folder {source}: give a folder outside it")
    if _within(theirs, mine):
        raise ModelDirError(f"--out {out} holds the model's folder {source}: give a new folder beside it")
    if out.exists():
        names = sorted(p.name for p in out.iterdir())
        if names and not is_model_folder(out):
            raise ModelDirError(f"--out {out} is not empty and holds no model of tinynas (no card.json of ours): "
                                f"give a new or empty folder (nothing in it was touched)")
        ours = set(MODEL_FILES) | {WINDOWS, SPLIT, "confusion.png"}
        # Temporary files of an interrupted earlier write (`.windows.npz.partial`, `model.weights.h5.partial...`)
        # are ours too: the folder is replaced whole, so they go with it.
        foreign = [name for name in names if name not in ours and _ours_partial(name) not in ours]
        if foreign:
            raise ModelDirError(f"--out {out} holds files that are not a model's ({', '.join(foreign[:3])}"
                                f"{', ...' if len(foreign) > 3 else ''}): give a new or empty folder")
    parent = mine.parent
    if parent.exists() and not os.access(parent, os.W_OK | os.X_OK):
        raise StorageError(f"--out {out}: cannot write in {parent} (permission denied), where the new folder is "
                           f"written before it replaces the old one: choose a writable place")
    return out


def write_model_dir(out: Path, source: ModelDir, model, tflite: bytes, card: dict,
                    scorer_c: tuple[dict, tuple[str, str]] | None = None) -> None:
    """Write a changed model: int8 files and card (`write_export`; `scorer_c`: the C of the classical scorer the
    folder serves, as there), float weights, and the source's training windows and split (copied, so the new folder
    can be changed again).

    Everything is written into a staging folder beside `out`, which then replaces `out` in one step: a
    full disk, a kill -9 or a power cut leaves the previous folder as it was (or no folder), never new
    weights beside an old card, and no partial file in `out`.
    """

    staging = stage_folder(out)
    try:
        save_weights(model, staging / MODEL_WEIGHTS)
        for name in TRAINING_DATA:
            if (source.path / name).is_file():
                shutil.copyfile(source.path / name, staging / name)
        # The source's C names: a firmware that links it keeps linking the adapted model.
        prefix = (source.card.get("c_runtime") or {}).get("prefix", "tinynas")  # checked by read_card
        write_export(staging, source.architecture, tflite, card, c_prefix=prefix, scorer_c=scorer_c)
        publish_folder(staging, out)
    except OSError as exc:
        discard_folder(staging)
        if isinstance(exc, StorageError):
            raise
        raise storage_error(exc, "writing the model", out) from None
    except BaseException:
        discard_folder(staging)
        raise
