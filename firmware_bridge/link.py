"""A serial link to a front-end, opened by URL through pySerial, with a reader thread.

`/dev/ttyACM0`, a pseudo-terminal path, `loop://` or `socket://host:port` all work
(`serial.serial_for_url`). The reader thread decodes frames into a bounded queue; when the
device disappears (USB unplugged, the pty closed) it keeps what was already received, reopens
the same URL until the device is back, and waits for its HELLO again. Counters say what
happened on the wire.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import asdict, dataclass
from typing import Protocol, cast

import serial

from firmware_bridge.errors import BridgeError
from firmware_bridge.protocol import Hello, Message, Ping, StreamDecoder, encode_frame

log = logging.getLogger(__name__)


class SerialPort(Protocol):
    """What the link uses of a pySerial port."""

    @property
    def in_waiting(self) -> int: ...
    def read(self, size: int = 1) -> bytes: ...
    def write(self, data: bytes, /) -> int | None: ...
    def close(self) -> None: ...


class LinkError(BridgeError, RuntimeError):
    """The port cannot be opened, or the device never said HELLO."""


@dataclass
class LinkCounters:
    """What the link has seen since it was opened."""

    bytes: int = 0
    frames_ok: int = 0
    bad_crc: int = 0
    bad_frames: int = 0
    gaps: int = 0
    reconnects: int = 0
    queue_drops: int = 0

    def to_dict(self) -> dict:
        """JSON-ready copy."""
        return asdict(self)


class Link:
    """Frames from a device at `url`; `get()` returns decoded messages in arrival order."""

    def __init__(self, url: str, baudrate: int = 1_000_000, queue_size: int = 4096,
                 reconnect: bool = True, read_timeout: float = 0.05) -> None:
        self.url = url
        self.baudrate = baudrate
        self.reconnect = reconnect
        self.read_timeout = read_timeout
        self.counters = LinkCounters()
        self.hello: Hello | None = None
        self.connected = threading.Event()
        self._hello_seen = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._decoder = StreamDecoder()
        self._port: SerialPort | None = None
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._sequence = 0
        self._write_lock = threading.Lock()

    # ---- lifecycle ----------------------------------------------------------------------
    def open(self) -> Link:
        """Open the port (LinkError if it cannot be opened) and start reading."""
        try:
            self._port = self._open_port()
        except (serial.SerialException, OSError, ValueError) as exc:
            raise LinkError(f"cannot open {self.url}: {exc}") from None
        self.connected.set()
        self._thread = threading.Thread(target=self._read_loop, name=f"link {self.url}", daemon=True)
        self._thread.start()
        return self

    def _open_port(self) -> SerialPort:
        port = serial.serial_for_url(self.url, baudrate=self.baudrate, timeout=self.read_timeout)
        # Every URL handler's class has in_waiting; the stubs declare it only on the concrete classes.
        return cast(SerialPort, port)

    def _opened(self) -> SerialPort:
        """The open port; LinkError before open()."""
        if self._port is None:
            raise LinkError(f"{self.url} is not open: call open() first")
        return self._port

    def close(self) -> None:
        """Stop the reader and close the port."""
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._port is not None:
            try:
                self._port.close()
            except Exception:  # closing a vanished device may fail; nothing left to do
                pass
        self.connected.clear()

    def __enter__(self) -> Link:
        return self.open() if self._thread is None else self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---- reading ------------------------------------------------------------------------
    def wait_hello(self, timeout: float = 5.0) -> Hello:
        """The device's HELLO; LinkError if none arrives within `timeout` seconds."""
        if not self._hello_seen.wait(timeout):
            raise LinkError(f"no HELLO from {self.url} within {timeout:g} s: is the device streaming?")
        assert self.hello is not None  # _handle sets it before _hello_seen
        return self.hello

    def get(self, timeout: float | None = None) -> Message | None:
        """The next message (HELLO included), or None after `timeout` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def _read_loop(self) -> None:
        while not self._closing.is_set():
            port = self._opened()  # looked up each time: _reopen replaces it
            try:
                # Block for the first byte (up to read_timeout), then take whatever else has arrived.
                data = port.read(1)
                if data and port.in_waiting:
                    data += port.read(port.in_waiting)
            except (serial.SerialException, OSError) as exc:
                self._lost(exc)
                if not self.reconnect or not self._reopen():
                    return
                continue
            if data:
                self._handle(data)

    def _handle(self, data: bytes) -> None:
        for _sequence, message in self._decoder.feed(data):
            if isinstance(message, Hello):
                self.hello = message
                self._hello_seen.set()
            try:
                self._queue.put_nowait(message)
            except queue.Full:
                # A stalled consumer must not stall the UART: drop the oldest, count it.
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    pass
                self._queue.put_nowait(message)
                self.counters.queue_drops += 1
        stats = self._decoder.stats
        self.counters.bytes = stats.bytes
        self.counters.frames_ok = stats.frames_ok
        self.counters.bad_crc = stats.bad_crc
        self.counters.bad_frames = stats.bad_frames
        self.counters.gaps = stats.gaps

    def _lost(self, exc: Exception) -> None:
        self.connected.clear()
        log.warning("link %s lost: %s", self.url, exc)
        try:
            self._opened().close()
        except Exception:  # the device is already gone
            pass

    def _reopen(self) -> bool:
        while not self._closing.is_set():
            time.sleep(0.2)
            try:
                self._port = self._open_port()
            except (serial.SerialException, OSError, ValueError):
                continue
            # A replugged device restarts its sequence numbers; its sample index tells the gap.
            self._decoder.reset_sequence()
            self.counters.reconnects += 1
            self.connected.set()
            log.info("link %s reconnected", self.url)
            return True
        return False

    # ---- writing ------------------------------------------------------------------------
    def send(self, message: Message) -> None:
        """Send a message to the device (e.g. a Ping)."""
        with self._write_lock:
            port = self._opened()
            frame = encode_frame(message, self._sequence)
            self._sequence = (self._sequence + 1) & 0xFFFF
            try:
                port.write(frame)
            except (serial.SerialException, OSError) as exc:
                raise LinkError(f"cannot write to {self.url}: {exc}") from None

    def ping(self, nonce: int = 0) -> None:
        """Send a Ping (the device answers with a Pong in the message stream)."""
        self.send(Ping(nonce))
