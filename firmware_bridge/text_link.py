"""A sensor that prints numbers, one line per sample: the most common sensor firmware there is.

`csv:/dev/ttyACM0?rate=200` (also `csv:///dev/...`, and any pySerial URL after `csv:`). Options in the query:
`rate` (Hz, required: a rate measured from arrival times is a check, never the truth), `channels` (default: the
field count of the first lines), `baud` (default 115200). Fields are separated by commas, tabs, semicolons or
spaces (detected); Arduino's Serial Plotter form `name:value` is read too. A first line of names is a header; a
column named t, time, ms, millis, us, micros or timestamp is the device's clock, which then places each sample
(lost lines leave a gap instead of shifting everything after them, and a clock that goes back is a restart).

A column named n, i, sample, count, counter, index, idx or seq is the device's sample counter and places each sample
the same way (a counter that goes back is a restart).

What the framed link guarantees holds here: samples land on the same forward-only timeline (`timeline.py`), a
restart of the device starts a new epoch (a banner line or other text after numbers, a clock or counter that goes
back, or a pause of `PAUSE_SECONDS`), and nothing recorded is re-indexed. Text lines (a banner, a header) are never
samples and never part of the rate. Malformed lines (another field count, text among numbers, a partial or overlong
line) and lines with a number that is no sample (NaN, infinity, beyond float32's range such as 1e400, a clock
running ahead of this machine's) are counted (`counters.bad_lines`) and skipped. No HELLO comes from such a device:
the link makes one once `RATE_SECONDS` of samples have arrived at the stated rate; at a rate off by more than
`RATE_TOLERANCE` it makes none and says so (`problem`), the data forwarder's known failure, never a silently
wrong rate. The silence of a restart is not a rate: the measurement starts again at the restart's first sign (the
pause, the banner, the counter going back).
"""

from __future__ import annotations

import math
import re
import time
import urllib.parse
from collections import deque

import numpy as np

from firmware_bridge.link import Link, LinkError
from firmware_bridge.protocol import Hello
from firmware_bridge.url_options import FLOAT32_MAX, option

SCHEME = "csv:"
RATE_SECONDS = 2.0
"""Seconds of samples the rate is measured over before the link says HELLO (and over which it keeps checking)."""
RATE_TOLERANCE = 0.05
PAUSE_SECONDS = 1.0
"""A silence this long (and at least 50 sample periods) is a restart: what follows starts a new epoch."""
PROBE_LINES = 5
"""Lines read before the channel count is taken from them (when not stated)."""
MAX_LINE = 1024
"""Longer lines are not a sample (a binary stream, a wrong baud rate): counted and skipped."""
TIME_NAMES = {"t": 1e-3, "time": 1e-3, "ms": 1e-3, "millis": 1e-3, "timestamp": 1e-3, "us": 1e-6, "micros": 1e-6}
"""Header names of a clock column and the seconds of one of its units."""
COUNTER_NAMES = ("n", "i", "sample", "count", "counter", "index", "idx", "seq")
"""Header names of a sample counter column (its unit is one sample period)."""
MAX_CLOCK = float(2 ** 53)
"""A clock or counter value beyond this (or below 0) is no clock: float64 holds whole numbers exactly up to here."""
CLOCK_AHEAD_SECONDS = 1.0
"""How far a device's clock may run ahead of this machine's since its first sample (plus 2 % of the time, a cheap
crystal's drift) before its value is taken for a damaged line: a clock cannot get ahead of the time that passed."""
_SEPARATORS = (",", "\t", ";")
_NAMED = re.compile(r"^\s*[A-Za-z_][\w .-]*:\s*")


def is_text_url(url: str) -> bool:
    return url.startswith(SCHEME)


def _fields(line: str) -> list[str]:
    separator = next((s for s in _SEPARATORS if s in line), None)
    parts = line.split(separator) if separator else line.split()
    return [_NAMED.sub("", part).strip() for part in parts]


def _numbers(fields: list[str]) -> list[float] | None:
    """The line's numbers, None for a line of text (a banner, a header, a word among numbers). NaN, infinity and
    1e400 are numbers here (a line of them is a bad sample, never a banner): `_sample_values` refuses them."""
    try:
        return [float(field) for field in fields]
    except ValueError:
        return None


def _sample_values(values: list[float]) -> bool:
    """Whether every value can be a sample: finite and within float32 (the timeline's samples)."""
    return all(math.isfinite(v) and abs(v) <= FLOAT32_MAX for v in values)


class TextLink(Link):
    """Samples from a device printing one line of numbers per sample; the same interface as the framed Link."""

    def __init__(self, url: str, **kwargs) -> None:
        parts = urllib.parse.urlsplit(url[len(SCHEME):])
        query = dict(urllib.parse.parse_qsl(parts.query))
        device = urllib.parse.urlunsplit(parts._replace(query="")) if parts.scheme else parts.path
        unknown = set(query) - {"rate", "channels", "baud"}
        if unknown:
            raise LinkError(f"{url}: unknown option {sorted(unknown)[0]!r} (rate, channels, baud)")
        if "rate" not in query:
            raise LinkError(f"{url}: say the rate the device prints at, e.g. {SCHEME}{device}?rate=200 (a rate "
                            f"measured from arrival times is only checked against it)")
        self.stated_rate = float(option(url, "csv", "rate", query["rate"]))
        self.stated_channels = int(option(url, "csv", "channels", query["channels"])) if "channels" in query else None
        # A sketch's Serial.begin(115200), whatever the framed link's.
        baud = int(option(url, "csv", "baud", query.get("baud", "115200")))
        if not device:
            raise LinkError(f"{url}: name the serial port, e.g. {SCHEME}/dev/ttyACM0?rate=200")
        super().__init__(url, baudrate=baud, **kwargs)
        self.device = device
        self._pending = b""
        self._channels: int | None = self.stated_channels
        self._clock: tuple[int, float] | None = None  # (column, seconds per unit) of a clock column
        self._header_done = False
        self._probe: list[list[float]] = []
        self._index = 0                     # the device's sample count in this epoch (or its clock's)
        self._first_time: float | None = None
        self._first_arrival = 0.0           # when the sample at _first_time arrived (this machine's clock)
        self._last_arrival: float | None = None
        self._restart = False
        self._held: list[tuple[np.ndarray, np.ndarray]] = []  # samples before the HELLO: (indices, values)
        self._rates: deque[tuple[float, int]] = deque()  # (arrival time, samples) for the rate check

    def _open_port(self):
        import serial

        return serial.serial_for_url(self.device, baudrate=self.baudrate, timeout=self.read_timeout)

    def _reconnected(self) -> None:
        self._pending = b""
        self._restart = True  # a replugged sketch starts again (a USB-powered board powers up)

    # ---- lines ----------------------------------------------------------------------------
    def _handle(self, data: bytes) -> None:
        now = time.monotonic()
        self.counters.bytes += len(data)
        if self._last_arrival is not None and now - self._last_arrival > max(PAUSE_SECONDS,
                                                                             50 / self.stated_rate):
            self._restarting()  # a silence as long as a reset takes: what follows may count from 0 again
        self._last_arrival = now
        self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        if len(self._pending) > MAX_LINE:
            self.counters.bad_lines += 1
            self._pending = b""
        block: list[tuple[int, list[float]]] = []
        for raw in lines:
            for values in self._samples(raw):
                if self._restart:
                    self._restart = False
                    self._flush(block, now)
                    block = []
                    self._index, self._first_time = 0, None
                    self._rates.clear()  # the silence of a restart is not the rate: measured again from here
                index = self._next_index(values, now)
                if index is None:  # a clock value no clock can have: a damaged line
                    self.counters.bad_lines += 1
                    continue
                if block and index <= block[-1][0]:  # the counter went back within this read: a restart
                    self._flush(block, now)
                    block = []
                block.append((index, values))
        self._flush(block, now)
        self._check_rate(now)

    def _samples(self, raw: bytes) -> list[list[float]]:
        """The samples one line completes: none (a header, a banner, a malformed line: counted), the line's, or,
        once the channel count is known from the first lines, those lines' too."""
        if len(raw) > MAX_LINE:
            self.counters.bad_lines += 1
            return []
        line = raw.decode("utf-8", "replace").strip().strip("\x00")
        if not line:
            return []
        fields = _fields(line)
        values = _numbers(fields)
        if values is None:
            if not self._header_done:
                clock = next(((i, unit) for i, name in enumerate(fields) if (unit := self._unit(name)) is not None),
                             None)
                # A header after a restart may not change the layout the HELLO said (one whose clock column was
                # missed at the start, and so is a channel): it is read only when it keeps the channel count.
                if self._channels is None or len(fields) - (clock is not None) == self._channels:
                    self._clock = clock
                self._header_done = True
            elif all(any(c.isalpha() for c in f) for f in fields if f):
                self._restarting()  # words after numbers: a banner, the device started again
                self._header_done = False
            else:
                self.counters.bad_lines += 1
            return []
        self._header_done = True
        if not _sample_values(values):  # NaN, inf, 1e400: the device sent them, but they are no sample
            self.counters.bad_lines += 1
            return []
        if self._channels is None:
            # The first line may be the tail of one cut when the port opened: the width most of the first lines
            # have is the device's.
            self._probe.append(values)
            if len(self._probe) < PROBE_LINES:
                return []
            widths = [len(v) for v in self._probe]
            self._channels = max(set(widths), key=widths.count) - (1 if self._clock else 0)
            probed, self._probe = self._probe, []
            kept = [v for v in probed if len(v) - (1 if self._clock else 0) == self._channels]
            self.counters.bad_lines += len(probed) - len(kept)
            return kept
        if len(values) - (1 if self._clock else 0) != self._channels:
            self.counters.bad_lines += 1
            return []
        return [values]

    def _unit(self, name: str) -> float | None:
        """Seconds of one unit of a column named `name` when it is the device's clock or sample counter, else None."""
        name = name.strip().lower()
        return TIME_NAMES.get(name, 1 / self.stated_rate if name in COUNTER_NAMES else None)

    def _restarting(self) -> None:
        """A restart's first sign (a pause, a banner): what comes next starts a new epoch, and the rate is measured
        again from its first sample (the silence of a reset is no rate: it once made a 500 Hz sketch "124 samples a
        second" and dropped the next 2 s of its samples)."""
        self._restart = True
        self._rates.clear()

    def _next_index(self, values: list[float], now: float) -> int | None:
        """The device index of a sample: counted, or from the device's clock or counter where it prints one; None
        for a clock value no clock can have (negative, beyond MAX_CLOCK, or ahead of the time that passed)."""
        if self._clock is None:
            index = self._index
        else:
            column, unit = self._clock
            raw = values.pop(column)
            if not 0 <= raw < MAX_CLOCK:
                return None
            seconds = raw * unit
            if self._first_time is not None and seconds - self._first_time > (
                    CLOCK_AHEAD_SECONDS + 1.02 * (now - self._first_arrival)):
                return None
            if self._first_time is None:
                self._first_time, self._first_arrival = seconds, now
            index = int(round((seconds - self._first_time) * self.stated_rate))
            if index < self._index - 1:  # the clock went back: the sketch started again
                self._first_time, self._first_arrival, index = seconds, now, 0
                self._rates.clear()  # its reset's silence is no rate either
            else:
                index = max(index, self._index)  # jitter of the clock never puts two samples at one index
        self._index = index + 1
        return index

    # ---- samples ----------------------------------------------------------------------------
    def _flush(self, block: list[tuple[int, list[float]]], now: float) -> None:
        if not block:
            return
        self._rates.append((now, len(block)))
        if self.problem:  # at a rate not the stated one: never recorded as if it were
            self.counters.foreign_samples += len(block)
            return
        indices = np.array([index for index, _ in block])
        values = np.asarray([row for _, row in block], dtype=np.float32)
        if self.hello is None:
            self._held.append((indices, values))
        else:
            self._deliver(indices, values)

    def _check_rate(self, now: float) -> None:
        while len(self._rates) > 2 and now - self._rates[1][0] >= RATE_SECONDS:
            self._rates.popleft()
        if len(self._rates) < 2 or now - self._rates[0][0] < RATE_SECONDS:
            return
        measured = sum(n for _, n in list(self._rates)[1:]) / (now - self._rates[0][0])
        if abs(measured - self.stated_rate) > RATE_TOLERANCE * self.stated_rate:
            self.problem = (f"the device prints {measured:.1f} samples a second, not the stated {self.stated_rate:g} "
                            f"(rate={self.stated_rate:g}): fix the rate, or the sketch's timing; its samples are not "
                            f"used meanwhile")
            self.counters.foreign_samples += sum(len(values) for _, values in self._held)
            self._held = []
            return
        self.problem = ""
        if self.hello is None and self._channels is not None:
            self.hello = self.latest_hello = Hello(f"text:{self.device}", "plain text", self._channels,
                                                   self.stated_rate, "float32")
            self._put(self.hello)
            self._hello_seen.set()
            held, self._held = self._held, []
            for indices, values in held:
                self._deliver(indices, values)
