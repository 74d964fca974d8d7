"""The service outlives every failed onboarding: a search that cannot fit, a bad request, a paused collection.

A real `tinynas service run` process on a simulated front-end over a real pty. It starts in SEARCHING
(as after a restart) on a plan whose windows the target cannot hold: the search fails, the service goes
IDLE with the reason and stays up (systemd would otherwise restart it into the same failure forever).
It then reads new requests: a user named `..` and a plan that cannot fit are refused in `status`; a
plan that fits starts a collection. The sensor "comes loose" (the simulated user stops moving): the
collection pauses and says what to check; `onboard --continue` resumes it keeping every accepted window;
after a second pause `onboard --cancel` drops it, recordings kept on disk.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from firmware_bridge.protocol import Hello
from firmware_bridge.simulator import PerformingSource, Simulator
from tests.support.net import free_port
from tinynas.service.runner import request
from tinynas.service.state import Deployed, ServiceState, save_state

CLASSES = ("fist", "open")
TIMEOUT = 240  # generous: nothing here is timed, only waited for (a loaded Pi is slow)


def _gestures(channels=4, seed=0):
    rng = np.random.default_rng(seed)
    windows = {}
    for number, label in enumerate(CLASSES):
        gain = np.full(channels, 5.0)
        gain[number] = 35
        windows[label] = (rng.normal(size=(6, 100, channels)) * gain).clip(-127, 127).astype(np.int8)
    return windows, (rng.normal(size=(4000, channels)) * 2).astype(np.int8)


def tinynas(*args):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True)


class Device:
    def __init__(self, root: Path):
        self.root = root
        self.data = root / "data"
        windows, rest = _gestures()
        self.source = PerformingSource(windows, rest, seed=1)
        self.simulator = Simulator(self.source, Hello("sim", "1", 4, 200.0, "int8"), port_dir=root / "dev").start()
        # 1.5 KiB of RAM: the C runtime's A(1,0) (the default runtime) fits 100-sample windows of 4 channels,
        # not 400-sample ones (their 1,600 input bytes alone).
        target = root / "tiny.toml"
        target.write_text('name = "tiny"\nram_bytes = 1536\nflash_bytes = 16384\nmac_budget = 1000000\n')
        self.long_plan, self.short_plan = root / "long.json", root / "short.json"
        for path, seconds in ((self.long_plan, 2.0), (self.short_plan, 0.5)):
            path.write_text(json.dumps({"classes": list(CLASSES), "repetitions": 3, "window_seconds": seconds,
                                        "rest_seconds": 2.0, "countdown": 0}))
        self.http_port = free_port()
        self.config = root / "tinynas.toml"
        self.config.write_text(f'port = "{self.simulator.port}"\ndata_dir = "{self.data}"\ntarget = "{target}"\n'
                               f'budget = "2h"\ncandidates = 2\nworkers = 1\nplan = "{self.short_plan}"\n'
                               f'http_port = {self.http_port}\n')
        self.performing = threading.Event()
        self._halt = threading.Event()
        self.log = open(root / "service.log", "a")
        self.process = None
        threading.Thread(target=self._user, daemon=True).start()

    def start(self):
        self.process = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config",
                                         str(self.config)], stdout=self.log, stderr=self.log)

    def state(self):
        try:
            return json.loads((self.data / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def status(self):
        try:
            return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/status.json",
                                                     timeout=5).read())
        except (OSError, ValueError):
            return {}

    def wait(self, condition, what):
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"service exited ({self.process.returncode}) waiting for {what}: "
                                     f"{(self.root / 'service.log').read_text()[-3000:]}")
            if condition():
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}: {(self.root / 'service.log').read_text()[-3000:]}")

    def windows(self):
        session = self.state().get("session")
        path = Path(session) / "windows.jsonl" if session else None
        return path.read_text().splitlines() if path and path.exists() else []

    def _user(self):
        # Performs each prompted sign when "go" shows on the status page, for twice the window (a late
        # start still fills it), while `performing` is set: clearing it is the loose electrode.
        last = None
        while not self._halt.wait(0.02):
            collection = self.status().get("collection") or {}
            key = (collection.get("number"), collection.get("go"))
            if collection.get("go") is not None and key != last and collection.get("prompt"):
                last = key
                if self.performing.is_set():
                    self.source.perform(collection["prompt"], repeats=2)

    def close(self):
        self._halt.set()
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.simulator.stop()
        self.log.close()


@pytest.fixture
def device(tmp_path):
    run = Device(tmp_path)
    try:
        yield run
    finally:
        run.close()


@pytest.mark.slow
def test_the_service_outlives_failed_onboardings_and_pauses_collections(device):
    # As after a restart in SEARCHING: the recorded windows (400 samples) cannot fit the target.
    device.data.mkdir()
    session = device.data / "profiles" / "alice" / "sessions" / "s1"
    save_state(device.data / "state.json", ServiceState(
        state="SEARCHING", user="alice", plan=str(device.long_plan), session=str(session),
        study=str(device.data / "profiles" / "alice" / "studies" / "s1")))
    device.start()
    device.wait(lambda: device.state().get("state") == "IDLE", "the failed search to leave the service IDLE")
    error = device.state()["error"]
    assert error.startswith("searching for alice failed: plan long records 400-sample windows")
    assert "use windows of at most" in error and "\n" not in error
    device.wait(lambda: device.status().get("state") == "IDLE", "the status page")
    shown = tinynas("service", "status", "--config", str(device.config))
    assert shown.returncode == 0 and "last error: searching for alice failed" in shown.stdout

    # New requests are read: a user name that is a path and a plan that cannot fit are refused in status.
    request(device.data, "onboard", user="..", plan=str(device.short_plan))
    device.wait(lambda: "not allowed" in device.state().get("error", ""), "the bad user name to be refused")
    assert device.state()["state"] == "IDLE"
    refused = tinynas("onboard", "--user", "bob", "--plan", str(device.long_plan), "--config", str(device.config))
    assert refused.returncode == 2 and "use windows of at most" in refused.stderr  # the CLI asks the device's layout
    request(device.data, "onboard", user="bob", plan=str(device.long_plan))  # an older client does not check
    device.wait(lambda: "onboarding of bob refused" in device.state().get("error", ""), "the long plan refused")
    assert device.state()["state"] == "IDLE" and not (device.data / "profiles" / "bob").exists()

    # A plan that fits starts a collection; nobody moves (loose electrode): it pauses, saying what to check.
    started = tinynas("onboard", "--user", "bob", "--config", str(device.config))
    assert started.returncode == 0, started.stderr
    device.wait(lambda: device.state().get("paused"), "the collection to pause")
    state = device.state()
    assert state["state"] == "COLLECTING" and state["user"] == "bob"
    assert "no sign seen within 1.5 s of go" in state["paused"] and "check the electrodes" in state["paused"]
    assert "tinynas onboard --user bob --continue" in state["paused"]
    # `service status` shows status.json, rewritten every half second: it may lag state.json a little.
    device.wait(lambda: "collection paused at fist" in tinynas("service", "status", "--config",
                                                               str(device.config)).stdout, "status to show the pause")
    shown = tinynas("service", "status", "--config", str(device.config))
    assert "\n  collection paused at fist: 3 attempts rejected" in shown.stdout

    # Electrode fixed: --continue resumes; the windows it accepts are kept through a second pause.
    device.performing.set()
    assert tinynas("onboard", "--user", "bob", "--continue", "--config", str(device.config)).returncode == 0
    device.wait(lambda: len(device.windows()) >= 2, "two accepted windows after --continue")
    device.performing.clear()
    device.wait(lambda: device.state().get("paused"), "the second pause")
    kept = device.windows()
    assert 2 <= len(kept) < 6
    shown = tinynas("service", "status", "--config", str(device.config))
    assert f"collection: {len(kept)} of 6 windows" in shown.stdout  # the count shown is the count kept
    # Someone else's --continue does not take over bob's collection.
    request(device.data, "continue", user="carol")
    device.wait(lambda: "ignored" in device.state().get("error", ""), "the foreign continue to be ignored")
    assert device.state()["paused"]
    session = Path(device.state()["session"])
    assert tinynas("onboard", "--user", "bob", "--cancel", "--config", str(device.config)).returncode == 0
    device.wait(lambda: device.state().get("state") == "IDLE", "the cancelled collection")
    assert "cancelled" in device.state()["error"] and str(session) in device.state()["error"]
    assert (session / "windows.jsonl").read_text().splitlines() == kept
    assert device.process.poll() is None


def _step_until(service, condition, what):
    """Runs the real state machine loop in a thread until `condition` (no device needed past HELLO)."""
    thread = threading.Thread(target=service._loop, daemon=True)
    thread.start()
    deadline = time.monotonic() + TIMEOUT
    try:
        while not condition():
            assert thread.is_alive(), f"the loop ended while waiting for {what}"
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(0.05)
    finally:
        service.stopping.set()
        thread.join(30)
    assert not thread.is_alive()


def test_a_failed_deployment_keeps_serving_the_previous_model(tmp_path):
    from tinynas.service.config import ServiceConfig
    from tinynas.service.runner import Service

    data = tmp_path / "data"
    previous = Deployed(user="alice", model=str(data / "alice" / "model.tflite"),
                        card=str(data / "alice" / "card.json"), accuracy=0.9)
    study = data / "profiles" / "bob" / "studies" / "s1"
    study.mkdir(parents=True)  # the study's card and model were lost (a disk swapped, a folder deleted)
    save_state(data / "state.json", ServiceState(state="DEPLOYING", user="bob", plan="gestures4", study=str(study),
                                                 session=str(data / "profiles" / "bob" / "sessions" / "s1"),
                                                 deployed=previous))
    service = Service(ServiceConfig(data_dir=str(data))).open()
    service.device = _device(Hello("sim", "1", 8, 200.0, "int8"))
    _step_until(service, lambda: service.state.state == "SERVING", "the failed deployment to end")
    saved = json.loads((data / "state.json").read_text())
    assert saved["state"] == "SERVING" and saved["deployed"] == previous.to_dict()
    assert saved["error"].startswith("deploying for bob failed: ") and "card.json" in saved["error"]


def test_a_search_whose_recording_is_gone_ends_idle_not_in_a_restart_loop(tmp_path):
    from tinynas.service.config import ServiceConfig
    from tinynas.service.runner import Service

    data = tmp_path / "data"
    save_state(data / "state.json", ServiceState(state="SEARCHING", user="bob", plan="gestures4",
                                                 study=str(data / "s"), session=str(data / "missing-session")))
    service = Service(ServiceConfig(data_dir=str(data))).open()
    service.device = _device(Hello("sim", "1", 8, 200.0, "int8"))
    _step_until(service, lambda: service.state.state == "IDLE", "the failed search to end")
    error = json.loads((data / "state.json").read_text())["error"]
    assert error.startswith("searching for bob failed: ") and "missing-session" in error and "\n" not in error


def _device(hello):
    """A device record as the service holds one after HELLO (its link not opened: these steps never read it)."""
    from firmware_bridge.link import Link
    from firmware_bridge.ring import SampleRing
    from tinynas.service.device import Device

    return Device(Link("loop://"), hello, SampleRing(hello.channels, 100))
