"""The service searches a continuous recording on target-sized windows cut from its segments."""

import json

import numpy as np

from firmware_bridge.plan import load_plan
from firmware_bridge.protocol import Hello, Samples
from firmware_bridge.recorder import Recorder
from tinynas.cost.budget import Budget
from tinynas.cost.targets import get_target
from tinynas.service.config import ServiceConfig
from tinynas.service.fit import check_plan_fits
from tinynas.service.runner import Service


def test_a_too_long_vibration_window_is_searched_on_target_sized_windows(tmp_path):
    # bearing4 on its method's smallest target: 2 s segments at 12 kHz, cut into 512-sample windows.
    hello = Hello("sim-accelerometer", "1", 1, 12000.0, "int16")
    plan = load_plan("bearing4")
    session = tmp_path / "data" / "profiles" / "pump" / "sessions" / "s1"
    rng = np.random.default_rng(0)
    with Recorder(session, hello, user="pump", labels=plan.classes, plan=plan.to_dict()) as recorder:
        start = 0
        for number, label in enumerate(plan.classes * 2):
            block = (rng.normal(size=(24000, 1)) * (200 + 100 * (number % 4))).astype(np.int16)
            recorder.add_samples(Samples(start, block))
            recorder.add_window(label, start, 24000)
            start += 24000
    service = Service(ServiceConfig(data_dir=str(tmp_path / "data"), target="STM32C011F6P6")).open()
    service.device = _device(hello)
    service.state.session, service.state.plan, service.state.user = str(session), "bearing4", "pump"
    windows, spec = service._windows()
    fit = check_plan_fits(plan, Budget.resolve(get_target("STM32C011F6P6")), 1, 12000.0)
    assert spec == f"session:{session}?window={fit.window}&hop={fit.hop}"
    assert windows.x.shape[1:] == (fit.window, 1) and fit.window == 512
    # Cut windows stay in their recording's group (8 recordings), so a split cannot leak between them.
    assert len(set(windows.groups.tolist())) == 8
    per_recording = 1 + (24000 - fit.window) // fit.hop
    assert len(windows) == 8 * per_recording
    assert np.bincount(windows.y).tolist() == [2 * per_recording] * 4
    assert json.loads((session / "manifest.json").read_text())["plan"]["name"] == "bearing4"


def _device(hello):
    """A device record as the service holds one after HELLO (its link not opened: these steps never read it)."""
    from firmware_bridge.link import Link
    from firmware_bridge.ring import SampleRing
    from tinynas.service.device import Device

    return Device(Link("loop://"), hello, SampleRing(hello.channels, 100))
