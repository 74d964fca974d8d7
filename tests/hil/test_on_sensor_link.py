"""The served model checked on the front-end's own chip, over the sensor's framed link: a simulated sensor whose
microcontroller also runs the model's test firmware (QEMU, the real image) streams its samples while the service's
check sends the test windows down between them. The faults of a real front-end: another model flashed, the cable
pulled in the middle of the check."""

import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from devtools.machine_speed import slowdown
from firmware_bridge.link import Link
from firmware_bridge.protocol import Hello
from firmware_bridge.ring import SampleRing
from firmware_bridge.simulator import ArraySource, Simulator
from tinynas.card import read_card
from tinynas.hil.board import get_board
from tinynas.hil.build import build_firmware, write_firmware
from tinynas.hil.check import HilError, check_on_board, folder_test_windows
from tinynas.hil.chip import EmulatedChip
from tinynas.hil.framed import FramedPort
from tinynas.hil.protocol import HilLink

pytestmark = pytest.mark.usefixtures("arm_toolchain")


@pytest.fixture(scope="module")
def microbit_firmware(hil_model, tmp_path_factory):
    board = get_board("microbit")
    out = tmp_path_factory.mktemp("sensor-chip") / "fw"
    return build_firmware(write_firmware(hil_model, board, out, emulated=True), board).folder


def _sensor(tmp_path, chip):
    """The front-end: a vibration sensor (noise, 1 channel at 1 kHz) with the chip beside it."""
    noise = np.random.default_rng(0).integers(-300, 300, size=(4000, 1)).astype(np.int16)
    return Simulator(ArraySource(noise), Hello("vib-chip", "1.0", 1, 1000.0, "int16"), port_dir=tmp_path, chip=chip)


class _UnplugOnInfer(FramedPort):
    """The sensor's cable pulled just before the test window number `at` goes down."""

    def __init__(self, link, simulator, at):
        super().__init__(link)
        self.simulator, self.at, self.infers = simulator, at, 0

    def write(self, data):
        if data.startswith(b"infer"):
            self.infers += 1
            if self.infers == self.at:
                self.simulator.unplug(0.5)
                time.sleep(0.2)
        return super().write(data)


def test_every_test_window_on_the_sensors_chip_matches_the_host_while_the_samples_flow(hil_model, microbit_firmware,
                                                                                        tmp_path):
    windows, labels = folder_test_windows(hil_model, read_card(hil_model))
    with EmulatedChip(microbit_firmware) as chip, _sensor(tmp_path, chip) as simulator, \
            Link(simulator.port).open() as link:
        assert link.wait_hello(30 * slowdown()).answers_tests
        ring = SampleRing(1, 10_000)
        stop = threading.Event()

        def consume():  # the service's stream reader: the samples keep being taken during the check
            while not stop.is_set():
                message = link.get(0.1)
                if message is not None and hasattr(message, "data") and getattr(message, "first_sample", None) \
                        is not None:
                    ring.add(message)

        reader = threading.Thread(target=consume, daemon=True)
        reader.start()
        before = link.counters.samples
        report = check_on_board(hil_model, None, None, HilLink(FramedPort(link), "sensor chip",
                                                               timeout=30 * slowdown()), windows, labels)
        stop.set()
        reader.join()
        during = link.counters.samples - before
    assert report.checked == report.windows == len(windows) and not report.stopped
    assert report.identical_to_host == len(windows)  # the same integer C, bit for bit
    assert report.board == "microbit" and report.clock_hz == 16_000_000 and report.counts == "instructions"
    assert 0 < report.stack_bytes <= read_card(hil_model).cost().stack_bytes
    assert during > 0 and link.counters.bad_crc == 0 and link.counters.bad_frames == 0


def test_a_sensor_chip_holding_another_model_is_named_with_the_command_that_flashes_the_served_one(
        hil_model, microbit_firmware, tmp_path):
    served = Path(shutil.copytree(hil_model, tmp_path / "served"))
    source = served / read_card(served).c_runtime["source"]
    source.write_text(source.read_text() + "/* searched again */\n")
    windows, labels = folder_test_windows(served, read_card(served))
    with EmulatedChip(microbit_firmware) as chip, _sensor(tmp_path, chip) as simulator, \
            Link(simulator.port).open() as link:
        link.wait_hello(30 * slowdown())
        with pytest.raises(HilError, match=r"holds model \w+, not .*tinynas firmware .* --board microbit"):
            check_on_board(served, None, None, HilLink(FramedPort(link), "sensor chip", timeout=30 * slowdown()),
                           windows, labels)


def test_a_sensor_unplugged_in_the_middle_of_the_check_is_waited_for_and_the_check_resumes(
        hil_model, microbit_firmware, tmp_path):
    windows, labels = folder_test_windows(hil_model, read_card(hil_model))
    windows, labels = windows[:5], labels[:5]
    with EmulatedChip(microbit_firmware) as chip, _sensor(tmp_path, chip) as simulator, \
            Link(simulator.port).open() as link:
        link.wait_hello(30 * slowdown())
        timeout = 10 * slowdown()

        def reopen():
            assert link.connected.wait(30 * slowdown())
            return HilLink(FramedPort(link), "sensor chip", timeout=timeout)

        report = check_on_board(hil_model, None, None, HilLink(_UnplugOnInfer(link, simulator, 3), "sensor chip",
                                                               timeout=timeout), windows, labels, reopen=reopen)
        assert link.counters.reconnects >= 1
    assert report.checked == 5 and not report.stopped and report.identical_to_host == 5
    assert report.resumed and report.resumed[0].startswith("window 3")
