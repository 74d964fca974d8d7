"""A recording that repeats itself is noticed while it is recorded (issue 54): a file played in a loop is not a
machine, and its copies would set a scorer's threshold on windows it has seen."""

import json

import numpy as np
import pytest

from firmware_bridge.errors import CollectionPaused
from firmware_bridge.guide import GuidedCollection, Prompter
from firmware_bridge.link import Link
from firmware_bridge.person import Machine
from firmware_bridge.plan import Plan
from firmware_bridge.protocol import Hello
from firmware_bridge.recorder import Recorder, RecordingThread
from firmware_bridge.repeats import REPEATED, RepeatWatch
from firmware_bridge.simulator import ArraySource, Simulator


def _shares(stream, segment):
    watch, shares = RepeatWatch(), []
    for start in range(0, len(stream) - segment + 1, segment):
        window = stream[start:start + segment]
        shares.append(watch.repeated_share(window))
        watch.remember(window)
    return shares


def test_a_looped_file_is_noticed_from_its_second_pass_and_real_noise_never():
    rng = np.random.default_rng(0)
    loop = (rng.normal(size=(5_000, 2)) * 3).astype(np.int16)  # faint, two channels: few distinct values
    shares = _shares(np.concatenate([loop] * 3), 1_000)
    assert max(shares[:5]) == 0.0 and min(shares[6:]) >= REPEATED
    fresh = (rng.normal(size=(30_000, 2)) * 3).astype(np.int16)
    assert max(_shares(fresh, 1_000)) == 0.0
    # The simulated machine replays its recording under fresh sensor noise, as a sensor would: never a repeat.
    machine = Machine({"normal": loop.astype(np.float64) * 100}, np.int16, seed=1)
    machine.set_state("normal")
    assert max(_shares(machine.read(15_000), 1_000)) < REPEATED


def test_a_flat_stretch_is_not_called_a_loop():
    assert max(_shares(np.zeros((10_000, 1), np.int16), 1_000)) == 0.0


class _Prompter(Prompter):
    def __init__(self):
        self.said = []

    def say(self, text):
        self.said.append(text)


def test_a_machine_plan_fed_a_looped_file_pauses_with_the_reason_and_keeps_what_is_whole(tmp_path):
    rate = 1000.0
    loop = (np.random.default_rng(2).normal(size=(1_500, 1)) * 400).astype(np.int16)  # 1.5 s played in a loop
    plan = Plan("m", ("normal",), kind="continuous", window_seconds=0.5, hold_seconds=4.0, repetitions=1,
                rest_seconds=0.0, countdown=0, task="anomaly")
    prompter = _Prompter()
    with Simulator(ArraySource(loop), Hello("sim", "1", 1, rate, "int16"), port_dir=tmp_path) as simulator, \
            Link(simulator.port).open() as link:
        with Recorder(tmp_path / "session", link.wait_hello(30), labels=plan.classes, plan=plan.to_dict()) as recorder:
            thread = RecordingThread(link, recorder)
            thread.start()
            try:
                with pytest.raises(CollectionPaused) as paused:
                    GuidedCollection(recorder, plan, prompter, timeout_seconds=60).run()
            finally:
                thread.stop()
    assert "a file played in a loop" in str(paused.value)  # said at the segment it happened, with what to do
    records = [json.loads(line) for line in (tmp_path / "session" / "windows.jsonl").read_text().splitlines()]
    kept = [r for r in records if "label" in r]
    assert 2 <= len(kept) < plan.segments  # the first pass (1.5 s) is kept; the loop is not
    assert any("repeats what was recorded before" in line for line in prompter.said)
