"""The service's state.json, damaged every way a disk or a person can damage it: reported, recovered, never lost."""

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinynas.errors import UsageError
from tinynas.service.state import (
    DamagedState,
    Deployed,
    ServiceState,
    backup_path,
    check_user_name,
    load_state,
    save_state,
    user_name_problem,
)

GOOD = ServiceState(state="SERVING", user="alice", plan="gestures4",
                    deployed=Deployed(user="alice", model="/d/model.tflite", card="/d/card.json", accuracy=0.9))

DAMAGED = {
    "truncated": lambda text: text[: len(text) // 2],
    "a JSON list": lambda text: "[1, 2, 3]\n",
    "deployed without its user": lambda text: json.dumps({**json.loads(text), "deployed": {"model": "/m"}}),
    "deployed with a text accuracy": lambda text: json.dumps(
        {**json.loads(text), "deployed": {**json.loads(text)["deployed"], "accuracy": "0.9"}}),
    "deployed with a task nobody knows": lambda text: json.dumps(
        {**json.loads(text), "deployed": {**json.loads(text)["deployed"], "task": "regress"}}),
    "binary": lambda text: "\x00\xff\xfe junk",
    "empty": lambda text: "",
    "unknown state": lambda text: json.dumps({**json.loads(text), "state": "DANCING"}),
    "a user that is a path": lambda text: json.dumps({**json.loads(text), "user": "../../etc"}),
}


def _write(path, text):
    path.write_bytes(text.encode("utf-8", "surrogateescape") if "\x00" not in text else
                     b"\x00\xff\xfe junk")


@pytest.mark.parametrize("damage", sorted(DAMAGED))
def test_damaged_state_is_recovered_from_its_last_good_copy(tmp_path, damage):
    path = tmp_path / "state.json"
    save_state(path, GOOD)
    good_text = path.read_text()
    _write(path, DAMAGED[damage](good_text))
    damaged_bytes = path.read_bytes()
    # `service status` reads without repairing: the disk is left as it is.
    seen = load_state(path)
    assert (seen.state, seen.user, seen.deployed) == (GOOD.state, GOOD.user, GOOD.deployed)
    assert "damaged" in seen.error and "recovered from state.json.bak" in seen.error and "\n" not in seen.error
    assert path.read_bytes() == damaged_bytes
    # The service repairs: the recovered state is saved, the damaged file set aside, never deleted.
    repaired = load_state(path, repair=True)
    assert (repaired.state, repaired.deployed) == (GOOD.state, GOOD.deployed)
    aside = list(tmp_path.glob("state.json.damaged-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == damaged_bytes
    assert load_state(path).error == repaired.error  # the saved state is good again and says what happened


def test_both_copies_damaged_start_idle_and_keep_the_files(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("[]")
    backup_path(path).write_text('{"state": "SERV')
    state = load_state(path, repair=True)
    assert state.state == "IDLE" and not state.deployed
    assert "started IDLE" in state.error and "state.json.damaged-" in state.error
    assert [p.read_text() for p in tmp_path.glob("state.json.damaged-*")] == ["[]"]
    assert load_state(path).state == "IDLE"


def test_a_missing_state_with_a_copy_is_recovered(tmp_path):
    path = tmp_path / "state.json"
    save_state(path, GOOD)
    path.unlink()
    assert load_state(path).deployed == GOOD.deployed


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=400), cut=st.integers(min_value=0, max_value=400))
def test_any_bytes_give_a_state_never_an_exception(tmp_path, data, cut):
    path = tmp_path / "fuzz" / "state.json"
    path.parent.mkdir(exist_ok=True)
    save_state(path, GOOD)
    good = path.read_bytes()
    path.write_bytes(data if data else good[:cut])
    state = load_state(path)
    assert state.state in ("IDLE", "COLLECTING", "SEARCHING", "DEPLOYING", "SERVING")
    assert state.user == "" or user_name_problem(state.user) is None


def test_status_reports_a_damaged_state_in_one_line(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "state.json").write_text('{"state": "SERVING", "deployed": {"model": "/m"}}')
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{data}"\n')
    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "service", "status", "--config", str(config)],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    assert "state: IDLE" in run.stdout and "the deployed model has no user" in run.stdout


@pytest.mark.parametrize("name", ["..", ".", ".hidden", "a/b", "", "x" * 65, "al ice", "bob\n", "é"])
def test_unsafe_user_names_are_refused(name):
    assert user_name_problem(name)
    with pytest.raises(UsageError):
        check_user_name(name)


@pytest.mark.parametrize("name", ["alice", "bob-2", "machine_7.a", "A", "x" * 64])
def test_safe_user_names_pass(name):
    assert check_user_name(name) == name


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300))
def test_any_bytes_as_a_config_give_a_config_or_a_config_error(tmp_path, data):
    from tinynas.service.config import ConfigError, ServiceConfig, load_config

    path = tmp_path / "fuzz.toml"
    path.write_bytes(data)
    try:
        assert isinstance(load_config(path), ServiceConfig)
    except ConfigError as exc:
        assert "\n" not in str(exc)


_VALUES = st.one_of(st.integers(-10**6, 10**6), st.floats(allow_nan=True), st.text(max_size=12), st.booleans(),
                    st.lists(st.integers(), max_size=2))


@settings(max_examples=100, deadline=None)
@given(values=st.dictionaries(st.sampled_from(sorted(ServiceState.__dataclass_fields__) + [
    "port", "workers", "budget", "min_accuracy", "http_port", "target", "epochs", "hop_seconds"]), _VALUES,
    max_size=4))
def test_any_config_values_give_a_config_or_a_one_line_error(values):
    from tinynas.service.config import ConfigError, ServiceConfig, check_config_data

    try:
        config = check_config_data(values, "fuzz.toml")
    except ConfigError as exc:
        assert str(exc).startswith("fuzz.toml: ") and "\n" not in str(exc)
    else:
        assert isinstance(config, ServiceConfig)
        assert 0 <= config.min_accuracy <= 1 and 0 <= config.http_port <= 65535
        assert config.workers == "auto" or config.workers >= 1


def test_a_deployed_record_reads_back_as_it_was_written_and_ignores_what_it_does_not_know():
    scorer = Deployed(user="motor", model="/d/m/model.tflite", card="/d/m/card.json", task="anomaly", accuracy=None,
                      anomaly={"threshold": 0.4, "false_alarm_rate": 0.01}, made=1.7e9)
    written = scorer.to_dict()
    assert written["accuracy"] is None and "held_out" not in written  # accuracy is always said; absent ones are not
    assert Deployed.from_dict(written) == scorer and scorer.scorer and scorer.id == "m"
    # a deployment.json written by a newer version, with a field this one does not know: read, the field left out
    assert Deployed.from_dict({**written, "calibrated_on": "2027-01-01"}) == scorer
    with pytest.raises(DamagedState, match="anomaly scorer has no threshold"):
        Deployed.from_dict({**written, "anomaly": None})
