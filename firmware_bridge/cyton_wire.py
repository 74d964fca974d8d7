"""What an OpenBCI Cyton board says on its serial port, for the simulator to be one.

The Cyton (8 channels at 250 Hz, an ADS1299 behind a USB radio dongle) is a board people own, and BrainFlow's
own driver (`brainflow:cyton?serial_port=...`) reads it: a simulated person in front of a simulated Cyton on a
pseudo-terminal therefore drives tinynas through BrainFlow's real code, as a user's board would. The board's
documented serial protocol (OpenBCI's "Cyton Data Format"):

- commands are single ASCII characters: `v` soft reset (answers its banner, ending `$$$`), `d` default channel
  settings (answers a line ending `$$$`), `b` start streaming, `s` stop; the rest (channel settings) are taken
  silently here;
- each sample is a 33-byte packet: 0xA0, a sample counter (0-255, wrapping), 8 channels of 24-bit big-endian two's
  complement counts, 6 bytes of accelerometer (zero here: BrainFlow keeps the last non-zero reading), 0xC0.

A count is 4.5 V / (2^23 - 1) / 24 (the default gain), 0.0224 uV, in BrainFlow's EMG channels.
"""

from __future__ import annotations

import numpy as np

CHANNELS = 8
RATE_HZ = 250.0
START, END = 0xA0, 0xC0
PACKET_BYTES = 33
COUNTS_PER_UNIT = 1000
"""Counts per unit of the simulated person's signal (int8-scaled sEMG): a full-scale 127 is 2.8 mV in BrainFlow."""
BANNER = b"OpenBCI V3 8-16 channel\nOn Board ADS1299 Device ID: 0x3E\nLIS3DH Device ID: 0x33\nFirmware: v3.1.2\n$$$"
DEFAULTS = b"updating channel settings to default$$$"
MAX_COUNT = 2 ** 23 - 1


def packets(counter: int, samples: np.ndarray) -> bytes:
    """The packets of `samples` (n, 8) in the person's units, the first numbered `counter` (mod 256)."""
    counts = np.clip(np.rint(np.asarray(samples, dtype=np.float64) * COUNTS_PER_UNIT), -MAX_COUNT, MAX_COUNT)
    counts = counts.astype(np.int64) & 0xFFFFFF
    n = len(counts)
    out = np.zeros((n, PACKET_BYTES), dtype=np.uint8)
    out[:, 0] = START
    out[:, 1] = (counter + np.arange(n)) % 256
    for byte, shift in enumerate((16, 8, 0)):
        out[:, 2 + byte:26:3] = (counts >> shift) & 0xFF
    out[:, 32] = END
    return out.tobytes()


class Commands:
    """The board's side of the commands: what it answers, and whether it streams."""

    def __init__(self) -> None:
        self.streaming = False

    def feed(self, data: bytes) -> bytes:
        """Take the host's bytes; return the board's answers."""
        answer = b""
        for command in data:
            if command == ord("v"):  # a soft reset stops streaming, as on the board
                self.streaming = False
                answer += BANNER
            elif command == ord("d"):
                answer += DEFAULTS
            elif command == ord("b"):
                self.streaming = True
            elif command == ord("s"):
                self.streaming = False
        return answer
