"""One progress abstraction: a status line redrawn in place on a terminal, log lines otherwise."""

from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("tinynas.progress")


class Progress:
    """Reports long work: `update(text)` redraws a bar on a TTY; `event(text)` always logs a line."""

    def __init__(self, stream=None, interactive: bool | None = None, width: int = 24) -> None:
        self.stream = stream or sys.stderr
        if interactive is None:
            interactive = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interactive = interactive
        self.width = width
        self._last_line = ""
        self._last_plain = 0.0

    def update(self, fraction: float | None, text: str) -> None:
        """Show progress (`fraction` of the budget, or None) with a short status text."""
        if self.interactive:
            bar = ""
            if fraction is not None:
                filled = int(round(max(0.0, min(1.0, fraction)) * self.width))
                bar = "[" + "#" * filled + "." * (self.width - filled) + "] "
            line = (bar + text)[:160]
            padding = " " * max(0, len(self._last_line) - len(line))
            self.stream.write("\r" + line + padding)
            self.stream.flush()
            self._last_line = line
        elif time.monotonic() - self._last_plain >= 30:
            # Service logs get a status line every 30 s rather than a redraw per tick.
            self._last_plain = time.monotonic()
            log.info("%s", text)

    def event(self, text: str) -> None:
        """Something worth a line of its own (a finished candidate, a new best)."""
        if self.interactive and self._last_line:
            self.stream.write("\r" + " " * len(self._last_line) + "\r")
            self.stream.flush()
            self._last_line = ""
        log.info("%s", text)

    def close(self) -> None:
        """End the status line."""
        if self.interactive and self._last_line:
            self.stream.write("\n")
            self.stream.flush()
            self._last_line = ""
