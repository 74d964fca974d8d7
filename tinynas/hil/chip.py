"""A model's test firmware on an emulated core beside a simulated sensor: a front-end that streams and holds the model.

A front-end whose microcontroller also runs the model answers the test firmware's commands on the sensor's own
link (ChipTest messages, HELLO capability CAN_TEST). Here that microcontroller is QEMU running the firmware `tinynas
firmware` built: the simulator (firmware_bridge.simulator) hands it the commands' bytes and sends its UART's bytes
back, so the service's check on the chip meets the real firmware, its real answers, resets and timing.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import serial

from tinynas.hil.build import manifest_board, read_manifest
from tinynas.hil.qemu import QemuError, emulated

RESET_SECONDS = 10.0


class EmulatedChip:
    """QEMU running the firmware in `firmware_dir` (built for an emulated board); use as a context manager."""

    def __init__(self, firmware_dir: str | Path) -> None:
        self.folder = Path(firmware_dir)
        manifest = read_manifest(self.folder)  # one line if it is not a firmware folder
        self.board = manifest_board(self.folder, manifest)  # a board file's board too
        if not (self.folder / "firmware.elf").is_file():
            raise QemuError(f"{self.folder} holds no firmware.elf: build it (tinynas firmware MODEL --board "
                            f"{self.board.name} --out {self.folder})")
        self.model_hash = manifest.get("model_hash", "")
        self._answer: Callable[[bytes], None] = lambda data: None
        self._stack = contextlib.ExitStack()
        self._port: serial.Serial | None = None
        self._scratch: Path | None = None
        self._monitor = Path()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> EmulatedChip:
        # A socket path of its own: a unix socket's path must be short, a firmware folder's need not be.
        self._scratch = Path(tempfile.mkdtemp(prefix="tinynas-chip-"))
        self._monitor = self._scratch / "monitor"
        try:
            pty = self._stack.enter_context(emulated(self.board, self.folder / "firmware.elf", self._monitor))
            self._port = serial.Serial(pty, baudrate=self.board.baud, timeout=0.1)
        except BaseException:
            self._stack.close()
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        self._thread = threading.Thread(target=self._forward, name="emulated chip", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._port is not None:
            self._port.close()
        self._stack.close()
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def attach(self, answer: Callable[[bytes], None]) -> None:
        self._answer = answer

    def write(self, data: bytes) -> None:
        if self._port is not None:
            try:
                self._port.write(data)
            except (OSError, serial.SerialException):
                pass  # QEMU gone: the host hears nothing and says so

    def reset(self) -> None:
        """The core starts again (QEMU's system_reset), as it does when the front-end loses power."""
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as monitor:
            monitor.settimeout(RESET_SECONDS)
            monitor.connect(str(self._monitor))
            monitor.sendall(b"system_reset\n")
            # Done once the monitor prompts again after the command: the chip has started again before the sensor
            # comes back on the link, as a real front-end's does (one power supply).
            said, deadline = b"", time.monotonic() + RESET_SECONDS
            while said.count(b"(qemu)") < 2 and time.monotonic() < deadline:
                chunk = monitor.recv(4096)
                if not chunk:
                    break
                said += chunk

    def _forward(self) -> None:
        while not self._stop.is_set() and self._port is not None:
            try:
                data = self._port.read(max(1, self._port.in_waiting))
            except (OSError, serial.SerialException):
                return
            if data:
                self._answer(data)
