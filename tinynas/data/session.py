"""Sessions recorded by `firmware_bridge` (format: `firmware_bridge/session_format.py`).

Each accepted labelled window of a session is one recording (one group for splitting). With
`window=N` (and `hop`), every recording is re-cut into windows of N samples, so a session recorded
in long windows (0.5 s of vibration) can be searched on windows a small target can hold; cut
windows never straddle two recordings and keep their recording's group.
"""

from __future__ import annotations

import bisect
import json
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from firmware_bridge.safe_read import read_regular
from firmware_bridge.session_format import FORMAT_NAME, scan, window_crc
from tinynas.data.signal_files import check_readable
from tinynas.data.windows import MAX_WINDOW_BYTES, DataError, Windows, check_size, readable, shown

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionSamples:
    """The continuous sample stream of a session, with what was lost."""

    samples: np.ndarray       # (total, channels) float32, NaN where a gap was not received
    received: np.ndarray      # (total,) bool
    corrupt_chunks: int
    lost_tail_bytes: int


@dataclass(frozen=True)
class Stream:
    """The received samples as contiguous segments.

    Memory follows what the file holds, not the sample indices its chunk headers claim: a header
    is outside the payload's CRC, so one flipped bit could otherwise ask for exabytes.
    """

    starts: list[int]             # first sample index of each segment, ascending
    segments: list[np.ndarray]    # (n, channels) float32 each
    corrupt_chunks: int
    lost_tail_bytes: int

    def window(self, start: int, length: int) -> np.ndarray | None:
        """Samples [start, start + length), or None when any of them was never received."""
        index = bisect.bisect_right(self.starts, start) - 1
        if index < 0 or length < 1:
            return None
        offset = start - self.starts[index]
        segment = self.segments[index]
        return segment[offset:offset + length] if offset + length <= len(segment) else None

    @property
    def end(self) -> int:
        """One past the last received sample index."""
        return self.starts[-1] + len(self.segments[-1]) if self.segments else 0


def _positive_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0


def _regular_if_there(path: Path, kind: str) -> None:
    """A session file that is there must be a regular file: a pipe or a device would block the read or never end
    (a missing one is the reader's to say)."""
    if os.path.lexists(path):
        check_readable(path, kind)


EVENTS_FILE_BYTES = 64 << 20
"""The most a session's events.jsonl may be: a prompt's few lines each (a larger one is not the guide's)."""


def read_events(folder: Path) -> list[dict]:
    """The events the guide logged in a session folder (events.jsonl), in order; torn or foreign lines skipped, []
    when there is none or it is not a regular file of at most EVENTS_FILE_BYTES (the one reader of that file)."""
    try:
        lines = read_regular(folder / "events.jsonl", EVENTS_FILE_BYTES, "session's events").decode(
            "utf-8", "replace").splitlines()
    except OSError:
        return []
    events = []
    for line in lines:
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue  # a torn last line
        if isinstance(event, dict):
            events.append(event)
    return events


def read_manifest(folder: Path) -> dict:
    """The session's manifest.json, checked for the format name and every field the loader uses."""
    path = folder / "manifest.json"
    _regular_if_there(path, "a session manifest")
    try:
        manifest = json.loads(path.read_bytes())
    except FileNotFoundError:
        raise DataError(f"{shown(folder)} is not a recorded session: no manifest.json") from None
    except PermissionError:
        raise DataError(f"cannot read {shown(path)}: permission denied (check its owner and mode)") from None
    except IsADirectoryError:
        raise DataError(f"{shown(path)} is a folder, not a session manifest") from None
    except OSError as exc:
        raise DataError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
        raise DataError(f"{shown(path)}: unreadable manifest ({type(exc).__name__}: {exc}; damaged?)") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_NAME:
        raise DataError(f"{shown(path)}: not a {FORMAT_NAME} manifest")
    for key in ("sample_rate_hz", "channels"):
        if key not in manifest:
            raise DataError(f"{shown(path)}: missing '{key}'")
    channels = manifest["channels"]
    if not (isinstance(channels, int) and not isinstance(channels, bool) and 1 <= channels <= 65535):
        raise DataError(f"{shown(path)}: channels is {channels!r}, not a channel count (damaged manifest?)")
    if not _positive_number(manifest["sample_rate_hz"]):
        raise DataError(f"{shown(path)}: sample_rate_hz is {manifest['sample_rate_hz']!r}, not a positive rate")
    if not _positive_number(manifest.get("scale", 1.0)):
        raise DataError(f"{shown(path)}: scale is {manifest['scale']!r}, not a positive number")
    names = manifest.get("channel_names")
    if names is not None and not (isinstance(names, list) and len(names) == channels
                                  and all(isinstance(n, str) for n in names)):
        raise DataError(f"{shown(path)}: channel_names is not a list of {channels} names")
    labels = manifest.get("labels", [])
    if not (isinstance(labels, list) and all(isinstance(label, str) for label in labels)):
        raise DataError(f"{shown(path)}: labels is not a list of names")
    return manifest


def read_stream(folder: Path, channels: int) -> Stream:
    """Every complete chunk of samples.bin, merged into contiguous segments (later chunks win)."""
    path = folder / "samples.bin"
    _regular_if_there(path, "a session's samples")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    except OSError as exc:
        raise DataError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    result = scan(data)
    for chunk in result.chunks:
        if chunk.samples.shape[1] != channels:
            raise DataError(f"{shown(path)}: a chunk has {chunk.samples.shape[1]} channels, "
                            f"the manifest says {channels}")
    if result.lost_tail_bytes:
        log.warning("%s: the last %d bytes are a torn chunk (recorder stopped mid-write); "
                    "every complete chunk before them was kept", shown(path), result.lost_tail_bytes)
    if result.corrupt_chunks:
        log.warning("%s: skipped %d corrupt chunk(s)", shown(path), result.corrupt_chunks)
    spans: list[list[int]] = []  # [first, end] of each run of overlapping or adjacent chunks
    for chunk in sorted((c for c in result.chunks if len(c.samples)), key=lambda c: c.first_sample):
        end = chunk.first_sample + len(chunk.samples)
        if spans and chunk.first_sample <= spans[-1][1]:
            spans[-1][1] = max(spans[-1][1], end)
        else:
            spans.append([chunk.first_sample, end])
    starts = [first for first, _ in spans]
    segments = [np.empty((end - first, channels), dtype=np.float32) for first, end in spans]
    # Version 1 (no forward-only timeline): in file order, a chunk written later replaces an earlier one.
    # Version 2 indices never repeat; should a damaged file still hold two chunks at one index, the one
    # written first is kept (reversed order): what was accepted is never replaced by what came after.
    ordered = [c for c in result.chunks if c.version == 1] + [c for c in reversed(result.chunks) if c.version != 1]
    for chunk in ordered:
        if len(chunk.samples):
            index = bisect.bisect_right(starts, chunk.first_sample) - 1
            offset = chunk.first_sample - starts[index]
            segments[index][offset:offset + len(chunk.samples)] = chunk.samples
    return Stream(starts, segments, result.corrupt_chunks, result.lost_tail_bytes)


def read_samples(folder: Path, channels: int) -> SessionSamples:
    """Every complete chunk of samples.bin laid out by sample index (gaps are NaN)."""
    stream = read_stream(Path(folder), channels)
    total = stream.end
    if total * channels * 4 > MAX_WINDOW_BYTES:
        raise DataError(f"{shown(Path(folder) / 'samples.bin')}: sample indices reach {total:,}, too many to lay "
                        f"out in memory (a damaged chunk header?)")
    samples = np.full((total, channels), np.nan, dtype=np.float32)
    received = np.zeros(total, dtype=bool)
    for first, segment in zip(stream.starts, stream.segments):
        samples[first:first + len(segment)] = segment
        received[first:first + len(segment)] = True
    return SessionSamples(samples, received, stream.corrupt_chunks, stream.lost_tail_bytes)


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def read_window_records(folder: Path) -> list[dict]:
    """Accepted windows from windows.jsonl; a torn last line (killed recorder) is ignored.

    A line with "retract": START withdraws the earlier window starting at START (a redo).
    """
    path = folder / "windows.jsonl"
    _regular_if_there(path, "a session's windows")
    try:
        lines = path.read_bytes().decode("utf-8", "replace").splitlines()
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise DataError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    records: list[dict] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):
            if number == len(lines):
                log.warning("%s: ignoring a torn last line", shown(path))
                break
            raise DataError(f"{shown(path)}: line {number} is not JSON (damaged file?)") from None
        if isinstance(record, dict) and "retract" in record:
            records = [r for r in records if r["start"] != record["retract"]]
            continue
        if not (isinstance(record, dict) and isinstance(record.get("label"), (str, int))
                and not isinstance(record.get("label"), bool) and _whole(record.get("start"))
                and _whole(record.get("length")) and record["length"] >= 1):
            raise DataError(f"{shown(path)}: line {number} is not a window record "
                            f"(label, start, length; damaged file?)")
        records.append(record)
    return records


def load_session(path: str | Path, window: int | None = None, hop: int | None = None) -> Windows:
    """Labelled windows of one recorded session folder, or of every session folder inside `path`.

    `window` (samples) re-cuts each recorded window into windows of that length every `hop`
    samples (default: hop = window); see the module docstring.
    """
    if window is not None and window < 1 or hop is not None and hop < 1:
        raise DataError(f"window and hop must be positive sample counts, got window={window}, hop={hop}")
    if window is None and hop is not None:
        raise DataError(f"hop={hop} needs window=N (the length to re-cut the recordings into)")
    root = Path(path)
    try:
        folders = [root] if (root / "manifest.json").exists() else sorted(
            p for p in root.iterdir() if (p / "manifest.json").exists()) if root.is_dir() else []
    except OSError as exc:
        raise DataError(f"cannot read folder {shown(root)}: {exc.strerror or exc}") from None
    if not folders:
        raise DataError(f"{shown(root)} holds no recorded session (no manifest.json)")
    x: list[np.ndarray] = []
    label_names: list[str] = []
    groups: list[str] = []
    sessions: list[str] = []
    starts: list[int] = []
    planned: list[str] = []
    rate = None
    channel_names: tuple[str, ...] = ()
    skipped = too_short = changed = 0
    recorded_lengths: set[int] = set()
    name_chars = 0  # the longest group name and session name so far: numpy stores every window's that wide
    for folder in folders:
        manifest = read_manifest(folder)
        if rate is not None and manifest["sample_rate_hz"] != rate:
            raise DataError(f"{shown(folder)}: {manifest['sample_rate_hz']} Hz, other sessions are {rate} Hz")
        rate = manifest["sample_rate_hz"]
        channels = manifest["channels"]
        if channel_names and len(channel_names) != channels:
            raise DataError(f"{shown(folder)}: {channels} channel(s), other sessions have {len(channel_names)}")
        channel_names = tuple(manifest.get("channel_names") or (f"ch{i}" for i in range(channels)))
        planned += [label for label in manifest.get("labels", []) if label not in planned]
        stream = read_stream(folder, channels)
        scale = float(manifest.get("scale", 1.0))
        for index, record in enumerate(read_window_records(folder)):
            start, length = record["start"], record["length"]
            name_chars = max(name_chars, 2 * len(readable(folder.name)) + len(f"/{index} donning 99"))
            recorded_lengths.add(length)
            if _whole(record.get("crc32")):
                whole = stream.window(start, length)
                if whole is not None and window_crc(whole) != record["crc32"]:
                    changed += 1  # its samples are not those that were accepted: never trained on
                    continue
            if window is None:
                check_size(len(x) + 1, length, channels, f"session:{shown(root)}", "re-cut with window=N",
                           names=name_chars)
                cuts = [(start, length)]
            else:
                step = hop or window
                count = max(0, (length - window) // step + 1)
                check_size(len(x) + count, window, channels, f"session:{shown(root)}", "raise hop", names=name_chars)
                cuts = [(start + offset, window) for offset in range(0, count * step, step)]
                too_short += not cuts
            for first, size in cuts:
                samples = stream.window(first, size)
                if samples is None:
                    skipped += 1
                    continue
                with np.errstate(over="ignore"):  # beyond float32: inf, refused by Windows in one line
                    x.append(samples * scale)
                label_names.append(readable(str(record["label"])))
                groups.append(f"{readable(folder.name)}/{index}")
                # A second donning of the armband within the session (a two-donning plan) is a session of its own:
                # the split can then validate on it (leave-one-session-out).
                donning = record.get("donning")
                sessions.append(readable(folder.name) + (f" donning {donning}" if isinstance(donning, int)
                                                         and donning > 1 else ""))
                starts.append(first)
    if changed:
        log.warning("%d window(s) of %s do not hold the samples that were accepted (their CRC-32 differs: a "
                    "damaged samples.bin?): left out", changed, shown(root))
    if skipped:
        log.warning("%d window(s) fall in samples that were never received (link gap or torn tail): skipped", skipped)
    if too_short:
        log.warning("%d recording(s) shorter than window=%d: skipped", too_short, window)
    if not x:
        if too_short:
            raise DataError(f"{shown(root)}: every recording is shorter than window={window} "
                            f"(recorded lengths: {', '.join(map(str, sorted(recorded_lengths)))})")
        raise DataError(f"{shown(root)}: no complete labelled windows")
    # Classes in the plan's order; a planned class with no accepted window is left out.
    class_names = [name for name in planned if name in label_names]
    class_names += sorted(set(label_names) - set(class_names))
    index_of = {name: i for i, name in enumerate(class_names)}
    labels = [index_of[name] for name in label_names]
    lengths = {len(samples) for samples in x}
    if len(lengths) > 1:
        raise DataError(f"{shown(root)}: windows of different lengths {sorted(lengths)}; re-cut them to one "
                        f"length with session:{shown(root)}?window={min(lengths)}")
    check_size(len(x), lengths.pop(), len(channel_names), f"session:{shown(root)}", "re-cut with a larger hop",
               names=name_chars)
    assert rate is not None  # windows were cut, so at least one manifest was read
    return Windows(np.stack(x), np.array(labels), np.array(groups), tuple(class_names), float(rate),
                   channel_names, {"source": "session", "path": shown(root),
                                   "sessions": [readable(f.name) for f in folders], "skipped_windows": skipped,
                                   "changed_windows": changed,
                                   **({"window": window, "hop": hop or window, "too_short": too_short}
                                      if window is not None else {})},
                   sessions=np.array(sessions), time_index=np.array(starts))
