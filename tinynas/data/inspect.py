"""A summary of a `Windows` for people: counts per class, shape, rate, groups, value range."""

from __future__ import annotations

import numpy as np

from tinynas.data.windows import Windows


def describe_windows(windows: Windows) -> dict:
    """JSON-ready facts about `windows` (what `tinynas data inspect` prints)."""
    counts = np.bincount(windows.y, minlength=windows.classes)
    return {
        "windows": len(windows), "window_length": windows.window_length, "channels": windows.channels,
        "sample_rate_hz": windows.sample_rate_hz,
        "window_seconds": windows.window_length / windows.sample_rate_hz,
        "channel_names": list(windows.channel_names) or [f"ch{i}" for i in range(windows.channels)],
        "classes": windows.classes,
        "counts": {name: int(count) for name, count in zip(windows.class_names, counts)},
        "groups": int(len(np.unique(windows.groups))),
        "sessions": sorted(set(windows.sessions.tolist())) if windows.sessions is not None else [],
        "min": float(windows.x.min()), "max": float(windows.x.max()),
        "mean": float(windows.x.mean()), "std": float(windows.x.std()),
        "provenance": windows.provenance,
    }
