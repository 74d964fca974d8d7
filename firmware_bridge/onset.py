"""Where a person started moving: windows are cut where the sign is, not where "go" was said.

People react to "go" in 0.2-0.5 s, some start during the countdown, and a distracted one a second late.
A window cut exactly at "go" then holds half rest and half sign, or runs into the next prompt. So the
guide looks for the movement's onset in the live stream from `EARLY_SECONDS` before "go" to
`LATE_SECONDS` after it, and starts the window `PREROLL_FRACTION` of a window before the onset (never
earlier than the tolerance): the onset itself is in the window, as in the data the method was trained on.

Every level here is measured on the signal with each channel's rest mean removed (`centre`, `level`): a sketch
printing raw `analogRead()` values (0-1023, about 512 at rest) has a large offset that a plain RMS counts as signal
(a full-scale movement then reaches 1.22x the rest level, never 2x); without it an offset sensor moves the needle
exactly as a centred one does. For a centred signal the rest mean is about 0 and the levels are as before.
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


def centre(baseline: np.ndarray) -> np.ndarray:
    """Each channel's mean over the rest `baseline` (samples, channels): the offset movement is measured from."""
    return np.asarray(baseline, dtype=np.float64).reshape(len(baseline), -1).mean(axis=0)


def level(signal: np.ndarray, offset: np.ndarray) -> float:
    """RMS over every sample and channel of `signal` (samples, channels) with the per-channel `offset` removed."""
    centred = np.asarray(signal, dtype=np.float64).reshape(len(signal), -1) - offset
    return float(np.sqrt(np.mean(centred ** 2)))


def loud_frames(stream: np.ndarray, baseline: np.ndarray, rate_hz: float) -> np.ndarray:
    """For each whole frame of `stream` (samples, channels): whether its RMS about the baseline's channel means
    reaches ONSET_FACTOR x the baseline's."""
    frame = frame_length(rate_hz)
    count = len(stream) // frame
    offset = centre(baseline)
    floor = level(baseline, offset)
    frames = np.asarray(stream[:count * frame], dtype=np.float64).reshape(count, frame, -1) - offset
    return np.sqrt((frames ** 2).mean(axis=(1, 2))) >= ONSET_FACTOR * max(floor, 1e-9)


def find_onset(stream: np.ndarray, baseline: np.ndarray, rate_hz: float) -> int | None:
    """Offset in `stream` (samples, channels) of the first of FRAMES_HELD frames whose RMS reaches ONSET_FACTOR x
    the baseline's after a quieter frame, or None. A movement already under way when `stream` begins (a person still
    signing from the prompt before, or one who started long before "go") has no onset here."""
    frame = frame_length(rate_hz)
    loud = loud_frames(stream, baseline, rate_hz)
    if len(loud) < FRAMES_HELD:
        return None
    held = np.convolve(loud.astype(int), np.ones(FRAMES_HELD, dtype=int), mode="valid") == FRAMES_HELD
    hits = [index for index in np.flatnonzero(held) if index > 0 and not loud[index - 1]]
    return int(hits[0]) * frame if hits else None


def moving_from_the_start(stream: np.ndarray, baseline: np.ndarray, rate_hz: float) -> bool:
    """Whether `stream` begins with a movement under way (its first FRAMES_HELD frames loud)."""
    loud = loud_frames(stream, baseline, rate_hz)
    return len(loud) >= FRAMES_HELD and bool(loud[:FRAMES_HELD].all())


def find_end(stream: np.ndarray, baseline: np.ndarray, rate_hz: float, after: int) -> int | None:
    """Offset in `stream` of where a movement under way at offset `after` stops: the first of FRAMES_HELD quiet
    frames (RMS under ONSET_FACTOR x the baseline's) from `after` on, or None when it does not stop in `stream`."""
    frame = frame_length(rate_hz)
    loud = loud_frames(stream, baseline, rate_hz)
    first = -(-after // frame)
    quiet = ~loud[first:]
    if len(quiet) < FRAMES_HELD:
        return None
    held = np.convolve(quiet.astype(int), np.ones(FRAMES_HELD, dtype=int), mode="valid") == FRAMES_HELD
    hits = np.flatnonzero(held)
    return (first + int(hits[0])) * frame if len(hits) else None
