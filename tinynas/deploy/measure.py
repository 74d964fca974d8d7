"""Real measurements of an exported int8 model: TFLite Micro arena, LiteRT accuracy and latency."""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tinynas.deploy.litert import Int8Model, ModelFileError, litert_interpreter, read_model
from tinynas.errors import TinynasError
from tinynas.quiet import captured_fd

MEASURE_ARENA_BYTES = 4 << 20
"""Arena handed to TFLite Micro when measuring; what it reports is what the model used."""

_TOTALS = re.compile(r"Arena allocation (total|head|tail) (\d+) bytes")
_CATEGORY = re.compile(
    r"'([^']+)' used (\d+) bytes with alignment overhead \(requested (\d+) bytes for (\d+)")


class MeasureError(TinynasError, RuntimeError):
    """A model that cannot be loaded or run by the measuring runtime."""


def tflite_micro_available() -> bool:
    """True when the `tflite-micro` Python interpreter is importable (x86_64 hosts)."""
    try:
        from tflite_micro.python.tflite_micro import runtime  # noqa: F401
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class ArenaMeasurement:
    """TFLite Micro's own account of the tensor arena a model needs (on this host's ABI)."""

    arena_bytes: int
    arena_head_bytes: int
    arena_tail_bytes: int
    categories: dict[str, int] = field(default_factory=dict)


def _tflite_micro_runtime():
    try:
        from tflite_micro.python.tflite_micro import runtime
    except Exception as exc:
        raise MeasureError(
            "tflite-micro is not installed (pip install --pre tflite-micro; x86_64 only)") from exc
    return runtime


def tflite_micro_outputs(tflite: bytes, windows: np.ndarray) -> np.ndarray:
    """TFLite Micro's int8 outputs (n, classes) for int8 `windows` (n, T*C): the reference the generated C
    runtime must equal bit for bit."""
    interpreter = _tflite_micro_runtime().Interpreter.from_bytes(bytes(tflite))
    shape = interpreter.get_input_details(0)["shape"]
    outputs = []
    for window in windows:
        interpreter.set_input(np.asarray(window).reshape(shape), 0)
        interpreter.invoke()
        outputs.append(interpreter.get_output(0).reshape(-1).copy())
    return np.stack(outputs)


def measure_arena(tflite: bytes) -> ArenaMeasurement:
    """Allocate `tflite` in TFLite Micro's recording allocator and read back head/tail/total."""
    runtime = _tflite_micro_runtime()
    # The recording allocator prints from C++ (MicroPrintf -> stderr), so capture the descriptor.
    failure: Exception | None
    with captured_fd(2) as printed:
        try:
            interpreter = runtime.Interpreter.from_bytes(bytes(tflite), arena_size=MEASURE_ARENA_BYTES)
        except Exception as exc:
            failure = exc
        else:
            failure = None
            interpreter.print_allocations()
            del interpreter
    if failure is not None:
        raise MeasureError(f"TFLite Micro could not allocate the model: {failure}") from None
    totals = {kind: int(value) for kind, value in _TOTALS.findall(printed.text)}
    if set(totals) != {"total", "head", "tail"}:
        raise MeasureError("TFLite Micro printed no arena allocation figures")
    categories = {name: int(used) for name, used, _req, _count in _CATEGORY.findall(printed.text)}
    return ArenaMeasurement(totals["total"], totals["head"], totals["tail"], categories)


@dataclass(frozen=True)
class InterpreterResult:
    """Predictions of the int8 model on some windows, as run by LiteRT."""

    predictions: np.ndarray
    logits: np.ndarray
    seconds_per_window: float

    def accuracy(self, labels: np.ndarray) -> float:
        """Share of windows whose predicted class is their label: the int8 accuracy every figure reports."""
        return float(np.mean(self.predictions == np.asarray(labels)))


def run_int8(tflite: bytes, windows: np.ndarray) -> InterpreterResult:
    """Quantize float `windows` (n, T, C) with the model's input params and run them one by one."""
    model = Int8Model(tflite)
    started = time.perf_counter()
    logits = model.logits(windows)
    elapsed = time.perf_counter() - started
    return InterpreterResult(logits.argmax(axis=1), logits, elapsed / max(len(logits), 1))


def int8_accuracy(tflite: bytes, windows: np.ndarray, labels: np.ndarray) -> float | None:
    """Accuracy of an int8 model (LiteRT) on model-input windows; None when there are none."""
    if len(windows) == 0:
        return None
    return run_int8(tflite, windows).accuracy(labels)


@dataclass(frozen=True)
class ModelMeasurement:
    """Everything `tinynas measure` reports about an exported model."""

    flash_bytes: int
    arena_bytes: int | None
    arena_head_bytes: int | None
    arena_tail_bytes: int | None
    arena_source: str
    int8_accuracy: float | None = None
    seconds_per_window: float | None = None

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


def measure_model(path: str | Path, windows: np.ndarray | None = None,
                  labels: np.ndarray | None = None) -> ModelMeasurement:
    """Measure an exported .tflite: flash, TFLM arena (when installed), int8 accuracy/latency."""
    path = Path(path)
    try:
        tflite = read_model(path)
    except ModelFileError as exc:
        raise MeasureError(str(exc)) from None
    except OSError as exc:
        raise MeasureError(f"cannot read {path}: {exc.strerror}") from None
    if len(tflite) < 8 or tflite[4:8] != b"TFL3":
        raise MeasureError(f"{path} is not a TFLite flatbuffer (no TFL3 identifier)")
    try:
        # LiteRT verifies the FlatBuffer; TFLite Micro trusts it, so damaged bytes are stopped here first.
        litert_interpreter(tflite)
    except ModelFileError as exc:
        raise MeasureError(f"{path}: {exc}") from None
    arena: ArenaMeasurement | None = None
    if tflite_micro_available():
        arena = measure_arena(tflite)
    accuracy = latency = None
    if windows is not None:
        result = run_int8(tflite, windows)
        latency = result.seconds_per_window
        if labels is not None:
            accuracy = result.accuracy(labels)
    return ModelMeasurement(
        flash_bytes=len(tflite),
        arena_bytes=arena.arena_bytes if arena else None,
        arena_head_bytes=arena.arena_head_bytes if arena else None,
        arena_tail_bytes=arena.arena_tail_bytes if arena else None,
        arena_source="tflite-micro" if arena else "unavailable (install tflite-micro)",
        int8_accuracy=accuracy,
        seconds_per_window=latency,
    )
