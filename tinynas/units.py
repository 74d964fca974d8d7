"""Durations and sizes as people write them ("90s", "1h30m", "6KiB", "1.14M"), read in one place.

Every flag, config key and board file that takes a duration, a byte size or a count goes through these
parsers, so "30m" means the same on the command line, in `tinynas.toml` and in a board file, and a typo
gets the same one-line error everywhere.
"""

from __future__ import annotations

import math
import re

from tinynas.errors import UsageError

MAX_SIZE_BYTES = 1 << 40
"""Largest RAM or flash budget read from a flag or file (1 TiB): larger values are typos, and
would overflow the journal's 64-bit integers a few digits later."""
MAX_COUNT = 10**15
"""Largest MAC budget read (10^15): far above any microcontroller's."""


class UnitError(UsageError):
    """A duration, size or count that cannot be read, or is out of range."""


def echoed(text: object, limit: int = 40) -> str:
    """What the user typed, quoted for a one-line message, cut to `limit` characters; a whole number of more
    than 20 digits is said by its length (never converted to float, which a 400-digit integer overflows)."""
    if isinstance(text, int) and not isinstance(text, bool):
        try:
            digits = str(text)
        except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
            return "a number of thousands of digits"
        count = len(digits.lstrip("-"))
        return digits if count <= 20 else f"a {count}-digit number"
    shown = repr(text.strip() if isinstance(text, str) else text)
    if len(shown) <= limit:
        return shown
    quote = shown[0] if shown[0] in "'\"" else ""
    return f"{shown[:limit - 4]}...{quote} ({len(str(text))} characters)"


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)(i?b?)\s*$", re.IGNORECASE)
_COUNT = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmg]?)\s*$", re.IGNORECASE)


def parse_duration(text: str | float | int) -> float:
    """'90s', '30m', '1h30m', '2h' or plain seconds -> seconds (above zero)."""
    if isinstance(text, (int, float)):
        seconds = float(text)
    else:
        cleaned = str(text).strip().lower()
        parts = _DURATION.fullmatch(cleaned)
        if not cleaned or parts is None:
            raise UnitError(f"cannot read duration {echoed(text)}: use e.g. 90s, 30m, 1h30m")
        hours, minutes, secs = (float(p) if p else 0.0 for p in parts.groups())
        seconds = hours * 3600 + minutes * 60 + secs
    if not seconds > 0:
        raise UnitError(f"the time budget must be positive, got {echoed(text)}")
    if not math.isfinite(seconds):
        raise UnitError(f"duration {echoed(text)} is beyond any time budget: use e.g. 90s, 30m, 1h30m")
    return seconds


MAX_LATENCY_SECONDS = 3600.0
"""A time per inference above an hour is a typo (a search budget given as --latency)."""
_LATENCY = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(ms|s|us|µs)?\s*$", re.IGNORECASE)


def parse_latency(text: str | float | int) -> float:
    """A time per inference: '250ms', '0.25s', '1500us' or plain seconds -> seconds, above 0 and at most an hour;
    one line (UnitError) for anything else (0, negative, NaN, 10^400, words)."""
    if isinstance(text, bool):
        raise UnitError(f"cannot read time per inference {echoed(text)}: use e.g. 250ms, 0.5s")
    if isinstance(text, (int, float)):
        seconds = float(text) if not isinstance(text, int) or abs(text) < 10**20 else math.inf
    else:
        match = _LATENCY.match(str(text))
        if match is None:
            raise UnitError(f"cannot read time per inference {echoed(text)}: use e.g. 250ms, 0.5s, 1500us")
        unit = (match.group(2) or "s").lower()
        seconds = float(match.group(1)) * {"ms": 1e-3, "s": 1.0, "us": 1e-6, "µs": 1e-6}[unit]
    if not math.isfinite(seconds) or not 0 < seconds <= MAX_LATENCY_SECONDS:
        raise UnitError(f"time per inference {echoed(text)} must be above 0 and at most an hour "
                        f"(e.g. 250ms, the service's hop)")
    return seconds


def _scaled(text: str | int, what: str, pattern: re.Pattern, scales: dict[str, int], top: int, example: str,
            top_text: str, whole=int) -> int:
    """A number with an optional k/M/G prefix, scaled and made `whole` (sizes truncate, counts round), within
    1..top; one line naming `what` if not."""
    if isinstance(text, int):
        return text
    match = pattern.match(str(text))
    if not match:
        raise UnitError(f"cannot read {what} {echoed(text)}: {example}")
    number = float(match.group(1)) * scales[match.group(2).lower()]  # inf for a number of hundreds of digits
    if not (math.isfinite(number) and 0 < int(whole(number)) <= top):
        raise UnitError(f"{what} {echoed(text)} is out of range: give {top_text}")
    return int(whole(number))


def parse_size(text: str | int, what: str = "size") -> int:
    """Parse '4096', '4k', '4KiB', '1.5M' (binary multiples) into bytes."""
    return _scaled(text, what, _SIZE, {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}, MAX_SIZE_BYTES,
                   "use bytes or a number with k/M (e.g. 4096, 4k, 4KiB)", "between 1 byte and 1 TiB (e.g. 6KiB)")


def parse_count(text: str | int, what: str = "count") -> int:
    """Parse '1060000', '1.06M', '500k' (decimal multiples) into an integer."""
    return _scaled(text, what, _COUNT, {"": 1, "k": 10**3, "m": 10**6, "g": 10**9}, MAX_COUNT,
                   "use a number, optionally with k/M/G", "between 1 and 10^15 (e.g. 1.14M)", whole=round)


def kib(nbytes: int) -> str:
    """Bytes shown to people: KiB with one decimal."""
    return f"{nbytes / 1024:.1f} KiB"
