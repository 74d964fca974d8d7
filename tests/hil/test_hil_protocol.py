"""The host's side of the test protocol against devices that are not the test firmware, through a real pty: a port
nobody answers on, an Arduino sketch printing its readings, another MLPerf Tiny firmware. One line each, in time."""

import os
import select
import threading
import time

import pytest
import serial

from devtools.machine_speed import slowdown
from tinynas.hil.protocol import DeviceTimeout, HilLink, NotOurFirmware


@pytest.fixture
def pty_device():
    """(the pty's port name, a function that starts a device writing `lines()`'s output on it until the test ends)."""
    master, slave = os.openpty()
    stop = threading.Event()
    threads = []

    def start(speak):
        thread = threading.Thread(target=speak, args=(master, stop), daemon=True)
        thread.start()
        threads.append(thread)

    yield os.ttyname(slave), start
    stop.set()
    for thread in threads:
        thread.join(5)
    os.close(master)
    os.close(slave)


def _link(name: str, timeout: float) -> HilLink:
    port = serial.Serial(name, 115200, timeout=0.2)
    return HilLink(port, name, timeout=timeout)


def test_a_port_nobody_answers_on_is_a_timeout_in_one_line(pty_device):
    name, _ = pty_device
    timeout = 0.5 * slowdown()
    started = time.monotonic()
    with pytest.raises(DeviceTimeout, match=r"no answer to `name` within .* \(is the test firmware flashed") as caught:
        _link(name, timeout).synchronise()
    assert time.monotonic() - started < timeout + 5 and "\n" not in str(caught.value)


def test_an_arduino_printing_its_readings_is_not_our_firmware(pty_device):
    name, start = pty_device

    def arduino(fd, stop):  # Serial.println(analogRead(A0)) in loop(), 100 times a second
        value = 500
        while not stop.is_set():
            value = (value * 37 + 11) % 1024
            os.write(fd, f"{value}\r\n".encode())
            time.sleep(0.01)

    start(arduino)
    with pytest.raises(NotOurFirmware, match="not in the test protocol .* flash the firmware of `tinynas firmware`"):
        _link(name, 10 * slowdown()).synchronise()


def test_another_mlperf_tiny_firmware_is_not_ours(pty_device):
    name, start = pty_device

    def keyword_spotter(fd, stop):  # answers the runner's commands as the MLPerf Tiny reference firmware does
        pending = b""
        while not stop.is_set():
            try:
                pending += os.read(fd, 256)
            except OSError:
                return
            while b"%" in pending:
                command, _, pending = pending.partition(b"%")
                if command.strip() == b"name":
                    os.write(fd, b"m-name-kws01-[unspecified]\r\n")
                os.write(fd, b"m-ready\r\n")

    start(keyword_spotter)
    with pytest.raises(NotOurFirmware, match="not tinynas's test firmware .*kws01"):
        _link(name, 2 * slowdown()).synchronise()


def test_the_sensors_own_port_is_said_to_be_a_frame_stream_not_garbage_text(tmp_path):
    """A user points `hil` at the armband's port: the front-end streams firmware_bridge's binary frames."""
    import subprocess
    import sys

    port = tmp_path / "tty"
    sensor = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "simulate", "--port", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60 * slowdown()
        while not port.exists():
            assert time.monotonic() < deadline and sensor.poll() is None, "the simulated front-end did not start"
            time.sleep(0.1)
        with pytest.raises(NotOurFirmware, match="bytes of binary data, not text .a sensor's frame stream") as caught:
            _link(str(port), 10 * slowdown()).synchronise()
        assert caught.value.args[0].isprintable()
    finally:
        sensor.terminate()
        sensor.wait(30)


def test_a_board_that_starts_again_just_after_the_question_is_asked_again_and_answers_once(pty_device):
    # A brown-out as the host asks: the question dies in the reset, the board says it started; asked again only
    # once that answer is overdue, so a board that did answer is never asked twice (two answers would shift every
    # later one by one).
    name, start = pty_device
    asked = []

    def board(fd, stop):
        first = True
        while not stop.is_set():
            if not select.select([fd], [], [], 0.05)[0]:
                continue
            data = os.read(fd, 256)
            for _ in range(data.count(b"name%")):
                asked.append(time.monotonic())
                if first:  # reset: the question is lost
                    first = False
                    os.write(fd, b"m-init-done\r\nm-ready\r\n")
                else:
                    os.write(fd, b"m-name-tinynas-hil\r\nm-ready\r\n")

    start(board)
    link = _link(name, 0.5 * slowdown())
    link.synchronise()
    assert len(asked) == 2
