"""The host's side of the test firmware's protocol (the MLPerf Tiny runner's command set; `firmware/hil_main.c`).

A command goes down as ASCII ending in '%'; the device answers lines starting with "m-" (or "e-" for an error) and
ends every answer with "m-ready". Everything that can go wrong on a real link is said in one line: no answer in
time, an answer that is not the protocol (another firmware, a wrong baud rate, noise), an error the device reports,
the device starting again in the middle of a command (a reset, a brown-out, a replug), the port going away.

Every number the device sends is checked at this boundary against what the firmware can send (`BoardNonsense`):
outputs are int8 and exactly as many as its profile said, counts and sizes are 32-bit unsigned, the peak stack
within what the board leaves the model. A board that answers otherwise (noise that still looks like the protocol,
another build, a fault) is refused whole: nothing it said is scored or recorded in the card.
"""

from __future__ import annotations

import re
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


class BoardNonsense(NotOurFirmware):
    """The device answered a number the test firmware cannot send (not a number, out of its range, or not as many as
    it said): the whole check is refused, since no answer of such a board can be trusted."""


UINT32_MAX = 2**32 - 1
"""The firmware prints its counts, sizes and stack as uint32_t."""
_INTEGER = re.compile(r"-?[0-9]{1,20}")
"""A number as the firmware prints it (%d / %u): digits, a minus sign at most; nothing int() would also take
("+5", " 5", "1_000", 4,000 digits)."""


def shown_number(text: str) -> str:
    """What the device sent for a number, for a message: itself, or its size when it is long."""
    body = text.strip()
    digits = body.lstrip("-")
    if digits.isdigit() and len(digits) > 20:
        return f"a {len(digits):,}-digit {'negative ' if body.startswith('-') else ''}number"
    return body if _INTEGER.fullmatch(body) else shown(body)


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
        self.outputs: int | None = None
        """Outputs per inference, as the profile said (None until `profile` is read)."""
        self.stack_available: int | None = None
        """Bytes of stack the board leaves the model, as the profile said: the most a peak can be."""

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
        """What the firmware holds (call `synchronise` first); its sizes are then what `infer` holds answers to."""
        lines = self.command("profile")
        try:
            kind, hz = _bracketed(lines, "m-counter-").split(",")
            inputs, outputs = _bracketed(lines, "m-sizes-").split(",")
        except ValueError:
            raise NotOurFirmware(f"{self.name}: a profile the host cannot read: {' | '.join(lines)[:160]}") from None
        profile = Profile(_bracketed(lines, "m-model-"), _bracketed(lines, "m-board-"), kind,
                          self._number(hz, "a counter rate of", 1, UINT32_MAX, "a rate in Hz (1 to 4,294,967,295)"),
                          self._number(inputs, "an input size of", 1, UINT32_MAX, "a size in bytes (1 to "
                                       "4,294,967,295)"),
                          self._number(outputs, "an output count of", 1, UINT32_MAX, "a count of outputs (1 to "
                                       "4,294,967,295)"),
                          self._number(_bracketed(lines, "m-stack-available-"), "an available stack of", 0, UINT32_MAX,
                                       "a size in bytes (0 to 4,294,967,295)"))
        self.outputs, self.stack_available = profile.output_size, profile.stack_available
        return profile

    def _number(self, text: str, what: str, low: int, high: int, expected: str) -> int:
        """`text` as the integer the firmware printed, in [low, high], else BoardNonsense in one line."""
        body = text.strip()
        if _INTEGER.fullmatch(body) is None or not low <= int(body) <= high:
            raise self.nonsense(f"{what} {shown_number(body)}", expected)
        return int(body)

    def nonsense(self, answered: str, expected: str) -> BoardNonsense:
        return BoardNonsense(f"{self.name}: the board answered {answered} which is not {expected}; not recorded")

    def load(self, window: np.ndarray) -> None:
        data = np.ascontiguousarray(window, dtype=np.int8).tobytes()
        self.command(f"db load {len(data)}")
        for start in range(0, len(data), CHUNK_BYTES):
            lines = self.command("db " + data[start:start + CHUNK_BYTES].hex())
        if "m-load-done" not in lines:
            raise DeviceError(f"{self.name}: the device did not take the whole window ({len(data)} bytes)")

    def infer(self, window: np.ndarray, runs: int = 1, warmup: int = 0, timeout: float | None = None) -> Inference:
        """Load `window` (int8) and run it `warmup` + `runs` times: the outputs, each counted call, the stack.

        Every number is checked (`BoardNonsense`): `runs` counts of a 32-bit counter, int8 outputs, as many as the
        profile said (when `profile` was read on this link), a stack within what the board leaves the model."""
        self.load(window)
        lines = self.command(f"infer {runs} {warmup}", timeout)
        counts, outputs = _bracketed(lines, "m-counts-").split(","), _bracketed(lines, "m-results-").split(",")
        stack = _bracketed(lines, "m-stack-")
        if len(counts) != runs:
            raise self.nonsense(f"{len(counts):,} counts", f"one per counted call ({runs} asked for)")
        if self.outputs is not None and len(outputs) != self.outputs:
            raise self.nonsense(f"{len(outputs):,} outputs", f"the {self.outputs} its profile gives (m-sizes)")
        counted = tuple(self._number(value, f"count {i + 1} =", 0, UINT32_MAX,
                                     "a count of its 32-bit counter (0 to 4,294,967,295)")
                        for i, value in enumerate(counts))
        values = [self._number(value, f"output {i + 1} =", -128, 127, "an int8 (-128 to 127)")
                  for i, value in enumerate(outputs)]
        limit = UINT32_MAX if self.stack_available is None else self.stack_available
        peak = self._number(stack, "a peak stack of", 0, limit,
                            f"a stack size (0 to the {limit:,} B " + ("the board leaves the model)"
                                                                      if self.stack_available is not None else
                                                                      "a 32-bit count holds)"))
        return Inference(np.array(values, dtype=np.int8), counted, peak)
