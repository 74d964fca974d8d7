"""A virtual front-end speaking the real protocol over a real pseudo-terminal.

The simulator owns a pty pair (`pty.openpty()`); hosts open `simulator.port`, a stable symlink to
the current slave side (like udev's /dev/serial/by-id links), with pySerial as they would a USB
device. It streams samples at their true rate from a `SignalSource`, and can inject faults:
dropped bytes, flipped bits, and an unplug (the pty is closed and a new one appears behind the
same symlink after a pause). A USB-powered front-end loses power with the cable, so by default it comes
back as a device that has just started: its sample counter and sequence numbers restart at 0
(`unplug(seconds, restart=False)` models a self-powered one, whose counter runs on while unplugged).

It also reads what the host sends, as a front-end does: a PING is answered with a PONG, and with a `chip` (a
model's test firmware on a core of its own, e.g. tinynas.hil.chip.EmulatedChip) its HELLO says CAN_TEST and the
bytes of ChipTest messages go to the chip, whose answers come back in ChipTest messages between the samples.
"""

from __future__ import annotations

import logging
import os
import pty
import random
import select
import tempfile
import threading
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from firmware_bridge.link import LinkError
from firmware_bridge.protocol import CAN_TEST, MAX_PAYLOAD, ChipTest, Hello, Mark, Samples, frame_samples
from firmware_bridge.sim_wires import WIRES, Wire, wire_named

log = logging.getLogger(__name__)


class SignalSource(Protocol):
    """Produces the next `count` samples, shape (count, channels), in the stream's dtype."""

    def read(self, count: int) -> np.ndarray: ...


class ArraySource:
    """Plays an array (n, channels) and loops at its end: a replayed recording."""

    def __init__(self, stream: np.ndarray) -> None:
        stream = np.asarray(stream)
        if stream.ndim != 2 or len(stream) == 0:
            raise ValueError(f"a source stream must have shape (n, channels), got {stream.shape}")
        self.stream = stream
        self.position = 0

    def read(self, count: int) -> np.ndarray:
        """The next `count` samples, wrapping around."""
        index = (self.position + np.arange(count)) % len(self.stream)
        self.position = (self.position + count) % len(self.stream)
        return self.stream[index]


def take_queued(queue: list, count: int, samples_read: int, played: list) -> tuple[list[np.ndarray], int]:
    """Up to `count` samples from the head of a queue of (label or None, samples) parts, noting each labelled
    part in `played` as (label, first sample, samples) when it starts; (the parts taken, samples still needed)."""
    parts, needed = [], count
    while needed and queue:
        label, head = queue[0]
        if label is not None:
            played.append((label, samples_read + count - needed, len(head)))
        take = head[:needed]
        parts.append(take)
        needed -= len(take)
        if len(take) == len(head):
            queue.pop(0)
        else:
            queue[0] = (None, head[len(take):])  # the rest of a started part: noted once, when it started
    return parts, needed


class PerformingSource:
    """A simulated user: rest noise until `perform(label)`, then one window of that class.

    `windows` maps each label to windows (n, T, channels) of that class; `rest` is a stream
    played between performances.
    """

    def __init__(self, windows: dict[str, np.ndarray], rest: np.ndarray, seed: int = 0) -> None:
        self.windows = {label: np.asarray(w) for label, w in windows.items()}
        self.rest = ArraySource(rest)
        self._rng = np.random.default_rng(seed)
        self._queue: list[tuple[str | None, np.ndarray]] = []
        self._lock = threading.Lock()
        self.samples_read = 0
        self.performed: list[tuple[str, int]] = []  # (label, window index) in order
        self.played: list[tuple[str, int, int]] = []  # (label, first sample, samples) as streamed

    def perform(self, label: str, delay_samples: int = 0, repeats: int = 1) -> None:
        """Play `repeats` windows of `label` after `delay_samples` of rest."""
        with self._lock:
            if delay_samples:
                self._queue.append((None, self.rest.read(delay_samples)))
            for _ in range(repeats):
                index = int(self._rng.integers(len(self.windows[label])))
                self._queue.append((label, self.windows[label][index]))
                self.performed.append((label, index))

    def read(self, count: int) -> np.ndarray:
        """Queued performance samples first, rest noise after."""
        with self._lock:
            parts, needed = take_queued(self._queue, count, self.samples_read, self.played)
        if needed:
            parts.append(self.rest.read(needed))
        self.samples_read += count
        return np.concatenate(parts).astype(self.rest.stream.dtype, copy=False)


@dataclass
class Faults:
    """Damage to inject on the wire."""

    drop_byte_probability: float = 0.0
    flip_bit_probability: float = 0.0
    seed: int = 0


class Chip(Protocol):
    """A model's test firmware beside the sensor: takes the bytes of commands, hands its answers' bytes to the
    function given to `attach`, and starts again on `reset` (the front-end lost power)."""

    def attach(self, answer: Callable[[bytes], None]) -> None: ...
    def write(self, data: bytes) -> None: ...
    def reset(self) -> None: ...


DEFAULT_PORT_NAME = "ttyTINYNAS0"
"""The port's name in its folder when none is given."""
__all__ = ["DEFAULT_PORT_NAME", "WIRES", "ArraySource", "Chip", "Faults", "SignalSource", "Simulator", "Wire"]


class Simulator:
    """Streams `source` as a front-end would, over a pty reachable at `self.port`, speaking `wire`
    (`firmware_bridge.sim_wires`: tinynas's frames; a sketch's plain text, firmware_bridge.text_link reads it; an
    OpenBCI Cyton's packets, BrainFlow's driver reads them; or an LSL outlet: no pty, `port` is its `lsl:` URL)."""

    def __init__(self, source: SignalSource, hello: Hello, block: int | None = None, faults: Faults | None = None,
                 port_dir: str | os.PathLike | None = None, speed: float = 1.0,
                 hello_interval: float = 1.0, port_name: str = DEFAULT_PORT_NAME, chip: Chip | None = None,
                 wire: str = "frames") -> None:
        self._wire = wire_named(wire)
        if not self._wire.carries_chip and chip is not None:
            raise ValueError(f"a {wire} front-end cannot carry a chip's test bytes: use wire='frames'")
        self._wire.check(hello)
        self.wire = wire
        self._outlet = None
        self.source = source
        self.hello = replace(hello, capabilities=hello.capabilities | CAN_TEST) if chip is not None else hello
        self.chip = chip
        # Samples per frame: as a real front-end batches them (protocol.frame_samples) unless given.
        self.block = block or frame_samples(hello.sample_rate_hz, hello.channels, hello.sample_format)
        self.faults = faults or Faults()
        self.speed = speed
        self.hello_interval = hello_interval
        self._dir = Path(port_dir) if port_dir else Path(tempfile.mkdtemp(prefix="tinynas-sim-"))
        self._dir.mkdir(parents=True, exist_ok=True)
        self.port = self._wire.port(str(self._dir / port_name), hello)
        self._master: int | None = None
        self._target: str | None = None
        """The pty our port link points to (a restarted simulator's link is not ours to remove)."""
        self._slave: int | None = None
        self.sample_index = 0
        self.frames_sent = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._plugged = threading.Event()
        self._write_lock = threading.Lock()
        self._sequence_lock = threading.Lock()
        self._rng = random.Random(self.faults.seed)
        self._hello_pending = False
        self._restart_pending = False
        self.restarts = 0
        self.to_chip = self.from_chip = 0
        """Bytes of ChipTest messages handed to the chip and sent back from it."""
        if chip is not None:
            chip.attach(self._answer_from_chip)

    # ---- the pty ------------------------------------------------------------------------
    def _plug(self) -> None:
        if not self._wire.pty:
            self._outlet = lsl_outlet(self.port[len("lsl:"):], self.hello)
            self._plugged.set()
            return
        master, slave = pty.openpty()
        tty.setraw(slave)  # no line discipline: bytes pass untouched (no CR/LF mangling, no echo)
        tty.setraw(master)
        link = Path(self.port)
        # A hidden name of our own: `with_suffix` would have picked (and deleted) e.g. a user's notes.new.
        temporary = link.with_name(f".{link.name}.{os.getpid()}.tinynas-new")
        temporary.unlink(missing_ok=True)
        self._target = os.ttyname(slave)
        temporary.symlink_to(self._target)
        os.replace(temporary, link)
        self._master, self._slave = master, slave
        self._plugged.set()

    def _unplug_now(self) -> None:
        self._plugged.clear()
        self._outlet = None  # the stream vanishes from the network (liblsl closes it with its last reference)
        for fd in (self._master, self._slave):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        target, self._target = self._target, None
        self._master = self._slave = None
        # Only our own link: another simulator started on the same port meanwhile (a restart) owns it now, and
        # removing it would leave that one streaming into a port nobody can open.
        link = Path(self.port)
        try:
            if target is not None and os.readlink(link) == target:
                link.unlink()
        except (FileNotFoundError, OSError):
            pass

    # ---- streaming ----------------------------------------------------------------------
    def start(self) -> Simulator:
        """Create the pty (or the LSL outlet) and start streaming (HELLO first)."""
        if self._wire.pty:
            _check_port_path(Path(self.port))
        self._plug()
        self._thread = threading.Thread(target=self._run, name="simulator", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop streaming and remove the pty."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._unplug_now()

    def __enter__(self) -> Simulator:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def unplug(self, seconds: float, restart: bool = True) -> None:
        """Simulate pulling the USB cable for `seconds`: the pty disappears, then comes back, the device
        restarted (its counters from 0) unless `restart` is False."""
        with self._write_lock:
            self._unplug_now()
        timer = threading.Timer(seconds, self._replug, args=(restart,))
        timer.daemon = True
        timer.start()

    def _replug(self, restart: bool = True) -> None:
        if restart and self.chip is not None:
            # One power supply: the model's core starts again too, before the sensor is back on the link. Outside
            # the write lock: the chip's boot banner is sent (or dropped, unplugged) by its own thread meanwhile.
            self.chip.reset()
        with self._write_lock:
            if not self._stop.is_set():
                if restart:
                    self._restart_pending = True
                self._plug()
                self._hello_pending = True

    def mark(self, code: int, text: str = "") -> None:
        """Send a MARK at the current sample index (e.g. a button press)."""
        self._send(Mark(self.sample_index, code, text))

    def _write_raw(self, data: bytes) -> None:
        with self._write_lock:
            if self._master is not None:
                try:
                    os.write(self._master, data)
                except OSError:
                    pass

    def _answer_from_chip(self, data: bytes) -> None:
        self.from_chip += len(data)
        for start in range(0, len(data), MAX_PAYLOAD):
            self._send(ChipTest(data[start:start + MAX_PAYLOAD]))

    def _read_host(self) -> None:
        """What the host sent since the last look: PINGs answered, ChipTest bytes to the chip."""
        # Under the write lock: an unplug closes the fd, and a replug may be given the same number for another pty.
        with self._write_lock:
            master = self._master
            try:
                if master is None or not select.select([master], [], [], 0)[0]:
                    return
                data = os.read(master, 4096)
            except (OSError, ValueError):
                return  # unplugged meanwhile
        answer = self._wire.from_host(data, self)
        if answer:
            self._write_raw(answer)

    def send(self, message) -> None:
        """A message from the device (its wire encodes it): the wire's answers, the stream, the chip's bytes."""
        self._send(message)

    def to_chip_bytes(self, data: bytes) -> None:
        """Test bytes the host sent for the model's chip (dropped when there is none)."""
        if self.chip is not None:
            self.to_chip += len(data)
            self.chip.write(data)

    def _send(self, message) -> None:
        with self._sequence_lock:  # the stream and the chip's answers send from two threads
            if not self._wire.pty:
                self._push(message)
                return
            frame = self._wire.encode(message)
            self.frames_sent += 1
            frame = self._damage(frame)
        with self._write_lock:
            if self._master is None:
                return  # unplugged: the bytes go nowhere
            try:
                os.write(self._master, frame)
            except OSError:
                pass

    def _push(self, message) -> None:
        """Samples into the LSL outlet, stamped when pushed (as a sender's program does: LSL's own clock)."""
        outlet = self._outlet
        if outlet is not None and isinstance(message, Samples):
            self.frames_sent += 1
            outlet.push_chunk(np.asarray(message.data, dtype=np.float32))

    def _damage(self, frame: bytes) -> bytes:
        if not (self.faults.drop_byte_probability or self.faults.flip_bit_probability):
            return frame
        out = bytearray()
        for byte in frame:
            roll = self._rng.random()
            if roll < self.faults.drop_byte_probability:
                continue
            if roll < self.faults.drop_byte_probability + self.faults.flip_bit_probability:
                byte ^= 1 << self._rng.randrange(8)
            out.append(byte)
        return bytes(out)

    def _run(self) -> None:
        self._hello_pending = False
        self._send_hello()
        last_hello = started = time.monotonic()
        first = self.sample_index
        rate = self.hello.sample_rate_hz * self.speed
        while not self._stop.is_set():
            self._read_host()
            if self._restart_pending:  # powered up again: counters from 0, the clock from now
                self._restart_pending = False
                self.restarts += 1
                banner = self._wire.powered_up()
                if banner:
                    self._write_raw(banner)
                self.sample_index = first = 0
                started = time.monotonic()
            if self._hello_pending or time.monotonic() - last_hello >= self.hello_interval:
                # Repeated HELLOs let a host that connects mid-stream (or lost one to noise) learn the format.
                self._hello_pending = False
                self._send_hello(flush=False)
                last_hello = time.monotonic()
            due = first + (time.monotonic() - started) * rate
            if self.sample_index + self.block > due:
                time.sleep(min(0.01, (self.sample_index + self.block - due) / rate))
                continue
            samples = self.source.read(self.block)
            # The device keeps sampling while unplugged: those samples are lost, the index runs on.
            if self._plugged.is_set():
                self._send(Samples(self.sample_index, samples))
            self.sample_index += self.block

    def _send_hello(self, flush: bool = True) -> None:
        first, message = self._wire.hello(self.hello, flush)
        if first:
            self._write_raw(first)
        if message is not None:
            self._send(message)


def lsl_outlet(name: str, hello: Hello):
    """An LSL outlet for `hello`'s stream: EMG, its channels and nominal rate, float32 samples."""
    from firmware_bridge.lsl_link import import_pylsl

    pylsl = import_pylsl("an LSL outlet")

    info = pylsl.StreamInfo(name, "EMG", hello.channels, hello.sample_rate_hz, pylsl.cf_float32, name)
    return pylsl.StreamOutlet(info)


def _check_port_path(link: Path) -> None:
    """Refuse a port path that holds anything but an old simulator's link to a pseudo-terminal.

    The simulator replaces its port with a symlink; pointed at a user's file by mistake it must not
    replace that file.
    """
    if link.is_symlink():
        if os.readlink(link).startswith("/dev/"):
            return  # a link left by a simulator that was killed: ours to replace
        raise LinkError(f"{link} is a link to {os.readlink(link)}, not a simulator port: choose another --port")
    if link.exists():
        raise LinkError(f"{link} already exists and is not a simulator port: choose another --port")
    if not link.parent.is_dir():
        raise LinkError(f"cannot create the port {link}: {link.parent} is not a folder")
