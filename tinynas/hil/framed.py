"""The test firmware's commands on the sensor's own framed link: a front-end that also holds the model.

A front-end whose HELLO says CAN_TEST carries the bytes of the test protocol (the MLPerf Tiny command set of
`firmware/hil_main.c`) in ChipTest messages between its samples, so the check needs no second cable and the
samples keep flowing while it runs. `FramedPort` gives those bytes the shape of a serial port, so `HilLink` and
`check_on_board` run unchanged over it.
"""

from __future__ import annotations

from firmware_bridge.link import Link, LinkError
from firmware_bridge.protocol import MAX_PAYLOAD, ChipTest


class FramedPort:
    """The test protocol's bytes in ChipTest messages of an open `Link` (the serial-port calls HilLink makes)."""

    def __init__(self, link: Link) -> None:
        self.link = link
        self.timeout: float = 0.5
        self._held = b""

    @property
    def in_waiting(self) -> int:
        return len(self._held)

    def read(self, size: int = 1) -> bytes:
        if not self._held:
            if not self.link.connected.is_set():
                raise OSError(f"the sensor's link {self.link.url} is not connected")
            self._held = self.link.chip_bytes(self.timeout or 0.0)
        data, self._held = self._held[:size], self._held[size:]
        return data

    def write(self, data: bytes) -> int:
        for start in range(0, len(data), MAX_PAYLOAD):
            try:
                self.link.send(ChipTest(bytes(data[start:start + MAX_PAYLOAD])))
            except LinkError as exc:
                raise OSError(str(exc)) from None
        return len(data)

    def flush(self) -> None:
        """Each write is sent whole at once."""

    def reset_input_buffer(self) -> None:
        self._held = b""
        self.link.forget_chip_bytes()

    def close(self) -> None:
        """The link is the service's: it stays open."""
