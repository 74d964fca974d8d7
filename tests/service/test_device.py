"""The service's hold on the sensor (tinynas/service/device.py) with the newer inputs: a port URL that can never be
opened is one line at once (never "plug it in" for ever), a wait in liblsl ends when the service stops, and the
link's own words (which stream it waits for, which other one is there) reach the page."""

import os
import threading
import time

import pytest

from devtools.machine_speed import slowdown
from firmware_bridge.link import LinkError, link_for_url
from firmware_bridge.protocol import Hello
from firmware_bridge.ring import SampleRing
from tinynas.service.device import Device, connect


@pytest.mark.parametrize(("port", "why"), [
    ("brainflow:armband", "BrainFlow knows no board 'armband'"),
    ("lsl:armband?timeout=-1", "timeout must be a number of seconds above 0"),
    ("csv:/dev/ttyACM0?rate=nan", "rate must be a number of samples a second"),
])
def test_a_port_that_can_never_open_is_one_line_at_once_not_a_wait_for_ever(port, why):
    told = []
    with pytest.raises(LinkError, match=why):
        connect(port, 115200, threading.Event(), told.append)
    assert told == []  # never "waiting for the sensor ...: plug it in"


def test_a_service_waiting_on_liblsl_for_a_stream_stops_at_once():
    stop, got = threading.Event(), []
    waiting = threading.Thread(target=lambda: got.append(connect(f"lsl:tinynas-nobody-{os.getpid()}?timeout=600",
                                                                 115200, stop, lambda text: None)))
    waiting.start()
    time.sleep(1.0)
    stopped = time.monotonic()
    stop.set()
    waiting.join(30 * slowdown())
    assert not waiting.is_alive() and got == [None] and time.monotonic() - stopped < 5 * slowdown()


def test_the_links_own_words_reach_the_page_while_its_stream_is_away():
    link = link_for_url("lsl:type=EMG")  # not opened: only what it says while its stream is away
    link.problem = ("the stream 'armband-A' on pi (source_id 'A') vanished; waiting for it to come back (another "
                    "stream with type 'EMG' is there, 'armband-B' on pi: ...)")
    device = Device(link, Hello("lsl:armband-A", "lsl EMG", 8, 200.0, "float32"), SampleRing(8, 100))
    health = device.health()
    assert not health["connected"] and health["problem"] == link.problem
