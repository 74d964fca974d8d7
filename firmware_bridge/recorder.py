"""Crash-safe recording of a session: manifest, append-only sample chunks, labelled windows.

Format: `session_format.py`. Samples are appended as CRC-checked chunks and flushed + fsynced
at least every `fsync_interval` seconds; every accepted window and every event is fsynced at
once. A recorder killed at any moment leaves every completed chunk readable, and the reader
reports the torn tail. The recorder also keeps the last `memory_seconds` of samples in memory
so that guided collection can cut and check windows from the live stream.

Sample indices are the session's own forward-only timeline (`timeline.py`): a recording resumed after
a power cut, or a device that restarted and counts from 0 again, continues after the last recorded
sample, so nothing recorded is ever overwritten or re-indexed; each such restart starts a new epoch
(an event, and the chunk headers' epoch). Every accepted window carries the CRC-32 of its samples, so
the reader can prove it reads what was accepted. Messages handed in after `close()` are ignored: the
stream reader and the collection's end race, and the race must not kill the reader.
"""

from __future__ import annotations

import json
import logging
import os
import platform
import threading
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np

from firmware_bridge import __version__
from firmware_bridge.durable import write_durably
from firmware_bridge.link import DeviceReset
from firmware_bridge.protocol import Hello, Mark, Samples
from firmware_bridge.ring import SampleRing
from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular
from firmware_bridge.session_format import (
    FORMAT_NAME,
    MAX_SAMPLES_BYTES,
    VERSION,
    SessionFormatError,
    encode_chunk,
    scan,
    window_crc,
)
from firmware_bridge.timeline import Timeline

log = logging.getLogger(__name__)


def _atomic_json(path: Path, value) -> None:
    write_durably(path, json.dumps(value, indent=2).encode("utf-8"))


class Recorder:
    """Writes one session folder from a device's HELLO and SAMPLES messages."""

    def __init__(self, folder: str | os.PathLike, hello: Hello, *, user: str = "", labels=(),
                 plan: dict | None = None, fsync_interval: float = 1.0, memory_seconds: float = 60.0) -> None:
        self.folder = Path(folder)
        self.hello = hello
        self.fsync_interval = fsync_interval
        self.folder.mkdir(parents=True, exist_ok=True)
        manifest_path = self.folder / "manifest.json"
        if os.path.lexists(manifest_path):
            try:
                self.manifest = json.loads(read_regular(manifest_path, SETTINGS_FILE_BYTES, "session manifest"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                raise SessionFormatError(f"{manifest_path} is damaged (not JSON); record into a new folder") from None
            except OSError as exc:  # a pipe, a device, a folder: never opened to block, never written over
                raise SessionFormatError(f"{manifest_path}: {exc.strerror or exc}; record into a new folder") \
                    from None
            if not isinstance(self.manifest, dict) or self.manifest.get("channels") != hello.channels or \
                    self.manifest.get("sample_rate_hz") != hello.sample_rate_hz:
                raise SessionFormatError(f"{self.folder} holds a session of another device layout (or no "
                                         f"session); record into a new folder")
        else:
            self.manifest = {
                "format": FORMAT_NAME, "version": VERSION, "device": asdict(hello),
                "sample_rate_hz": hello.sample_rate_hz, "channels": hello.channels,
                "channel_names": [f"ch{i}" for i in range(hello.channels)],
                "sample_format": hello.sample_format, "scale": 1.0, "user": user, "labels": list(labels),
                "plan": plan or {}, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "software": {"firmware_bridge": __version__, "python": platform.python_version()},
            }
            _atomic_json(manifest_path, self.manifest)
        # Appending to an existing session (resume after a power cut) continues its files, after its last
        # sample, in a new epoch: the device has most likely restarted and counts from 0 again.
        end, last_epoch = _recorded_extent(self.folder / "samples.bin")
        self.timeline = Timeline(end)
        self.epoch = last_epoch + 1 if end else 0
        self._samples = open(self.folder / "samples.bin", "ab")
        self._windows = open(self.folder / "windows.jsonl", "a", encoding="utf-8")
        self._events = open(self.folder / "events.jsonl", "a", encoding="utf-8")
        self._last_sync = time.monotonic()
        self._lock = threading.Lock()
        self.closed = False
        self.ring = SampleRing(hello.channels, int(memory_seconds * hello.sample_rate_hz))
        self._expected: int | None = None
        self.samples_written = 0
        self.samples_synced = 0  # samples_written at the last fsync: what a power cut cannot take away
        self.gaps: list[tuple[int, int]] = []

    # ---- incoming -----------------------------------------------------------------------
    def handle(self, message) -> None:
        """Record one message from the link (ignored once closed)."""
        if self.closed:
            return
        if isinstance(message, Samples):
            self.add_samples(message)
        elif isinstance(message, DeviceReset):
            with self._lock:
                if not self.closed:
                    self.epoch += 1
                    self._event_locked({"reset": {"epoch": self.epoch, "device_first": message.device_first,
                                                  "link_first": message.first_sample}})
        elif isinstance(message, Mark):
            self.add_event({"mark": message.code, "sample": message.sample_index, "text": message.text})
        elif isinstance(message, Hello) and message != self.hello:
            self.add_event({"hello": asdict(message)})

    def add_samples(self, message: Samples) -> None:
        """Append a chunk; fsync if the last one was more than `fsync_interval` ago."""
        data = message.data
        with self._lock:
            if self.closed or data.ndim != 2 or data.shape[1] != self.hello.channels:
                return  # closed, or another device's layout: never written into this session
            placement = self.timeline.place(message.first_sample, len(data))
            if placement.reset:  # fed straight from a device whose counter went back (the Link places it)
                self.epoch += 1
                self._event_locked({"reset": {"epoch": self.epoch, "device_first": message.first_sample}})
            first = placement.first
            if self._expected is not None and first != self._expected:
                gap = (self._expected, first)
                self.gaps.append(gap)
                self._event_locked({"gap": list(gap), "lost_samples": gap[1] - gap[0]})
            self._expected = first + len(data)
            self._samples.write(encode_chunk(first, data, self.hello.sample_format, self.epoch))
            # The ring first: whoever sees the count move (without this lock) finds the samples in memory too.
            self.ring.add(Samples(first, data) if first != message.first_sample else message)
            self.samples_written += len(data)
            if time.monotonic() - self._last_sync >= self.fsync_interval:
                self._sync_locked()

    def add_window(self, label: str, start: int, length: int, **details) -> None:
        """Record an accepted labelled window (fsynced at once), with the CRC-32 of its samples when they are
        still in memory (they are for a window just cut from the live stream)."""
        with self._lock:
            record = {"label": label, "start": int(start), "length": int(length),
                      "accepted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "epoch": self.epoch, **details}
            samples = self.ring.window(int(start), int(length))
            if samples is not None and "retract" not in details:
                record["crc32"] = window_crc(samples)
            self._windows.write(json.dumps(record) + "\n")
            self._sync_locked()

    def add_event(self, event: dict) -> None:
        """Record an event (mark, gap, redo, prompt), fsynced at once."""
        with self._lock:
            self._event_locked(event)

    def _event_locked(self, event: dict) -> None:
        self._events.write(json.dumps({"time": time.time(), **event}) + "\n")
        self._sync_locked()

    def _sync_locked(self) -> None:
        for handle in (self._samples, self._windows, self._events):
            handle.flush()
            os.fsync(handle.fileno())
        self._last_sync = time.monotonic()
        self.samples_synced = self.samples_written

    # ---- the live stream ----------------------------------------------------------------
    @property
    def latest_sample(self) -> int:
        """One past the newest sample received."""
        return self.ring.latest_sample

    def window(self, start: int, length: int) -> np.ndarray | None:
        """Samples [start, start + length) from memory, or None if not (all) received or too old."""
        return self.ring.window(start, length)

    def close(self) -> None:
        """Flush, fsync and close every file (a second call does nothing)."""
        with self._lock:
            if self.closed:
                return
            self._sync_locked()
            self.closed = True
            for handle in (self._samples, self._windows, self._events):
                handle.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def _recorded_extent(path: Path) -> tuple[int, int]:
    """(one past the last recorded sample index, the last chunk's epoch) of a samples.bin; (0, -1) when empty."""
    try:
        data = read_regular(path, MAX_SAMPLES_BYTES, "session's samples")
    except FileNotFoundError:
        return 0, -1
    except OSError as exc:
        raise SessionFormatError(f"{path}: {exc.strerror or exc}; record into a new folder") from None
    chunks = scan(data).chunks
    if not chunks:
        return 0, -1
    return max(c.first_sample + len(c.samples) for c in chunks), chunks[-1].epoch


class RecordingThread(threading.Thread):
    """Moves messages from a `Link` into a `Recorder` until stopped."""

    def __init__(self, link, recorder: Recorder) -> None:
        super().__init__(name="recorder", daemon=True)
        self.link = link
        self.recorder = recorder
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            message = self.link.get(timeout=0.1)
            if message is not None:
                self.recorder.handle(message)

    def stop(self) -> None:
        """Stop after the message in hand."""
        self._halt.set()
        self.join(timeout=5)
