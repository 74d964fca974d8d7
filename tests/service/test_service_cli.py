import json
import subprocess
import sys
import tomllib

import pytest

from tinynas.service.config import DEFAULT_CONFIG, ConfigError, ServiceConfig, load_config
from tinynas.service.state import ServiceState, load_state, save_state


def tinynas(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_default_config_documents_every_key():
    documented = tomllib.loads(DEFAULT_CONFIG)
    assert ServiceConfig(**documented) == ServiceConfig()
    assert set(documented) == set(ServiceConfig.__dataclass_fields__)


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('port = "/dev/x"\ncolour = "blue"\n')
    with pytest.raises(ConfigError, match="unknown key\\(s\\) colour"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no config file"):
        load_config(tmp_path / "missing.toml")
    bad.write_text('normalize = "zscore"\n')
    with pytest.raises(ConfigError, match="normalize must be one of none, channel, not 'zscore'"):
        load_config(bad)


def test_state_round_trip_is_atomic(tmp_path):
    path = tmp_path / "state.json"
    assert load_state(path).state == "IDLE"
    save_state(path, ServiceState(state="SEARCHING", user="bob", study="/x"))
    again = load_state(path)
    assert (again.state, again.user, again.study) == ("SEARCHING", "bob", "/x") and again.updated > 0
    assert not list(tmp_path.glob(".*tmp"))


def test_onboard_status_and_stop_requests(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    run = tinynas("onboard", "--user", "carla", "--plan", "gestures4", "--config", str(config))
    assert run.returncode == 0, run.stderr
    requests = list((tmp_path / "data" / "requests").glob("*-onboard.json"))
    assert len(requests) == 1 and json.loads(requests[0].read_text())["user"] == "carla"
    status = json.loads(tinynas("service", "status", "--json", "--config", str(config)).stdout)
    assert status["running"] is False and status["state"] == "IDLE"
    assert tinynas("service", "stop", "--config", str(config)).returncode == 0
    bad = tinynas("onboard", "--user", "dan", "--plan", "no-such-plan", "--config", str(config))
    assert bad.returncode == 2 and "unknown plan" in bad.stderr


def test_install_writes_a_restarting_unprivileged_memory_capped_unit(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    run = tinynas("service", "install", "--config", str(config), "--unit-dir", str(tmp_path), "--user", "pi")
    assert run.returncode == 0, run.stderr
    unit = (tmp_path / "tinynas.service").read_text()
    for line in ("Restart=on-failure", "User=pi", "MemoryMax=1536M", f"--config {config}",
                 f"ReadWritePaths={tmp_path / 'data'}"):
        assert line in unit


def test_service_without_a_device_fails_in_one_line(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'port = "{tmp_path / "no-device"}"\ndata_dir = "{tmp_path / "data"}"\n')
    run = tinynas("service", "run", "--config", str(config))
    assert run.returncode == 2
    assert run.stderr.strip().startswith("tinynas: error: cannot open") and len(run.stderr.strip().splitlines()) == 1
