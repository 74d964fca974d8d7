"""Guided collection with a simulated user over a real pseudo-terminal."""

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from firmware_bridge import onset
from firmware_bridge.errors import CollectionPaused
from firmware_bridge.guide import GuidedCollection, Prompter, check_window
from firmware_bridge.link import Link
from firmware_bridge.plan import Plan, PlanError, load_plan
from firmware_bridge.protocol import Hello
from firmware_bridge.recorder import Recorder, RecordingThread
from firmware_bridge.simulator import PerformingSource, Simulator
from tinynas.data.session import load_session, read_window_records


class Collecting(Prompter):
    def __init__(self, redo_first=False):
        self.lines = []
        self.redo_first = redo_first

    def say(self, text):
        self.lines.append(text)

    def wants_redo(self, seconds):
        super().wants_redo(seconds)  # the rest passes as it would for a person
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


def _perform(source, label, go, performs=None):
    # The simulated user reacts to "go" a little late (more so on a loaded machine), like a person: the
    # gesture lasts twice the window, so a late start still fills the window. Real time, not sped up.
    if performs is None or performs(label):
        source.perform(label, repeats=2)


def _run(tmp_path, plan, source, prompter, channels=4, performs=None, redon=None, max_attempts=3):
    hello = Hello("sim", "1", channels, 200.0, "int8")
    with Simulator(source, hello, port_dir=tmp_path) as simulator, Link(simulator.port).open() as link:
        with Recorder(tmp_path / "session", link.wait_hello(30), labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                guide = GuidedCollection(recorder, plan, prompter,
                                         on_prompt=lambda label, go: _perform(source, label, go, performs),
                                         timeout_seconds=60, redon=redon, max_attempts=max_attempts)
                return guide.run()
            finally:
                thread.stop()


# Every prompt of a collection costs real time: its countdown, the person's sign (the window) and the rest after it
# (about 3 s at the sizes below). So each test prompts no more than its subject needs: one sign per class where the
# subject is the labels, a countdown only where the countdown is said or timed, and one collection read by the
# tests that only read it. The rest stays 1.5 s everywhere: a sign is held a window longer than the window (0.5 s
# past the window's end), and the rest must outlast that tail and leave a rest window (0.5 s) after it, with room
# for a stream that lags a loaded host, so that the next prompt's rest level is measured on rest.


@pytest.fixture(scope="module")
def collected(tmp_path_factory):
    """One guided collection of three signs, once each, the first redone: what the tests that only read a whole
    collection read (a test that adds to it works on a copy of its session)."""
    folder = tmp_path_factory.mktemp("collected")
    windows, rest = _gestures()
    plan = Plan("test", ("fist", "open", "point"), repetitions=1, window_seconds=0.5, rest_seconds=1.5, countdown=1)
    prompter = Collecting(redo_first=True)
    result = _run(folder, plan, PerformingSource(windows, rest), prompter)
    return SimpleNamespace(session=folder / "session", plan=plan, prompter=prompter, result=result)


@pytest.mark.slow
def test_guided_collection_records_checked_labelled_windows(collected):
    result, prompter = collected.result, collected.prompter
    assert dict(result.accepted) == {"fist": 1, "open": 1, "point": 1} and result.redone == 1
    assert "Perform sign fist - 1" in prompter.lines and "go" in prompter.lines
    assert sum(line == "Perform sign fist - 1" for line in prompter.lines) == 2  # the redone sign is asked again
    data = load_session(collected.session)
    assert np.bincount(data.y).tolist() == [1, 1, 1]  # the redone window is retracted, its new one kept
    # Each window carries its class's channel pattern: the strongest channel is the class's.
    strongest = np.sqrt((data.x ** 2).mean(axis=1)).argmax(axis=1)
    assert strongest.tolist() == data.y.tolist()
    manifest = json.loads((collected.session / "manifest.json").read_text())
    assert manifest["plan"]["classes"] == ["fist", "open", "point"]


@pytest.mark.slow
def test_collection_resumes_after_a_power_cut(collected, tmp_path):
    # The power cut came after the first round (the shared collection, copied): the plan asks for two rounds.
    shutil.copytree(collected.session, tmp_path / "session")
    windows, rest = _gestures()
    plan = replace(collected.plan, repetitions=2, countdown=0)  # the countdown is not the subject here
    prompter = Collecting()
    second = _run(tmp_path, plan, PerformingSource(windows, rest), prompter)
    assert dict(second.accepted) == {"fist": 1, "open": 1, "point": 1}
    assert any(line.startswith("resuming: 3 windows") for line in prompter.lines)
    data = load_session(tmp_path / "session")
    assert len(data) == 6 and np.bincount(data.y).tolist() == [2, 2, 2]


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
    assert len(load_plan("isl26").prompts()) == 26 * 10
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


@pytest.mark.slow
def test_a_sign_rejected_too_often_pauses_the_collection_and_keeps_its_windows(tmp_path):
    windows, rest = _gestures()
    plan = Plan("test", ("fist", "open"), repetitions=1, window_seconds=0.5, rest_seconds=1.5, countdown=0)
    # A loose electrode after the first sign: the user moves, the sensor sees nothing (three attempts at "open").
    performed = []
    prompter = Collecting()
    with pytest.raises(CollectionPaused) as caught:
        _run(tmp_path, plan, PerformingSource(windows, rest), prompter,
             performs=lambda label: performed.append(label) or len(performed) <= 1)
    paused = caught.value
    assert performed == ["fist"] + ["open"] * 3
    assert paused.label == "open" and "no sign seen within 1.5 s of go" in str(paused)
    assert "check the electrodes" in str(paused)
    assert "1 accepted window(s) kept" in str(paused) and "\n" not in str(paused)
    assert len(load_session(tmp_path / "session")) == 1
    # Electrode fixed: running again continues from the kept window.
    prompter = Collecting()
    second = _run(tmp_path, plan, PerformingSource(windows, rest), prompter)
    assert dict(second.accepted) == {"open": 1}
    assert any(line.startswith("resuming: 1 windows") for line in prompter.lines)
    assert np.bincount(load_session(tmp_path / "session").y).tolist() == [1, 1]


@pytest.mark.slow
def test_collect_command_pauses_in_one_line(tmp_path):
    windows, rest = _gestures()
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"classes": ["fist", "open"], "repetitions": 1, "window_seconds": 0.25,
                                "rest_seconds": 0.25, "countdown": 0}))
    hello = Hello("sim", "1", 4, 200.0, "int8")
    # Nobody performs: every attempt is rejected and the command stops with one line, exit 2.
    with Simulator(PerformingSource(windows, rest), hello, port_dir=tmp_path / "dev") as simulator:
        run = subprocess.run([sys.executable, "-m", "tinynas.cli", "collect", "--port", simulator.port, "--plan",
                              str(plan), "--out", str(tmp_path / "session"), "--headless"],
                             capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert (last.startswith("tinynas: error: collection paused at fist: 3 attempts rejected")
            and "Traceback" not in run.stderr)
    assert (tmp_path / "session" / "manifest.json").exists()


@pytest.mark.parametrize("text, message", [
    ("[1, 2]", "must be an object with at least 'classes'"),
    ('{"repetitions": 2}', "missing 'classes'"),
    ('{"classes": 3}', "'classes' must be a list of class names, not 3"),
    ('{"classes": ["a", "b"], "repetitions": "two"}', "'repetitions' must be a whole number"),
    ('{"classes": ["a", "b"], "colour": "red"}', "unknown key(s) colour"),
    ("\u00ff\u00fe not json", "not a JSON plan"),
    ('{"classes": ["a", "b"], "window_seconds": 0}', "window > 0 s"),
])
def test_a_bad_plan_file_says_which_key_and_what_it_should_be(tmp_path, text, message):
    path = tmp_path / "plan.json"
    path.write_text(text, encoding="latin-1")
    with pytest.raises(PlanError) as info:
        load_plan(str(path))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_good_plan_file_loads(tmp_path):
    path = tmp_path / "mine.json"
    path.write_text('{"classes": ["open", "close"], "repetitions": 2, "window_seconds": 1.5}')
    plan = load_plan(str(path))
    assert plan.name == "mine" and plan.classes == ("open", "close") and plan.repetitions == 2


def test_a_rest_class_is_checked_for_stillness_not_for_movement():
    rng = np.random.default_rng(0)
    baseline = rng.normal(size=(200, 4)) * 2
    still = rng.normal(size=(200, 4)) * 2  # a person really resting: as quiet as the baseline
    assert check_window(still, "int8", rest=baseline, still=True) == []
    assert "no movement seen" in check_window(still, "int8", rest=baseline)[0]  # as a sign it would be refused
    moving = rng.normal(size=(200, 4)) * 20
    assert "movement seen while resting" in check_window(moving, "int8", rest=baseline, still=True)[0]
    assert load_plan("gestures4").rest_class == "rest"


def test_the_baseline_is_never_a_previous_attempt_s_signal():
    """A late sign runs into the next prompt's rest period: that is not rest, and later windows must not be
    compared with it (it snowballed into pauses: 12.8 vs rest 10.7, then 13.0 vs 12.8, ...)."""
    from types import SimpleNamespace

    recorder = SimpleNamespace(hello=Hello("sim", "1", 4, 200.0, "int8"))
    guide = GuidedCollection(recorder, load_plan("gestures4"))
    rng = np.random.default_rng(0)
    quiet, loud = rng.normal(size=(200, 4)) * 2, rng.normal(size=(200, 4)) * 12
    assert guide._true_rest(quiet) is quiet
    assert guide._true_rest(loud) is quiet  # a sign still going on when the prompt came: the quiet rest is used
    quieter = rng.normal(size=(200, 4)) * 1.5
    assert guide._true_rest(quieter) is quieter and guide._true_rest(None) is quieter


@pytest.mark.parametrize("fields, message", [
    ({"classes": ("a", "b"), "rest_class": "idle"}, "rest_class 'idle' is not one of its classes"),
    ({"classes": ("a", "b"), "rest_class": "a", "kind": "continuous"}, "rest_class goes with gesture plans"),
])
def test_a_bad_rest_class_is_refused_before_anything_is_recorded(fields, message):
    with pytest.raises(PlanError, match=message):
        Plan("x", **fields)


class LatePerson(PerformingSource):
    """Starts each sign a stated time after "go", as people do (0.2-0.5 s, now and then a second)."""

    def __init__(self, windows, rest, delays_seconds, rate=200.0):
        super().__init__(windows, rest)
        self.delays = list(delays_seconds)
        self.rate = rate

    def react(self, label, _go):
        delay = self.delays.pop(0) if self.delays else 0.3
        self.perform(label, delay_samples=int(delay * self.rate), repeats=2)


@pytest.mark.slow
def test_a_late_sign_is_found_where_the_person_made_it(tmp_path):
    windows, rest = _gestures()
    # Reaction times from quick to a second late: a window cut at "go" would hold rest (0.5 s windows). The six of
    # them are the subject; the countdown is not (the person reacts to "go"; the 0.3 s before it are the rest's end).
    person = LatePerson(windows, rest, [0.1, 0.9, 1.1, 0.5, 0.7, 0.2])
    plan = Plan("test", ("fist", "open", "point"), repetitions=2, window_seconds=0.5, rest_seconds=1.5, countdown=0)
    hello = Hello("sim", "1", 4, 200.0, "int8")
    with Simulator(person, hello, port_dir=tmp_path) as simulator, Link(simulator.port).open() as link:
        with Recorder(tmp_path / "session", link.wait_hello(30), labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                result = GuidedCollection(recorder, plan, Collecting(), on_prompt=person.react,
                                          timeout_seconds=60).run()
            finally:
                thread.stop()
    assert dict(result.accepted) == {"fist": 2, "open": 2, "point": 2} and result.rejected == 0
    data = load_session(tmp_path / "session")
    strongest = np.sqrt((data.x ** 2).mean(axis=1)).argmax(axis=1)
    assert strongest.tolist() == data.y.tolist()
    # Each window lies on the sign the person made (not on the rest before it): it starts the pre-roll before the
    # onset, which is found to a frame (a sign that begins inside a frame is heard from the frame's start).
    played = {first: count for _label, first, count in person.played}
    early = int(round(onset.PREROLL_FRACTION * 100)) + onset.frame_length(200.0)  # 100-sample windows at 200 Hz
    for start in data.time_index:
        assert any(first - early <= start and start + 100 <= first + count + 20 for first, count in played.items())
    # And where the sign began is recorded with it: within a frame or two of where the person started.
    for record in read_window_records(tmp_path / "session"):
        assert any(abs(record["onset"] - first) <= 40 for first in played), record


@pytest.mark.slow
def test_a_sign_started_too_late_is_asked_again_never_cut_at_go(tmp_path):
    """A person who starts 2 s after "go" (past onset.LATE_SECONDS) gets the prompt again; no window is kept that
    starts at "go" with rest in it under the sign's label."""
    windows, rest = _gestures()
    # The countdown stays: the late sign (2.0-3.0 s after the first "go") is still going on at the second "go", 2.7 s
    # after the first, and the guide must wait for the retry's own sign after a quieter frame. One sign after the
    # retry shows the collection goes on as before.
    person = LatePerson(windows, rest, [2.0, 0.3, 0.2])
    plan = Plan("test", ("fist", "open"), repetitions=1, window_seconds=0.5, rest_seconds=1.5, countdown=1)
    hello = Hello("sim", "1", 4, 200.0, "int8")
    with Simulator(person, hello, port_dir=tmp_path) as simulator, Link(simulator.port).open() as link:
        with Recorder(tmp_path / "session", link.wait_hello(30), labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                result = GuidedCollection(recorder, plan, Collecting(), on_prompt=person.react,
                                          timeout_seconds=60).run()
            finally:
                thread.stop()
    assert dict(result.accepted) == {"fist": 1, "open": 1}
    events = [json.loads(line) for line in (tmp_path / "session" / "events.jsonl").read_text().splitlines()]
    [rejected] = [e for e in events if "rejected" in e]
    assert "no sign seen within 1.5 s of go" in rejected["problems"][0]
    records = read_window_records(tmp_path / "session")
    assert all(record["start"] != record["go"] and record["onset"] > record["start"] for record in records)
    played = [first for _label, first, _count in person.played]
    assert all(any(abs(record["onset"] - first) <= 40 for first in played) for record in records)


@pytest.mark.parametrize("fields, message", [
    ({"hold_seconds": 0.5, "window_seconds": 1.0}, r"hold_seconds = 0.5 s; a block holds a state from one segment"),
    ({"hold_seconds": 36000.0}, r"to 3600 s"),
    ({"window_seconds": 120.0}, r"at most 30 s per recorded segment"),
    ({"order": ("a", "c")}, r"order names c, not among its classes"),
    ({"order": ("a", "a")}, r"order never prompts b"),
    ({"window_samples": -1}, r"sample counts"),
    ({"hold_seconds": 3000.0, "repetitions": 20}, r"would take 33.4 h \(40 prompts\); at most 12 h"),
])
def test_a_machine_plan_with_impossible_durations_is_refused_in_one_line(fields, message):
    with pytest.raises(PlanError, match=message):
        Plan("m", ("a", "b"), kind="continuous", **fields)
    with pytest.raises(PlanError, match="go with continuous plans"):
        Plan("g", ("a", "b"), hold_seconds=10.0)


def test_confirm_goes_with_machine_plans_only():
    assert Plan("m", ("a", "b"), kind="continuous", confirm=True).confirm
    with pytest.raises(PlanError, match="confirm = true goes with continuous plans"):
        Plan("g", ("a", "b"), confirm=True)  # a person is prompted with a countdown: nothing would confirm it


def test_a_plan_file_sets_the_order_durations_window_and_hop(tmp_path):
    path = tmp_path / "pump.toml"
    path.write_text('classes = ["normal", "worn"]\norder = ["normal", "normal", "worn"]\nkind = "continuous"\n'
                    'window_seconds = 1.0\nhold_seconds = 5\nwindow_samples = 256\nhop_samples = 128\n'
                    'confirm = true\n')
    plan = load_plan(str(path))
    assert plan.prompts() == ["normal", "normal", "worn"] and (plan.segments, plan.block_seconds) == (5, 5.0)
    assert (plan.window_samples, plan.hop_samples, plan.confirm) == (256, 128, True)
    bearing = load_plan("bearing4")
    assert bearing.kind == "continuous" and bearing.confirm and bearing.block_seconds >= 10


class Machine(PerformingSource):
    """A machine that runs in the state it was last set to (each state its own steady vibration)."""

    def __init__(self, gains, rate):
        self.gains, self.rate = gains, rate
        self.state = next(iter(gains))
        self._rng = np.random.default_rng(0)
        self.samples_read = 0

    def read(self, count):
        self.samples_read += count
        return (self._rng.normal(size=(count, 1)) * self.gains[self.state]).astype(np.int16)


@pytest.mark.slow
def test_a_machine_block_is_held_confirmed_and_recorded_as_segments_that_never_span_an_unplug(tmp_path):
    plan = Plan("m", ("idle", "load"), kind="continuous", window_seconds=0.25, hold_seconds=1.0, repetitions=1,
                rest_seconds=0.0, countdown=0, confirm=True)
    machine = Machine({"idle": 50, "load": 900}, 1000.0)
    hello = Hello("sim", "1", 1, 1000.0, "int16")
    confirmed = []

    def confirm(label):  # the operator switches the machine, then confirms
        machine.state = label
        confirmed.append(label)

    with Simulator(machine, hello, port_dir=tmp_path) as simulator, Link(simulator.port).open() as link:
        with Recorder(tmp_path / "session", link.wait_hello(30), labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                def prompt(label, _go):
                    if label == "load":  # the cable is pulled while the second block records
                        simulator.unplug(0.3)
                guide = GuidedCollection(recorder, plan, Collecting(), on_prompt=prompt, confirm=confirm,
                                         timeout_seconds=60)
                guide.run()
            finally:
                thread.stop()
    assert confirmed == ["idle", "load"]
    records = [json.loads(line) for line in (tmp_path / "session" / "windows.jsonl").read_text().splitlines()]
    assert [r["label"] for r in records] == ["idle"] * 4 + ["load"] * 4
    assert [r["segment"] for r in records] == [0, 1, 2, 3] * 2
    windows = load_session(tmp_path / "session")
    assert len(windows) == 8 and windows.provenance["changed_windows"] == 0
    assert not np.isnan(windows.x).any()  # no segment holds a sample that was never received
    level = np.sqrt((windows.x.astype(np.float64) ** 2).mean(axis=(1, 2)))
    assert level[:4].max() < 100 < 600 < level[4:].min()  # each segment holds the state it is labelled with


def test_one_state_is_an_anomaly_plan_and_only_that():
    with pytest.raises(PlanError, match="task = anomaly"):
        Plan("healthy", ("normal",), kind="continuous")
    with pytest.raises(PlanError, match="one class"):
        Plan("healthy", ("normal", "ball"), kind="continuous", task="anomaly")
    with pytest.raises(PlanError, match="kind = continuous"):
        Plan("healthy", ("normal",), task="anomaly")
    assert load_plan("motor-normal").task == "anomaly"


@pytest.mark.slow
def test_a_two_donning_plan_asks_once_halfway_and_its_second_half_is_a_session_to_validate_on(tmp_path):
    from tinynas.data.splits import make_split

    windows, rest = _gestures()
    source = PerformingSource(windows, rest)
    # Three rounds of two signs: the smallest plan whose second donning holds two windows of each sign, one to
    # validate and one to test on. The countdown is not the subject.
    plan = Plan("donned twice", ("fist", "open"), repetitions=3, window_seconds=0.5, rest_seconds=1.5,
                countdown=0, donnings=2)
    assert plan.redon_after == 2  # one of the three rounds (the second donning gets the larger half), then the re-don
    asked = []
    # The person is away after the re-don: the collection pauses with the first half and the re-don kept (at the
    # first rejected attempt: how many attempts make a pause is another test's subject).
    with pytest.raises(CollectionPaused):
        _run(tmp_path, plan, source, Collecting(), performs=lambda label: not asked, redon=lambda: asked.append(1),
             max_attempts=1)
    assert len(asked) == 1
    # Resumed (after a power cut, say): the re-don is on record and is not asked again.
    result = _run(tmp_path, plan, source, Collecting(), redon=lambda: asked.append(2))
    assert len(asked) == 1 and dict(result.accepted) == {"fist": 2, "open": 2}
    data = load_session(tmp_path / "session")
    donned = [str(name).endswith("donning 2") for name in data.sessions]
    assert donned == [False] * 2 + [True] * 4
    split = make_split(data, "auto", seed=0)
    assert split.held_out and "donning 2" in split.held_out
    assert all(donned[i] for i in np.concatenate([split.val, split.test])) and not any(donned[i] for i in split.train)


@pytest.mark.parametrize("fields", [{"donnings": 3}, {"donnings": 2, "kind": "continuous"}])
def test_a_plan_donned_more_than_twice_or_for_a_machine_is_refused(fields):
    with pytest.raises(PlanError, match="donnings is 1 or 2"):
        Plan("p", ("a", "b"), **fields)


def _raw_adc(signal: np.ndarray) -> np.ndarray:
    """What a sketch printing `analogRead()` sends for a centred `signal`: 512 at rest, 0 to 1023."""
    return np.clip(np.round(512 + signal), 0, 1023)


@pytest.mark.parametrize("still", [False, True])
def test_an_offset_sensor_is_judged_exactly_as_a_centred_one(still):
    """The movement check measures about each channel's rest mean: a raw ADC's 512 changes neither the verdict
    nor the figures it gives."""
    rng = np.random.default_rng(3)
    rest = rng.normal(size=(200, 4)) * 2
    for window in (rng.normal(size=(100, 4)) * 2, rng.normal(size=(100, 4)) * 20,
                   np.sin(np.arange(100) / 2.0)[:, None] * np.array([300.0, 50.0, 20.0, 5.0])):
        assert (check_window(window + 512, "float32", rest + 512, still=still)
                == check_window(window, "float32", rest, still=still))


def test_a_raw_adc_sketchs_full_scale_movement_is_movement():
    """A full-scale sine on a raw `analogRead()` sketch reached 1.22x the rest level measured with its offset
    (against 1.5x): never movement, and the advice blamed the electrodes. About the rest mean it is movement, and
    its onset is found where it began, as on the centred signal."""
    rng = np.random.default_rng(4)
    rest = rng.normal(size=(200, 4)) * 2
    moving = np.sin(2 * np.pi * 40 * np.arange(100) / 200)[:, None] * 500 + rng.normal(size=(100, 4)) * 2
    assert check_window(_raw_adc(moving), "float32", _raw_adc(rest)) == []
    stream = np.concatenate([rng.normal(size=(100, 4)) * 2, moving])
    assert onset.find_onset(_raw_adc(stream), _raw_adc(rest), 200.0) == onset.find_onset(stream, rest, 200.0) == 100
    still = rng.normal(size=(100, 4)) * 2
    assert "no movement seen" in check_window(_raw_adc(still), "float32", _raw_adc(rest))[0]


def test_the_centred_case_keeps_its_figures():
    """For a centred sensor (tinynas's firmware, int8) the rest mean is about 0: the figures said are the plain RMS
    ones as before, to the decimal shown."""
    rng = np.random.default_rng(5)
    rest = np.round(rng.normal(size=(200, 4)) * 3)
    quiet = np.round(rng.normal(size=(100, 4)) * 3)
    [problem] = check_window(quiet, "int8", rest)
    plain = (np.sqrt(np.mean(quiet ** 2)), np.sqrt(np.mean(rest ** 2)))
    assert f"(signal RMS {plain[0]:.1f} vs rest {plain[1]:.1f})" in problem


SKETCH = r'''
"""A user's sketch, as a plain program: four analogRead() values a line at 200 Hz, 512 at rest; 'move C' on stdin
makes a second of full-scale movement on channel C; 'reset' is the board resetting (a silence, its banner and
header again, the count from 0)."""
import math, os, random, sys, threading, time

fd, rate = int(sys.argv[1]), 200.0
commands = []
threading.Thread(target=lambda: [commands.append(line.split()) for line in sys.stdin], daemon=True).start()
rng = random.Random(0)


def banner():
    os.write(fd, b"EMG sketch 1.0 - analogRead x4 at 200 Hz\r\na0,a1,a2,a3\r\n")


banner()
n, started, moving, until = 0, time.monotonic(), 0, -1
while True:
    while commands:
        word = commands.pop(0)
        if word[0] == "move":
            moving, until = int(word[1]), n + int(rate)
        elif word[0] == "reset":
            time.sleep(0.6)
            banner()
            n, started, until = 0, time.monotonic(), -1
    values = []
    for channel in range(4):
        value = 512 + rng.gauss(0, 2)
        if n < until:
            value += (500 if channel == moving else 60) * math.sin(2 * math.pi * 40 * n / rate + channel)
        values.append(min(1023, max(0, int(round(value)))))
    os.write(fd, (",".join(map(str, values)) + "\r\n").encode())
    n += 1
    delay = started + n / rate - time.monotonic()
    if delay > 0:
        time.sleep(delay)
'''


class ResettingRest(Collecting):
    """A person resting between signs, while the board resets once (the second rest)."""

    def __init__(self, sketch):
        super().__init__()
        self.sketch, self.rests = sketch, 0

    def wants_redo(self, seconds):
        self.rests += 1
        if self.rests == 2:
            self.sketch.stdin.write("reset\n")
            self.sketch.stdin.flush()
        return super().wants_redo(seconds)


@pytest.mark.slow
def test_a_raw_adc_sketch_whose_board_resets_gives_its_windows(tmp_path):
    """A sketch tinynas did not write (a plain program printing raw analogRead() values to a pseudo-terminal) through
    `csv:PORT?rate=200`: the guide hears its signs (offset 512), the board resets once between two signs with its
    banner and header (a new epoch, not a rate change), and every prompt gives its window on the first attempt."""
    import os

    from firmware_bridge.text_link import TextLink

    master, slave = os.openpty()
    # Each sign once (its own channel), the reset in the rest between the second and the third; no countdown (the
    # sketch moves at "go").
    plan = Plan("raw", ("fist", "open", "point"), repetitions=1, window_seconds=0.5, rest_seconds=1.5, countdown=0)
    channel = {"fist": 0, "open": 1, "point": 2}
    sketch = None
    try:
        with TextLink(f"csv:{os.ttyname(slave)}?rate=200").open() as link:
            sketch = subprocess.Popen([sys.executable, "-c", SKETCH, str(master)], stdin=subprocess.PIPE, text=True,
                                      pass_fds=(master,))
            hello = link.wait_hello(30)
            assert (hello.channels, hello.sample_rate_hz) == (4, 200.0)

            def move(label, _go):
                sketch.stdin.write(f"move {channel[label]}\n")
                sketch.stdin.flush()

            with Recorder(tmp_path / "session", hello, labels=plan.classes, plan=plan.to_dict()) as recorder:
                thread = RecordingThread(link, recorder)
                thread.start()
                try:
                    result = GuidedCollection(recorder, plan, ResettingRest(sketch), on_prompt=move,
                                              timeout_seconds=60).run()
                finally:
                    thread.stop()
            assert link.counters.resets == 1 and link.counters.foreign_samples == 0 and not link.problem
    finally:
        if sketch is not None:
            sketch.kill()
            sketch.wait()
        os.close(master)
        os.close(slave)
    assert dict(result.accepted) == {"fist": 1, "open": 1, "point": 1} and result.rejected == 0
    data = load_session(tmp_path / "session")
    spread = data.x.std(axis=1)  # about each window's own mean: the channel that moved
    assert spread.argmax(axis=1).tolist() == data.y.tolist()
    assert [record["epoch"] for record in read_window_records(tmp_path / "session")] == [0, 0, 1]
