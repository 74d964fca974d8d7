"""A gesture session as it was lived: the whole sample stream, and where each sign began and ended in it.

`load_session` gives the windows the guide cut, one per prompt, each starting just before the sign's onset. What
serving sees is another thing: a window every hop over whatever the last seconds hold, the edges of signs and the
idle arm between them. The stream's judge (`tinynas.deploy.stream`) needs the stream and the truth along it, which
this module reads from the session folder: `samples.bin` (every sample, prompts, rests and rejected attempts
included), the window records (the guide keeps each sign's `onset`; sessions recorded before it did give the
onset back as the window's pre-roll) and the prompts' rest levels. A sign's end is where its envelope falls back
under the onset line for FRAMES_HELD frames (`firmware_bridge.onset`): the person relaxed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from firmware_bridge import onset as envelope
from firmware_bridge.session_format import window_crc
from tinynas.data.session import Stream, read_events, read_manifest, read_stream, read_window_records
from tinynas.data.windows import DataError, Windows, readable, shown

MIN_SIGN_SECONDS = 0.3
"""A sign lasts at least this long: a dip of the envelope right after the onset is not its end."""
MAX_SIGN_WINDOWS = 3
"""Nor longer than this many windows: a person who never relaxes is cut there (or at the next prompt)."""


@dataclass(frozen=True)
class SignEvent:
    """One prompted sign (or still class) in the stream: samples [onset, end) performed `label`."""

    label: str
    onset: int
    end: int
    record: int
    """Its window's index among the session's records (`load_session`'s group is f"{folder}/{record}")."""
    group: str
    still: bool
    """A still class (the plan's rest): its span is its window."""

    def overlap(self, start: int, stop: int) -> int:
        """Samples of [start, stop) inside the sign."""
        return max(0, min(stop, self.end) - max(start, self.onset))


@dataclass(frozen=True)
class Recording:
    """A session's stream (scaled as its windows are) and its signs, in the order they were performed."""

    folder: Path
    stream: Stream
    scale: float
    sample_rate_hz: float
    channels: int
    class_names: tuple[str, ...]
    events: tuple[SignEvent, ...]
    window_length: int
    """Samples of the windows the guide recorded (the model's window for a model searched on them)."""
    still_class: str | None = None
    """The plan's still class (its rest), if it has one."""

    def samples(self, start: int, length: int) -> np.ndarray | None:
        """Samples [start, start + length) as the model's windows hold them, or None where any was not received."""
        raw = self.stream.window(start, length)
        return None if raw is None else raw * np.float32(self.scale)

    @property
    def end(self) -> int:
        return self.stream.end


def _rest_levels(folder: Path) -> list[tuple[int, float]]:
    """(go, rest RMS) of every prompt that measured the rest before it (events.jsonl), in order."""
    levels = []
    for event in read_events(folder):
        go, level = event.get("go"), event.get("rest_rms")
        if isinstance(go, int) and isinstance(level, (int, float)) and not isinstance(level, bool) and level > 0:
            levels.append((go, float(level)))
    return levels


def _prompts(folder: Path) -> list[int]:
    """Every "go" of the session (accepted or not), ascending: a sign does not run into the next prompt."""
    found = []
    for event in read_events(folder):
        if "prompt" in event and isinstance(event.get("go"), int):
            found.append(event["go"])
    return sorted(found)


def _sign_end(stream: Stream, onset: int, level: float, rate_hz: float, limit: int) -> int:
    """Where the sign begun at `onset` ends: FRAMES_HELD frames under the onset line after MIN_SIGN_SECONDS, before
    `limit` (where it is cut when the person never relaxes in time)."""
    first = onset + int(round(MIN_SIGN_SECONDS * rate_hz))
    frame = envelope.frame_length(rate_hz)
    position = first
    quiet = 0
    while position + frame <= limit:
        samples = stream.window(position, frame)
        if samples is None:
            return position  # a link gap ends what the judge can see of the sign
        loud = float(np.sqrt(np.mean(samples.astype(np.float64) ** 2))) >= envelope.ONSET_FACTOR * level
        quiet = 0 if loud else quiet + 1
        if quiet == envelope.FRAMES_HELD:
            return position - (envelope.FRAMES_HELD - 1) * frame
        position += frame
    return limit


def load_recording(folder: str | Path) -> Recording:
    """One gesture session folder's stream and signs; DataError in one line when it is not one."""
    folder = Path(folder)
    if not (folder / "manifest.json").is_file():
        raise DataError(f"{shown(folder)} is not a recorded session (no manifest.json): give one session folder")
    manifest = read_manifest(folder)
    channels, rate = manifest["channels"], float(manifest["sample_rate_hz"])
    stream = read_stream(folder, channels)
    plan: dict = manifest["plan"] if isinstance(manifest.get("plan"), dict) else {}
    still_class = plan.get("rest_class") if isinstance(plan.get("rest_class"), str) else None
    levels = _rest_levels(folder)
    prompts = _prompts(folder)
    records = read_window_records(folder)
    events = []
    lengths = set()
    for index, record in enumerate(records):
        start, length, label = record["start"], record["length"], readable(str(record["label"]))
        whole = stream.window(start, length)
        if whole is None or (isinstance(record.get("crc32"), int) and window_crc(whole) != record["crc32"]):
            continue  # never received, or not the samples that were accepted: load_session leaves it out too
        lengths.add(length)
        group = f"{readable(folder.name)}/{index}"
        go: int = record["go"] if isinstance(record.get("go"), int) else start
        if label == still_class:
            events.append(SignEvent(label, start, start + length, index, group, True))
            continue
        onset = record.get("onset")
        if not isinstance(onset, int) or isinstance(onset, bool) or not start <= onset < start + length:
            onset = start + int(round(envelope.PREROLL_FRACTION * length))  # recorded before onsets were kept
        level = next((value for when, value in reversed(levels) if when <= go), levels[0][1] if levels else 0.0)
        later = [when for when in prompts if when > go]
        limit = min(onset + MAX_SIGN_WINDOWS * length, later[0] if later else stream.end)
        end = _sign_end(stream, onset, level, rate, limit) if level > 0 else min(onset + length, limit)
        events.append(SignEvent(label, onset, max(end, onset + 1), index, group, False))
    if not events:
        raise DataError(f"{shown(folder)} holds no labelled window whose samples were received")
    planned = [name for name in manifest.get("labels", []) if any(e.label == name for e in events)]
    planned += sorted({e.label for e in events} - set(planned))
    return Recording(folder, stream, float(manifest.get("scale", 1.0)), rate, channels, tuple(planned),
                     tuple(sorted(events, key=lambda e: e.onset)), max(lengths), still_class)


def with_context(windows: Windows, recording: Recording, margin: int | None = None) -> Windows:
    """`windows` (a `load_session` of `recording`'s folder) with the stream around each of them: `margin` samples
    (default: a window) before and after it, and its sign's span there (`Windows.context`). A window whose
    surroundings were not all received is padded with its edge samples. Windows that are not this recording's, or
    re-cut ones, come back as they were."""
    length = windows.window_length
    margin = length if margin is None else margin
    by_group = {event.group: event for event in recording.events}
    if windows.time_index is None or any(str(group) not in by_group for group in windows.groups):
        return windows
    context = np.empty((len(windows), length + 2 * margin, windows.channels), dtype=np.float32)
    spans = np.empty((len(windows), 2), dtype=np.int64)
    for index, (group, start, window) in enumerate(zip(windows.groups, windows.time_index, windows.x)):
        event = by_group[str(group)]
        first = int(start) - margin
        around = np.empty_like(context[index])
        for offset in range(0, len(around), length):  # a window's worth at a time: a gap costs only its part
            size = min(length, len(around) - offset)
            part = recording.samples(first + offset, size) if first + offset >= 0 else None
            around[offset:offset + size] = np.nan if part is None else part
        around[margin:margin + length] = window  # the window itself as it was loaded (scaled, checked)
        context[index] = _fill_gaps(around)
        begin, end = (margin, margin + length) if event.still else (event.onset - first, event.end - first)
        spans[index] = (max(0, begin), min(len(around), max(end, begin + 1)))
    return Windows(windows.x, windows.y, windows.groups, windows.class_names, windows.sample_rate_hz,
                   windows.channel_names, {**windows.provenance, "stream_context": margin,
                                           **({"still_class": recording.still_class} if recording.still_class
                                              else {})}, windows.sessions,
                   windows.time_index, context, spans)


def _fill_gaps(samples: np.ndarray) -> np.ndarray:
    """NaN rows replaced by the nearest received row (the window itself is always received)."""
    missing = np.isnan(samples).any(axis=1)
    if not missing.any():
        return samples
    kept = np.flatnonzero(~missing)
    nearest = kept[np.clip(np.searchsorted(kept, np.arange(len(samples))), 0, len(kept) - 1)]
    return samples[nearest]
