"""A serial link to a front-end, opened by URL through pySerial, with a reader thread.

`/dev/ttyACM0`, a pseudo-terminal path, `loop://` or `socket://host:port` all work
(`serial.serial_for_url`). The reader thread decodes frames into a bounded queue; when the
device disappears (USB unplugged, the pty closed) it keeps what was already received, reopens
the same URL until the device is back, and waits for its HELLO again. Counters say what
happened on the wire, and `health()` how the stream is doing now (samples per second, the age of the
newest sample).

Sample indices are placed on a forward-only timeline (`timeline.py`): a device that restarts (a
USB-powered front-end replugged, a watchdog reset) counts from 0 again, and its samples then get
indices after everything received before, never the indices of samples already seen. Such a restart
is also put in the message stream as a `DeviceReset`, so that a recorder can note it.

A device whose HELLO says it answers tests (`Hello.answers_tests`) sends its answers in ChipTest messages; they go
to a queue of their own (`chip_bytes`), so that the samples' consumer never sees them and a check of the model on
the chip (tinynas.hil) never waits behind samples.
"""

from __future__ import annotations

import importlib
import logging
import queue
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, replace
from typing import Protocol, cast

import numpy as np
import serial

from firmware_bridge.errors import BridgeError
from firmware_bridge.protocol import ChipTest, Hello, Message, Ping, Samples, StreamDecoder, encode_frame
from firmware_bridge.timeline import Timeline

log = logging.getLogger(__name__)

FLOAT32_MAX = float(np.finfo(np.float32).max)
"""Samples are float32 on the timeline: a source's larger value (BrainFlow's and LSL's doubles) is no sample."""


class SerialPort(Protocol):
    """What the link uses of a pySerial port."""

    @property
    def in_waiting(self) -> int: ...
    def read(self, size: int = 1) -> bytes: ...
    def write(self, data: bytes, /) -> int | None: ...
    def close(self) -> None: ...


class LinkError(BridgeError, RuntimeError):
    """The port cannot be opened, or the device never said HELLO."""


@dataclass(frozen=True)
class DeviceReset:
    """Not a wire message: the link's note that the device restarted (its sample counter went back).

    `first_sample` is where the new epoch starts on the link's timeline; `device_first` the device's
    own index there (0 after a power-up)."""

    epoch: int
    first_sample: int
    device_first: int


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
    samples: int = 0          # samples received (per channel)
    lost_samples: int = 0     # samples the device counted but that never arrived (unplugs, lost frames)
    resets: int = 0           # times the device's sample counter went back (it restarted)
    foreign_samples: int = 0  # samples dropped because their channel count is not the HELLO's
    chip_drops: int = 0       # ChipTest answers dropped because nobody was reading them
    bad_lines: int = 0        # plain text (text_link.py): malformed, partial or overlong lines skipped
    bad_values: int = 0       # samples refused for a value that is no sample: NaN, infinity, beyond float32

    def to_dict(self) -> dict:
        """JSON-ready copy."""
        return asdict(self)


class Link:
    """Frames from a device at `url`; `get()` returns decoded messages in arrival order."""

    def __init__(self, url: str, baudrate: int = 1_000_000, queue_size: int = 4096,
                 reconnect: bool = True, read_timeout: float = 0.05, stop: threading.Event | None = None) -> None:
        self.url = url
        self.stop = stop
        """The caller's stop (the service's): a link waiting in a library (lsl_link.py) gives up when it is set."""
        self.baudrate = baudrate
        self.reconnect = reconnect
        self.read_timeout = read_timeout
        self.counters = LinkCounters()
        self.hello: Hello | None = None
        self.latest_hello: Hello | None = None
        self.connected = threading.Event()
        self._hello_seen = threading.Event()
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._chip: queue.Queue = queue.Queue(maxsize=256)
        self._decoder = StreamDecoder()
        self._port: SerialPort | None = None
        self._closing = threading.Event()
        self._thread: threading.Thread | None = None
        self._sequence = 0
        self._write_lock = threading.Lock()
        self.timeline = Timeline()
        self.last_sample_time: float | None = None  # time.time() of the newest samples
        self._arrivals: deque[tuple[float, int]] = deque()  # (monotonic time, samples) of the last seconds
        self.problem = ""
        """What is wrong with the stream now, in one line ("" when nothing is): a plain-text device at another rate
        than stated (text_link.py) says so here, and `wait_hello` and `health` say it."""

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
            if self.problem:
                raise LinkError(f"{self.url}: {self.problem}")
            raise LinkError(f"no HELLO from {self.url} within {timeout:g} s: is the device streaming?")
        assert self.hello is not None  # _handle sets it before _hello_seen
        return self.hello

    def get(self, timeout: float | None = None) -> Message | DeviceReset | None:
        """The next message (HELLO and DeviceReset included), or None after `timeout` seconds."""
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def chip_bytes(self, timeout: float) -> bytes:
        """The next bytes of the device's test answers (ChipTest), b"" after `timeout` seconds."""
        try:
            return self._chip.get(timeout=timeout)
        except queue.Empty:
            return b""

    def forget_chip_bytes(self) -> None:
        """Drop test answers received so far (a check starting again after an interruption)."""
        while True:
            try:
                self._chip.get_nowait()
            except queue.Empty:
                return

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
                if self.hello is None:
                    self.hello = message  # the layout every sample is checked against
                self.latest_hello = message
                self._hello_seen.set()
            elif isinstance(message, Samples):
                if message.data.dtype.kind == "f" and not np.isfinite(message.data).all():
                    # float32 frames carrying NaN or infinity: those samples are refused, a gap on the timeline
                    self._deliver(message.first_sample + np.arange(len(message.data)), message.data)
                    continue
                placed = self._placed(message)
                if placed is not None:
                    self._put(placed)
                continue
            elif isinstance(message, ChipTest):
                try:
                    self._chip.put_nowait(message.data)
                except queue.Full:  # answers nobody asked for (a check that gave up): never block the samples
                    self.counters.chip_drops += 1
                continue
            self._put(message)
        stats = self._decoder.stats
        self.counters.bytes = stats.bytes
        self.counters.frames_ok = stats.frames_ok
        self.counters.bad_crc = stats.bad_crc
        self.counters.bad_frames = stats.bad_frames
        self.counters.gaps = stats.gaps

    def _placed(self, message: Samples) -> Samples | None:
        """`message` at its timeline index (a DeviceReset queued first when the counter went back)."""
        if self.hello is not None and message.data.shape[1] != self.hello.channels:
            # Another channel count than the HELLO's is another device (or firmware): never mixed in.
            self.counters.foreign_samples += len(message.data)
            return None
        expected = self.timeline.end
        placement = self.timeline.place(message.first_sample, len(message.data))
        if placement.reset:
            self.counters.resets += 1
            log.warning("link %s: the device restarted (its sample counter went back to %d); its samples "
                        "continue at %d", self.url, placement.device_first, placement.first)
            self._put(DeviceReset(placement.epoch, placement.first, placement.device_first))
        elif placement.first > expected and self.counters.samples:
            self.counters.lost_samples += placement.first - expected
        count = len(message.data)
        self.counters.samples += count
        now = time.monotonic()
        self.last_sample_time = time.time()
        self._arrivals.append((now, count))
        while self._arrivals and now - self._arrivals[0][0] > 2.0:
            self._arrivals.popleft()
        return replace(message, first_sample=placement.first) if placement.first != message.first_sample else message

    def _deliver(self, indices: np.ndarray, values: np.ndarray) -> None:
        """Samples `values` (n, channels) at the device's increasing sample `indices`: each run of consecutive
        indices placed on the timeline and queued as one Samples (a skipped index is a gap, as a lost frame is).
        A sample with a value that is no float32 number (NaN, infinity, beyond float32's range) is refused and
        counted (`bad_values`): its index is a gap, never a sample passed on."""
        values = np.asarray(values)
        if values.dtype.kind == "f":
            good = (np.abs(values) <= FLOAT32_MAX).all(axis=1)  # False for NaN too
            if not good.all():
                self.counters.bad_values += int(np.count_nonzero(~good))
                indices, values = np.asarray(indices)[good], values[good]
                if not len(indices):
                    return
            values = values.astype(np.float32, copy=False)
        cuts = np.flatnonzero(np.diff(indices) != 1) + 1
        for start, stop in zip(np.concatenate([[0], cuts]), np.concatenate([cuts, [len(indices)]])):
            placed = self._placed(Samples(int(indices[start]), values[start:stop]))
            if placed is not None:
                self._put(placed)

    def _put(self, message) -> None:
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

    def health(self) -> dict:
        """How the stream is doing now, JSON-ready: connected, samples per second over the last 2 s, the age
        of the newest sample (None before any), and the counters."""
        now = time.monotonic()
        arrivals = [(t, n) for t, n in list(self._arrivals) if now - t <= 2.0]
        span = now - arrivals[0][0] if len(arrivals) > 1 else 0.0
        rate = sum(n for _, n in arrivals[1:]) / span if span > 0.2 else 0.0
        age = None if self.last_sample_time is None else max(0.0, time.time() - self.last_sample_time)
        return {"connected": self.connected.is_set(), "samples_per_second": round(rate, 1),
                "last_sample_age_seconds": None if age is None else round(age, 2),
                "last_sample_time": self.last_sample_time, **self.counters.to_dict(),
                **({"problem": self.problem} if self.problem else {})}

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
            self._reconnected()
            self.counters.reconnects += 1
            self.connected.set()
            log.info("link %s reconnected", self.url)
            return True
        return False

    def _reconnected(self) -> None:
        # A replugged device restarts its sequence numbers; its sample index tells the gap.
        self._decoder.reset_sequence()

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


class PolledLink(Link):
    """A source a library reads for us (BrainFlow, LSL) instead of a serial port: `open` says its HELLO and starts
    `_poll_loop`; `close` stops it and `_release`s what the library holds; nothing can be sent to it."""

    what = "this source"

    def _announce(self, hello: Hello) -> None:
        self.hello = self.latest_hello = hello
        self._put(hello)
        self._hello_seen.set()
        self.connected.set()
        self._thread = threading.Thread(target=self._poll_loop, name=f"link {self.url}", daemon=True)
        self._thread.start()

    def _poll_loop(self) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        """Let go of the library's session or stream (it may be gone already)."""

    def close(self) -> None:
        self._closing.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._release()
        self.connected.clear()

    def send(self, message: Message) -> None:
        raise LinkError(f"{self.url}: {self.what} takes no messages")


SCHEMES = {"csv:": ("firmware_bridge.text_link", "TextLink"), "brainflow:": ("firmware_bridge.brainflow_link",
                                                                          "BrainFlowLink"),
           "lsl:": ("firmware_bridge.lsl_link", "LslLink")}
"""A port URL's scheme and the link class that reads it (module, class), as pySerial's `serial_for_url` keeps its
protocol handlers: the module is imported when its scheme is asked for (BrainFlow and pylsl load only then).
Anything else is a serial port speaking tinynas's frames (`Link`)."""


def link_for_url(url: str, baudrate: int = 1_000_000, stop: threading.Event | None = None) -> Link:
    """The link for a port URL, not yet opened: a plain-text device for `csv:...`, a BrainFlow board for
    `brainflow:...`, an LSL stream for `lsl:...`, else tinynas's frames. A URL that can never be opened (an unknown
    option, a value out of its range, an unknown board, a library missing) is a LinkError here already; `stop`, when
    set, ends a wait in a library (resolving an LSL stream)."""
    for scheme, (module, name) in SCHEMES.items():
        if url.startswith(scheme):
            return cast(Link, getattr(importlib.import_module(module), name)(url, stop=stop))
    return Link(url, baudrate=baudrate, stop=stop)
