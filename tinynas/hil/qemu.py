"""An emulated board for the test firmware: QEMU with the board's UART on a pseudo-terminal.

`-icount shift=0` makes every guest instruction one nanosecond of virtual time, so the firmware's timer counts
instructions, the same on every run and every machine (QEMU models no pipeline: instructions, not cycles). The
UART goes to a pty, which the host opens like the serial port of a real board: the same path runs here and on a
user's desk.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from tinynas.errors import MissingDependencyError, TinynasError
from tinynas.hil.board import Board

START_TIMEOUT_S = 30.0


class QemuMissing(MissingDependencyError):
    """qemu-system-arm is not installed."""


class QemuError(TinynasError, RuntimeError):
    """QEMU did not start the board."""


def qemu_command(board: Board, elf: Path, monitor: Path | None = None) -> list[str]:
    """QEMU for `board` running `elf`; `monitor`: a unix socket for QEMU's monitor (to reset or stop the board)."""
    control = f"unix:{monitor},server=on,wait=off" if monitor is not None else "none"
    return ["qemu-system-arm", "-M", board.qemu_machine, "-nographic", "-monitor", control, "-serial", "pty",
            "-icount", "shift=0", "-kernel", str(elf)]


@contextlib.contextmanager
def emulated(board: Board, elf: Path, monitor: Path | None = None) -> Iterator[str]:
    """Start QEMU for `board` with `elf`; yield the path of the pty its UART is on; stop QEMU when done."""
    if not board.emulated:
        raise QemuError(f"board {board.name} has no emulator (no qemu_machine in its file): flash it and use --port")
    if shutil.which("qemu-system-arm") is None:
        raise QemuMissing("--qemu needs qemu-system-arm, which is not installed: sudo apt-get install qemu-system-arm")
    process = subprocess.Popen(qemu_command(board, elf, monitor), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield _pty_of(process, board)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def _pty_of(process: subprocess.Popen, board: Board) -> str:
    """The pty QEMU says it put the UART on ("char device redirected to /dev/pts/N")."""
    assert process.stdout is not None
    said, deadline = b"", time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([process.stdout], [], [], 0.2)
        if ready:
            chunk = os.read(process.stdout.fileno(), 4096)
            if not chunk:
                break
            said += chunk
            found = re.search(rb"char device redirected to (/dev/pts/\d+)", said)
            if found:
                return found.group(1).decode()
        elif process.poll() is not None:
            break
    words = said.decode("utf-8", "replace").strip().splitlines()
    raise QemuError(f"QEMU did not start board {board.name}: {words[-1] if words else 'no output'}")
