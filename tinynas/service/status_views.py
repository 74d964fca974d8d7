"""What the status page draws, computed from the service's live state: the signal trace while recording,
the trials of a running search, and the served model. Each view is small JSON (rounded, decimated), so a
page polling once a second costs the Pi little."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from firmware_bridge.guide import FULL_SCALE
from tinynas.anomaly.section import AnomalyCardError, classical_summary, read_section
from tinynas.card import read_card
from tinynas.cost.runtime import RUNTIME_NAMES
from tinynas.errors import TinynasError
from tinynas.folders import JOURNAL, MODEL, MODEL_C, MODEL_H, FolderError
from tinynas.modes import Runtime
from tinynas.service.models import download_names
from tinynas.service.state import Deployed
from tinynas.study.journal import peek
from tinynas.study.time_cost import time_cost_words

TRACE_SECONDS = 4.0
"""How much signal the page shows per channel."""
TRACE_POINTS = 120
"""Min/max pairs per channel: enough for the eye on a phone, ~2 KB per channel per update."""


def _rms(values: np.ndarray) -> np.ndarray:
    # The guide's own measure (raw RMS, not de-meaned): the level it compares with the rest level.
    return np.sqrt(np.mean(values.astype(np.float64) ** 2, axis=0))


def _round(values, digits: int = 4) -> list[float]:
    values = np.asarray(values, dtype=np.float64).ravel()
    if np.all(np.abs(values) < 10 ** digits) and np.array_equal(values, np.round(values)):
        return values.tolist()  # whole numbers of at most `digits` digits (int8/int16 samples): already exact
    return [float(f"{value:.{digits}g}") for value in values]


def channel_levels(ring, rate_hz: float, seconds: float) -> list[float] | None:
    """Raw RMS per channel over the last `seconds` (None before enough samples arrived)."""
    length = max(1, int(round(seconds * rate_hz)))
    latest, data, received = ring.recent(length)
    if latest < length or not received.any():
        return None
    return _round(_rms(data[received]))


def trace(ring, rate_hz: float, sample_format: str, rest: list[float] | None = None,
          channel_names: list[str] | None = None) -> dict[str, Any]:
    """The last TRACE_SECONDS of every channel as a min/max envelope, with its level, its rest level and a
    flag when it is flat (a dead electrode) or clips (gain too high), as the guide would judge a window."""
    length = max(TRACE_POINTS, int(round(TRACE_SECONDS * rate_hz)))
    latest, data, received = ring.recent(length)
    data = data[received]
    if len(data) < 2:
        return {"seconds": TRACE_SECONDS, "rate_hz": rate_hz, "channels": []}
    # The buckets of np.array_split (the first len % points one sample longer), reduced in one call per bound
    # rather than two per bucket and channel: 0.5 ms a request instead of 4.4 (8 channels). A page polls once a
    # second, `tinynas simulate --follow` 20 times: at 4.4 ms that was more CPU than the recording itself.
    points = min(TRACE_POINTS, len(data))
    size, longer = divmod(len(data), points)
    starts = np.arange(points) * size + np.minimum(np.arange(points), longer)
    lows, highs = np.minimum.reduceat(data, starts, axis=0), np.maximum.reduceat(data, starts, axis=0)
    level = _rms(data[-max(1, int(rate_hz * 0.5)):])
    low, high = FULL_SCALE.get(sample_format, (None, None))
    channels = []
    for c in range(data.shape[1]):
        column = data[:, c]
        flag = ""
        if column.std() < 1e-6:
            flag = "flat"
        elif low is not None and np.mean((column <= low) | (column >= high)) > 0.01:
            flag = "clipping"
        channels.append({"name": channel_names[c] if channel_names and c < len(channel_names) else f"channel {c}",
                         "min": _round(lows[:, c]), "max": _round(highs[:, c]),
                         "level": float(f"{level[c]:.4g}"),
                         "rest": rest[c] if rest and c < len(rest) else None, "flag": flag})
    return {"seconds": TRACE_SECONDS, "rate_hz": rate_hz, "latest_sample": int(latest), "channels": channels}


def trials(study: Path) -> list[dict[str, Any]]:
    """Every candidate of a running search as the page's chart needs it (read-only; a locked journal: [])."""

    seen = peek(study / JOURNAL)
    out: list[dict[str, Any]] = []
    for trial in seen[0] if seen is not None else []:
        note = "; ".join(trial.violations) or trial.error
        diagnosis = trial.diagnosis or (trial.details.get("first_attempt") or {}).get("diagnosis")
        if diagnosis:
            note = f"stopped by the health monitor: training {diagnosis}" + (
                f", retried at lr {trial.retry_learning_rate:g}" if trial.retry_learning_rate is not None else "")
        elif trial.details.get("stopped") == "curve":
            note = "stopped early: its learning curve could not beat the best"
        # A cross-validated candidate is ranked on every window, each judged by a fold model that never saw it:
        # that count is its accuracy, not the best epoch of its mean fold curve.
        folds = trial.details.get("cross_validation") or {}
        accuracy = (folds["hits"] / folds["windows"] if trial.state.value == "complete" and folds.get("windows")
                    else trial.best_val_accuracy)
        out.append({"number": trial.number, "name": trial.architecture.name(), "state": trial.state.value,
                    "val_accuracy": None if accuracy is None else round(accuracy, 4),
                    "measure": "out-of-fold" if folds else "validation",
                    "ram_bytes": int(trial.costs.get("peak_ram_bytes", 0)), "note": note})
    return out


_MODEL_CACHE: dict[str, tuple[tuple[float, float], dict]] = {}


def chip_time(card, hop_seconds: float) -> dict[str, Any] | None:
    """One inference of the card's model on its target against serving's hop: the words the page shows, and whether
    the chip keeps the hop (None: the target gives no clock, or the runtime has no time model)."""
    try:
        chip = card.on_chip(hop_seconds)
    except TinynasError:  # a target the card cannot give back: the page says nothing of time, and lives
        return None
    if chip is None:
        return None
    budget = card.latency_seconds()
    keeps = chip.seconds <= hop_seconds
    target = card.target_name or "the target"
    verdict = (f"keeps the {hop_seconds:g} s hop" if keeps else
               f"does NOT keep the {hop_seconds:g} s hop: the chip would fall behind the stream")
    searched = (f"; searched to keep {1000 * budget:g} ms per inference" if budget is not None else
                "; searched without a time budget")
    spent = time_cost_words(card.time_cost(), budget)  # what keeping the hop cost the search, and what would open it
    searched += f"; {spent}" if spent else ""
    return {"words": f"on {target}: {chip.words()} (estimated): {verdict}{searched}", "keeps_hop": keeps,
            "seconds": chip.seconds, "share_of_hop": chip.share_of_hop, "energy_uj": chip.energy_uj}


def served_model(deployed: Deployed, hop_seconds: float = 0.25) -> dict[str, Any]:
    """The served model's architecture, RAM and flash on the chip for its runtime, its time per inference against
    the hop, accuracy and when it was made (from its card, read and checked whole: a damaged card gives
    {"damaged": why}, never a dead page)."""

    card_path = deployed.card
    try:
        # The cache's key: `tinynas hil` records its check in the card; the hop comes from the config.
        changed = (Path(card_path).stat().st_mtime, hop_seconds)
    except OSError as exc:
        return {"damaged": f"{card_path}: {exc.strerror or exc}"}
    cached = _MODEL_CACHE.get(card_path)
    if cached is None or cached[0] != changed:
        folder = Path(card_path).parent
        try:
            card = read_card(folder)
        except FolderError as exc:
            _MODEL_CACHE[card_path] = (changed, {"damaged": str(exc)})
            return _MODEL_CACHE[card_path][1]
        cost = card.cost_estimate or {}
        choice = card.runtime_choice or {}
        runtime = card.runtime
        summary = {"name": card.name, "ram_bytes": cost.get("peak_ram_bytes"),
                   # What the chip flashes: for TFLite Micro under the chip accounting the .tflite and the
                   # interpreter's code; for the C runtime its tables and code (the .tflite is not flashed).
                   "flash_bytes": (cost.get("flash_bytes") if runtime == Runtime.C else
                                   (card.flash_bytes or 0) + (cost.get("code_bytes") or 0)),
                   "runtime": RUNTIME_NAMES.get(runtime, str(runtime)), "runtime_reason": choice.get("reason"),
                   "int8_test_accuracy": card.int8_test_accuracy, "classes": card.classes,
                   "held_out": card.int8_test, "downloads": download_names(folder),
                   "made": deployed.made or changed[0], "chip": card.hil, "folder": str(folder),
                   "time": chip_time(card, hop_seconds)}
        try:
            section = read_section({"anomaly": card.anomaly}) if card.anomaly is not None else None
        except AnomalyCardError as exc:
            _MODEL_CACHE[card_path] = (changed, {"damaged": str(exc)})
            return _MODEL_CACHE[card_path][1]
        classical = classical_summary(section)
        if classical is not None:  # served: the classical scorer, not the network
            summary.update(classical, runtime_reason="", classical=True,
                           no_chip_check="the hardware check (tinynas hil) runs int8 networks only",
                           # the folder keeps the network finalist's files beside the scorer it serves: said so
                           download_notes={name: "the network finalist, not served" for name in (MODEL, MODEL_C,
                                                                                                 MODEL_H)})
        _MODEL_CACHE[card_path] = (changed, summary)
    return _MODEL_CACHE[card_path][1]


def per_minute(times, now: float | None = None) -> int:
    """How many of `times` (epoch seconds, oldest first) fall in the last minute; in serving's first minute, the rate
    their spread shows (a count over a minute not yet lived read 156 a minute at 4 a second)."""
    now = time.time() if now is None else now
    times = list(times)
    recent = [t for t in times if now - t <= 60.0]
    if len(recent) >= 2 and now - times[0] < 60.0 and recent[-1] > recent[0]:
        return round((len(recent) - 1) * 60.0 / (recent[-1] - recent[0]))
    return len(recent)
