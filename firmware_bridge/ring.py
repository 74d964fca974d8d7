"""The last seconds of a live sample stream, indexed by the device's sample counter."""

from __future__ import annotations

import threading

import numpy as np

from firmware_bridge.protocol import Samples


class SampleRing:
    """Holds the newest `capacity` samples; knows which were received (link gaps are holes)."""

    def __init__(self, channels: int, capacity: int) -> None:
        self.capacity = max(1, capacity)
        self._data = np.zeros((self.capacity, channels), dtype=np.float32)
        self._received = np.zeros(self.capacity, dtype=bool)
        self.latest_sample = 0  # one past the newest sample received
        self._lock = threading.Lock()

    @property
    def channels(self) -> int:
        """Channels of each sample held."""
        return int(self._data.shape[1])

    def add(self, message: Samples) -> None:
        """Store a SAMPLES block (older than the ring or not, in any order)."""
        count = len(message.data)
        with self._lock:
            if message.first_sample > self.latest_sample:
                missing = min(message.first_sample - self.latest_sample, self.capacity)
                self._received[(self.latest_sample + np.arange(missing)) % self.capacity] = False
            index = (message.first_sample + np.arange(count)) % self.capacity
            self._data[index] = message.data
            self._received[index] = True
            self.latest_sample = max(self.latest_sample, message.first_sample + count)

    def recent(self, length: int) -> tuple[int, np.ndarray, np.ndarray]:
        """The newest `length` samples, oldest first, whatever arrived: (latest_sample, data, received mask).

        For showing the signal (the status page's trace), where a link gap is a hole, not a reason to show nothing.
        """
        with self._lock:
            length = max(0, min(length, self.capacity, self.latest_sample))
            index = (self.latest_sample - length + np.arange(length)) % self.capacity
            return self.latest_sample, self._data[index].copy(), self._received[index].copy()

    def window(self, start: int, length: int) -> np.ndarray | None:
        """Samples [start, start + length), or None if any is missing or already overwritten."""
        with self._lock:
            if start < 0 or start + length > self.latest_sample or start < self.latest_sample - self.capacity:
                return None
            index = (start + np.arange(length)) % self.capacity
            if not self._received[index].all():
                return None
            return self._data[index].copy()
