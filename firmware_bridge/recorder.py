"""Crash-safe recording of a session: manifest, append-only sample chunks, labelled windows.

Format: `session_format.py`. Samples are appended as CRC-checked chunks and flushed + fsynced
at least every `fsync_interval` seconds; every accepted window and every event is fsynced at
once. A recorder killed at any moment leaves every completed chunk readable, and the reader
reports the torn tail. The recorder also keeps the last `memory_seconds` of samples in memory
so that guided collection can cut and check windows from the live stream.
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
from firmware_bridge.protocol import Hello, Mark, Samples
from firmware_bridge.ring import SampleRing
from firmware_bridge.session_format import FORMAT_NAME, VERSION, SessionFormatError, encode_chunk

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
        if manifest_path.exists():
            try:
                self.manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise SessionFormatError(f"{manifest_path} is damaged (not JSON); record into a new folder") from None
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
        # Appending to an existing session (resume after a power cut) continues its files.
        self._samples = open(self.folder / "samples.bin", "ab")
        self._windows = open(self.folder / "windows.jsonl", "a", encoding="utf-8")
        self._events = open(self.folder / "events.jsonl", "a", encoding="utf-8")
        self._last_sync = time.monotonic()
        self._lock = threading.Lock()
        self.ring = SampleRing(hello.channels, int(memory_seconds * hello.sample_rate_hz))
        self._expected: int | None = None
        self.samples_written = 0
        self.samples_synced = 0  # samples_written at the last fsync: what a power cut cannot take away
        self.gaps: list[tuple[int, int]] = []

    # ---- incoming -----------------------------------------------------------------------
    def handle(self, message) -> None:
        """Record one message from the link."""
        if isinstance(message, Samples):
            self.add_samples(message)
        elif isinstance(message, Mark):
            self.add_event({"mark": message.code, "sample": message.sample_index, "text": message.text})
        elif isinstance(message, Hello) and message != self.hello:
            self.add_event({"hello": asdict(message)})

    def add_samples(self, message: Samples) -> None:
        """Append a chunk; fsync if the last one was more than `fsync_interval` ago."""
        data = message.data
        with self._lock:
            if self._expected is not None and message.first_sample != self._expected:
                gap = (self._expected, message.first_sample)
                self.gaps.append(gap)
                self._event_locked({"gap": list(gap), "lost_samples": gap[1] - gap[0]})
            self._expected = message.first_sample + len(data)
            self._samples.write(encode_chunk(message.first_sample, data, self.hello.sample_format))
            self.samples_written += len(data)
            self.ring.add(message)
            if time.monotonic() - self._last_sync >= self.fsync_interval:
                self._sync_locked()

    def add_window(self, label: str, start: int, length: int, **details) -> None:
        """Record an accepted labelled window (fsynced at once)."""
        with self._lock:
            record = {"label": label, "start": int(start), "length": int(length),
                      "accepted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **details}
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
        """Flush, fsync and close every file."""
        with self._lock:
            self._sync_locked()
            for handle in (self._samples, self._windows, self._events):
                handle.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


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
