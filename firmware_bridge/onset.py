"""Where a person started moving: windows are cut where the sign is, not where "go" was said.

People react to "go" in 0.2-0.5 s, some start during the countdown, and a distracted one a second late.
A window cut exactly at "go" then holds half rest and half sign, or runs into the next prompt. So the
guide looks for the movement's onset in the live stream from `EARLY_SECONDS` before "go" to
`LATE_SECONDS` after it, and starts the window `PREROLL_FRACTION` of a window before the onset (never
earlier than the tolerance): the onset itself is in the window, as in the data the method was trained on.
"""

from __future__ import annotations

import numpy as np

EARLY_SECONDS = 0.3
"""A sign started up to this long before "go" (during the countdown) is still that prompt's sign."""
LATE_SECONDS = 1.5
"""A sign started up to this long after "go" is still that prompt's sign; later, the attempt has no movement."""
FRAME_SECONDS = 0.1
"""Envelope frame: long enough to average sEMG noise at 200 Hz (20 samples), short against a sign."""
FRAMES_HELD = 2
"""Consecutive frames above the line that make an onset (one noisy frame does not)."""
ONSET_FACTOR = 2.0
"""A frame is movement when its RMS reaches this multiple of the baseline's (above the window check's 1.5x,
since a 0.1 s frame is noisier than a whole window)."""
PREROLL_FRACTION = 0.1


def frame_length(rate_hz: float) -> int:
    """Samples per envelope frame at `rate_hz` (at least 4)."""
    return max(4, int(round(FRAME_SECONDS * rate_hz)))


def find_onset(stream: np.ndarray, baseline: np.ndarray, rate_hz: float) -> int | None:
    """Offset in `stream` (samples, channels) of the first of FRAMES_HELD frames whose RMS reaches ONSET_FACTOR x
    the baseline's, or None."""
    frame = frame_length(rate_hz)
    count = len(stream) // frame
    if count < FRAMES_HELD:
        return None
    floor = float(np.sqrt(np.mean(np.asarray(baseline, dtype=np.float64) ** 2)))
    frames = np.asarray(stream[:count * frame], dtype=np.float64).reshape(count, frame, -1)
    loud = np.sqrt((frames ** 2).mean(axis=(1, 2))) >= ONSET_FACTOR * max(floor, 1e-9)
    held = np.convolve(loud.astype(int), np.ones(FRAMES_HELD, dtype=int), mode="valid") == FRAMES_HELD
    hits = np.flatnonzero(held)
    return int(hits[0]) * frame if len(hits) else None
