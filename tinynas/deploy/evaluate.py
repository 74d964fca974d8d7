"""`tinynas evaluate`: run an exported int8 model with LiteRT on every window of a data set.

The model's card says what it was made for (window length, channels, rate, classes, preprocessing);
data that does not match is refused with one line saying which.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.atomic import atomic_write_bytes
from tinynas.card import read_card
from tinynas.data.preprocess import Preprocessing
from tinynas.data.windows import DataError, Windows, windows_argument
from tinynas.deploy.litert import Int8Model, ModelFileError, read_model
from tinynas.errors import TinynasError
from tinynas.folders import CARD, MODEL, FolderError


class EvaluateError(TinynasError, ValueError):
    """A model that cannot be evaluated (missing file or card)."""


@dataclass(frozen=True)
class Evaluation:
    """Accuracy figures, confusion matrix (rows: true class, columns: predicted) and latency."""

    model: str
    classes: tuple[str, ...]
    n_windows: int
    accuracy: float
    balanced_accuracy: float
    per_class_recall: dict[str, float]
    confusion: list[list[int]]
    latency_us: float
    predictions: list[int]

    def to_dict(self) -> dict:
        """JSON-ready dict (the --json output)."""
        return {"model": self.model, "classes": list(self.classes), "n_windows": self.n_windows,
                "accuracy": self.accuracy, "balanced_accuracy": self.balanced_accuracy,
                "per_class_recall": self.per_class_recall, "confusion": self.confusion,
                "latency_us": self.latency_us}

    def text(self) -> str:
        """A report for people: figures, per-class recall and the confusion matrix."""
        present = [i for i, row in enumerate(self.confusion) if sum(row)]
        lines = [f"{self.model}: {self.n_windows} windows",
                 f"  accuracy {self.accuracy:.3f}, balanced accuracy {self.balanced_accuracy:.3f}, "
                 f"{self.latency_us:.0f} us per window (LiteRT, this machine)", "  recall per class:"]
        lines += [f"    {name:>12}  {recall:.3f}" for name, recall in self.per_class_recall.items()]
        width = max(5, *map(len, self.classes))
        lines.append("  confusion (rows: true class, columns: predicted):")
        lines.append("    " + " " * width + " " + " ".join(f"{name[:width]:>{width}}" for name in self.classes))
        for i in present:
            lines.append(f"    {self.classes[i]:>{width}} " + " ".join(f"{v:>{width}d}" for v in self.confusion[i]))
        return "\n".join(lines)


def model_files(path: str | Path) -> tuple[Path, dict]:
    """The .tflite and its card for a model directory or a .tflite with card.json beside it."""
    path = Path(path)
    tflite = path / MODEL if path.is_dir() else path
    if not tflite.exists():
        raise EvaluateError(f"{tflite}: no such model (give an export directory or its model.tflite)")
    if not tflite.is_file():
        raise EvaluateError(f"{tflite}: not a file (give an export directory or its model.tflite)")
    card_path = tflite.parent / CARD
    if not card_path.exists() and not card_path.is_symlink():
        raise EvaluateError(f"{card_path}: no card next to the model, so the data cannot be checked against it")
    try:
        card = read_card(tflite.parent).to_dict()  # every section checked, the file read as untrusted input
    except FolderError as exc:
        raise EvaluateError(str(exc)) from None
    return tflite, card


def load_model(tflite: Path):
    """The LiteRT model in `tflite`; a damaged or foreign file is one line naming it."""

    try:
        return Int8Model(read_model(tflite))
    except ModelFileError as exc:
        raise EvaluateError(f"{tflite}: {exc}") from None


def evaluate(path: str | Path, windows: Windows) -> Evaluation:
    """Run the exported int8 model on every window; refuse data the model was not made for."""

    windows_argument(windows)
    tflite, card = model_files(path)
    preprocessing = Preprocessing.from_card(card)
    preprocessing.check(windows)
    labels = preprocessing.labels_for(windows)
    inputs = preprocessing.apply(windows.x)
    model = load_model(tflite)
    if model.classes != len(preprocessing.class_names):
        raise DataError(f"{tflite} outputs {model.classes} classes but its card names "
                        f"{len(preprocessing.class_names)}: card and model do not belong together")
    started = time.perf_counter()
    predictions = model.logits(inputs).argmax(axis=1)
    latency = (time.perf_counter() - started) / len(inputs) * 1e6
    classes = preprocessing.class_names
    confusion = np.zeros((len(classes), len(classes)), dtype=int)
    np.add.at(confusion, (labels, predictions), 1)
    totals = confusion.sum(axis=1)
    recall = {classes[i]: float(confusion[i, i] / totals[i]) for i in range(len(classes)) if totals[i]}
    return Evaluation(str(tflite), tuple(classes), int(len(labels)), float(np.mean(predictions == labels)),
                      float(np.mean(list(recall.values()))), recall, confusion.tolist(), float(latency),
                      predictions.tolist())


PNG_MAKER = "tinynas evaluate"
"""The PNG `Software` text of a confusion matrix evaluate drew: only such a file is ever replaced."""


def drew_it(path: str | Path) -> bool:
    """Whether `path` is missing or a confusion matrix `evaluate` drew (its PNG text chunk says so)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return True
    if not path.is_file() or path.is_symlink():
        return False
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)  # the text chunk comes before the image data
    except OSError:
        return False
    return head.startswith(b"\x89PNG") and PNG_MAKER.encode() in head


def plot_confusion(evaluation: Evaluation, path: str | Path) -> Path:
    """Write the confusion matrix as a PNG (row-normalised colours, counts written in), marked as ours."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    confusion = np.asarray(evaluation.confusion, dtype=float)
    shares = confusion / np.maximum(confusion.sum(axis=1, keepdims=True), 1)
    size = max(4.0, 0.35 * len(evaluation.classes) + 2)
    figure, axes = plt.subplots(figsize=(size, size))
    axes.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    ticks = range(len(evaluation.classes))
    axes.set_xticks(ticks, evaluation.classes, rotation=90)
    axes.set_yticks(ticks, evaluation.classes)
    axes.set_xlabel("predicted")
    axes.set_ylabel("true class")
    axes.set_title(f"accuracy {evaluation.accuracy:.3f} on {evaluation.n_windows} windows")
    if len(evaluation.classes) <= 30:
        for (i, j), count in np.ndenumerate(confusion):
            if count:
                axes.text(j, i, str(int(count)), ha="center", va="center", fontsize=7,
                          color="white" if shares[i, j] > 0.5 else "black")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100, metadata={"Software": PNG_MAKER})
    plt.close(figure)
    atomic_write_bytes(path, buffer.getvalue())
    return Path(path)
