"""Serving's idle and unknown answers: a still window is rest (or unknown), an unsure one is unknown."""

import json

import numpy as np

from firmware_bridge.guide import STILL_FACTOR
from firmware_bridge.plan import Plan, load_plan
from tinynas.service.idle import UNKNOWN, IdleRule, confidence_threshold, idle_rule, session_rest_level


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
    assert session_rest_level(tmp_path) == 3.0
    gestures = idle_rule(load_plan("gestures4"), tmp_path, np.array([0.9, 0.8]), np.array([True, True]), "2 val")
    assert gestures.still_rms == STILL_FACTOR * 3.0 and gestures.still_label == "rest"
    assert idle_rule(load_plan("isl26"), tmp_path, np.zeros(0), np.zeros(0, bool), "").still_label == UNKNOWN
    machine = idle_rule(Plan("m", ("a", "b"), kind="continuous"), tmp_path, np.zeros(0), np.zeros(0, bool), "")
    assert machine.still_rms == 0.0  # a quiet machine is a state, not idle
    assert session_rest_level(tmp_path / "missing") is None


def _stream_answers(rng, windows=40, classes=("rest", "fist", "open")):
    """Out-of-fold answers along each held-out window's stream as the worker gives them: idle before a sign (low
    level), a sign's edges answered unsurely, its middle surely, with a stray wrong answer now and then."""
    stream = {key: [] for key in ("window", "offset", "rms", "confidence", "predicted", "truth")}
    for window in range(windows):
        label = 1 + window % 2
        for offset in range(-8, 9):
            truth = -2 if offset < -4 else -1 if offset < -2 else label
            sure = float(rng.uniform(0.4, 0.6) if truth == -1 else rng.uniform(0.55, 0.99))
            predicted = label if truth != -2 else int(rng.integers(0, 3))
            if truth >= 0 and rng.uniform() < 0.1:
                predicted = 3 - label  # a stray
            stream["window"].append(window)
            stream["offset"].append(offset * 50)
            stream["rms"].append(1.0 if truth == -2 else 10.0)
            stream["confidence"].append(round(sure, 4))
            stream["predicted"].append(predicted)
            stream["truth"].append(truth)
    return stream


def test_the_rule_and_the_smoothing_are_set_on_the_answers_along_the_stream(tmp_path):
    from tinynas.deploy.served import Smoothing
    from tinynas.service.idle import stream_rule

    (tmp_path / "events.jsonl").write_text(json.dumps({"prompt": "fist", "go": 0, "rest_rms": 2.0}) + "\n")
    rule = stream_rule(load_plan("gestures4"), tmp_path, _stream_answers(np.random.default_rng(3)),
                       ("rest", "fist", "open"), 4)
    assert rule.still_rms == STILL_FACTOR * 2.0 and rule.still_label == "rest"
    assert 0.5 < rule.unknown_below < 0.6  # set on the sign windows' offsets: none surer than 0.55 is cut
    assert "out-of-fold answers along the held-out windows' streams" in rule.calibrated_on
    chosen = Smoothing(**rule.smoothing)
    assert chosen.k >= 2  # the strays are outvoted...
    assert chosen.n <= 4  # ...without waiting a second at a sign's onset
    assert rule.to_dict()["smoothing"] == chosen.to_dict()
