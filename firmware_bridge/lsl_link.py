"""A Lab Streaming Layer stream as a front-end: how research labs move EMG, EEG and IMU between programs.

`lsl:NAME` (the stream's name) or `lsl:type=EMG` (or `lsl:name=...`, `lsl:source_id=...`), with `timeout=S` for
resolving (default 5 s): `lsl:MyArmband?timeout=30`, `lsl:type=EMG&timeout=30`. The stream's nominal rate and
channel count make the HELLO (an irregular stream, rate 0, is refused: windows need a rate). Samples are placed by
their LSL timestamps (the sender's clock), so samples the network lost leave a gap; a stream that vanishes is
resolved again every second and what it sends then starts a new epoch. Needs `pip install pylsl`
(tinynas[sensors]).
"""

from __future__ import annotations

import os
import platform
import urllib.parse
from typing import Any

import numpy as np

from firmware_bridge.link import Link, LinkError, PolledLink
from firmware_bridge.protocol import Hello

SCHEME = "lsl:"
POLL_SECONDS = 0.02
RETRY_SECONDS = 1.0
JITTER_SECONDS = 0.05
"""How far a timestamp may stray from its sample's place before it is a gap (a sender's push jitter and clock): a
loss shorter than this is not seen (the samples after it follow on), the price of not cutting windows at every
late push."""
_PROPERTIES = ("name", "type", "source_id")


def import_pylsl(what: str):
    """pylsl, or one line: not installed, or installed without liblsl (PyPI's pylsl bundles liblsl for x86_64 Linux,
    Windows and macOS; on a Raspberry Pi it is installed apart)."""
    try:
        import pylsl
    except ImportError:
        raise LinkError(f"{what}: pylsl is not installed: pip install pylsl (or tinynas[sensors])") from None
    except RuntimeError:  # pylsl's "LSL binary library file was not found"
        raise LinkError(f"{what}: pylsl finds no liblsl on this {platform.machine()} machine: install liblsl (a "
                        f"release package of github.com/sccn/liblsl, or built from source) and point PYLSL_LIB at "
                        f"it") from None
    if not os.environ.get("LSLAPICFG"):  # a user's own liblsl configuration wins
        try:  # liblsl's INFO lines on stderr would break the one-line rule: its errors only (before any LSL call)
            pylsl.set_config_content("[log]\nlevel = -2\n")
        except Exception:  # noqa: BLE001 - a liblsl older than 1.16 has no such call; its lines stay
            pass
    return pylsl


def is_lsl_url(url: str) -> bool:
    return url.startswith(SCHEME)


class LslLink(PolledLink):
    """Samples of an LSL stream resolved by name or type; the same interface as the framed Link."""

    what = "an LSL stream"

    def __init__(self, url: str, **kwargs) -> None:
        import_pylsl(url)
        head, _, options = url[len(SCHEME):].partition("?")
        query = dict(urllib.parse.parse_qsl(head)) if "=" in head else {"name": head}
        query.update(urllib.parse.parse_qsl(options))
        try:
            self.resolve_seconds = float(query.pop("timeout", 5.0))
        except ValueError:
            raise LinkError(f"{url}: timeout must be seconds") from None
        if len(query) != 1 or next(iter(query)) not in _PROPERTIES or not next(iter(query.values())):
            raise LinkError(f"{url}: give one of {', '.join(_PROPERTIES)}, e.g. lsl:type=EMG or lsl:MyArmband")
        super().__init__(url, **kwargs)
        self.property, self.value = next(iter(query.items()))
        self._inlet: Any = None
        self._last_stamp: float | None = None
        self._index = 0

    def _resolve(self, timeout: float) -> Any:
        import pylsl

        found = pylsl.resolve_byprop(self.property, self.value, 1, timeout)
        if not found:
            return None
        inlet = pylsl.StreamInlet(found[0], max_buflen=30, recover=False)
        inlet.open_stream(timeout=timeout)
        return inlet

    def open(self) -> Link:
        inlet = self._resolve(self.resolve_seconds)
        if inlet is None:
            raise LinkError(f"cannot open {self.url}: no LSL stream with {self.property} {self.value!r} within "
                            f"{self.resolve_seconds:g} s (is its outlet running, on this network?)")
        info = inlet.info()
        rate, channels = float(info.nominal_srate()), int(info.channel_count())
        if rate <= 0 or not 1 <= channels <= 255:
            inlet.close_stream()
            raise LinkError(f"{self.url}: the stream has {channels} channels at a nominal rate of {rate:g} Hz: an "
                            f"irregular stream (rate 0) cannot be cut into windows")
        self._inlet = inlet
        self._announce(Hello(f"lsl:{info.name()}", f"lsl {info.type()}", channels, rate, "float32"))
        return self

    def _release(self) -> None:
        if self._inlet is not None:
            try:
                self._inlet.close_stream()
            except Exception:  # noqa: BLE001 - already gone
                pass

    def _poll_loop(self) -> None:
        assert self.hello is not None  # open() said it
        rate = self.hello.sample_rate_hz
        while not self._closing.wait(POLL_SECONDS):
            if self._inlet is None:
                self._again()
                continue
            try:
                chunk, stamps = self._inlet.pull_chunk(timeout=0.0)
            except Exception:  # noqa: BLE001 - pylsl's LostError (pylsl.util in 1.18), or the library failing
                self.connected.clear()
                self.problem = f"the stream {self.value!r} vanished; looking for it again every {RETRY_SECONDS:g} s"
                self._inlet = None
                continue
            if not stamps:
                continue
            data = np.asarray(chunk, dtype=np.float32).reshape(len(stamps), -1)
            if data.shape[1] != self.hello.channels:
                self.counters.foreign_samples += len(data)
                continue
            indices = self._place(np.asarray(stamps, dtype=np.float64), rate)
            self._deliver(indices, data)

    def _place(self, times: np.ndarray, rate: float) -> np.ndarray:
        """Each sample's index on the timeline from its timestamp. Senders stamp when they push (a chunk late by
        what their program was busy with) and their clocks run a little fast or slow of the nominal rate: only a
        step between two samples' stamps of more than JITTER_SECONDS beyond the nominal one is a gap (samples never
        sent); a shorter or earlier step is the next index."""
        previous = times[0] - 1 / rate if self._last_stamp is None else self._last_stamp
        missing = np.rint(np.diff(times, prepend=previous) * rate).astype(np.int64) - 1
        missing[missing <= max(2, round(JITTER_SECONDS * rate))] = 0
        indices = self._index + np.arange(len(times)) + np.cumsum(missing)
        self._last_stamp, self._index = float(times[-1]), int(indices[-1]) + 1
        return indices

    def _again(self) -> None:
        if self._closing.wait(RETRY_SECONDS):
            return
        inlet = self._resolve(RETRY_SECONDS)
        if inlet is None:
            return
        self._inlet = inlet
        self._index, self._last_stamp = 0, None  # its samples start again: a new epoch on the timeline
        self.problem = ""
        self.counters.reconnects += 1
        self.connected.set()
