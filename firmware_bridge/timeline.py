"""A sample timeline that only moves forward, across device resets.

A front-end counts its samples from 0 when it powers up, and a USB-powered one powers up again each
time it is replugged. Taken as they come, the counter's values after a reset name samples that were
already recorded: a session reader (later chunks win at the same index) would then read windows
accepted before the replug with signal recorded after it, and live inference, waiting for an index it
has already passed, would freeze. So every consumer sees samples placed on a timeline: the counter's
values plus an offset that changes only when the counter goes back (a new *epoch*), by which the new
epoch starts after everything placed so far, with a gap of `EPOCH_GAP` samples that were never
received. Nothing placed is ever re-indexed, and a window, which must be received whole, never spans
two epochs.
"""

from __future__ import annotations

from dataclasses import dataclass

EPOCH_GAP = 1
"""Unreceived samples between two epochs: one is enough to break every window that would span them."""


@dataclass(frozen=True)
class Placement:
    """Where a block of samples lands on the timeline."""

    first: int          # timeline index of the block's first sample
    epoch: int          # 0 for the first counter run, +1 at each reset
    reset: bool         # this block starts a new epoch (the device's counter went back)
    device_first: int   # the device's own index of the first sample


class Timeline:
    """Places device sample blocks on a forward-only timeline.

    `end` is where the timeline already reaches (0 for a new one; a session's last sample + 1 when a
    recording is resumed): the first block lands at its own index if that is past `end`, else after it.
    """

    def __init__(self, end: int = 0) -> None:
        self.end = max(0, int(end))
        self.epoch = 0
        self._offset: int | None = None
        self._expected: int | None = None  # the device index the next block should start at

    def place(self, device_first: int, count: int) -> Placement:
        """Where the block of `count` samples whose first device index is `device_first` goes."""
        reset = False
        if self._offset is None:
            self._offset = 0 if device_first >= self.end else self.end + EPOCH_GAP - device_first
        elif self._expected is not None and device_first < self._expected:
            # The counter went back: the device restarted. Start after everything placed so far.
            self._offset = self.end + EPOCH_GAP - device_first
            self.epoch += 1
            reset = True
        self._expected = device_first + count
        first = device_first + self._offset
        self.end = max(self.end, first + count)
        return Placement(first, self.epoch, reset, device_first)
