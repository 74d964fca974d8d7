"""The serial frame format between a sensor front-end and the host (pure functions, no I/O).

A frame on the wire is COBS(body) followed by a 0x00 delimiter, where body is

    version u8 | type u8 | sequence u16 | payload length u16 | payload | CRC-32 u32

all little endian; the CRC-32 (IEEE, as zlib.crc32) covers version..payload. COBS removes
every 0x00 from the body, so a receiver resynchronises at the next delimiter after garbage, a
dropped byte or a flipped bit; the CRC and the length field reject the damaged frame; the
sequence number (per sender, wrapping at 65536) reveals frames that never arrived.
See PROTOCOL.md for the messages and byte-level examples.
"""

from __future__ import annotations

import enum
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np

from firmware_bridge.errors import BridgeError

VERSION = 1
DELIMITER = b"\x00"
MAX_PAYLOAD = 4096
_HEAD = struct.Struct("<BBHH")
_CRC = struct.Struct("<I")


class MessageType(enum.IntEnum):
    """Message types (byte 1 of the body)."""

    HELLO = 1
    SAMPLES = 2
    MARK = 3
    PING = 4
    PONG = 5
    ERROR = 6
    TEST = 7


# One table for the wire and the session files: code -> (name, dtype); FORMAT_CODES is its inverse.
FORMAT_BY_CODE: dict[int, tuple[str, np.dtype]] = {
    1: ("int8", np.dtype("<i1")), 2: ("int16", np.dtype("<i2")), 3: ("float32", np.dtype("<f4"))}
FORMAT_CODES = {name: code for code, (name, _) in FORMAT_BY_CODE.items()}

FRAME_SECONDS = 0.02
"""How much signal a SAMPLES frame carries: about 50 frames a second whatever the rate (issue 31: 16-sample frames
at 12 kHz were 750 messages a second, and a loaded host dropped thousands of them)."""
MIN_FRAME_SAMPLES = 16


def frame_samples(sample_rate_hz: float, channels: int, sample_format: str) -> int:
    """Samples per SAMPLES frame for a stream: FRAME_SECONDS of it, at least MIN_FRAME_SAMPLES, within MAX_PAYLOAD."""
    size = next(dtype.itemsize for name, dtype in FORMAT_BY_CODE.values() if name == sample_format)
    room = (MAX_PAYLOAD - 12) // (channels * size)  # the SAMPLES header is 12 bytes
    return max(1, min(room, 0xFFFF, max(MIN_FRAME_SAMPLES, int(round(sample_rate_hz * FRAME_SECONDS)))))


class ProtocolError(BridgeError, ValueError):
    """Bytes or values that do not make a valid frame or message."""


class CrcError(ProtocolError):
    """A frame whose CRC does not match its bytes (noise on the line), counted apart."""


# ---- COBS ----------------------------------------------------------------------------------
def cobs_encode(data: bytes) -> bytes:
    """Consistent Overhead Byte Stuffing: the result holds no 0x00 byte."""
    out = bytearray()
    for block in bytes(data).split(b"\x00"):
        # Blocks longer than 254 bytes are cut into 254-byte runs that carry no implied zero.
        while len(block) >= 254:
            out.append(255)
            out += block[:254]
            block = block[254:]
        out.append(len(block) + 1)
        out += block
    return bytes(out)


def cobs_decode(data: bytes) -> bytes:
    """Inverse of `cobs_encode`; ProtocolError on a malformed encoding."""
    out = bytearray()
    position, size = 0, len(data)
    while position < size:
        code = data[position]
        if code == 0:
            raise ProtocolError("COBS data contains a zero byte")
        end = position + code
        if end > size:
            raise ProtocolError("COBS block runs past the end of the frame")
        out += data[position + 1:end]
        position = end
        if code != 255 and position < size:
            out.append(0)
    return bytes(out)


# ---- messages ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Hello:
    """The device introduces itself: who it is and what its samples look like."""

    device_id: str
    firmware_version: str
    channels: int
    sample_rate_hz: float
    sample_format: str  # int8, int16 or float32, little endian
    capabilities: int = 0
    """What the device does besides streaming: bits of CAPABILITIES (a trailing byte; absent means 0)."""

    @property
    def answers_tests(self) -> bool:
        """Whether the device holds the model and answers the test firmware's commands in TEST messages."""
        return bool(self.capabilities & CAN_TEST)


CAN_TEST = 1
"""HELLO capability bit 0: the front-end also runs a model and answers TEST messages (tinynas.hil's commands)."""


@dataclass(frozen=True)
class Samples:
    """A block of interleaved samples (n, channels) whose first sample has index `first_sample`."""

    first_sample: int
    data: np.ndarray = field(compare=False)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Samples) and self.first_sample == other.first_sample
                and self.data.shape == other.data.shape and np.array_equal(self.data, other.data))


@dataclass(frozen=True)
class Mark:
    """An event at a sample index, e.g. a button press (code) with an optional note."""

    sample_index: int
    code: int
    text: str = ""


@dataclass(frozen=True)
class Ping:
    """Liveness check; the other side answers with a Pong carrying the same nonce."""

    nonce: int


@dataclass(frozen=True)
class Pong:
    """Answer to a Ping."""

    nonce: int


@dataclass(frozen=True)
class Error:
    """The device reports a problem (e.g. ADC overrun)."""

    code: int
    text: str = ""


@dataclass(frozen=True)
class ChipTest:
    """Bytes of the test firmware's command set (`tinynas hil`) tunnelled on the sensor's link: commands from the
    host, answers from a device whose HELLO says CAN_TEST. The bytes are the ones a UART of the test firmware
    carries, so one command parser serves both."""

    data: bytes


Message = Hello | Samples | Mark | Ping | Pong | Error | ChipTest


def _short_text(text: str, what: str) -> bytes:
    raw = text.encode("utf-8")
    if len(raw) > 255:
        raise ProtocolError(f"{what} is longer than 255 bytes")
    return bytes([len(raw)]) + raw


def encode_payload(message: Message) -> tuple[MessageType, bytes]:
    """The message type and payload bytes of `message`; ProtocolError if a value does not fit its field."""
    try:
        return _encode_payload(message)
    except (struct.error, OverflowError, TypeError, UnicodeEncodeError) as exc:
        # A negative index, a nonce past 32 bits, a NaN rate: the field cannot carry it.
        raise ProtocolError(f"cannot encode {type(message).__name__}: {exc}") from None


def _encode_payload(message: Message) -> tuple[MessageType, bytes]:
    if isinstance(message, Hello):
        if message.sample_format not in FORMAT_CODES:
            raise ProtocolError(f"unknown sample format {message.sample_format!r}")
        if not 1 <= message.channels <= 255:
            raise ProtocolError(f"channels must be 1..255, got {message.channels}")
        if not 0 < message.sample_rate_hz * 1000 < 2**32:  # also refuses NaN
            raise ProtocolError(f"sample rate must be above 0 and below 4.29 MHz, got {message.sample_rate_hz}")
        if not 0 <= message.capabilities <= 255:
            raise ProtocolError(f"capabilities must be 0..255, got {message.capabilities}")
        # The capability byte only when there is one: a HELLO without it is byte for byte the one before it.
        return MessageType.HELLO, (_short_text(message.device_id, "device id")
                                   + _short_text(message.firmware_version, "firmware version")
                                   + struct.pack("<BIB", message.channels, round(message.sample_rate_hz * 1000),
                                                 FORMAT_CODES[message.sample_format])
                                   + (bytes([message.capabilities]) if message.capabilities else b""))
    if isinstance(message, Samples):
        data = np.asarray(message.data)
        if data.ndim != 2:
            raise ProtocolError(f"samples must have shape (n, channels), got {data.shape}")
        code = {"int8": 1, "int16": 2, "float32": 3}.get(data.dtype.name)
        if code is None:
            raise ProtocolError(f"samples must be int8, int16 or float32, got {data.dtype}")
        dtype = FORMAT_BY_CODE[code][1]
        return MessageType.SAMPLES, (struct.pack("<QHBB", message.first_sample, data.shape[0], data.shape[1], code)
                                     + np.ascontiguousarray(data, dtype=dtype).tobytes())
    if isinstance(message, Mark):
        return MessageType.MARK, struct.pack("<QH", message.sample_index, message.code) + message.text.encode()
    if isinstance(message, Ping):
        return MessageType.PING, struct.pack("<I", message.nonce)
    if isinstance(message, Pong):
        return MessageType.PONG, struct.pack("<I", message.nonce)
    if isinstance(message, Error):
        return MessageType.ERROR, struct.pack("<H", message.code) + message.text.encode()
    if isinstance(message, ChipTest):
        return MessageType.TEST, bytes(message.data)
    raise ProtocolError(f"not a message: {message!r}")


def decode_payload(kind: int, payload: bytes) -> Message:
    """The message of type `kind` carried by `payload`."""
    try:
        if kind == MessageType.HELLO:
            n = payload[0]
            device = payload[1:1 + n].decode()
            m = payload[1 + n]
            firmware = payload[2 + n:2 + n + m].decode()
            channels, rate_mhz, code = struct.unpack_from("<BIB", payload, 2 + n + m)
            if code not in FORMAT_BY_CODE:
                raise ProtocolError(f"HELLO names unknown sample format code {code}")
            if channels == 0 or rate_mhz == 0:  # what encode refuses: a recorder would divide by them
                raise ProtocolError(f"HELLO with {channels} channels at {rate_mhz} mHz")
            rest = payload[2 + n + m + 6:]  # the capability byte; a later version may add more after it
            return Hello(device, firmware, channels, rate_mhz / 1000, FORMAT_BY_CODE[code][0],
                         rest[0] if rest else 0)
        if kind == MessageType.SAMPLES:
            first, count, channels, code = struct.unpack_from("<QHBB", payload, 0)
            if code not in FORMAT_BY_CODE or channels == 0:
                raise ProtocolError(f"SAMPLES with format code {code} and {channels} channels")
            dtype = FORMAT_BY_CODE[code][1]
            body = payload[12:]
            if len(body) != count * channels * dtype.itemsize:
                raise ProtocolError(f"SAMPLES says {count}x{channels} but carries {len(body)} bytes")
            return Samples(first, np.frombuffer(body, dtype=dtype).reshape(count, channels))
        if kind == MessageType.MARK:
            index, code = struct.unpack_from("<QH", payload, 0)
            return Mark(index, code, payload[10:].decode())
        if kind in (MessageType.PING, MessageType.PONG):
            (nonce,) = struct.unpack("<I", payload)
            return (Ping if kind == MessageType.PING else Pong)(nonce)
        if kind == MessageType.ERROR:
            (code,) = struct.unpack_from("<H", payload, 0)
            return Error(code, payload[2:].decode())
        if kind == MessageType.TEST:
            return ChipTest(bytes(payload))
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"malformed {MessageType(kind).name} payload: {exc}") from None
    raise ProtocolError(f"unknown message type {kind}")


def encode_frame(message: Message, sequence: int) -> bytes:
    """The bytes to send for `message` with sequence number `sequence` (mod 65536), delimiter included."""
    kind, payload = encode_payload(message)
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError(f"payload of {len(payload)} bytes exceeds {MAX_PAYLOAD}")
    body = _HEAD.pack(VERSION, kind, sequence & 0xFFFF, len(payload)) + payload
    return cobs_encode(body + _CRC.pack(zlib.crc32(body))) + DELIMITER


def decode_frame(encoded: bytes) -> tuple[int, Message]:
    """(sequence, message) from one frame's bytes without the delimiter; ProtocolError if damaged."""
    body = cobs_decode(encoded)
    if len(body) < _HEAD.size + _CRC.size:
        raise ProtocolError(f"frame of {len(body)} bytes is too short")
    (crc,) = _CRC.unpack_from(body, len(body) - _CRC.size)
    if zlib.crc32(body[:-_CRC.size]) != crc:
        raise CrcError("bad CRC")
    version, kind, sequence, length = _HEAD.unpack_from(body, 0)
    if version != VERSION:
        raise ProtocolError(f"frame version {version}, expected {VERSION}")
    if length != len(body) - _HEAD.size - _CRC.size:
        raise ProtocolError(f"frame says {length} payload bytes, carries {len(body) - _HEAD.size - _CRC.size}")
    return sequence, decode_payload(kind, body[_HEAD.size:_HEAD.size + length])


@dataclass
class DecoderStats:
    """What a decoder has seen."""

    bytes: int = 0
    frames_ok: int = 0
    bad_crc: int = 0
    bad_frames: int = 0   # COBS, length, version or payload errors
    gaps: int = 0         # frames missing according to sequence numbers
    discarded_bytes: int = 0


class StreamDecoder:
    """Feed it byte chunks of any size; get back (sequence, message) for every intact frame.

    Memory stays bounded by `max_frame_bytes` whatever is fed: a partial frame longer than that
    is dropped as garbage (the decoder restarts at the next byte), and a frame that is too long
    is rejected by its size before it is copied or decoded. Nothing is ever sized from a length
    field; the length field is only compared with what arrived.
    """

    def __init__(self, max_frame_bytes: int = 2 * MAX_PAYLOAD) -> None:
        self.stats = DecoderStats()
        self._buffer = bytearray()
        self._expected: int | None = None
        self._max = max_frame_bytes

    @property
    def buffered(self) -> int:
        """Bytes of a partial frame held until its delimiter arrives (at most max_frame_bytes)."""
        return len(self._buffer)

    def reset_sequence(self) -> None:
        """Forget the expected sequence number (the device restarted, e.g. after a reconnect)."""
        self._expected = None

    def feed(self, data: bytes) -> list[tuple[int, Message]]:
        """Decode every complete frame in `data` (plus what was buffered)."""
        if not isinstance(data, (bytes, bytearray)):
            data = bytes(data)
        self.stats.bytes += len(data)
        out: list[tuple[int, Message]] = []
        start, size = 0, len(data)
        while start < size:
            end = data.find(0, start)
            if end < 0:
                self._keep(data, start, size)
                break
            length = len(self._buffer) + end - start
            if length > self._max:  # too long to be a frame: dropped unread, never copied whole
                self._buffer.clear()
                self.stats.bad_frames += 1
                self.stats.discarded_bytes += length + 1
            elif length:  # (back-to-back delimiters are fine: a sender may lead with one to resync)
                encoded = bytes(self._buffer) + data[start:end] if self._buffer else bytes(data[start:end])
                self._buffer.clear()
                self._decode(encoded, out)
            start = end + 1
        return out

    def _keep(self, data: bytes, start: int, size: int) -> None:
        # A partial frame waits for its delimiter; one that outgrows any frame is garbage (a line
        # stuck high, a wrong baud rate) and is dropped so the next bytes can start a frame.
        if len(self._buffer) + size - start > self._max:
            self.stats.discarded_bytes += len(self._buffer) + size - start
            self.stats.bad_frames += 1
            self._buffer.clear()
        else:
            self._buffer += data[start:size]

    def _decode(self, encoded: bytes, out: list) -> None:
        try:
            sequence, message = decode_frame(encoded)
        except ProtocolError as exc:
            if isinstance(exc, CrcError):
                self.stats.bad_crc += 1
            else:
                self.stats.bad_frames += 1
            self.stats.discarded_bytes += len(encoded) + 1
            return
        if self._expected is not None:
            self.stats.gaps += (sequence - self._expected) & 0xFFFF
        self._expected = (sequence + 1) & 0xFFFF
        self.stats.frames_ok += 1
        out.append((sequence, message))
