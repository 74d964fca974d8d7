"""The sensor front-end as the service holds it: the link, its HELLO, the live ring; and waiting for it.

Without the device the service does not exit (under systemd's `Restart=` that is a restart loop, and the
person beside the Pi sees nothing): it serves the status page saying which port it waits on and which
serial ports it can see, and tries again every `RETRY_SECONDS` until the sensor is plugged in.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from firmware_bridge.link import Link, LinkError, link_for_url
from firmware_bridge.protocol import Hello
from firmware_bridge.ring import SampleRing

log = logging.getLogger(__name__)

RETRY_SECONDS = 2.0
HELLO_SECONDS = 10.0
"""How long an open port may stay silent before the page says so (the device keeps being listened to)."""
RING_SECONDS = 30.0


@dataclass
class Device:
    """The connected front-end: its link (which reconnects by itself), its HELLO and the live samples."""

    link: Link
    hello: Hello
    ring: SampleRing

    def health(self) -> dict:
        """The link's health plus what the device said it is, JSON-ready."""
        health = self.link.health()
        latest = self.link.latest_hello
        if latest is not None and (latest.channels, latest.sample_rate_hz, latest.sample_format) != (
                self.hello.channels, self.hello.sample_rate_hz, self.hello.sample_format):
            health["problem"] = (f"the device now says {latest.channels} channel(s) at {latest.sample_rate_hz:g} Hz "
                                 f"({latest.sample_format}), not the {self.hello.channels} at "
                                 f"{self.hello.sample_rate_hz:g} Hz it started with: its samples are not used; "
                                 f"restart the service for the new device")
        elif not health["connected"] and not health.get("problem"):  # the link's own words first (lsl_link.py)
            health["problem"] = f"the sensor was unplugged from {self.link.url}: plug it in again (recordings are kept)"
        return health


def visible_ports() -> list[str]:
    """Serial ports this machine has now (stable /dev/serial/by-id names first), for the "plug it in" advice."""
    ports: list[str] = []
    by_id = Path("/dev/serial/by-id")
    try:
        ports += sorted(str(p) for p in by_id.iterdir())
    except OSError:
        pass
    try:
        from serial.tools import list_ports

        ports += sorted(p.device for p in list_ports.comports())
    except Exception:  # noqa: BLE001 - advice only: a platform without the listing just lists none
        pass
    return ports


def waiting_text(port: str, why: str) -> str:
    """What the status page says while the service waits for the device."""
    seen = visible_ports()
    ports = f"serial ports seen: {', '.join(seen)}" if seen else "no serial port is seen"
    return (f"waiting for the sensor on {port}: {why}; plug it in (or set `port` in the config; {ports}); "
            f"trying again every {RETRY_SECONDS:g} s")


def connect(port: str, baudrate: int, stop: threading.Event, on_wait) -> Device | None:
    """The device at `port` once it said HELLO; None if `stop` is set first. `on_wait(text)` is told why not yet
    (and "" once connected)."""
    said = ""
    link_for_url(port, baudrate=baudrate)  # a URL that can never be opened: one line now, never "plug it in" for ever
    while not stop.is_set():
        try:
            link = link_for_url(port, baudrate=baudrate, stop=stop).open()
        except LinkError as exc:
            text = waiting_text(port, "it cannot be opened (" + str(exc).removeprefix(f"cannot open {port}: ") + ")")
            if text != said:
                log.warning("%s", text)
                said = text
            on_wait(text)
            stop.wait(RETRY_SECONDS)
            continue
        waited = 0.0
        while not stop.is_set():
            try:
                hello = link.wait_hello(min(1.0, HELLO_SECONDS))
            except LinkError:
                waited += 1.0
                if link.problem:  # a plain-text device at another rate than stated: said at once
                    text = f"{port}: {link.problem}"
                elif waited >= HELLO_SECONDS:
                    text = (f"{port} is open but the device says nothing (no HELLO for {waited:.0f} s): is it "
                            f"running the tinynas firmware at {baudrate} baud? (a sketch that prints numbers: "
                            f"port = \"csv:{port}?rate=HZ\")")
                else:
                    continue
                if text != said:
                    log.warning("%s", text)
                    said = text
                on_wait(text)
                continue
            on_wait("")
            ring = SampleRing(hello.channels, int(RING_SECONDS * hello.sample_rate_hz))
            return Device(link, hello, ring)
        link.close()
    return None
