"""Sessions recorded by `firmware_bridge` (format: `firmware_bridge/session_format.py`)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from firmware_bridge.session_format import FORMAT_NAME, scan
from tinynas.data.windows import DataError, Windows

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionSamples:
    """The continuous sample stream of a session, with what was lost."""

    samples: np.ndarray       # (total, channels) float32, NaN where a gap was not received
    received: np.ndarray      # (total,) bool
    corrupt_chunks: int
    lost_tail_bytes: int


def read_manifest(folder: Path) -> dict:
    """The session's manifest.json, checked for the format name and required fields."""
    path = folder / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{folder} is not a recorded session: no manifest.json") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: unreadable manifest ({exc})") from None
    if manifest.get("format") != FORMAT_NAME:
        raise DataError(f"{path}: not a {FORMAT_NAME} manifest")
    for key in ("sample_rate_hz", "channels"):
        if key not in manifest:
            raise DataError(f"{path}: missing '{key}'")
    return manifest


def read_samples(folder: Path, channels: int) -> SessionSamples:
    """Every complete chunk of samples.bin laid out by sample index (gaps are NaN)."""
    path = folder / "samples.bin"
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        data = b""
    result = scan(data)
    total = max((c.first_sample + len(c.samples) for c in result.chunks), default=0)
    samples = np.full((total, channels), np.nan, dtype=np.float32)
    received = np.zeros(total, dtype=bool)
    for chunk in result.chunks:
        if chunk.samples.shape[1] != channels:
            raise DataError(f"{path}: a chunk has {chunk.samples.shape[1]} channels, the manifest says {channels}")
        end = chunk.first_sample + len(chunk.samples)
        samples[chunk.first_sample:end] = chunk.samples
        received[chunk.first_sample:end] = True
    if result.lost_tail_bytes:
        log.warning("%s: the last %d bytes are a torn chunk (recorder stopped mid-write); "
                    "every complete chunk before them was kept", path, result.lost_tail_bytes)
    if result.corrupt_chunks:
        log.warning("%s: skipped %d corrupt chunk(s)", path, result.corrupt_chunks)
    return SessionSamples(samples, received, result.corrupt_chunks, result.lost_tail_bytes)


def read_window_records(folder: Path) -> list[dict]:
    """Accepted windows from windows.jsonl; a torn last line (killed recorder) is ignored.

    A line with "retract": START withdraws the earlier window starting at START (a redo).
    """
    path = folder / "windows.jsonl"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):
                log.warning("%s: ignoring a torn last line", path)
                break
            raise DataError(f"{path}: line {number} is not JSON") from None
        if "retract" in record:
            records = [r for r in records if r["start"] != record["retract"]]
            continue
        records.append(record)
    return records


def load_session(path: str | Path) -> Windows:
    """Labelled windows of one recorded session folder, or of every session folder inside `path`."""
    root = Path(path)
    folders = [root] if (root / "manifest.json").exists() else sorted(
        p for p in root.iterdir() if (p / "manifest.json").exists()) if root.is_dir() else []
    if not folders:
        raise DataError(f"{root} holds no recorded session (no manifest.json)")
    x, label_names, groups, sessions, starts = [], [], [], [], []
    planned: list[str] = []
    rate = None
    channel_names: tuple[str, ...] = ()
    skipped = 0
    for folder in folders:
        manifest = read_manifest(folder)
        if rate is not None and manifest["sample_rate_hz"] != rate:
            raise DataError(f"{folder}: {manifest['sample_rate_hz']} Hz, other sessions are {rate} Hz")
        rate = manifest["sample_rate_hz"]
        channel_names = tuple(manifest.get("channel_names") or (f"ch{i}" for i in range(manifest["channels"])))
        planned += [label for label in manifest.get("labels", []) if label not in planned]
        stream = read_samples(folder, manifest["channels"])
        scale = float(manifest.get("scale", 1.0))
        for index, record in enumerate(read_window_records(folder)):
            start, length = int(record["start"]), int(record["length"])
            if start < 0 or start + length > len(stream.received) or not stream.received[start:start + length].all():
                skipped += 1
                continue
            x.append(stream.samples[start:start + length] * scale)
            label_names.append(str(record["label"]))
            groups.append(f"{folder.name}/{index}")
            sessions.append(folder.name)
            starts.append(start)
    if skipped:
        log.warning("%d window(s) fall in samples that were never received (link gap or torn tail): skipped", skipped)
    if not x:
        raise DataError(f"{root}: no complete labelled windows")
    # Classes in the plan's order; a planned class with no accepted window is left out.
    class_names = [name for name in planned if name in label_names]
    class_names += sorted(set(label_names) - set(class_names))
    labels = [class_names.index(name) for name in label_names]
    lengths = {len(window) for window in x}
    if len(lengths) > 1:
        raise DataError(f"{root}: windows of different lengths {sorted(lengths)}")
    return Windows(np.stack(x), np.array(labels), np.array(groups), tuple(class_names), float(rate),
                   channel_names, {"source": "session", "path": str(root), "sessions": [f.name for f in folders],
                                   "skipped_windows": skipped},
                   sessions=np.array(sessions), time_index=np.array(starts))
