"""Steps `adapt` and `recalibrate` share: check the new windows, re-export int8 within the budget,
score old and new models on the same windows, and record the change in the card."""

from __future__ import annotations

import datetime
import math

import numpy as np

from tinynas.card import ModelCard
from tinynas.cost.budget import Budget
from tinynas.cost.runtime import check_accounting, check_runtime
from tinynas.data.checks import check_windows
from tinynas.data.windows import DataError, Windows
from tinynas.deploy.export import convert_int8
from tinynas.deploy.measure import int8_accuracy, measure_arena, tflite_micro_available
from tinynas.deploy.modeldir import ModelDir
from tinynas.errors import TinynasError
from tinynas.modes import Accounting, Runtime


class AdaptationError(TinynasError, ValueError):
    """A change that cannot be made or was not accepted (budget broken, not better)."""


def check_shape(model_dir: ModelDir, windows: Windows, what: str) -> None:
    """Refuse windows of another length, channel count, channel order or rate, in one line."""
    if len(windows) == 0:
        raise DataError(f"{what} holds no windows")
    model_dir.preprocessing.check_input(windows, what)


LEVEL_RATIO = 1e4
"""New windows whose level (RMS per channel) differs from the training windows' by more than this factor
come from another unit, gain or sensor: refused, not adapted to."""


def check_new_data(model_dir: ModelDir, windows: Windows, what: str) -> None:
    """The data checks a search runs (a flat or saturated channel), and the level against the training
    windows': data a model cannot be adapted to is refused in one line before any work."""

    errors = [finding.message for finding in check_windows(windows)
              if finding.severity == "error" and finding.kind in ("flat_channel", "saturated_channel")]
    if errors:
        raise DataError(f"{what}: {'; '.join(errors)} (nothing adapted or written)")
    if not model_dir.has_training_data:
        return
    reference = _rms(model_dir.windows.x)
    level = _rms(windows.x)
    ratio = level / np.maximum(reference, 1e-30)
    names = model_dir.preprocessing.channel_names or tuple(str(i + 1) for i in range(len(ratio)))
    for channel, factor in enumerate(ratio):
        if not (1 / LEVEL_RATIO <= factor <= LEVEL_RATIO):
            louder = "louder" if factor > 1 else "quieter"
            shown = f"{factor:.3g}" if factor > 1 else f"{1 / max(factor, 1e-300):.3g}"
            raise DataError(f"{what}: channel {names[channel]} is {shown} times {louder} than the windows the model "
                            f"was trained on (another unit, gain or sensor?): nothing adapted or written")


def _rms(x: np.ndarray) -> np.ndarray:
    """Per-channel RMS in float64 (float32 squares of 1e30 would overflow)."""
    return np.sqrt(np.mean(np.square(x, dtype=np.float64), axis=(0, 1)))


def rounded_int8_accuracy(tflite: bytes, x: np.ndarray, y: np.ndarray) -> float | None:
    """`int8_accuracy` to 4 digits, as the card's history records it; None when there are no windows."""

    accuracy = int8_accuracy(tflite, x, y)
    return None if accuracy is None else round(accuracy, 4)


def export_within_budget(model_dir: ModelDir, model, calibration: np.ndarray, seed: int = 0) -> bytes:
    """Full-int8 export calibrated on `calibration` (model input); the budget re-checked on the result."""

    tflite = convert_int8(model, calibration, seed=seed)
    card = model_dir.card
    budget = Budget(model_dir.target(), Runtime(card_runtime(card)), Accounting(card_accounting(card)))
    target, runtime = budget.target, budget.runtime
    cost = budget.estimate(model_dir.architecture)
    violations = list(cost.violations(target))
    # The .tflite is what TFLite Micro flashes (with its code, under the chip accounting); the C runtime
    # flashes its own tables and code instead, which the estimate above already counts.
    if runtime == Runtime.TFLM and len(tflite) + cost.code_bytes > target.flash_bytes:
        violations.append(f"flash {len(tflite) + cost.code_bytes:,} B > {target.flash_bytes:,} B")
    if violations:
        raise AdaptationError(f"the changed model does not fit {target.name}: {'; '.join(violations)} "
                              f"(nothing written)")
    return tflite


def card_accounting(card: dict) -> str:
    """How a model's budget was counted (`ModelCard.accounting`: older cards, TFLite Micro's arena alone)."""

    try:
        return check_accounting(ModelCard.from_dict(card).accounting, card_runtime(card))
    except TinynasError as exc:
        raise AdaptationError(f"card.json: {exc}") from None


def card_runtime(card: dict) -> str:
    """The runtime a model's budget was counted for; cards written before `--runtime` say none: TFLite Micro."""

    try:
        return check_runtime(card.get("runtime", "tflm"))
    except TinynasError as exc:
        raise AdaptationError(f"card.json: {exc}") from None


def original_test(model_dir: ModelDir, preprocessing=None) -> tuple[np.ndarray, np.ndarray]:
    """The windows the card's test accuracy was measured on, as model input (empty if not kept)."""
    if not model_dir.has_training_data:
        return np.zeros((0,) + (model_dir.preprocessing.window_length, model_dir.preprocessing.channels),
                        np.float32), np.zeros(0, np.int64)
    windows, test = model_dir.windows, model_dir.split["test"]
    pre = preprocessing or model_dir.preprocessing
    return pre.apply(windows.x[test]), windows.y[test]


def describe_data(spec: str, windows: Windows) -> dict:
    """What the card says about the data a change used."""
    return {"spec": spec, "digest": windows.digest(), "windows": len(windows),
            "classes": list(windows.class_names), "sessions": sorted(set(map(str, windows.sessions)))
            if windows.sessions is not None else []}


def changed_card(model_dir: ModelDir, tflite: bytes, preprocessing, entry: dict,
                 test_accuracy: float | None) -> dict:
    """The source card with the new model's figures and `entry` appended to its history."""

    card = {key: value for key, value in model_dir.card.items()
            if key not in ("architecture", "name", "digest", "quantization", "tools")}
    history = list(card.get("history") or [])
    # The float figure belonged to the old weights: kept in the history, not shown as the new model's.
    entry = {**entry, "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
             "from": str(model_dir.path), "previous_int8_test_accuracy": card.get("int8_test_accuracy"),
             "previous_float_test_accuracy": card.pop("float_test_accuracy", None),
             # The count and per-class figures were the old model's too: this card's test accuracy is the new one's.
             "previous_int8_test": card.pop("int8_test", None)}
    history.append(entry)
    card.update(history=history, preprocessing=preprocessing.to_dict(), flash_bytes=len(tflite))
    if test_accuracy is not None:
        card["int8_test_accuracy"] = test_accuracy
    if tflite_micro_available():
        arena = measure_arena(tflite)
        card["measured_arena_host64"] = {"arena_bytes": arena.arena_bytes,
                                         "arena_head_bytes": arena.arena_head_bytes,
                                         "arena_tail_bytes": arena.arena_tail_bytes}
    return card


def finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
