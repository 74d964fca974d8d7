"""A motor that changes load, through the device service (issue 59): its classical scorer is served, the motor
is run at a heavier load and the scorer calls it a fault; the operator asks for the new condition to be kept
(`onboard --recalibrate --condition heavy`), runs the motor on at that load while it is recorded, and the
service keeps both conditions: back at the light load, and at the heavy one again, the alarm is rare; a fault at
the heavy load raises it.

The real service process, a simulated front-end on a real pseudo-terminal, the product's simulated machine
(`tinynas.service.follower.Follower`, which keeps the machine running while a new condition is recorded, as an
operator does); the operator's load changes are this test's. Figures in device samples: a slow machine changes
nothing.
"""

import json
import subprocess
import sys
import threading
import time
import urllib.request

import numpy as np
import pytest

from devtools.machine_speed import slowdown as measured_slowdown
from firmware_bridge.person import Machine
from firmware_bridge.protocol import Hello
from firmware_bridge.simulator import Simulator
from tests.support.net import free_port
from tinynas.data.synthetic import vibration
from tinynas.service.follower import Follower
from tinynas.service.runner import request as ask

RATE = 4000.0
HEAVY = 2.5
"""The heavy load's vibration against the light load's (its own recordings, not the light load's scaled copy)."""


def _states():
    """Light and heavy running and an inner-race fault at the heavy load, as int16 streams (a minute of each)."""
    data = vibration(windows_per_class=30, length=8000, sample_rate_hz=RATE, windows_per_recording=5, seed=31)
    other = vibration(windows_per_class=30, length=8000, sample_rate_hz=RATE, windows_per_recording=5, seed=32)
    light = data.x[data.y == 0].reshape(-1, 1)
    heavy = HEAVY * other.x[other.y == 0].reshape(-1, 1)
    fault = HEAVY * other.x[other.y == other.class_names.index("inner_race")].reshape(-1, 1)
    scale = 32000 / max(np.abs(s).max() for s in (light, heavy, fault))
    return {name: (stream * scale).astype(np.int16) for name, stream in
            (("light", light), ("heavy", heavy), ("heavy_inner_race", fault))}


@pytest.fixture(scope="module")
def motor(tmp_path_factory):
    root = tmp_path_factory.mktemp("loads")
    data = root / "data"
    machine = Machine(_states(), np.int16)
    simulator = Simulator(machine, Hello("sim-motor", "1.0", 1, RATE, "int16"), port_dir=root / "dev").start()
    plan = root / "plan.json"
    plan.write_text(json.dumps({"classes": ["light"], "task": "anomaly", "kind": "continuous", "repetitions": 3,
                                "window_seconds": 1.0, "hold_seconds": 6.0, "rest_seconds": 0.0, "countdown": 1,
                                "confirm": True, "verb": "Run the machine normally"}))
    http_port, slowdown = free_port(), measured_slowdown()
    config = root / "tinynas.toml"
    # 5 % false alarms: the new condition's threshold then needs 19 later windows, 25 s of recording (1 %: 100 s).
    config.write_text(f'port = "{simulator.port}"\ndata_dir = "{data}"\ntarget = "STM32C011F6P6"\nmin_auroc = 0.5\n'
                      f'budget = "2h"\ncandidates = 3\nepochs = 6\nfinal_epochs = 8\nlearning_rate = 0.003\n'
                      f'workers = 2\nplan = "{plan}"\nhop_seconds = 0.25\nalarm_k = 3\nalarm_n = 5\n'
                      f'http_port = {http_port}\nscorer = "classical"\nfalse_alarm_rate = 0.05\n')
    log = open(root / "service.log", "a")
    process = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config", str(config)],
                               stdout=log, stderr=log)
    follower = Follower(f"http://127.0.0.1:{http_port}/status.json", "", machine, data, root / "machine.jsonl",
                        simulator=simulator, serve_state="light")
    halt = threading.Event()
    thread = threading.Thread(target=lambda: [follower.step() for _ in iter(lambda: halt.wait(0.05), True)],
                              daemon=True)
    thread.start()

    def status():
        try:
            return json.loads((data / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait(condition, seconds, what):
        deadline = time.monotonic() + seconds * slowdown
        while time.monotonic() < deadline:
            assert process.poll() is None, f"service exited while waiting for {what}: " \
                                           f"{(root / 'service.log').read_text()[-3000:]}"
            if condition():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out waiting for {what}: {(root / 'service.log').read_text()[-3000:]}")

    def page():  # what the status page draws (the status file plus the served model's summary)
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/status.json", timeout=10) as answer:
            return json.loads(answer.read())

    def predictions():
        path = data / "predictions.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines() if line.endswith("}")] \
            if path.exists() else []

    def run(state, predictions_wanted, what):
        """The operator runs the motor in `state`: the predictions made from then on, once there are enough."""
        follower.serve_state = state
        wait(lambda: machine.state == state, 30, f"the motor to run {state}")
        since = simulator.sample_index + 8000  # from the first window wholly in the new state (one 2 s margin)
        wait(lambda: sum(p["end_sample"] >= since for p in predictions()) >= predictions_wanted, 120, what)
        return [p for p in predictions() if p["end_sample"] >= since]

    try:
        wait(lambda: status().get("state") == "IDLE", 60, "the service to come up")
        ask(data, "onboard", user="motor", plan=str(plan))
        wait(lambda: status().get("state") == "SERVING", 400, "serving")
        first = page()
        light_before = run("light", 20, "scores at the light load")
        heavy_before = run("heavy", 12, "scores at the heavy load, before it is kept")
        said = subprocess.run([sys.executable, "-m", "tinynas.cli", "onboard", "--user", "motor", "--recalibrate",
                               "--condition", "heavy", "--config", str(config)], capture_output=True, text=True,
                              timeout=60)
        wait(lambda: (status().get("rewear") or {}).get("phase") in ("accepted", "rejected", "failed"), 300,
             "the new condition to be kept")
        wait(lambda: status().get("state") == "SERVING", 60, "serving again")
        kept = page()
        light_after = run("light", 20, "scores back at the light load")
        heavy_after = run("heavy", 20, "scores at the heavy load, kept")
        failing = run("heavy_inner_race", 12, "scores of the fault at the heavy load")
        yield {"first": first, "said": said, "kept": kept, "light_before": light_before,
               "heavy_before": heavy_before, "light_after": light_after, "heavy_after": heavy_after,
               "failing": failing, "log": (root / "service.log").read_text(), "simulator": simulator}
    finally:
        halt.set()
        if process.poll() is None:
            ask(data, "stop")
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        simulator.stop()
        log.close()


@pytest.mark.slow
def test_the_heavy_load_alarms_before_it_is_kept(motor):
    assert motor["first"]["model"]["name"] == "features + Gaussian (classical)"
    assert _alarmed(motor["light_before"]) <= 0.3
    assert _alarmed(motor["heavy_before"]) >= 0.8  # the light load's scorer calls the heavy load a fault


@pytest.mark.slow
def test_the_new_condition_is_recorded_running_and_kept_beside_the_old(motor):
    assert motor["said"].returncode == 0 and "keeping its earlier conditions beside 'heavy'" in motor["said"].stdout
    flow = motor["kept"]["rewear"]
    assert flow["phase"] == "accepted" and flow["condition"] == "heavy", flow
    assert "conditions kept: as searched, heavy" in flow["text"]
    assert motor["kept"]["model"]["conditions"] == ["as searched", "heavy"]


def _alarmed(scored):
    return sum(p["alarm"] for p in scored) / len(scored)


@pytest.mark.slow
def test_back_at_the_light_load_and_at_the_heavy_one_the_alarm_is_rare(motor):
    # Before: the heavy load alarms nearly throughout. After, at either load, windows are flagged at about the 5 %
    # rate (the rate a 23 s recording can set a threshold for); overlapping windows (1 s every 0.25 s) carry one
    # odd second into several, so the 3-of-5 alarm can still sound briefly (seen once in four runs: 5 of 20).
    assert _alarmed(motor["heavy_before"]) >= 0.8
    for name, kept in (("light_after", "as searched"), ("heavy_after", "heavy")):
        scored = motor[name]
        assert _alarmed(scored) <= 0.3, name
        assert sum(p["condition"] == kept for p in scored) >= 0.9 * len(scored), name


@pytest.mark.slow
def test_a_fault_at_the_heavy_load_raises_the_alarm(motor):
    assert any(p["alarm"] for p in motor["failing"])
