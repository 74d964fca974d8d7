"""Guided collection with a simulated user over a real pseudo-terminal."""

import json

import numpy as np
import pytest

from firmware_bridge.guide import GuidedCollection, Plan, PlanError, Prompter, check_window, load_plan
from firmware_bridge.link import Link
from firmware_bridge.protocol import Hello
from firmware_bridge.recorder import Recorder, RecordingThread
from firmware_bridge.simulator import PerformingSource, Simulator
from tinynas.data.session import load_session


class Collecting(Prompter):
    def __init__(self, redo_first=False):
        self.lines = []
        self.redo_first = redo_first

    def say(self, text):
        self.lines.append(text)

    def wants_redo(self, seconds):
        if self.redo_first:
            self.redo_first = False
            return True
        return False


def _gestures(channels=4, length=100, seed=0):
    rng = np.random.default_rng(seed)
    windows = {}
    for number, label in enumerate(("fist", "open", "point")):
        gain = np.full(channels, 6.0)   # every electrode picks up some activity
        gain[number] = 35
        gain[(number + 1) % channels] = 18
        windows[label] = (rng.normal(size=(5, length, channels)) * gain).clip(-127, 127).astype(np.int8)
    rest = (rng.normal(size=(1000, channels)) * 2).astype(np.int8)
    return windows, rest


def _run(tmp_path, plan, source, prompter, channels=4):
    hello = Hello("sim", "1", channels, 200.0, "int8")
    with Simulator(source, hello, port_dir=tmp_path, speed=4) as simulator, Link(simulator.port).open() as link:
        with Recorder(tmp_path / "session", link.wait_hello(5), labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                guide = GuidedCollection(recorder, plan, prompter,
                                         on_prompt=lambda label, go: source.perform(label), timeout_seconds=10)
                return guide.run()
            finally:
                thread.stop()


@pytest.mark.slow
def test_guided_collection_records_checked_labelled_windows(tmp_path):
    windows, rest = _gestures()
    source = PerformingSource(windows, rest)
    plan = Plan("test", ("fist", "open", "point"), repetitions=2, window_seconds=0.5, rest_seconds=0.1, countdown=1)
    prompter = Collecting(redo_first=True)
    result = _run(tmp_path, plan, source, prompter)
    assert dict(result.accepted) == {"fist": 2, "open": 2, "point": 2} and result.redone == 1
    assert "Perform sign fist - 1" in prompter.lines and "go" in prompter.lines
    data = load_session(tmp_path / "session")
    assert np.bincount(data.y).tolist() == [2, 2, 2]
    # Each window carries its class's channel pattern: the strongest channel is the class's.
    strongest = np.sqrt((data.x ** 2).mean(axis=1)).argmax(axis=1)
    assert strongest.tolist() == data.y.tolist()
    manifest = json.loads((tmp_path / "session" / "manifest.json").read_text())
    assert manifest["plan"]["classes"] == ["fist", "open", "point"]


@pytest.mark.slow
def test_collection_resumes_after_a_power_cut(tmp_path):
    windows, rest = _gestures()
    plan = Plan("test", ("fist", "open", "point"), repetitions=2, window_seconds=0.5, rest_seconds=0, countdown=1)
    first = _run(tmp_path, Plan("test", plan.classes, repetitions=1, window_seconds=0.5, rest_seconds=0,
                                countdown=1), PerformingSource(windows, rest), Collecting())
    assert sum(first.accepted.values()) == 3
    prompter = Collecting()
    second = _run(tmp_path, plan, PerformingSource(windows, rest), prompter)
    assert sum(second.accepted.values()) == 3
    assert any(line.startswith("resuming: 3 windows") for line in prompter.lines)
    assert len(load_session(tmp_path / "session")) == 6


def test_quality_checks_speak_plainly():
    window = np.random.default_rng(0).normal(size=(100, 4)) * 20
    assert check_window(window, "int8") == []
    flat = window.copy()
    flat[:, 3] = 5
    assert check_window(flat, "int8") == ["channel 3 is flat - check the electrode or sensor"]
    clipped = window.copy()
    clipped[:10, 1] = 127
    assert "channel 1 clips (10% of samples at full scale)" in check_window(clipped, "int8")[0]
    quiet = np.random.default_rng(1).normal(size=(100, 4))
    assert "no movement seen" in check_window(quiet, "int8", rest=quiet)[0]


def test_plans():
    assert len(load_plan("isl26").prompts()) == 26 * 5
    assert load_plan("gestures4").prompts()[:5] == ["rest", "fist", "open", "point", "rest"]
    with pytest.raises(PlanError, match="at least 2 classes"):
        Plan("x", ("a",))
    with pytest.raises(PlanError, match="unknown plan"):
        load_plan("nope")


def test_plan_file(tmp_path):
    path = tmp_path / "machine.toml"
    path.write_text('classes = ["idle", "load"]\nrepetitions = 3\nwindow_seconds = 0.25\nkind = "continuous"\n')
    plan = load_plan(str(path))
    assert plan.name == "machine" and plan.classes == ("idle", "load") and plan.kind == "continuous"
