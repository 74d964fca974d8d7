"""The simulated person and machine: as people and machines are, not as the code expects."""

import logging

import numpy as np
import pytest

from firmware_bridge.person import Behaviour, Machine, Person


def _person(**behaviour):
    rng = np.random.default_rng(0)
    signs = {"A": rng.normal(size=(3, 400, 8)) * 20, "B": rng.normal(size=(3, 400, 8)) * 30}
    return Person(signs, 8, 200.0, np.int16, noise=1.5, behaviour=Behaviour(**behaviour), rest_class="rest")


def test_reaction_times_follow_the_stated_distribution_with_late_starts():
    person = _person(late_probability=0.1)
    times = np.array([person.reaction_seconds() for _ in range(2000)])
    late = (times >= 0.7) & (times <= 1.1)
    assert 0.07 < late.mean() < 0.16  # ~10 % late starts (and a few slow ordinary reactions)
    assert 0.3 < np.median(times) < 0.42 and times.min() > 0.05


def test_a_person_rests_still_and_signs_late_after_go():
    person = _person(late_probability=0.0, wrong_probability=0.0, miss_probability=0.0, reaction_spread=0.0)
    assert person.react("rest", 2.0)["made"] is None
    still = person.read(400).astype(float)
    assert 1.0 < still.std() < 2.0  # sensor noise, nothing else
    done = person.react("A", 2.0, since_go_seconds=0.1)
    assert done == {"asked": "A", "made": "A", "reaction_seconds": 0.35}
    stream = person.read(1000).astype(float)
    level = np.sqrt((stream.reshape(-1, 10, 8) ** 2).mean(axis=(1, 2)))
    onset = int(np.argmax(level > 5)) * 10
    assert abs(onset - 0.25 * 200) <= 10  # the sign starts 0.35 s after GO, seen 0.1 s after it
    assert (level[onset // 10:(onset + 500) // 10] > 5).all()  # held the window and half a second more
    assert person.played[0][0] == "A"


def test_a_person_sometimes_makes_the_wrong_sign_or_none():
    person = _person(wrong_probability=0.2, miss_probability=0.2)
    made = [person.react("A", 0.1)["made"] for _ in range(500)]
    person.read(10)
    assert 0.12 < np.mean([m is None for m in made]) < 0.28
    assert 0.12 < np.mean([m == "B" for m in made]) < 0.28
    with pytest.raises(ValueError, match="probability"):
        Behaviour(wrong_probability=1.5)


def test_a_machine_plays_each_state_on_and_says_when_a_recording_wraps(caplog):
    machine = Machine({"normal": np.arange(100)[:, None], "worn": 1000 + np.arange(50)[:, None]}, np.float32)
    assert np.abs(machine.read(50)).max() < 5  # off until told: sensor noise, no recording used up
    machine.set_state("normal")
    first = machine.read(30)[:, 0]
    machine.set_state("worn")
    worn = machine.read(20)[:, 0]
    machine.set_state("normal")
    # The recording under the sensor's own noise (a hundredth of its level: here ~0.2).
    assert np.allclose(machine.read(30)[:, 0], np.arange(30, 60), atol=1.5)
    assert np.allclose(first, np.arange(30), atol=1.5)
    machine.set_state("worn")
    with caplog.at_level(logging.WARNING):
        again = machine.read(40)[:, 0]
    assert np.allclose(again, [1000 + i % 50 for i in range(20, 60)], atol=1.5)
    assert not np.array_equal(again[30:], worn[:10])  # a wrapped recording is heard afresh, never sample for sample
    machine.stop()
    assert np.abs(machine.read(10)).max() < 5
    assert "worn" in machine.wrapped and "used up and starts again" in caplog.text
    with pytest.raises(ValueError, match="no state 'ball'"):
        machine.set_state("ball")


def test_an_armband_put_on_again_changes_each_channel_s_gain_not_the_sign():
    sign = np.full((1, 40, 3), 20.0)
    person = Person({"fist": sign}, 3, 200.0, np.float32, noise=0.0, behaviour=Behaviour(seed=3))
    person.perform("fist", 0.0, 0.2)
    before = person.read(40)
    gains = person.redon()
    person.perform("fist", 0.0, 0.2)
    after = person.read(40)
    assert person.donnings == 2 and not np.allclose(gains, 1.0) and np.all(gains > 0)
    assert np.allclose(before, 20.0) and np.allclose(after, 20.0 * gains)


def test_an_armband_put_on_again_turned_moves_each_muscle_to_the_next_electrode():
    sign = np.zeros((1, 40, 3))
    sign[..., 0] = 30.0  # the muscle under electrode 0 on the first day
    person = Person({"fist": sign}, 3, 200.0, np.float32, noise=0.0, behaviour=Behaviour(seed=3))
    gains = person.redon(rotation=1)
    person.perform("fist", 0.0, 0.2)
    after = person.read(40)
    assert person.rotation == 1
    assert np.allclose(after[:, 1], 30.0 * gains[1]) and np.allclose(after[:, [0, 2]], 0.0)
