"""The DEPLOYING step decides on the held-out windows' interval, with a real int8 model run by LiteRT.

The service is a real `ServiceContext` on a temporary data_dir; the model is the session's tiny exported network
(tests/conftest.py). Which windows are held out is set here (the split protocol is not under test), so that the
model is right on exactly the number of them each case needs.
"""

import json
import shutil
from dataclasses import replace

import numpy as np
import pytest

from tinynas.data.splits import Split
from tinynas.deploy.measure import run_int8
from tinynas.service import search_deploy
from tinynas.service.config import ServiceConfig
from tinynas.service.context import Phase, ServiceContext
from tinynas.service.models import DEPLOYMENT_FILE, stored_models


@pytest.fixture
def deploying(tmp_path, exported_tiny, vibration_split, monkeypatch):
    """A service in DEPLOYING with a finished study of the tiny model, and a way to choose its held-out windows."""
    _, tflite, paths = exported_tiny
    data, _, _, _ = vibration_split
    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"), min_accuracy=0.5)).open()
    study = tmp_path / "data" / "profiles" / "alice" / "studies" / "20261204-120000"
    study.mkdir(parents=True)
    shutil.copy(paths.tflite_path, study / "model.tflite")
    card = {"classes": list(data.class_names), "int8_test_accuracy": 1.0,
            "input": {"shape": [data.window_length, data.channels], "sample_rate_hz": data.sample_rate_hz}}
    (study / "card.json").write_text(json.dumps(card))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"classes": list(data.class_names), "repetitions": 5, "window_seconds": 1.0}))
    service.state.state, service.state.user, service.state.plan = "DEPLOYING", "alice", str(plan)
    service.state.study, service.state.session = str(study), str(tmp_path / "session")
    predictions = run_int8(tflite, data.x).predictions

    def hold_out(right: int, wrong: int, recordings: int = 0):
        """Held-out windows the model gets right on `right` of `right + wrong` (their labels changed if needed), each a
        recording of its own (a gesture session's), or cut from `recordings` recordings (a machine's blocks)."""
        y = data.y.copy()
        chosen = list(np.arange(right))
        for index in range(right, right + wrong):
            y[index] = (predictions[index] + 1) % len(data.class_names)  # the model does not say this
            chosen.append(index)
        y[:right] = predictions[:right]
        groups = np.array([f"w{i}" for i in range(len(y))])
        if recordings:
            groups[:right + wrong] = [f"r{i % recordings}" for i in range(right + wrong)]
            y[:right + wrong] = y[0]  # a recording holds one state
        windows = replace(data, y=y, groups=groups)
        test = np.array(chosen)
        rest = np.setdiff1d(np.arange(len(y)), test)
        monkeypatch.setattr(search_deploy, "session_windows", lambda _service: (windows, "test"))
        monkeypatch.setattr(search_deploy, "make_split",
                            lambda *_a, **_k: Split(rest[:-8], rest[-8:], test, "chosen here"))

    return service, hold_out


def test_a_four_window_coin_toss_is_not_deployed_and_says_how_much_more_to_record(deploying):
    service, hold_out = deploying
    hold_out(right=2, wrong=2)
    service.config = replace(service.config, source="/etc/tinynas.toml")  # the command given back must reach it
    transition = search_deploy.deploy(service)
    assert transition.phase == Phase.IDLE and "deployed" not in transition.changes
    assert transition.changes["error"] == ""  # one more step is not an error
    gate = transition.changes["gate"]
    assert gate.decision == "undecided" and "2 of 4 held-out windows" in gate.text and "15%-85%" in gate.text
    assert gate.command == f"tinynas onboard --user alice --more {gate.more_per_class} --config /etc/tinynas.toml"
    # Bounded (one step, then the gate decides again), in whole held-out recordings: here the split chosen by the
    # fixture holds 4 of the windows out, so a step is the repetitions that add one held-out window per class.
    assert gate.bounded and gate.adds_held_out >= 4 and gate.minutes > 0
    assert len(gate.recall) == 4 and sum(value is not None for value in gate.recall.values()) >= 1  # per class
    assert stored_models(service.paths.root / "profiles") == []  # nothing was published
    service.apply(transition)
    from tinynas.service.state import load_state

    assert load_state(service.paths.state).gate == gate  # kept for the page until the next step


def test_a_model_right_on_every_held_out_window_is_served_with_its_count(deploying):
    service, hold_out = deploying
    hold_out(right=12, wrong=0)
    transition = search_deploy.deploy(service)
    assert transition.phase == Phase.SERVING
    deployed = transition.changes["deployed"]
    held = deployed.held_out
    assert (held["hits"], held["windows"]) == (12, 12) and held["interval"][0] > 0.7
    assert sum(held["support"]) == 12 and np.trace(np.array(held["confusion"])) == 12
    service.apply(transition)
    # What is served is also written beside the model, so that it can be served again after another user's.
    folder = service.paths.profile("alice") / "deployed" / "20261204-120000"
    assert json.loads((folder / DEPLOYMENT_FILE).read_text())["held_out"] == held
    assert service.state.history[-1]["user"] == "alice" and service.state.history[-1]["id"] == folder.name


def test_a_model_wrong_even_at_the_top_of_its_interval_is_refused_with_record_again(deploying):
    service, hold_out = deploying
    hold_out(right=1, wrong=11)
    transition = search_deploy.deploy(service)
    error = transition.changes["error"]
    assert "below 50% even at the interval's top" in error and "--more" not in error
    assert "tinynas onboard --user alice" in error
    assert transition.changes["gate"].decision == "refuse" and transition.changes["gate"].recall


def test_overlapping_windows_of_two_recordings_are_counted_as_two_and_cannot_serve(deploying):
    # A continuous plan's windows, cut with a hop from 2 held-out recordings, all right: 2 measurements, not 12.
    service, hold_out = deploying
    hold_out(right=12, wrong=0, recordings=2)
    transition = search_deploy.deploy(service)
    assert transition.phase == Phase.IDLE and "deployed" not in transition.changes
    gate = transition.changes["gate"]
    assert gate.decision == "undecided" and gate.unit == "recordings"
    assert gate.text.startswith("100% (2 of 2 held-out recordings, ") and "of their 12 windows right; 95% " \
        "interval 34%-100%)" in gate.text


def _scorer_study(tmp_path, exported_tiny, vibration_split, auroc):
    _, _, paths = exported_tiny
    data, _, _, _ = vibration_split
    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"))).open()
    study = tmp_path / "data" / "profiles" / "motor" / "studies" / "20261206-120000"
    study.mkdir(parents=True)
    shutil.copy(paths.tflite_path, study / "model.tflite")
    (study / "card.json").write_text(json.dumps({
        "classes": ["normal", "anomaly"], "input": {"shape": [data.window_length, data.channels],
                                                    "sample_rate_hz": data.sample_rate_hz},
        "anomaly": {"threshold": 0.5, "threshold_steps": 5, "score_scale": 0.1, "false_alarm_rate": 0.01,
                    "calibration": {"calibration_windows": 120}, "synthetic_test": {"auroc": auroc}}}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"classes": ["normal"], "kind": "continuous", "task": "anomaly", "repetitions": 3,
                                "window_seconds": 2.0, "hold_seconds": 60.0}))
    service.state.state, service.state.user, service.state.plan = "DEPLOYING", "motor", str(plan)
    service.state.study, service.state.session = str(study), str(tmp_path / "session")
    return service


def test_a_scorer_below_the_quality_bar_is_not_served_and_says_what_to_record(tmp_path, exported_tiny,
                                                                              vibration_split):
    service = _scorer_study(tmp_path, exported_tiny, vibration_split, auroc=0.55)
    transition = search_deploy.deploy(service)
    assert transition.phase == Phase.IDLE and "deployed" not in transition.changes
    error = transition.changes["error"]
    assert "AUROC 0.55, below 0.6" in error and "record longer normal running (180 s were recorded" in error
    assert transition.changes["gate"].decision == "refuse"
    assert stored_models(service.paths.root / "profiles") == []


def test_a_scorer_above_the_bar_is_served(tmp_path, exported_tiny, vibration_split):
    service = _scorer_study(tmp_path, exported_tiny, vibration_split, auroc=0.81)
    transition = search_deploy.deploy(service)
    assert transition.phase == Phase.SERVING and transition.changes["deployed"].task == "anomaly"
