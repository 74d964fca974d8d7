"""Serving's idle and unknown answers: a still window is rest (or unknown), an unsure one is unknown."""

import json

import numpy as np

from firmware_bridge.guide import STILL_FACTOR
from firmware_bridge.plan import Plan, load_plan
from tinynas.data.windows import Windows
from tinynas.service.idle import UNKNOWN, IdleRule, confidence_threshold, idle_rule, session_rest


def test_the_threshold_costs_at_most_the_stated_share_of_correct_answers():
    rng = np.random.default_rng(0)
    confidences = rng.uniform(0.3, 1.0, size=400)
    correct = rng.uniform(size=400) < confidences  # surer answers are right more often
    threshold = confidence_threshold(confidences, correct)
    right = confidences[correct]
    assert 0.3 < threshold < 0.9
    assert np.mean(right < threshold) <= 0.05 + 1 / len(right)
    few = np.arange(19) < 19  # under MIN_CALIBRATION correct answers: a quantile of them is noise
    assert confidence_threshold(confidences[:19], few) == 0.0
    assert confidence_threshold(confidences, np.zeros(400, bool)) == 0.0  # nothing right: no unknown answers


def test_a_still_window_is_the_rest_class_and_an_unsure_one_unknown():
    rule = IdleRule(unknown_below=0.6, still_rms=3.0, still_label="rest")
    rng = np.random.default_rng(1)
    still, moving = rng.normal(size=(400, 8)), rng.normal(size=(400, 8)) * 20
    assert rule.answer(still, "fist", 0.99) == ("rest", "still")  # whatever the network says
    assert rule.answer(moving, "fist", 0.5) == (UNKNOWN, "unsure")
    assert rule.answer(moving, "fist", 0.7) == ("fist", "")
    assert IdleRule.from_card({}).answer(still, "fist", 0.1) == ("fist", "")  # an older card: as before


def test_the_rule_comes_from_the_rest_the_guide_heard(tmp_path):
    events = [{"prompt": "A", "rest_rms": 2.0}, {"prompt": "B", "rest_rms": 4.0}, {"prompt": "C", "rest_rms": 3.0},
              {"prompt": "D", "rest_rms": None}, {"gap": [1, 2]}]
    (tmp_path / "events.jsonl").write_text("\n".join(map(json.dumps, events)) + "\n{torn")
    assert session_rest(tmp_path) == (3.0, ())  # a session recorded before the rest's means were kept
    gestures = idle_rule(load_plan("gestures4"), tmp_path, np.array([0.9, 0.8]), np.array([True, True]), "2 val")
    assert gestures.still_rms == STILL_FACTOR * 3.0 and gestures.still_label == "rest"
    assert idle_rule(load_plan("isl26"), tmp_path, np.zeros(0), np.zeros(0, bool), "").still_label == UNKNOWN
    machine = idle_rule(Plan("m", ("a", "b"), kind="continuous"), tmp_path, np.zeros(0), np.zeros(0, bool), "")
    assert machine.still_rms == 0.0  # a quiet machine is a state, not idle
    assert session_rest(tmp_path / "missing") == (None, ())


def test_a_raw_adc_at_rest_is_still_about_its_offset_and_a_sign_is_not(tmp_path):
    """A sketch printing analogRead() sits at ~512: the level is measured about the rest's channel means the guide
    kept, so an idle arm is still and a sign is not, exactly as for a centred sensor."""
    rng = np.random.default_rng(0)
    events = [{"prompt": "fist", "rest_rms": 2.0, "rest_mean": [512.0, 498.0]},
              {"prompt": "open", "rest_rms": 2.2, "rest_mean": [512.4, 497.6]}]
    (tmp_path / "events.jsonl").write_text("\n".join(map(json.dumps, events)) + "\n")
    rule = idle_rule(load_plan("gestures4"), tmp_path, np.array([0.9]), np.array([True]), "1 val")
    assert rule.rest_mean == (512.2, 497.8) and IdleRule.from_card({"serving": rule.to_dict()}) == rule
    idle = np.array([512.2, 497.8]) + rng.normal(0, 2.0, (400, 2))
    sign = np.array([512.2, 497.8]) + rng.normal(0, 40.0, (400, 2))
    assert rule.answer(idle, "fist", 0.99) == ("rest", "still")
    assert rule.answer(sign, "fist", 0.99) == ("fist", "")
    centred = IdleRule(still_rms=rule.still_rms, still_label="rest")
    assert centred.is_still(idle - [512.2, 497.8]) and not centred.is_still(idle)  # plain RMS: 500, never still


LENGTH, MARGIN, SIGN_AT = 100, 400, 250
"""The held-out windows' streams: 100-sample windows with 400 samples of context each side, each sign from sample
250 of its context: offsets up to -250 hold only rest (idle), -200 and -150 half of it (the sign's edge)."""


STRAYS = 0.1
"""A sign's answers that name the other sign. Which smoothing wins on them varies with the draw (k=2 of 3, or the
most named of 5); what every draw of 30 chose outvotes a stray and shows a sign within three answers."""


def _stream_answers(rng, windows=40, offset=0.0):
    """Out-of-fold answers along each held-out window's stream as the worker gives them: idle before a sign (low
    level), a sign's edges answered unsurely, its middle surely, with a stray wrong answer now and then; and the
    session's windows with their streams (about `offset`, a raw ADC's)."""
    stream = {key: [] for key in ("window", "offset", "confidence", "predicted", "truth")}
    noise = np.random.default_rng(1)  # the signal apart from the answers' draws
    context = offset + np.concatenate([noise.normal(0, 1.0, (windows, SIGN_AT, 1)),
                                       noise.normal(0, 10.0, (windows, LENGTH + 2 * MARGIN - SIGN_AT, 1))], axis=1)
    labels = np.array([1 + window % 2 for window in range(windows)])
    for window in range(windows):
        label = int(labels[window])
        for step in range(-8, 9):
            truth = -2 if step < -4 else -1 if step < -2 else label
            sure = float(rng.uniform(0.4, 0.6) if truth == -1 else rng.uniform(0.55, 0.99))
            predicted = label if truth != -2 else int(rng.integers(0, 3))
            if truth >= 0 and rng.uniform() < STRAYS:
                predicted = 3 - label  # a stray
            stream["window"].append(window)
            stream["offset"].append(step * 50)
            stream["confidence"].append(round(sure, 4))
            stream["predicted"].append(predicted)
            stream["truth"].append(truth)
    # And one rest window (no answers along it): every class of the session has its windows.
    context, labels = np.concatenate([context, offset + noise.normal(0, 1.0, (1, LENGTH + 2 * MARGIN, 1))]), \
        np.append(labels, 0)
    session = Windows(context[:, MARGIN:MARGIN + LENGTH], labels, np.arange(windows + 1), ("rest", "fist", "open"),
                      200.0, context=context, spans=np.tile([SIGN_AT, LENGTH + 2 * MARGIN], (windows + 1, 1)))
    return stream, session


def test_the_rule_and_the_smoothing_are_set_on_the_answers_along_the_stream(tmp_path):
    from tinynas.deploy.served import Smoother, Smoothing
    from tinynas.service.idle import stream_rule

    (tmp_path / "events.jsonl").write_text(json.dumps({"prompt": "fist", "go": 0, "rest_rms": 2.0}) + "\n")
    rule = stream_rule(load_plan("gestures4"), tmp_path, *_stream_answers(np.random.default_rng(3)), 4)
    assert rule.still_rms == STILL_FACTOR * 2.0 and rule.still_label == "rest"
    assert 0.5 < rule.unknown_below < 0.6  # set on the sign windows' offsets: none surer than 0.55 is cut
    assert "out-of-fold answers along the held-out windows' streams" in rule.calibrated_on
    chosen = Smoothing(**rule.smoothing)
    smoother = Smoother(chosen)
    shown = [smoother.update(label, 0.6) for label in ["rest"] * 3 + ["fist"] * 4 + ["open"] + ["fist"] * 2]
    assert shown[3:6].count("fist") >= 1  # a sign shown within three answers of its start (0.75 s at the hop)...
    assert shown[7] == "fist"  # ...and a stray answer inside it outvoted
    assert rule.to_dict()["smoothing"] == chosen.to_dict()
    # The same person on a raw ADC (every sample 512 higher, the guide keeping the rest's means): the same rule.
    (tmp_path / "events.jsonl").write_text(json.dumps({"prompt": "fist", "go": 0, "rest_rms": 2.0,
                                                       "rest_mean": [512.0]}) + "\n")
    raw = stream_rule(load_plan("gestures4"), tmp_path, *_stream_answers(np.random.default_rng(3), offset=512.0), 4)
    assert (raw.unknown_below, raw.smoothing, raw.still_rms) == (rule.unknown_below, rule.smoothing, rule.still_rms)
