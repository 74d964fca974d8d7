"""The served model checked on the front-end's own chip, where the front-end can run it (its HELLO says CAN_TEST).

Such a front-end holds a model's test firmware beside its sensor code and answers the test commands on the same
link (tinynas.hil.framed). While a model is served, the check runs once per served model and per device start (a
replug or reset may bring another firmware): the served folder's test windows go down, and the outputs, counts and
stack come back and are recorded in the served card (`hil`), which the page shows. A front-end that holds another
model is told on the page with the command that builds the served one's firmware; the samples keep flowing
throughout, and nothing the check meets ends serving.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from tinynas.card import read_card, record_section
from tinynas.errors import TinynasError
from tinynas.hil.check import check_on_board, folder_test_groups, folder_test_windows
from tinynas.hil.framed import FramedPort
from tinynas.hil.protocol import HilLink
from tinynas.service.context import Phase, ServiceContext

log = logging.getLogger(__name__)

POLL_SECONDS = 1.0
ANSWER_SECONDS = 30.0
"""Seconds the chip may take for one answer (a bearing model took about a second per inference on a 16 MHz
Cortex-M0 under QEMU, instructions counted as cycles: the margin is for larger models and slower cores)."""
RECONNECT_SECONDS = 30.0
"""How long a check waits for an unplugged front-end before it says how far it got."""


def check_chip(service: ServiceContext) -> None:
    """A side thread: check each served model on a front-end that can run it, once per model and device start."""
    done: tuple | None = None
    while not service.stopping.wait(POLL_SECONDS):
        device, deployed = service.device, service.state.deployed
        hello = device.link.latest_hello if device is not None else None
        if device is None or hello is None or not hello.answers_tests:
            service.chip_check = {}
            continue
        if service.state.state != Phase.SERVING or deployed is None or deployed.scorer:
            continue
        counters = device.link.counters
        key = (deployed.model, counters.resets, counters.reconnects)
        if key != done:
            done = key
            service.chip_check = check_served(service, Path(deployed.card).parent)


def check_served(service: ServiceContext, folder: Path) -> dict:
    """Check the model in `folder` on the front-end's chip; what the page says of it ({"state", "text"})."""
    device = service.device
    assert device is not None  # check_chip looked
    name = f"the chip of the sensor on {device.link.url}"
    service.chip_check = {"state": "checking", "text": f"checking the served model on {name}"}

    def reopen() -> HilLink:
        # The link reopens a replugged port by itself: wait for it, then talk to whatever firmware it now holds.
        deadline = time.monotonic() + RECONNECT_SECONDS
        while not device.link.connected.wait(0.5):
            if service.stopping.is_set() or time.monotonic() > deadline:
                raise TinynasError(f"{name} did not come back within {RECONNECT_SECONDS:g} s")
        return HilLink(FramedPort(device.link), name, timeout=ANSWER_SECONDS)

    try:
        card = read_card(folder)
        windows, labels = folder_test_windows(folder, card)
        report = check_on_board(folder, None, None, HilLink(FramedPort(device.link), name, timeout=ANSWER_SECONDS),
                                windows, labels, reopen=reopen, progress=lambda text: log.info("chip check: %s", text),
                                groups=folder_test_groups(folder))
    except TinynasError as exc:
        log.warning("chip check: %s", exc)
        return {"state": "refused", "text": str(exc)}
    log.info("chip check of %s:\n%s", folder.name, report.text())
    if report.checked:
        try:
            record_section(folder, "hil", report.card_section(time.time()))
        except (OSError, TinynasError) as exc:  # a full disk: the page still says what the chip did
            log.warning("chip check: not recorded in %s: %s", folder, exc)
    if report.stopped:
        return {"state": "stopped", "text": f"stopped after {report.checked} of {report.windows} windows: "
                                            f"{report.stopped}"}
    return {"state": "done", "text": ""}
