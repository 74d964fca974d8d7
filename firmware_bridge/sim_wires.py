"""What a simulated front-end speaks, one strategy object per wire (`firmware_bridge.simulator` holds one): tinynas's
frames, a sketch's plain text, an OpenBCI Cyton's packets, an LSL outlet. Each says how a message leaves the device,
what the device does with the host's bytes, what it says when it powers up, and where it is reached; the simulator
keeps the pty, the clock and the damage, and asks its wire the rest."""

from __future__ import annotations

import os

import numpy as np

from firmware_bridge import cyton_wire
from firmware_bridge.protocol import ChipTest, Hello, Ping, Pong, Samples, StreamDecoder, encode_frame

BANNER = b"tinynas simulate: plain-text sensor started\r\n"
"""What the plain-text sketch prints when it starts (a board reset prints it again)."""


class Wire:
    """tinynas's own frames (the base: the other wires say only what they do otherwise)."""

    name = "frames"
    pty = True
    """Reached through a pseudo-terminal (LSL: through the network, by the stream's name)."""
    carries_chip = True
    """Can carry a model's test bytes beside the samples (only tinynas's frames have a message for them)."""

    def __init__(self) -> None:
        self._sequence = 0
        self._from_host = StreamDecoder()

    def check(self, hello: Hello) -> None:
        """ValueError in one line if this wire cannot stream `hello`'s format."""

    def port(self, default: str, hello: Hello) -> str:
        """Where the host reaches the device: the pty's path, as given, for wires on a serial line."""
        return default

    def encode(self, message) -> bytes:
        """The bytes `message` leaves the device as (b"": nothing on this wire)."""
        frame = encode_frame(message, self._sequence)
        self._sequence = (self._sequence + 1) & 0xFFFF
        return frame

    def from_host(self, data: bytes, device) -> bytes:
        """What the device answers the host's `data` with (bytes written back at once); messages to the simulator
        (`device`: PING, a chip's test bytes) handed over as they decode."""
        for _sequence, message in self._from_host.feed(data):
            if isinstance(message, Ping):
                device.send(Pong(message.nonce))
            elif isinstance(message, ChipTest):
                device.to_chip_bytes(message.data)
        return b""

    def powered_up(self) -> bytes:
        """What the device prints when it powers up again (its counters from 0)."""
        self._sequence = 0
        return b""

    def hello(self, hello: Hello, flush: bool) -> tuple[bytes, object | None]:
        """What announces the stream: bytes to write first (a NUL flushes a partial frame the host holds) and a
        message to send (None: this wire describes itself otherwise)."""
        return (b"\x00" if flush else b""), hello


class TextWire(Wire):
    """A sketch printing one line of comma-separated numbers per sample, its banner when it starts."""

    name = "text"
    carries_chip = False

    def encode(self, message) -> bytes:
        if not isinstance(message, Samples):
            return b""
        data = np.asarray(message.data)
        if data.dtype.kind in "iu":
            rows = (",".join(map(str, row)) for row in data.tolist())
        else:  # 9 significant digits: a float32 comes back as itself
            rows = (",".join(f"{value:.9g}" for value in row) for row in data.tolist())
        return ("\r\n".join(rows) + "\r\n").encode()

    def from_host(self, data: bytes, device) -> bytes:
        return b""  # a sketch reads nothing

    def powered_up(self) -> bytes:
        return BANNER

    def hello(self, hello: Hello, flush: bool) -> tuple[bytes, object | None]:
        # A sketch prints its banner when it starts, and says nothing else about itself.
        return (BANNER if flush else b""), None


class CytonWire(Wire):
    """An OpenBCI Cyton: silent until BrainFlow's driver sends its single-letter commands, then 33-byte packets."""

    name = "cyton"
    carries_chip = False

    def __init__(self) -> None:
        super().__init__()
        self._board = cyton_wire.Commands()
        self._packet = 0  # the board's sample counter

    def check(self, hello: Hello) -> None:
        if (hello.channels, hello.sample_rate_hz) != (cyton_wire.CHANNELS, cyton_wire.RATE_HZ):
            raise ValueError(f"a Cyton streams {cyton_wire.CHANNELS} channels at {cyton_wire.RATE_HZ:g} Hz, not "
                             f"{hello.channels} at {hello.sample_rate_hz:g}")

    def encode(self, message) -> bytes:
        if not (isinstance(message, Samples) and self._board.streaming):
            return b""
        frame = cyton_wire.packets(self._packet, message.data)
        self._packet = (self._packet + len(message.data)) % 256
        return frame

    def from_host(self, data: bytes, device) -> bytes:
        return self._board.feed(data)  # answered as the board does

    def powered_up(self) -> bytes:
        self._board, self._packet = cyton_wire.Commands(), 0  # a Cyton powers up silent
        return b""

    def hello(self, hello: Hello, flush: bool) -> tuple[bytes, object | None]:
        return b"", None  # a board that speaks when spoken to


class LslWire(Wire):
    """An LSL outlet: no pty; the stream is found by its name and describes itself (type, channels, rate)."""

    name = "lsl"
    pty = False
    carries_chip = False

    def port(self, default: str, hello: Hello) -> str:
        # The stream's name: the device's and this process's (two simulators on one network).
        return f"lsl:{hello.device_id}-{os.getpid()}"

    def encode(self, message) -> bytes:
        return b""  # samples go into the outlet (`Simulator._push`), not onto a line

    def from_host(self, data: bytes, device) -> bytes:
        return b""

    def hello(self, hello: Hello, flush: bool) -> tuple[bytes, object | None]:
        return b"", None  # a stream described by its outlet


WIRES: dict[str, type[Wire]] = {cls.name: cls for cls in (Wire, TextWire, CytonWire, LslWire)}
"""The wires by name, as `tinynas simulate --wire` takes them."""


def wire_named(name: str) -> Wire:
    """A fresh wire called `name`; ValueError naming the choices for any other."""
    try:
        return WIRES[name]()
    except (KeyError, TypeError):
        raise ValueError(f"wire must be one of {', '.join(WIRES)}, got {name!r}") from None
