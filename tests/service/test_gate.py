"""The deploy gate's ask is in proportion: whole held-out recordings, at most the plan's own length per step, with the
minutes it takes; shown as one more step, not an error (issue 54)."""

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from firmware_bridge.plan import PRESETS, Plan
from tinynas.service.gate import GateOutcome, ask, outcome
from tinynas.verdict import HeldOut, deploy_gate

GESTURES5 = Plan("gestures4-5", ("rest", "fist", "open", "point"), repetitions=5, window_seconds=2.0,
                 rest_seconds=2.0, countdown=3, rest_class="rest")


def _gate(hits, windows, plan, classes=4, minimum=0.5):
    share = windows / (plan.repetitions * classes)
    verdict = deploy_gate(HeldOut(hits, windows), minimum, classes, share)
    held = {**HeldOut(hits, windows).to_dict(), "recall": [1.0, 1.0, hits / windows, None][:classes]}
    return verdict, outcome(verdict, held, plan.classes, plan, "dan", share, "")


def test_one_wrong_of_four_asks_one_step_of_the_plan_not_fifteen_more():
    verdict, gate = _gate(3, 4, GESTURES5)
    assert verdict.more_per_class == 15  # what the count alone asked (~8.5 min)
    assert gate.decision == "undecided" and gate.more_per_class == 5 and gate.bounded
    assert gate.minutes == round(5 * 4 * 7 / 60, 1)  # 5 rounds of 4 prompts of 7 s (countdown, sign, rest)
    assert gate.adds_held_out == 4 and "gestures4's" in gate.advice  # a 15-repetition plan would have decided
    assert gate.command == "tinynas onboard --user dan --more 5"
    assert "then the gate decides again" in gate.words()


def test_two_wrong_of_four_still_asks_one_step():
    verdict, gate = _gate(2, 4, GESTURES5)
    assert verdict.decision == "undecided" and verdict.more_per_class > 30  # 120 per class in a journey
    assert gate.more_per_class == 5


def test_the_fifteen_repetition_plan_gets_no_advice_to_use_itself():
    plan = PRESETS["gestures4"]
    verdict, gate = _gate(9, 12, plan)
    assert verdict.decision == "undecided" and gate.more_per_class <= plan.repetitions and not gate.advice


def test_a_refusal_says_what_to_do_and_the_per_class_recall():
    verdict, gate = _gate(0, 12, PRESETS["gestures4"])
    assert verdict.decision == "refuse" and gate.decision == "refuse" and gate.more_per_class == 0
    assert gate.recall == {"rest": 1.0, "fist": 1.0, "open": 0.0, "point": None}
    assert "record again with the sensor placed as during the recording" in gate.command


def test_the_outcome_survives_the_state_file_and_a_damaged_one_is_dropped():
    _, gate = _gate(3, 4, GESTURES5)
    assert GateOutcome.from_dict(gate.to_dict()) == gate
    assert GateOutcome.from_dict({"user": 3, "decision": "maybe"}) is None
    assert GateOutcome.from_dict([]) is None and GateOutcome.from_dict({}) is None


@settings(max_examples=300, deadline=None)
@given(needed=st.integers(1, 10_000), repetitions=st.integers(1, 40), classes=st.integers(2, 26),
       share=st.floats(0.05, 0.6))
def test_the_ask_never_exceeds_its_bound_and_always_adds_held_out_windows(needed, repetitions, classes, share):
    plan = Plan("p", tuple(f"c{i}" for i in range(classes)), repetitions=repetitions, window_seconds=1.0)
    per_class, minutes, adds = ask(needed, plan, classes, share)
    step = math.ceil(1 / share)
    assert per_class % step == 0 and per_class >= step  # whole held-out recordings per class
    assert per_class <= max(step, math.ceil(repetitions / step) * step)  # the plan's own length, in whole steps
    assert adds >= classes  # every step is a new measurement
    assert minutes == per_class * classes * (plan.countdown + plan.block_seconds + plan.rest_seconds) / 60
