"""SIGTERM handled as Ctrl-C: systemd and `kill` stop tinynas the way a user's Ctrl-C does.

Every long-running command (a search, the device service) already stops cleanly on
KeyboardInterrupt, with its journal and state intact; mapping SIGTERM onto it keeps one stop path.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def _raise_interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM raises KeyboardInterrupt; the previous handler is restored after."""
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
