"""The host's side of the test firmware's protocol (the MLPerf Tiny runner's command set; `firmware/hil_main.c`).

A command goes down as ASCII ending in '%'; the device answers lines starting with "m-" (or "e-" for an error) and
ends every answer with "m-ready". Everything that can go wrong on a real link is said in one line: no answer in
time, an answer that is not the protocol (another firmware, a wrong baud rate, noise), an error the device reports,
the device starting again in the middle of a command (a reset, a brown-out, a replug), the port going away.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from tinynas.errors import TinynasError

READY = "m-ready"
BOOT = "m-init-done"
CHUNK_BYTES = 240
"""Bytes per `db` command: 480 hex digits, inside the firmware's 600-character command buffer."""
MAX_STRAY_LINES = 20
"""Lines that are not the protocol tolerated before the device is said not to speak it."""


class DeviceError(TinynasError, RuntimeError):
    """The board did not answer as the test firmware does (the message says how)."""


class DeviceTimeout(DeviceError):
    """No complete answer within the time allowed."""


class DeviceReset(DeviceError):
    """The device started again in the middle of a command."""


class DeviceRefused(DeviceError):
    """The firmware answered with an error (e-[...]): the model failed, or overflowed the stack."""


class NotOurFirmware(DeviceError):
    """The device answers, but not the test protocol."""


@dataclass(frozen=True)
class Profile:
    """What the firmware says about itself (`profile%`)."""

    model_hash: str
    board: str
    counter_kind: str
    counter_hz: int
    input_size: int
    output_size: int
    stack_available: int


@dataclass(frozen=True)
class Inference:
    """One window's counted calls on the device: its int8 outputs, each call's count and the peak stack."""

    outputs: np.ndarray
    counts: tuple[int, ...]
    stack_bytes: int


def shown(line: str) -> str:
    """A line the device sent, for a message: its text, or (mostly not printable) what it looks like."""
    printable = sum(char.isprintable() for char in line)
    if line and printable < 0.8 * len(line):
        return f"{len(line)} bytes of binary data, not text (a sensor's frame stream? a wrong baud rate?)"
    return repr(line[:60])


def _bracketed(lines: list[str], head: str) -> str:
    for line in lines:
        if line.startswith(head + "["):
            return line[len(head) + 1:].rstrip("]")
    raise NotOurFirmware(f"the device's answer has no {head}[...] line: {' | '.join(lines)[:160]}")


class HilLink:
    """Commands to the test firmware over an open serial port (pySerial: a device, a pty, or socket://)."""

    def __init__(self, port, name: str, timeout: float = 30.0, clock=time.monotonic) -> None:
        self.port, self.name, self.timeout, self.clock = port, name, timeout, clock
        self._pending = b""

    def _readline(self, deadline: float, what: str) -> str:
        while b"\n" not in self._pending:
            left = deadline - self.clock()
            if left <= 0:
                raise DeviceTimeout(f"{self.name}: no answer to `{what}` within {self.timeout:g} s (is the test "
                                    f"firmware flashed and running, at the right baud rate?)")
            self.port.timeout = min(left, 0.5)
            try:
                got = self.port.read(max(1, getattr(self.port, "in_waiting", 0) or 1))
            except (OSError, ValueError) as exc:  # pySerial's SerialException is an OSError
                raise DeviceError(f"{self.name}: the port went away during `{what}` ({str(exc)[:80]}): "
                                  f"unplugged?") from None
            self._pending += got
            if len(self._pending) > 1 << 16:
                raise NotOurFirmware(f"{self.name}: 64 KiB without a line end in answer to `{what}`: not the test "
                                     f"firmware's protocol (another firmware, or a wrong baud rate?)")
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("ascii", "replace").strip("\r\x00 ")

    def command(self, text: str, timeout: float | None = None) -> list[str]:
        """Send `text`%; the answer's lines up to m-ready (DeviceError for an e- line)."""
        deadline = self.clock() + (self.timeout if timeout is None else timeout)
        try:
            self.port.write(text.encode("ascii") + b"%")
            self.port.flush()
        except (OSError, ValueError) as exc:
            raise DeviceError(f"{self.name}: the port went away during `{text[:24]}` ({str(exc)[:80]}): "
                              f"unplugged?") from None
        lines, stray = [], 0
        while True:
            line = self._readline(deadline, text[:24])
            if line == READY:
                break
            if line == BOOT:
                raise DeviceReset(f"{self.name}: the device started again during `{text[:24]}` (reset, power or "
                                  f"replug)")
            if line.startswith("e-"):
                raise DeviceRefused(f"{self.name}: the device refused `{text[:24]}`: {line[2:].strip('[]')}")
            if line.startswith("m-"):
                lines.append(line)
            elif line:
                stray += 1
                if stray > MAX_STRAY_LINES:
                    raise NotOurFirmware(f"{self.name}: the device answers, but not in the test protocol "
                                         f"({shown(line)}); flash the firmware of `tinynas firmware`")
        return lines

    def synchronise(self) -> None:
        """Forget whatever the device said before (its boot banner, a half answer, a stale m-ready) and agree where
        answers start: `name%`, and every line up to the firmware's name is left behind."""
        try:
            self.port.reset_input_buffer()
        except (OSError, ValueError) as exc:
            raise DeviceError(f"{self.name}: cannot use the port ({str(exc)[:80]})") from None
        self._pending = b""
        deadline = self.clock() + self.timeout
        self._write_name()
        heard: list[str] = []
        booted = asked_again = False
        while True:
            try:
                line = self._readline(deadline, "name")
            except DeviceTimeout:
                if booted and not asked_again:
                    # It started (again) after our question went down and never answered it: the question was
                    # lost in the reset. Asked again only now: answered, a second question would answer twice.
                    asked_again = True
                    deadline = self.clock() + self.timeout
                    self._write_name()
                    continue
                if heard:
                    raise NotOurFirmware(f"{self.name}: the device is not tinynas's test firmware (it says "
                                         f"{shown(' | '.join(heard))}); flash the firmware of `tinynas firmware`") \
                        from None
                raise
            if line == "m-name-tinynas-hil":
                break
            booted = booted or line == BOOT
            if line and line not in (READY, BOOT):
                heard.append(line)
                if len(heard) > MAX_STRAY_LINES:
                    raise NotOurFirmware(f"{self.name}: the device answers, but not in the test protocol "
                                         f"({shown(heard[0])}); flash the firmware of `tinynas firmware`")
        while self._readline(deadline, "name") != READY:
            pass

    def _write_name(self) -> None:
        try:
            self.port.write(b"%name%")  # the first % ends whatever half command an earlier run left
            self.port.flush()
        except (OSError, ValueError) as exc:
            raise DeviceError(f"{self.name}: cannot write to the port ({str(exc)[:80]}): unplugged?") from None

    def profile(self) -> Profile:
        """What the firmware holds (call `synchronise` first)."""
        lines = self.command("profile")
        try:
            kind, hz = _bracketed(lines, "m-counter-").split(",")
            inputs, outputs = _bracketed(lines, "m-sizes-").split(",")
            return Profile(_bracketed(lines, "m-model-"), _bracketed(lines, "m-board-"), kind, int(hz), int(inputs),
                           int(outputs), int(_bracketed(lines, "m-stack-available-")))
        except ValueError:
            raise NotOurFirmware(f"{self.name}: a profile the host cannot read: {' | '.join(lines)[:160]}") from None

    def load(self, window: np.ndarray) -> None:
        data = np.ascontiguousarray(window, dtype=np.int8).tobytes()
        self.command(f"db load {len(data)}")
        for start in range(0, len(data), CHUNK_BYTES):
            lines = self.command("db " + data[start:start + CHUNK_BYTES].hex())
        if "m-load-done" not in lines:
            raise DeviceError(f"{self.name}: the device did not take the whole window ({len(data)} bytes)")

    def infer(self, window: np.ndarray, runs: int = 1, warmup: int = 0, timeout: float | None = None) -> Inference:
        """Load `window` (int8) and run it `warmup` + `runs` times: the outputs, each counted call, the stack."""
        self.load(window)
        lines = self.command(f"infer {runs} {warmup}", timeout)
        try:
            counts = tuple(int(v) for v in _bracketed(lines, "m-counts-").split(","))
            outputs = np.array([int(v) for v in _bracketed(lines, "m-results-").split(",")], dtype=np.int64)
            stack = int(_bracketed(lines, "m-stack-"))
        except ValueError:
            raise NotOurFirmware(f"{self.name}: an answer the host cannot read: {' | '.join(lines)[:160]}") from None
        if len(counts) != runs or outputs.min(initial=0) < -128 or outputs.max(initial=0) > 127:
            raise NotOurFirmware(f"{self.name}: an answer that does not add up ({len(counts)} counts for {runs} "
                                 f"runs, outputs {outputs.tolist()[:8]})")
        return Inference(outputs.astype(np.int8), counts, stack)
