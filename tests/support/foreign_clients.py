"""Front-ends tinynas did not write (issue 68): the wire is formatted here, with nothing of firmware_bridge's writers,
as people's own clients do it. The person in front of them is the product's simulated person (what the signal is);
what reaches the service is theirs.

- `AdcSketch`: an Arduino-style sketch on a serial port printing `analogRead()` values, 0-1023 with the electrodes'
  offset at ~512, comma-separated, CRLF; a banner and a header line when it starts, and again after a reset (the
  cable pulled: USB power lost). Nothing is written while no host reads (a full buffer drops lines, as a USB CDC
  port does), so the sketch never blocks.
- `LslArmband`: a pylsl outlet of type EMG (float32, microvolts, its own name and source_id) and, once the service
  has found it, a second EMG outlet of another device on the same network; a reset destroys the armband's outlet
  and makes a new one (same source_id) a second later.

Both take `source`, the person (firmware_bridge.person.Person: int8 samples as the front-end measured them), and
read it at the true rate, so that the follower's reactions land where the person made them."""

from __future__ import annotations

import errno
import os
import threading
import time
import tty
from pathlib import Path

import numpy as np

ADC_BANNER = b"\r\nMyoWare 4-ch logger v0.3 (analogRead A0-A3, 200 Hz)\r\nA0,A1,A2,A3\r\n"
ADC_OFFSET, ADC_GAIN = 512, 3.0  # an int8 of +-127 is +-381 counts about the electrodes' midpoint


class _Paced:
    """Reads the person at the true rate in blocks; `emit` gets each block (or drops it while unplugged)."""

    def __init__(self, source, rate: float, block: int) -> None:
        self.source, self.rate, self.block = source, rate, block
        self.sample_index = 0
        self._stop = threading.Event()
        self._plugged = threading.Event()
        self._plugged.set()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def unplug(self, seconds: float) -> None:
        """The cable out for `seconds` (samples the person makes meanwhile are lost), then the device restarts."""
        self._plugged.clear()
        threading.Timer(seconds, self._replug).start()

    def _replug(self) -> None:
        self.restart()
        self._plugged.set()

    def restart(self) -> None:  # what the device does when it gets power again
        pass

    def emit(self, samples: np.ndarray) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        started = time.monotonic()
        while not self._stop.is_set():
            due = (time.monotonic() - started) * self.rate
            if self.sample_index + self.block > due:
                time.sleep(min(0.005, (self.sample_index + self.block - due) / self.rate))
                continue
            samples = self.source.read(self.block)
            if self._plugged.is_set():
                self.emit(samples)
            self.sample_index += self.block


class AdcSketch(_Paced):
    """Raw analogRead() lines on a pseudo-terminal linked at `port_dir`/ttyADC (see the module docstring)."""

    def __init__(self, source, rate: float, port_dir: Path, seed: int = 0) -> None:
        super().__init__(source, rate, block=4)
        self.master, slave = os.openpty()
        tty.setraw(slave)  # a USB CDC port: bytes as sent, no newline translation
        os.set_blocking(self.master, False)
        port_dir.mkdir(parents=True, exist_ok=True)
        self.port = str(port_dir / "ttyADC")
        os.symlink(os.ttyname(slave), self.port)
        self._slave = slave  # held open: the pty lives while the sketch does
        self.rng = np.random.default_rng(seed)
        self.dropped_bytes = 0
        self._write(ADC_BANNER)

    def restart(self) -> None:
        self._write(ADC_BANNER)

    def emit(self, samples: np.ndarray) -> None:
        counts = np.clip(np.rint(ADC_OFFSET + ADC_GAIN * samples.astype(np.float64)
                                 + self.rng.normal(0.0, 1.0, samples.shape)), 0, 1023).astype(int)
        self._write("".join(",".join(str(v) for v in row) + "\r\n" for row in counts).encode())

    def _write(self, data: bytes) -> None:
        try:
            os.write(self.master, data)
        except OSError as exc:  # no host reading: the line is lost, the sketch goes on
            if exc.errno not in (errno.EAGAIN, errno.EIO):
                raise
            self.dropped_bytes += len(data)

    def stop(self) -> None:
        super().stop()
        for fd in (self.master, self._slave):
            os.close(fd)


class LslArmband(_Paced):
    """An LSL armband of type EMG and, from `add_decoy()`, a second EMG device (see the module docstring)."""

    NAME, SOURCE_ID = "Armband-7F3A", "armband-7f3a-serial-0042"

    def __init__(self, source, rate: float, channels: int) -> None:
        import pylsl

        super().__init__(source, rate, block=8)
        self.pylsl, self.channels = pylsl, channels
        self.port = "lsl:type=EMG"
        self._lock = threading.Lock()
        self.outlet = self._outlet()
        self.decoy = None
        self._decoy_thread: threading.Thread | None = None

    def _outlet(self):
        info = self.pylsl.StreamInfo(self.NAME, "EMG", self.channels, self.rate, self.pylsl.cf_float32,
                                     self.SOURCE_ID)
        return self.pylsl.StreamOutlet(info)

    def add_decoy(self) -> None:
        """Another person's EMG device starts streaming on the same network."""
        info = self.pylsl.StreamInfo("Lab-EMG-2", "EMG", self.channels, self.rate, self.pylsl.cf_float32,
                                     "lab-emg-2")
        self.decoy = self.pylsl.StreamOutlet(info)
        self._decoy_thread = threading.Thread(target=self._decoy_run, daemon=True)
        self._decoy_thread.start()

    def _decoy_run(self) -> None:
        rng = np.random.default_rng(7)
        while not self._stop.is_set():
            self.decoy.push_chunk((rng.normal(0, 40.0, (8, self.channels))).astype(np.float32).tolist())
            time.sleep(8 / self.rate)

    def unplug(self, seconds: float) -> None:
        with self._lock:
            self._plugged.clear()
            self.outlet = None  # the outlet gone: the app on the armband's phone was closed
        threading.Timer(seconds, self._replug).start()

    def restart(self) -> None:
        with self._lock:
            self.outlet = self._outlet()

    def emit(self, samples: np.ndarray) -> None:
        with self._lock:
            if self.outlet is not None:
                self.outlet.push_chunk((samples.astype(np.float32) * 2.5).tolist())  # int8 counts to microvolts

    def stop(self) -> None:
        super().stop()
        if self._decoy_thread is not None:
            self._decoy_thread.join(5)
        self.outlet = self.decoy = None
