"""The options of a port URL (`csv:PORT?rate=200`, `lsl:NAME?timeout=30`, `brainflow:cyton?ip_port=6677`) and their
ranges: the one table the three links check against, and the numbers a device's own description must stay within.

A value out of its range is refused in one line naming the option and the range (NaN, infinity, 1e308, a negative
timeout, a fraction where a count is wanted), before any port is opened or any library waits: a negative LSL
timeout was liblsl's "wait for ever", and a port number past 65535 reached BrainFlow's C++ as it was. The
command line's own options are tinynas/options.py's RANGES; the bridge never imports tinynas, so a port URL's
ranges live here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from firmware_bridge.link import FLOAT32_MAX, LinkError

__all__ = ["FLOAT32_MAX", "MAX_CHANNELS", "MAX_RATE_HZ", "URL_RANGES", "Bound", "option"]

MAX_RATE_HZ = 100_000.0
"""The fastest sample rate a link takes (stated for plain text, or a stream's own nominal rate): above any sEMG or
vibration front-end on a serial port; a larger figure is a typo or a damaged description."""
MAX_CHANNELS = 255
"""The protocol's channel count is one byte (PROTOCOL.md), whatever the source."""


@dataclass(frozen=True)
class Bound:
    """The values one URL option may take: `low` to `high`, whole numbers only or any finite number."""

    low: float
    high: float
    whole: bool = False
    low_open: bool = False
    unit: str = ""

    def words(self) -> str:
        """The range as the error line says it ("an integer from 1 to 255", "seconds above 0 and at most 600")."""
        unit = f" {self.unit}" if self.unit else ""
        if self.whole:
            return f"an integer from {int(self.low)} to {int(self.high)}{unit}"
        if self.low_open:
            return f"a number{unit} above {self.low:g} and at most {self.high:g}"
        return f"a number{unit} from {self.low:g} to {self.high:g}"

    def parse(self, url: str, option: str, text: str) -> float | int:
        """The value of `option` written `text` in `url`, or LinkError in one line naming the option and range."""
        try:
            value: float | int = int(text) if self.whole else float(text)
        except ValueError:
            value = math.nan  # "fast", "2.5" for a count, "1e3" for a count: refused below in the same words
        inside = (math.isfinite(value) and (value > self.low if self.low_open else value >= self.low)
                  and value <= self.high)
        if not inside:
            shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
            raise LinkError(f"{url}: {option} must be {self.words()}, got {shown!r}")
        return value


URL_RANGES: dict[str, dict[str, Bound]] = {
    # csv:PORT?rate=HZ&channels=N&baud=B (text_link.py); baud as the service config's `baudrate`.
    "csv": {"rate": Bound(0.0, MAX_RATE_HZ, low_open=True, unit="of samples a second"),
            "channels": Bound(1, MAX_CHANNELS, whole=True),
            "baud": Bound(1, 100_000_000, whole=True)},
    # lsl:NAME?timeout=S (lsl_link.py): how long opening waits for the stream; never "for ever".
    "lsl": {"timeout": Bound(0.0, 600.0, low_open=True, unit="of seconds")},
    # brainflow:BOARD?... (brainflow_link.py): BrainFlowInputParams' numeric fields, which BrainFlow's C++ takes as
    # they come. `master_board` is a board's name or number, checked as the board itself is.
    "brainflow": {"timeout": Bound(0, 600, whole=True, unit="(seconds)"),
                  "ip_port": Bound(0, 65_535, whole=True),
                  "ip_protocol": Bound(0, 2, whole=True, unit="(0 none, 1 UDP, 2 TCP)")},
}
"""Every numeric option of a port URL, by scheme, and its range."""


def option(url: str, scheme: str, name: str, text: str) -> float | int:
    """`text`, the value of option `name` of a `scheme` URL, checked against URL_RANGES."""
    return URL_RANGES[scheme][name].parse(url, name, text)
