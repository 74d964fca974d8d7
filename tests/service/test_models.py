"""Users and their models: every deployed model stays, `tinynas serve` switches between them in a running service.

The deployed folders are made by the service's own DEPLOYING step (a real int8 model checked by LiteRT); the
service runs as a real process reading a simulated front-end on a pseudo-terminal; the commands are the CLI's.
"""

import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from firmware_bridge.protocol import Hello
from firmware_bridge.simulator import ArraySource, Simulator
from tinynas.cli import main
from tinynas.data.splits import Split
from tinynas.service import search_deploy
from tinynas.service.config import ServiceConfig
from tinynas.service.context import ServiceContext
from tinynas.service.models import choose, previous_id, remember, stored_models
from tinynas.service.state import Deployed, load_state


def _deploy(service, tmp_path, data, study_name, user):
    """Run the DEPLOYING step for `user` on a study of the session's tiny model (every held-out window right)."""
    study = service.paths.profile(user) / "studies" / study_name
    study.mkdir(parents=True)
    shutil.copy(tmp_path / "model.tflite", study / "model.tflite")
    (study / "card.json").write_text(json.dumps({
        "classes": list(data.class_names), "int8_test_accuracy": 1.0, "name": f"A(3,3) {user}",
        "input": {"shape": [data.window_length, data.channels], "sample_rate_hz": data.sample_rate_hz}}))
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"classes": list(data.class_names), "repetitions": 5, "window_seconds": 1.0}))
    service.state.state, service.state.user, service.state.plan = "DEPLOYING", user, str(plan)
    service.state.study, service.state.session = str(study), str(tmp_path / "session")
    transition = search_deploy.deploy(service)
    assert transition.phase == "SERVING", transition.changes.get("error")
    service.apply(transition)


@pytest.fixture
def two_users(tmp_path, exported_tiny, vibration_split, monkeypatch):
    """alice with two models (the older first), then bob: bob's served; the data_dir and the windows."""
    _, tflite, _ = exported_tiny
    data, _, _, _ = vibration_split
    from tinynas.deploy.measure import run_int8

    predictions = run_int8(tflite, data.x).predictions
    # The model is right on every window: the gate deploys it. A gesture session's windows, each a recording of its
    # own (the synthetic set cuts several from one, which the gate would count as one).
    windows = replace(data, y=predictions, groups=np.array([f"w{i}" for i in range(len(data.y))]))
    test = np.arange(0, len(data.y), 4)
    rest = np.setdiff1d(np.arange(len(data.y)), test)
    monkeypatch.setattr(search_deploy, "session_windows", lambda _service: (windows, "test"))
    monkeypatch.setattr(search_deploy, "make_split", lambda *_a, **_k: Split(rest[:-8], rest[-8:], test, "t"))
    (tmp_path / "model.tflite").write_bytes(tflite)
    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"))).open()
    for study, user in (("20261201-090000", "alice"), ("20261202-090000", "alice"), ("20261203-090000", "bob")):
        _deploy(service, tmp_path, data, study, user)
        time.sleep(0.01)  # distinct "made" times, oldest first
    return tmp_path / "data", data


def test_every_deployed_model_stays_and_is_listed(two_users):
    data_dir, _ = two_users
    models = stored_models(data_dir / "profiles")
    assert [(m.user, m.id) for m in models] == [("alice", "20261201-090000"), ("alice", "20261202-090000"),
                                                ("bob", "20261203-090000")]
    served = load_state(data_dir / "state.json").deployed
    assert served is not None and served.user == "bob"
    rows = [m.summary(served) for m in models]
    assert [row["served"] for row in rows] == [False, False, True]
    assert all(row["held_out"]["windows"] > 0 and row["held_out"]["interval"][0] > 0.5 for row in rows)


def test_choose_finds_the_newest_a_named_and_the_previous_model(two_users):
    data_dir, _ = two_users
    state = load_state(data_dir / "state.json")
    profiles = data_dir / "profiles"
    assert choose(profiles, "alice", None, False, state.history, state.deployed).id == "20261202-090000"
    assert choose(profiles, "alice", "20261201-090000", False, state.history, state.deployed).id == "20261201-090000"
    # bob is served; alice's previous model is the last one of hers that was served.
    assert choose(profiles, "alice", None, True, state.history, state.deployed).id == "20261202-090000"
    from tinynas.errors import UsageError

    with pytest.raises(UsageError, match="no model 'nope'"):
        choose(profiles, "alice", "nope", False, state.history, state.deployed)
    with pytest.raises(UsageError, match="carol has no deployed model"):
        choose(profiles, "carol", None, False, state.history, state.deployed)
    with pytest.raises(UsageError, match="no previous model"):
        choose(profiles, "bob", None, True, state.history, state.deployed)


def test_history_remembers_each_switch_once_and_rolls_back():
    history = []
    for user, model in (("alice", "a1"), ("alice", "a2"), ("alice", "a2"), ("bob", "b1")):
        history = remember(history, Deployed(user, f"/d/{user}/deployed/{model}/model.tflite", "card.json"))
    assert [entry["id"] for entry in history] == ["a1", "a2", "b1"]
    served = Deployed("alice", "/d/alice/deployed/a2/model.tflite", "card.json")
    assert previous_id(history, "alice", served) == "a1"
    assert previous_id(history, "bob", served) == "b1"  # bob is not served: his last one


def _run(*argv):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *argv], capture_output=True, text=True, timeout=120)


def _wait_served(data_dir, user, model_id, seconds=60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            status = json.loads((data_dir / "status.json").read_text())
        except (OSError, ValueError):
            status = {}
        deployed = status.get("deployed") or {}
        if deployed.get("user") == user and f"/{model_id}/" in deployed.get("model", ""):
            return status
        time.sleep(0.2)
    raise AssertionError(f"{user}'s {model_id} not served within {seconds} s; last status: {status}")


def test_a_running_service_switches_users_and_rolls_back_and_deletes_nothing(two_users, tmp_path, capsys):
    data_dir, data = two_users
    stream = (data.x[:40].reshape(-1, data.channels) * 1000).clip(-32768, 32767).astype(np.int16)
    simulator = Simulator(ArraySource(stream), Hello("sim-motor", "1.0", data.channels, data.sample_rate_hz, "int16"),
                          port_dir=tmp_path / "dev").start()
    config = tmp_path / "tinynas.toml"
    config.write_text(f'port = "{simulator.port}"\ndata_dir = "{data_dir}"\nhttp_port = 0\n')
    before = sorted(str(p.relative_to(data_dir)) for p in (data_dir / "profiles").rglob("*"))
    service = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config", str(config)],
                               stdout=subprocess.DEVNULL, stderr=open(tmp_path / "service.log", "w"))
    try:
        _wait_served(data_dir, "bob", "20261203-090000")
        assert main(["service", "models", "--config", str(config)]) == 0
        listing = capsys.readouterr().out
        held = len(data.y[::4])
        assert "* bob" in listing and listing.count("alice") >= 2
        assert f"of {held} held-out windows of the onboarding" in listing  # what the figure measured

        assert main(["serve", "--user", "alice", "--config", str(config)]) == 0  # her newest
        _wait_served(data_dir, "alice", "20261202-090000")
        assert main(["serve", "--user", "alice", "--previous", "--config", str(config)]) == 0
        status = _wait_served(data_dir, "alice", "20261201-090000")  # rolled back
        assert status["deployed"]["held_out"]["windows"] == held
        assert status["user"] == "alice"  # the user shown is the one served, not the last onboarded
        assert main(["serve", "--user", "bob", "--config", str(config)]) == 0
        _wait_served(data_dir, "bob", "20261203-090000")

        wrong = _run("serve", "--user", "alice", "--model", "nope", "--config", str(config))
        assert wrong.returncode == 2 and wrong.stderr.startswith("tinynas: error: alice has no model 'nope'")
        bob = _run("serve", "--user", "bob", "--previous", "--config", str(config))
        assert bob.returncode == 2 and f"tinynas service models --config {config}" in bob.stderr  # the same service
        assert wrong.stderr.count("\n") == 1
    finally:
        service.terminate()
        service.wait(30)
        simulator.stop()
    after = sorted(str(p.relative_to(data_dir)) for p in (data_dir / "profiles").rglob("*"))
    assert after == before  # a switch deletes nothing and writes nothing into the model folders


def test_download_names_are_the_files_a_model_folder_has(tmp_path):
    from tinynas.service.models import DOWNLOADS, download_names

    assert download_names(tmp_path) == []
    (tmp_path / "model.tflite").write_bytes(b"x")
    assert download_names(tmp_path) == ["model.tflite"]  # no C runtime: no firmware bundle
    for name in DOWNLOADS:
        if name != "firmware.zip":
            (tmp_path / name).write_text("x")
    assert download_names(tmp_path)[0] == "firmware.zip" and set(download_names(tmp_path)) == set(DOWNLOADS)
