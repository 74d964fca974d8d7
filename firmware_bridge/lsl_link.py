"""A Lab Streaming Layer stream as a front-end: how research labs move EMG, EEG and IMU between programs.

`lsl:NAME` (the stream's name) or `lsl:type=EMG` (or `lsl:name=...`, `lsl:source_id=...`), with `timeout=S` for
resolving (default 5 s, at most 600): `lsl:MyArmband?timeout=30`, `lsl:type=EMG&timeout=30`. The stream's nominal
rate and channel count make the HELLO (an irregular stream, rate 0, and a stream of strings are refused: windows
need a rate and numbers). Samples are placed by their LSL timestamps (the sender's clock), so samples the network
lost leave a gap; a sample with a value that is no float32 number is refused (`bad_values`).

The link keeps to the stream it first resolved (its source_id, or its name and host when it has none): a stream
that vanishes is waited for, and only that stream is taken back when it returns (a new epoch); another stream that
answers the same `type=EMG` is never switched to, it is named in the link's `problem` instead, with the URL that
would read it. Every wait in liblsl is cut into slices of `SLICE_SECONDS` (liblsl's own waits cannot be
interrupted): Ctrl-C, SIGTERM, `close()` or the caller's stop event end it within a slice. Needs `pip install
pylsl` (tinynas[sensors]).
"""

from __future__ import annotations

import logging
import math
import os
import platform
import threading
import time
import urllib.parse
from typing import Any

import numpy as np

from firmware_bridge.link import Link, LinkError, PolledLink
from firmware_bridge.protocol import Hello
from firmware_bridge.url_options import MAX_CHANNELS, MAX_RATE_HZ, option

log = logging.getLogger(__name__)

SCHEME = "lsl:"
POLL_SECONDS = 0.02
RETRY_SECONDS = 1.0
SLICE_SECONDS = 0.1
"""The longest single wait handed to liblsl or spent between two looks at it: a stop is heard within this."""
FORGET_SECONDS = 2.0
"""A stream not heard of for this long is no longer listed by the background resolver (liblsl's forget_after)."""
MAX_GAP_SECONDS = 60.0
"""A step between two timestamps longer than this is no gap the network left (a sender whose clock jumped, a damaged
stamp): the count goes on instead of leaving a hole of that size on the timeline."""
STRING_FORMAT = 3
"""liblsl's cf_string: a stream of text, not of samples."""
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


_RESOLVERS: dict[tuple[str, str], Any] = {}
_RESOLVERS_LOCK = threading.Lock()


def resolver(prop: str, value: str) -> Any:
    """liblsl's continuous resolver for streams whose `prop` is `value`, made once per process and kept: it asks the
    network in the background and its results are read without waiting, but destroying one can block for seconds
    (liblsl joins its threads), which a stop or a retry must not wait for. A process holds one per port it opened."""
    import pylsl

    with _RESOLVERS_LOCK:
        if (prop, value) not in _RESOLVERS:
            _RESOLVERS[prop, value] = pylsl.ContinuousResolver(prop=prop, value=value, forget_after=FORGET_SECONDS)
        return _RESOLVERS[prop, value]


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
        timeout = query.pop("timeout", None)
        if len(query) != 1 or next(iter(query)) not in _PROPERTIES or not next(iter(query.values())):
            raise LinkError(f"{url}: give one of {', '.join(_PROPERTIES)}, e.g. lsl:type=EMG or lsl:MyArmband")
        self.resolve_seconds = 5.0 if timeout is None else float(option(url, "lsl", "timeout", timeout))
        super().__init__(url, **kwargs)
        self.property, self.value = next(iter(query.items()))
        self._resolver: Any = None
        self._inlet: Any = None
        self._identity: tuple[str, str, str] | None = None  # (source_id, name, hostname) of the stream first resolved
        self._last_stamp: float | None = None
        self._index = 0

    # ---- which stream ------------------------------------------------------------------------
    def _same(self, info: Any) -> bool:
        """Whether `info` is the stream first resolved: the same source_id, or (without one) name and host."""
        assert self._identity is not None
        source_id, name, host = self._identity
        if source_id:
            return bool(info.source_id() == source_id)
        return bool(info.name() == name and info.hostname() == host)

    def _who(self) -> str:
        assert self._identity is not None
        source_id, name, host = self._identity
        return f"{name!r} on {host}" + (f" (source_id {source_id!r})" if source_id else "")

    @staticmethod
    def _url_of(info: Any) -> str:
        return f"lsl:source_id={info.source_id()}" if info.source_id() else f"lsl:name={info.name()}"

    def _layout(self, info: Any) -> str:
        """What is wrong with `info` as a front-end ("" when nothing is): a rate, channels, a format."""
        rate, channels = float(info.nominal_srate()), int(info.channel_count())
        if info.channel_format() == STRING_FORMAT:
            return "it sends strings, not numbers"
        if not (math.isfinite(rate) and 0 < rate <= MAX_RATE_HZ) or not 1 <= channels <= MAX_CHANNELS:
            return (f"it has {channels} channels at a nominal rate of {rate:g} Hz: an irregular stream (rate 0) "
                    f"cannot be cut into windows (a rate above 0 and at most {MAX_RATE_HZ:g} Hz, 1 to "
                    f"{MAX_CHANNELS} channels)")
        return ""

    # ---- waits, in slices ----------------------------------------------------------------------
    def _stopped(self) -> bool:
        return self._closing.is_set() or (self.stop is not None and self.stop.is_set())

    def _nap(self, seconds: float) -> bool:
        """Wait `seconds` (a signal is heard at once: Event.wait is interruptible); True when the link is stopped."""
        return self._closing.wait(seconds) or self._stopped()

    def _connect(self, info: Any, seconds: float) -> Any:
        """An open inlet to `info` within `seconds` (in slices), or None (stopped, gone, or too slow)."""
        import pylsl

        inlet = pylsl.StreamInlet(info, max_buflen=30, recover=False)
        deadline = time.monotonic() + seconds
        while not self._stopped():
            try:
                inlet.open_stream(timeout=max(0.01, min(SLICE_SECONDS, deadline - time.monotonic())))
                return inlet
            except TimeoutError:
                if time.monotonic() >= deadline:
                    break
            except Exception:  # noqa: BLE001 - LostError: an outlet the resolver still lists, already gone
                break
        try:
            inlet.close_stream()
        except Exception:  # noqa: BLE001 - never opened
            pass
        return None

    # ---- opening -----------------------------------------------------------------------------
    def open(self) -> Link:
        self._resolver = resolver(self.property, self.value)
        deadline = time.monotonic() + self.resolve_seconds
        while True:
            # A readable stream first, where a name or type matches several.
            found = sorted(self._resolver.results(), key=lambda info: bool(self._layout(info)))
            if found:
                break
            if self._nap(SLICE_SECONDS):
                raise LinkError(f"cannot open {self.url}: stopped while looking for the stream")
            if time.monotonic() >= deadline:
                raise LinkError(f"cannot open {self.url}: no LSL stream with {self.property} {self.value!r} within "
                                f"{self.resolve_seconds:g} s (is its outlet running, on this network?)")
        info = found[0]
        wrong = self._layout(info)
        if wrong:
            raise LinkError(f"{self.url}: the stream {info.name()!r} cannot be read: {wrong}")
        self._identity = (info.source_id(), info.name(), info.hostname())
        inlet = self._connect(info, max(SLICE_SECONDS, deadline - time.monotonic()))
        if inlet is None:
            raise LinkError(f"cannot open {self.url}: the stream {self._who()} did not let itself be read within "
                            f"{self.resolve_seconds:g} s")
        if len(found) > 1:
            others = ", ".join(f"{other.name()!r} ({self._url_of(other)})" for other in found[1:3])
            log.warning("%s: %d LSL streams answer %s %r; reading %s, not %s: name one to choose", self.url,
                        len(found), self.property, self.value, self._who(), others)
        self._inlet = inlet
        rate, channels = float(info.nominal_srate()), int(info.channel_count())
        self._announce(Hello(f"lsl:{info.name()}", f"lsl {info.type()}", channels, rate, "float32"))
        return self

    def _release(self) -> None:
        inlet, self._inlet = self._inlet, None
        if inlet is not None:
            try:
                inlet.close_stream()
            except Exception:  # noqa: BLE001 - already gone
                pass

    # ---- reading -----------------------------------------------------------------------------
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
                self.problem = f"the stream {self._who()} vanished; waiting for it to come back"
                self._inlet = None
                continue
            if not stamps:
                continue
            try:
                data = np.asarray(chunk, dtype=np.float64).reshape(len(stamps), -1)
            except (TypeError, ValueError):  # not numbers after all: never a sample, never a dead thread
                self.counters.bad_values += len(stamps)
                continue
            if data.shape[1] != self.hello.channels:
                self.counters.foreign_samples += len(data)
                continue
            indices = self._place(np.asarray(stamps, dtype=np.float64), rate)
            self._deliver(indices, data)

    def _place(self, times: np.ndarray, rate: float) -> np.ndarray:
        """Each sample's index on the timeline from its timestamp. Senders stamp when they push (a chunk late by
        what their program was busy with) and their clocks run a little fast or slow of the nominal rate: only a
        step between two samples' stamps of more than JITTER_SECONDS beyond the nominal one is a gap (samples never
        sent); a shorter or earlier step is the next index, and so is a step no gap can be (not a number, or longer
        than MAX_GAP_SECONDS: a damaged stamp or a sender's clock that jumped)."""
        previous = times[0] - 1 / rate if self._last_stamp is None else self._last_stamp
        with np.errstate(invalid="ignore", over="ignore"):
            steps = np.diff(times, prepend=previous) * rate
        steps = np.where(np.isfinite(steps) & (steps <= MAX_GAP_SECONDS * rate), steps, 1.0)
        missing = np.rint(steps).astype(np.int64) - 1
        missing[missing <= max(2, round(JITTER_SECONDS * rate))] = 0
        indices = self._index + np.arange(len(times)) + np.cumsum(missing)
        last = float(times[-1])
        self._last_stamp = last if math.isfinite(last) else self._last_stamp
        self._index = int(indices[-1]) + 1
        return indices

    def _again(self) -> None:
        """Every RETRY_SECONDS: the stream first resolved, if the network lists it again; never another one."""
        if self._nap(RETRY_SECONDS) or self._resolver is None:
            return
        assert self.hello is not None
        listed = self._resolver.results()
        others = [info for info in listed if not self._same(info)]
        waiting = f"the stream {self._who()} vanished; waiting for it to come back"
        if others:
            other = others[0]
            waiting += (f" (another stream with {self.property} {self.value!r} is there, {other.name()!r} on "
                        f"{other.hostname()}: it is not read in its place; to read it, set the port to "
                        f"{self._url_of(other)})")
        self.problem = waiting
        for info in listed:
            if not self._same(info):
                continue
            if (int(info.channel_count()), float(info.nominal_srate())) != (self.hello.channels,
                                                                           self.hello.sample_rate_hz):
                self.problem = (f"the stream {self._who()} came back with {int(info.channel_count())} channels at "
                                f"{float(info.nominal_srate()):g} Hz, not the {self.hello.channels} at "
                                f"{self.hello.sample_rate_hz:g} Hz it started with: it is not read; restart for "
                                f"the new layout")
                continue
            inlet = self._connect(info, RETRY_SECONDS)
            if inlet is None:
                continue
            self._inlet = inlet
            self._index, self._last_stamp = 0, None  # its samples start again: a new epoch on the timeline
            self.problem = ""
            self.counters.reconnects += 1
            self.connected.set()
            return
