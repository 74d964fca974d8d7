"""Data faults found before any search starts, said in plain words.

A dead electrode, a saturated amplifier, prompts recorded under the wrong label or a class with
a handful of windows waste a whole search and no training signal explains them afterwards.
`check_windows` looks for them in seconds. NaN/inf values and classes without any window are
already refused when `Windows` are built (`tinynas.data.windows`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinynas.data.windows import Windows

FLAT_STD_RATIO = 1e-3
"""A channel whose spread is below this fraction of the other channels' median spread is flat."""
FLAT_WINDOW_FRACTION = 0.5
"""A channel constant within more than this fraction of windows is flat."""
RAIL_FRACTION = 0.05
"""A channel with more than this fraction of its samples on its extreme values is saturated."""
IMBALANCE_RATIO = 10.0
"""Largest / smallest class count above which the data set is called extremely imbalanced."""
MAX_MAGNITUDE = 1e9
"""Largest sample value a search is asked to train on: raw ADC counts reach ~10^5, physical units far less; at
~10^19 a float32 square overflows, and long before that every candidate's training diverges (data of 10^30 used to
end a search with "give a longer --budget")."""
MIXED_GROUP_FRACTION = 0.02
"""Fraction of recordings holding several labels above which the labels are called mixed up."""


@dataclass(frozen=True)
class Finding:
    """One data fault: its kind, how serious, and what to tell the user."""

    kind: str  # huge_values, flat_channel, saturated_channel, mixed_labels, imbalance
    severity: str  # "error": the search would be meaningless; "warning": it can run, worse
    message: str


def _channel_name(windows: Windows, channel: int) -> str:
    names = windows.channel_names
    return f"channel {names[channel]}" if names else f"channel {channel + 1}"


def check_windows(windows: Windows) -> list[Finding]:
    """Every data fault found in `windows`, errors first."""
    findings = (_huge_values(windows) + _flat_channels(windows) + _saturated_channels(windows)
                + _mixed_labels(windows) + _imbalance(windows))
    return sorted(findings, key=lambda f: f.severity != "error")


def _huge_values(windows: Windows) -> list[Finding]:
    peak = np.abs(windows.x).max(axis=(0, 1))
    huge = [channel for channel in range(windows.channels) if peak[channel] > MAX_MAGNITUDE]
    if not huge:
        return []
    names = ", ".join(_channel_name(windows, channel) for channel in huge[:3])
    return [Finding("huge_values", "error", f"values reach {float(peak.max()):.3g} ({names}), far beyond any "
                    f"sensor's range and more than float32 training can use: a unit or scale mix-up? (rescale the "
                    f"data, e.g. to volts, g or ADC counts)")]


def _flat_channels(windows: Windows) -> list[Finding]:
    x = windows.x
    # In float64: float32 squares of a 1e20 signal overflow to inf and would read as "flat".
    spread = x.std(axis=(0, 1), dtype=np.float64)
    within = x.std(axis=1, dtype=np.float64)  # (n, C)
    constant_fraction = (within <= 1e-6 * (np.abs(x).max(axis=(0, 1)) + 1e-12)).mean(axis=0)
    reference = np.median(spread[spread > 0]) if (spread > 0).any() else 0.0
    found = []
    for channel in range(windows.channels):
        if spread[channel] <= FLAT_STD_RATIO * reference or spread[channel] == 0:
            found.append(Finding("flat_channel", "error", f"{_channel_name(windows, channel)} is flat "
                                 f"(no signal in any window): check the electrode or sensor wiring"))
        elif constant_fraction[channel] > FLAT_WINDOW_FRACTION:
            found.append(Finding("flat_channel", "warning", f"{_channel_name(windows, channel)} is flat in "
                                 f"{constant_fraction[channel]:.0%} of the windows: check the electrode contact"))
    if windows.channels > 1 and len(found) == windows.channels:
        return [Finding("flat_channel", "error", "every channel is flat: is the sensor connected?")]
    return found


def _saturated_channels(windows: Windows) -> list[Finding]:
    found = []
    for channel in range(windows.channels):
        values = windows.x[:, :, channel]
        low, high = values.min(), values.max()
        if high <= low:
            continue  # flat, reported above
        on_rails = float(np.mean((values == low) | (values == high)))
        if on_rails > RAIL_FRACTION:
            found.append(Finding("saturated_channel", "warning",
                                 f"{_channel_name(windows, channel)} is saturated: {on_rails:.0%} of its samples "
                                 f"sit at its limits ({low:g} / {high:g}); lower the gain or move the sensor"))
    return found


def _mixed_labels(windows: Windows) -> list[Finding]:
    groups, y = np.asarray(windows.groups), windows.y
    unique = np.unique(groups)
    if len(unique) < 2 or len(unique) == len(groups):
        return []  # one window per recording (or one recording): nothing to compare within
    mixed = [g for g in unique if len(np.unique(y[groups == g])) > 1]
    if len(mixed) <= MIXED_GROUP_FRACTION * len(unique):
        return []
    example = mixed[0]
    labels = sorted({windows.class_names[i] for i in np.unique(y[groups == example])})
    return [Finding("mixed_labels", "error",
                    f"{len(mixed)} of {len(unique)} recordings hold windows with different labels "
                    f"(e.g. recording {example}: {', '.join(labels[:4])}): labels were mixed up")]


def _imbalance(windows: Windows) -> list[Finding]:
    counts = np.bincount(windows.y, minlength=windows.classes)
    largest, smallest = int(counts.argmax()), int(counts.argmin())
    if counts[smallest] * IMBALANCE_RATIO >= counts[largest]:
        return []
    return [Finding("imbalance", "warning",
                    f"class {windows.class_names[smallest]!r} has {counts[smallest]} windows, "
                    f"{counts[largest] / counts[smallest]:.0f}x fewer than {windows.class_names[largest]!r}: "
                    f"record more of it")]
