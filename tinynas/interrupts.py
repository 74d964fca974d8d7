"""How tinynas's processes stop: SIGTERM handled as Ctrl-C, and child processes that die with their parent.

Every long-running command (a search, the device service) already stops cleanly on
KeyboardInterrupt, with its journal and state intact; mapping SIGTERM onto it keeps one stop path.
The processes it starts (search workers, the service's re-wear child) ask the kernel to kill them when their
parent dies, even by SIGKILL, so no orphan keeps training or writing after a crash or a power-cut restart.
"""

from __future__ import annotations

import contextlib
import ctypes
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


def die_with_parent() -> None:
    """Linux: ask the kernel to SIGKILL this process when its parent dies (PR_SET_PDEATHSIG). Called first thing in
    a worker, or as a child's `preexec_fn`; elsewhere (no such libc) a no-op."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
