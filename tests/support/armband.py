"""The armband put on again, for the adaptation tests: a new session's data spec and the shift a re-wear makes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

NEW_SESSION = "synthetic:emg?classes=4&windows_per_class=12&length=64&channels=4&windows_per_recording=3&seed=9"


def shifted(windows, rotate: int = 1, gains=(0.5, 1.6, 0.8, 1.3)):
    """The armband put on again: electrodes rotated by `rotate` and each with another gain."""
    x = np.roll(windows.x, rotate, axis=2) * np.asarray(gains, np.float32)
    return replace(windows, x=x.astype(np.float32))
