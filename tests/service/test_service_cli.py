import contextlib
import json
import os
import subprocess
import sys
import tomllib

import numpy as np
import pytest

from tests.support.net import free_port
from tinynas.service.config import CONFIG_KEYS, DEFAULT_CONFIG, ConfigError, ServiceConfig, load_config
from tinynas.service.state import ServiceState, load_state, save_state


def tinynas(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True, cwd=cwd)


def test_default_config_documents_every_key():
    documented = tomllib.loads(DEFAULT_CONFIG)
    assert ServiceConfig(**documented) == ServiceConfig()
    assert set(documented) == set(CONFIG_KEYS)


def test_config_errors(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('port = "/dev/x"\ncolour = "blue"\n')
    with pytest.raises(ConfigError, match="unknown key\\(s\\) colour"):
        load_config(bad)
    with pytest.raises(ConfigError, match="no config file"):
        load_config(tmp_path / "missing.toml")
    bad.write_text('normalize = "zscore"\n')
    with pytest.raises(ConfigError, match="normalize must be one of none, channel, window, not 'zscore'"):
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
    stop = tinynas("service", "stop", "--config", str(config))
    # No service runs: a stop request left now would stop the next start instead.
    assert stop.returncode == 0 and "nothing to stop" in stop.stdout
    assert not list((tmp_path / "data" / "requests").glob("*-stop.json"))
    bad = tinynas("onboard", "--user", "dan", "--plan", "no-such-plan", "--config", str(config))
    assert bad.returncode == 2 and "unknown plan" in bad.stderr


def test_a_stopped_service_is_said_to_be_stopped_with_when_its_state_was_saved(tmp_path):
    from tinynas.service.state import Deployed

    data = tmp_path / "data"
    data.mkdir()
    deployed = Deployed(user="alice", model=str(tmp_path / "m.tflite"), card=str(tmp_path / "card.json"), accuracy=0.9)
    save_state(data / "state.json", ServiceState(state="SERVING", user="alice", deployed=deployed))
    (tmp_path / "c.toml").write_text(f'data_dir = "{data}"\n')
    first, *rest = tinynas("service", "status", "--config", str(tmp_path / "c.toml")).stdout.splitlines()
    # Not "serving ... for alice": nothing runs; the state file is what the service last saved, and when.
    assert first.startswith("service not running (stopped); its last known state saved 20"), first
    assert first.endswith(": SERVING, user alice") and not any(line.lstrip().startswith("serving") for line in rest)
    assert any(line.startswith("  not serving (the service is stopped); serves again when started: ")
               and "for alice" in line for line in rest), rest


def test_the_page_address_given_back_carries_the_token(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\nhttp_port = 8765\nhttp_token = "s3cret-s3cret-s3cret"\n')
    run = tinynas("onboard", "--user", "carla", "--plan", "gestures4", "--config", str(config))
    assert run.returncode == 0 and "http://127.0.0.1:8765/?token=s3cret-s3cret-s3cret" in run.stdout, run.stderr


def test_install_writes_a_restarting_unprivileged_memory_capped_unit(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    run = tinynas("service", "install", "--config", str(config), "--unit-dir", str(tmp_path), "--user", "pi")
    assert run.returncode == 0, run.stderr
    unit = (tmp_path / "tinynas.service").read_text()
    for line in ("Restart=on-failure", "RestartPreventExitStatus=2", "User=pi", "MemoryMax=1536M",
                 f"--config {config}", f"ReadWritePaths={tmp_path / 'data'}"):
        assert line in unit


@pytest.mark.parametrize("args, message", [
    (("--user", "x\nExecStartPre=/bin/sh"), "is not a system user name"),
    (("--memory-max", "lots"), "--memory-max 'lots'"),
    (("--config", "{w}/a b.toml"), "cannot go into a systemd unit"),
])
def test_install_refuses_what_would_inject_into_or_break_the_unit(tmp_path, args, message):
    (tmp_path / "a b.toml").write_text(f'data_dir = "{tmp_path / "data"}"\n')
    (tmp_path / "ok.toml").write_text(f'data_dir = "{tmp_path / "data"}"\n')
    args = tuple(a.replace("{w}", str(tmp_path)) for a in args)
    config = () if "--config" in args else ("--config", str(tmp_path / "ok.toml"))
    run = tinynas("service", "install", *config, *args, "--unit-dir", str(tmp_path))
    assert run.returncode == 2 and message in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "tinynas.service").exists()


def test_a_pid_file_of_0_or_minus_1_is_not_a_running_service(tmp_path):
    from tinynas.service.paths import ServicePaths, running_pid

    paths = ServicePaths(tmp_path)
    for text in ("0", "-1", "99999999999999999999999", "x"):
        paths.pid.write_text(text)
        assert running_pid(paths) is None
    paths.pid.write_text(str(os.getpid()))
    assert running_pid(paths) == os.getpid()


@pytest.mark.parametrize("written", [
    '[1, 2, 3]', '{"deployed": {"model": "m.tflite", "user": "u"}}', '{"deployed": "yes", "link": [1]}',
    '{"threads": {"serial": 5}, "predictions": [{"smoothed": "fist"}, 7], "search": {"seconds_left": "soon"}}',
    '{"state": 5', '\u00ff\u00fe'])
def test_status_reads_a_status_file_of_any_shape(tmp_path, written):
    """status.json is a file: a power cut, an older tinynas or a hand edit leaves it in any shape."""
    (tmp_path / "c.toml").write_text(f'data_dir = "{tmp_path}"\n')
    (tmp_path / "service.pid").write_text(str(os.getpid()))  # a live process: status.json is read
    (tmp_path / "status.json").write_text(written)
    done = tinynas("service", "status", "--config", str(tmp_path / "c.toml"))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert done.stdout.startswith("service running; state")
    if "deployed" in written and '"model"' in written:
        assert "serving m.tflite for u (int8 accuracy not measured)" in done.stdout


def test_a_second_service_on_the_same_data_dir_is_refused_in_one_line(tmp_path):
    import fcntl

    from tinynas.service.paths import ServicePaths

    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\nport = "{tmp_path / "nope"}"\n'
                      f'http_port = {free_port()}\n')
    paths = ServicePaths(tmp_path / "data")
    paths.root.mkdir()
    # The running service's state, caught mid-write (say): repairing it is that service's business, not the refused
    # one's (which read and repaired it before taking the lock, setting it aside as damaged).
    paths.state.write_text('{"state": "SERV')
    with open(paths.lock, "a+") as held:  # what a running service holds
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        paths.pid.write_text(str(os.getpid()))
        before = sorted(p.name for p in paths.root.iterdir())
        run = tinynas("service", "run", "--config", str(config))
    assert run.returncode == 2 and "another tinynas service already runs on" in run.stderr
    assert f"(pid {os.getpid()})" in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert paths.pid.read_text() == str(os.getpid())  # the running one's pid file is left alone
    assert paths.state.read_text() == '{"state": "SERV' and sorted(p.name for p in paths.root.iterdir()) == before


def test_a_context_reads_the_disk_only_when_opened(tmp_path):
    from tinynas.service.config import ServiceConfig
    from tinynas.service.context import ServiceContext

    context = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data")))
    assert not (tmp_path / "data").exists() and context.state.state == "IDLE"
    assert context.open() is context and (tmp_path / "data").is_dir()


def _wait(condition, seconds, what, process):
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the service exited ({process.returncode}) while waiting for {what}"
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@contextlib.contextmanager
def _running_service(tmp_path, port: str):
    """`tinynas service run` on `port` with a config of its own: yields (the config, a function returning its
    status.json or None, the page's address, the process); killed if the test did not stop it, and its output
    must hold no traceback."""
    import urllib.request

    http = free_port()
    config = tmp_path / "tinynas.toml"
    config.write_text(f'port = "{port}"\ndata_dir = "{tmp_path / "data"}"\nhttp_port = {http}\n')
    service = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config", str(config)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def live():
        try:
            return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{http}/status.json", timeout=2).read())
        except OSError:
            return None

    try:
        yield config, live, f"http://127.0.0.1:{http}/", service
    finally:
        if service.poll() is None:
            service.kill()
        output = service.stdout.read()
    assert "Traceback" not in output, output


@pytest.mark.slow
@pytest.mark.parametrize("wire", ["frames", "text"])
def test_service_without_a_device_waits_serving_the_page_then_connects(tmp_path, wire):
    """No device is no exit (a restart loop under systemd): the page says which port to plug the sensor into;
    once it is plugged in the service goes on; a stop request still stops it cleanly. The same for a sketch that
    prints numbers (port = "csv:PORT?rate=HZ")."""
    import urllib.request

    from firmware_bridge.protocol import Hello
    from firmware_bridge.simulator import ArraySource, Simulator

    port = tmp_path / "dev" / "ttyTINYNAS0"
    port.parent.mkdir()
    url = str(port) if wire == "frames" else f"csv:{port}?rate=200"
    with _running_service(tmp_path, url) as (config, live, address, service):
        waiting = _wait(lambda: (live() or {}).get("device", {}).get("waiting"), 60, "the waiting page", service)
        assert f"waiting for the sensor on {url}" in waiting and "plug it in" in waiting
        assert "<html" in urllib.request.urlopen(address, timeout=2).read().decode()
        stream = (np.random.default_rng(0).normal(size=(2000, 2)) * 5).astype(np.int8)
        with Simulator(ArraySource(stream), Hello("sim", "1", 2, 200.0, "int8"), port_dir=port.parent, wire=wire):
            status = _wait(lambda: (s := live()) and s["device"].get("connected") and s["link"]["samples"] > 0
                           and s, 60, "the plugged-in device", service)
            assert status["device"]["channels"] == 2 and status["link"]["samples_per_second"] >= 0
            assert tinynas("service", "stop", "--config", str(config)).returncode == 0
            assert service.wait(60) == 0


@pytest.mark.slow
def test_service_reads_a_brainflow_board_as_its_sensor(tmp_path):
    """The service on BrainFlow's synthetic board (port = "brainflow:synthetic"): connected, its EMG channels and
    rate on the status, samples arriving; stopped cleanly."""
    from brainflow.board_shim import BoardIds, BoardShim

    with _running_service(tmp_path, "brainflow:synthetic") as (config, live, _, service):
        status = _wait(lambda: (s := live()) and s["device"].get("connected") and s["link"]["samples"] > 0 and s,
                       60, "the board's samples", service)
        emg = BoardShim.get_emg_channels(BoardIds.SYNTHETIC_BOARD.value)
        assert status["device"]["device_id"] == "brainflow:synthetic_board" and status["device"]["channels"] == len(emg)
        assert tinynas("service", "stop", "--config", str(config)).returncode == 0
        assert service.wait(60) == 0


@pytest.mark.parametrize("text, words", [
    ('workers = "two"\n', 'workers must be "auto" or an integer from 1'),
    ("workers = 1000\n", 'workers must be "auto" or an integer from 1 to'),
    ('budget = "abc"\n', "budget must be a positive duration"),
    ('min_accuracy = "high"\n', "min_accuracy must be a number in [0, 1]"),
    ("min_accuracy = 1.5\n", "min_accuracy must be a number in [0, 1]"),
    ('target = "NoSuchBoard"\n', "target: unknown target 'NoSuchBoard'; built-in targets: "),
    ("http_port = 99999\n", "http_port must be an integer from 0 to 65535"),
    ('strategy = "best"\n', "strategy must be one of paper, "),
    ('runtime = "tvm"\n', "runtime must be one of auto, c, tflm, not 'tvm'"),
    ("runtime = 1\n", "runtime must be a non-empty string"),
    ("epochs = 0\n", "epochs must be an integer from 1"),
    ("hop_seconds = -1\n", "hop_seconds must be a number in (0, 60]"),
    ("port = 3\n", "port must be a non-empty string"),
    ('plan = "no-such-plan"\n', "plan: unknown plan 'no-such-plan'"),
    ("colour = 1\n", "unknown key(s) colour (known keys: port, "),
])
def test_every_config_value_is_checked_when_read(tmp_path, text, words, cli_in_process):
    config = tmp_path / "bad.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n' + text)
    with pytest.raises(ConfigError) as caught:
        load_config(config)
    assert words in str(caught.value) and str(config) in str(caught.value)
    # In-process (60 fresh interpreters cost a minute of a worker); through the real console entry a config that is
    # not one is refused below (test_a_binary_file_or_a_folder_is_not_a_config).
    for command in (["service", "run"], ["service", "status"], ["service", "config"], ["onboard", "--user", "x"]):
        run = cli_in_process(*command, "--config", str(config))
        assert run.returncode == 2 and run.stderr.startswith("tinynas: error: ") and words in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists()  # refused before anything was written


def test_a_binary_file_or_a_folder_is_not_a_config(tmp_path):
    binary = tmp_path / "random.toml"
    binary.write_bytes(bytes(range(256)) * 4)
    for path, words in ((binary, "is not a text file"), (tmp_path, "is a folder, not a config file")):
        run = tinynas("service", "run", "--config", str(path))
        assert run.returncode == 2 and words in run.stderr and len(run.stderr.strip().splitlines()) == 1


def test_service_config_checks_and_prints_the_given_file(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\nbudget = "2m"\nworkers = 1\n')
    run = tinynas("service", "config", "--config", str(config))
    assert run.returncode == 0, run.stderr
    printed = tomllib.loads(run.stdout)
    assert printed == {**ServiceConfig().to_dict(), "data_dir": str(tmp_path / "data"), "budget": "2m", "workers": 1}
    assert "# Target microcontroller" in run.stdout  # the documentation comes along
    assert tinynas("service", "config").stdout == DEFAULT_CONFIG


def test_onboarding_refuses_unsafe_user_names(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    for name in ("..", "a/b", ".x", "x" * 100):
        run = tinynas("onboard", "--user", name, "--config", str(config))
        assert run.returncode == 2 and "tinynas: error: " in run.stderr and len(run.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data" / "requests").exists()


def test_continue_and_cancel_leave_requests(tmp_path):
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    assert tinynas("onboard", "--user", "ann", "--continue", "--config", str(config)).returncode == 0
    assert tinynas("onboard", "--user", "ann", "--cancel", "--config", str(config)).returncode == 0
    requests = tmp_path / "data" / "requests"
    assert [json.loads(p.read_text()) for p in sorted(requests.glob("*-continue.json"))] == [
        {"kind": "continue", "user": "ann"}]
    assert len(list(requests.glob("*-cancel.json"))) == 1
    both = tinynas("onboard", "--user", "ann", "--continue", "--cancel", "--config", str(config))
    assert both.returncode == 2


def test_onboarding_checks_the_plan_against_the_target_of_the_running_device(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # What a running service publishes about its device: one vibration channel at 12 kHz.
    (data / "status.json").write_text(json.dumps({"device": {"channels": 1, "sample_rate_hz": 12000.0}}))
    config = tmp_path / "tinynas.toml"
    config.write_text(f'data_dir = "{data}"\ntarget = "STM32C011F6P6"\n')
    run = tinynas("onboard", "--user", "pump", "--plan", "bearing4", "--config", str(config))
    assert run.returncode == 0, run.stderr
    # The window the search will use is the cost model's (it moves when the model's figures are corrected).
    from firmware_bridge.plan import load_plan
    from tinynas.cost.budget import Budget
    from tinynas.cost.targets import get_target
    from tinynas.service.fit import check_plan_fits, longest_fitting_window

    cut = check_plan_fits(load_plan("bearing4"), Budget.resolve(get_target("STM32C011F6P6")), 1, 12000.0)
    assert cut.cut and cut.window == 512
    assert f"will use {cut.window}-sample windows every {cut.hop} samples" in run.stdout
    # A 16-channel armband: 400 x 16 input bytes alone miss the 4 KiB chip.
    (data / "status.json").write_text(json.dumps({"device": {"channels": 16, "sample_rate_hz": 200.0}}))
    config.write_text(f'data_dir = "{data}"\ntarget = "STM32F030F4P6"\n')
    run = tinynas("onboard", "--user", "eve", "--plan", "gestures4", "--config", str(config))
    gestures = load_plan("gestures4")
    longest = longest_fitting_window(Budget.resolve(get_target("STM32F030F4P6")), 400, 16, len(gestures.classes))
    assert 0 < longest < 400
    assert run.returncode == 2 and f"use windows of at most {longest} samples" in run.stderr
    assert len(list((data / "requests").glob("*-onboard.json"))) == 1  # only the plan that fits was requested
