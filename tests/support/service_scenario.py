"""The device service as a real process with the product's simulated person in front of it: the scenario the
service's journey tests share (tests/service/test_service.py, test_rewear.py, test_two_users.py)."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
import urllib.request
from pathlib import Path

import numpy as np

from devtools.machine_speed import slowdown as _slowdown
from firmware_bridge.person import Behaviour, Person
from firmware_bridge.protocol import Hello
from firmware_bridge.simulator import Simulator
from tests.support.net import free_port
from tinynas.service.follower import POLL_SECONDS, Follower
from tinynas.service.runner import request

CLASSES = ("fist", "open", "point")
PLAN_CLASSES = ("rest",) + CLASSES
REPETITIONS = 5
GESTURE_SAMPLES = 100
WINDOW_SAMPLES = 200  # the plan's 1.0 s windows at 200 Hz
RATE = 200.0


def gestures(seed=0, channels=4):
    rng = np.random.default_rng(seed)
    windows = {}
    for number, label in enumerate(CLASSES):
        gain = np.full(channels, 5.0)
        gain[number] = 35
        gain[(number + 1) % channels] = 15
        burst = rng.normal(size=(12, GESTURE_SAMPLES, channels)) * gain
        windows[label] = burst.clip(-127, 127).astype(np.int8)
    return windows


PORTS = {"frames": "{port}", "text": "csv:{port}?rate={rate:g}", "cyton": "brainflow:cyton?serial_port={port}",
         "lsl": "{port}", "adc": "csv:{port}?rate={rate:g}", "lsl-foreign": "{port}"}
"""The service's `port` for each front-end the simulator can be (its `port`: a pty's path, or an LSL stream's URL)."""
FOREIGN = ("adc", "lsl-foreign")
"""Front-ends written in tests/support/foreign_clients.py, not by firmware_bridge's simulator."""


class Scenario:
    def __init__(self, root: Path, wire: str = "frames"):
        self.root = root
        self.data = root / "data"
        # A Cyton streams 8 channels at 250 Hz; the others the armband's 4 at 200 Hz.
        channels, rate = (8, 250.0) if wire == "cyton" else (4, RATE)
        # A realistic person, later than the default (20 % late starts), 2 % wrong signs, 2 % missed ones.
        self.source = Person(gestures(channels=channels), channels, rate, np.int8, noise=1.5,
                             behaviour=Behaviour(late_probability=0.2, seed=1), rest_class="rest")
        if wire in FOREIGN:  # a front-end tinynas did not write (tests/support/foreign_clients.py)
            from tests.support.foreign_clients import AdcSketch, LslArmband

            self.simulator = (AdcSketch(self.source, rate, root / "dev") if wire == "adc" else
                              LslArmband(self.source, rate, channels)).start()
        else:
            self.simulator = Simulator(self.source, Hello("sim-armband", "1.0", channels, rate, "int8"),
                                       port_dir=root / "dev", wire=wire).start()
        port = PORTS[wire].format(port=self.simulator.port, rate=rate)
        plan = root / "plan.json"
        plan.write_text(json.dumps({"classes": list(PLAN_CLASSES), "rest_class": "rest",
                                    "repetitions": REPETITIONS, "window_seconds": 1.0, "rest_seconds": 1.0,
                                    "countdown": 1}))
        self.http_port = free_port()
        self.slowdown = _slowdown()
        self.config = root / "tinynas.toml"
        self.config.write_text(
            f'port = "{port}"\ndata_dir = "{self.data}"\ntarget = "STM32F030F4P6"\n'
            # Bounded by candidates, not by seconds: a time budget is a race a busy machine loses (CI: none
            # finished). The budget is only the cap a hung worker would meet.
            'budget = "2h"\ncandidates = 3\n'
            f'epochs = 40\nlearning_rate = 0.01\nfinal_epochs = 60\nworkers = 2\nplan = "{plan}"\n'
            f'hop_seconds = 0.25\nsmoothing = 1\n'
            f'min_accuracy = 0.5\nhttp_port = {self.http_port}\n')
        self.process = None
        self.log = open(root / "service.log", "a")
        self.seen_states = []
        self.page_seen = {}  # per state, the first live status carrying what the status page draws for it
        self.pauses = 0
        self.follower_failed = ""  # the traceback that ended the simulated person's thread, if one did
        self._user = threading.Thread(target=self._simulated_user, daemon=True)
        self._halt = threading.Event()
        self._user.start()

    def start(self):
        # The stream reader is made to fail once while collecting (as a race used to kill it): the
        # collection must go on without a restart.
        env = {**os.environ, "TINYNAS_INJECT_FAULT": "read_stream@COLLECTING"}
        self.process = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config",
                                         str(self.config)], stdout=self.log, stderr=self.log, env=env)

    def kill(self):
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def status(self):
        try:
            return json.loads((self.data / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def state(self):
        try:
            return json.loads((self.data / "state.json").read_text())
        except (OSError, ValueError):
            return {}

    def wait(self, condition, timeout, what):
        deadline = time.monotonic() + timeout * self.slowdown
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"service exited ({self.process.returncode}) while waiting for {what}; "
                                     f"log: {(self.root / 'service.log').read_text()[-3000:]}")
            if condition():
                return
            if self.follower_failed:
                raise AssertionError(f"the simulated person stopped while waiting for {what}:\n{self.follower_failed}")
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}; log: {(self.root / 'service.log').read_text()[-3000:]}")

    def live_status(self):
        try:
            return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/status.json",
                                                     timeout=1).read())
        except (OSError, ValueError, http.client.HTTPException):  # e.g. the service killed mid-answer
            return {}

    def _simulated_user(self):
        # The product's follower (`tinynas simulate --person`): reacts to each GO it sees on the status
        # endpoint; continues a paused collection after a look at the armband, as the page says. It looks as often
        # as `tinynas simulate` does: each look costs the service a page snapshot (0.5 ms of the trace, more while
        # searching); at 50 looks a second, with 4 ms per trace then, the service spent a fifth of a core on them.
        follower = Watching(self, f"http://127.0.0.1:{self.http_port}/status.json", "", self.source, self.data,
                             self.root / "person.jsonl")
        try:
            while not self._halt.wait(POLL_SECONDS):
                follower.step()
        except Exception:  # noqa: BLE001 - said by `wait`: a dead follower must fail the test, not time it out
            self.follower_failed = traceback.format_exc()

    def windows_accepted(self):
        path = self.session() / "windows.jsonl" if self.session() else None
        return [json.loads(line) for line in path.read_text().splitlines()] if path and path.exists() else []

    def session(self):
        value = self.state().get("session")
        return Path(value) if value else None

    def trials(self):
        import sqlite3

        study = self.state().get("study")
        journal = Path(study) / "journal.sqlite" if study else None
        if not journal or not journal.exists():
            return []
        try:
            with sqlite3.connect(f"file:{journal}?mode=ro", uri=True) as db:
                return db.execute("SELECT number, state, attempts FROM trials ORDER BY number").fetchall()
        except sqlite3.OperationalError:  # created but not yet initialised
            return []

    def close(self):
        self._halt.set()
        if self.process is not None and self.process.poll() is None:
            request(self.data, "stop")
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        self.simulator.stop()
        self.log.close()


class Watching(Follower):
    """The follower, noting what the test checks: the states seen, the first status carrying what the page
    draws in each, and the pauses."""

    def __init__(self, scenario, *args):
        super().__init__(*args)
        self.scenario = scenario

    def status(self):
        status = super().status()
        state, run = status.get("state"), self.scenario
        if state and (not run.seen_states or run.seen_states[-1] != state):
            run.seen_states.append(state)
        drawn = {"COLLECTING": lambda s: (s.get("collection") or {}).get("trace", {}).get("channels")
                 and (s.get("collection") or {}).get("rest"),
                 "SEARCHING": lambda s: (s.get("search") or {}).get("trials_list"),
                 "SERVING": lambda s: (s.get("model") or {}).get("name") and s.get("predictions")}
        if state in drawn and state not in run.page_seen and drawn[state](status):
            run.page_seen[state] = status
        return status

    def _continue_pause(self, status):
        before = self.continued_pause
        super()._continue_pause(status)
        self.scenario.pauses += self.continued_pause != before


def children(pid: int) -> list[int]:
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:  # gone meanwhile
        return []


def worker_processes(pid: int) -> tuple[int, int]:
    """(launchers, workers) of `pid`: the worker launcher (multiprocessing's forkserver) and the workers forked
    from it, or workers spawned directly where there is no forkserver (the resource tracker is neither)."""
    launchers = workers = 0
    for child in children(pid):
        try:
            command = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:  # gone meanwhile
            continue
        if b"multiprocessing.forkserver" in command:
            launchers += 1
            workers += len(children(child))
        else:
            workers += b"spawn_main" in command
    return launchers, workers
