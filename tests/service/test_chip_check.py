"""The service checks the served model on a front-end that holds it (its HELLO says CAN_TEST): once per served model
and per device start, recorded in the served card, shown on the page; a front-end holding another model is told
with the command that builds the served one's firmware. The front-end is a simulated sensor with the real test
firmware on an emulated micro:bit beside it (QEMU)."""

import shutil
import sys
import threading
import time
import traceback
from pathlib import Path

import numpy as np
import pytest

from devtools.machine_speed import slowdown
from firmware_bridge.link import Link
from firmware_bridge.protocol import Hello
from firmware_bridge.ring import SampleRing
from firmware_bridge.simulator import ArraySource, Simulator
from tinynas.card import read_card
from tinynas.folders import CARD, MODEL
from tinynas.hil.board import get_board
from tinynas.hil.build import build_firmware, write_firmware
from tinynas.hil.chip import EmulatedChip
from tinynas.service.chip_check import check_chip
from tinynas.service.config import ServiceConfig
from tinynas.service.device import Device
from tinynas.service.runner import Service
from tinynas.service.state import Deployed, ServiceState
from tinynas.service.status import page_snapshot

pytestmark = pytest.mark.usefixtures("arm_toolchain")


def _wait(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:  # every thread's stack: where a link or the chip got stuck
            stacks = "\n".join(f"--- thread {ident}\n" + "".join(traceback.format_stack(frame))
                               for ident, frame in sys._current_frames().items())
            raise AssertionError(f"timed out waiting for {what}\n{stacks}")
        time.sleep(0.1)


def _serving(tmp_path, model_folder) -> Service:
    served = Path(shutil.copytree(model_folder, tmp_path / "data" / "profiles" / "ann" / "deployed" / "s1"))
    service = Service(ServiceConfig(data_dir=str(tmp_path / "data"))).open()
    service.state = ServiceState(state="SERVING", user="ann", deployed=Deployed(
        user="ann", model=str(served / MODEL), card=str(served / CARD), accuracy=0.9))
    return service


@pytest.fixture
def sensor_with_chip(hil_model, tmp_path):
    """`start(firmware_of)`: a vibration sensor whose chip holds the firmware of `firmware_of`, connected to the
    service as its device."""
    opened = []

    def start(service, firmware_of):
        board = get_board("microbit")
        firmware = build_firmware(write_firmware(firmware_of, board, tmp_path / "fw", emulated=True), board).folder
        chip = EmulatedChip(firmware).__enter__()
        noise = np.random.default_rng(0).integers(-300, 300, size=(4000, 1)).astype(np.int16)
        simulator = Simulator(ArraySource(noise), Hello("vib-chip", "1.0", 1, 1000.0, "int16"), port_dir=tmp_path,
                              chip=chip).start()
        link = Link(simulator.port).open()
        opened.extend([chip, simulator, link])
        service.device = Device(link, link.wait_hello(30 * slowdown()), SampleRing(1, 10_000))
        return simulator, link

    yield start
    for thing in reversed(opened):
        thing.__exit__(None, None, None) if isinstance(thing, EmulatedChip) else (
            thing.close() if isinstance(thing, Link) else thing.stop())


def _checking(service):
    thread = threading.Thread(target=check_chip, args=(service,), daemon=True)
    thread.start()
    return thread


def test_the_served_model_is_checked_on_the_sensors_chip_and_again_after_a_replug(hil_model, tmp_path,
                                                                                  sensor_with_chip):
    service = _serving(tmp_path, hil_model)
    simulator, link = sensor_with_chip(service, hil_model)
    served = Path(service.state.deployed.card).parent
    thread = _checking(service)
    try:
        _wait(lambda: service.chip_check.get("state") == "done", "the check on the chip", 300 * slowdown())
        recorded = read_card(served).hil
        assert recorded["board"] == "microbit" and recorded["checked"] == recorded["windows"] > 0
        assert recorded["identical_to_host"] == recorded["checked"]
        page = page_snapshot(service)
        assert page["model"]["chip"]["checked"] == recorded["checked"] and page["device"]["answers_tests"]
        first = (served / CARD).stat().st_mtime_ns
        simulator.unplug(0.5)  # a replug may bring another firmware: checked again
        _wait(lambda: (served / CARD).stat().st_mtime_ns != first and service.chip_check.get("state") == "done",
              f"the check after the replug ({simulator.to_chip} B to the chip, {simulator.from_chip} B from it; "
              f"{link.counters})", 300 * slowdown())
        assert link.counters.reconnects >= 1
    finally:
        service.stopping.set()
        thread.join(timeout=60)


def test_a_sensor_chip_with_another_model_is_told_on_the_page(hil_model, tmp_path, sensor_with_chip):
    service = _serving(tmp_path, hil_model)
    served = Path(service.state.deployed.card).parent
    source = served / read_card(served).c_runtime["source"]
    source.write_text(source.read_text() + "/* searched again */\n")  # the chip holds the model before this one
    sensor_with_chip(service, hil_model)
    thread = _checking(service)
    try:
        _wait(lambda: service.chip_check.get("state") == "refused", "the refusal", 120 * slowdown())
        text = page_snapshot(service)["chip_check"]["text"]
        assert "holds model" in text and f"tinynas firmware {served} --board microbit" in text
        assert read_card(served).hil is None  # nothing recorded of a check that did not run
    finally:
        service.stopping.set()
        thread.join(timeout=60)
