"""Gesture sessions written as the recorder writes them, from signals a test chooses: the stream (idle rest, then
each sign for a while), each sign's window record (with its onset) and the prompts' rest levels. For the stream's
judge, the deploy gate and re-wear tests, which need a session whose truth is known to the sample."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from firmware_bridge.protocol import Hello, Samples
from firmware_bridge.recorder import Recorder


def write_session(folder: Path, signs: list[tuple[str, np.ndarray]], *, rate: float, rest: np.ndarray,
                  classes: tuple[str, ...], rest_class: str | None = None, idle_seconds: float = 1.0,
                  window: int | None = None, seed: int = 0, channel_names: tuple[str, ...] = ()) -> list[dict]:
    """A session of `signs` (label, samples performed), each preceded by `idle_seconds` of `rest`-like samples (rest
    drawn from `rest` at random offsets), its window cut at the onset as the guide cuts it; returns what was
    written per sign: label, onset, end, start."""
    rng = np.random.default_rng(seed)
    channels = rest.shape[1]
    hello = Hello("test", "1", channels, rate, "float32")
    plan = {"name": "test", "classes": list(classes), "kind": "gesture", "rest_class": rest_class,
            "window_seconds": (window or 0) / rate}
    idle = int(round(idle_seconds * rate))
    written = []
    with Recorder(folder, hello, labels=classes, plan=plan, fsync_interval=0.0) as recorder:
        position = 0

        def emit(data: np.ndarray) -> None:
            nonlocal position
            recorder.add_samples(Samples(position, np.asarray(data, dtype=np.float32)))
            position += len(data)

        for label, performed in signs:
            offset = int(rng.integers(0, max(1, len(rest) - idle)))
            before = rest[offset:offset + idle]
            if len(before) < idle:
                before = np.resize(rest, (idle, channels))
            go = position + idle // 2
            level = float(np.sqrt(np.mean(before.astype(np.float64) ** 2)))
            recorder.add_event({"prompt": label, "attempt": 1, "go": go, "rest_rms": round(level, 4)})
            emit(before)
            onset = position
            emit(performed)
            length = window or len(performed)
            start = onset if label == rest_class else max(0, onset - int(0.1 * length))
            marks = {} if label == rest_class else {"onset": onset}
            recorder.add_window(label, start, length, attempt=1, go=go, **marks)
            written.append({"label": label, "onset": onset, "end": onset + len(performed), "start": start})
        tail = np.resize(rest, (idle, channels))
        emit(tail)
    if channel_names:  # a front-end that names its channels (the recorder writes ch0, ch1, ...)
        manifest = json.loads((folder / "manifest.json").read_text())
        (folder / "manifest.json").write_text(json.dumps({**manifest, "channel_names": list(channel_names)}))
    return written
