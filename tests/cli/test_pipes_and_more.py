"""The CLI's small courtesies: a closed pipe is a quiet end, and `onboard --more` leaves a checked request."""

import json
import subprocess
import sys

import pytest

from tinynas.cli import main


def test_a_reader_that_stops_early_is_not_an_internal_error(tmp_path):
    # `tinynas targets | head -1`: the reader is gone before tinynas writes its last block.
    run = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "targets"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, cwd=tmp_path)
    run.stdout.close()
    stderr = run.stderr.read().decode()
    assert run.wait(60) == 0
    assert stderr == ""  # no "internal error", no crash log, no "Exception ignored"


def test_status_through_head_is_quiet(tmp_path):
    config = tmp_path / "t.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    pipeline = subprocess.run(f"{sys.executable} -m tinynas.cli service status --config {config} | head -c 1",
                              shell=True, capture_output=True, text=True, timeout=60)
    assert "internal error" not in pipeline.stderr and "Traceback" not in pipeline.stderr


def test_onboard_more_leaves_a_request_with_the_count(tmp_path, capsys):
    config = tmp_path / "t.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    session = tmp_path / "data" / "profiles" / "alice" / "sessions" / "20261206-090000"
    session.mkdir(parents=True)
    (session / "manifest.json").write_text("{}")  # a recorded session to add to
    assert main(["onboard", "--user", "alice", "--more", "3", "--config", str(config)]) == 0
    requests = list((tmp_path / "data" / "requests").glob("*-onboard.json"))
    assert [json.loads(path.read_text()) for path in requests] == [{"kind": "onboard", "user": "alice", "more": 3}]
    assert "3 more repetition(s) per class for alice requested" in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["--more", "0"], "--more must be between 1 and 100"),
    (["--more", "5", "--plan", "gestures4"], "--more adds to the user's last session"),
    (["--more", "2", "--continue"], "not allowed with argument"),
    (["--more", "2"], "alice has no recorded session to add to on this device"),  # said now, not later
    (["--more", "9" * 4001], "--more must be between 1 and 100, got a 4001-digit number"),
])
def test_onboard_more_refuses_what_cannot_be_followed(tmp_path, capsys, argv, message):
    config = tmp_path / "t.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    try:
        code = main(["onboard", "--user", "alice", *argv, "--config", str(config)])
    except SystemExit as exit_:  # argparse's own refusals (one line too: tinynas.cli._Parser)
        code = exit_.code
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "data" / "requests").exists() or not any((tmp_path / "data" / "requests").iterdir())


@pytest.mark.parametrize(("argv", "message"), [
    (["--signs", "3"], "--signs goes with --test"),
    (["--test"], "no model is served on"),
    (["--test", "--signs", "0"], "--signs must be between 1 and 1000"),  # the option first, before anything is read
])
def test_the_live_test_is_refused_in_one_line_without_a_served_model(tmp_path, capsys, argv, message):
    config = tmp_path / "t.toml"
    config.write_text(f'data_dir = "{tmp_path / "data"}"\n')
    assert main(["onboard", "--user", "alice", *argv, "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tinynas: error: ") and message in err and err.count("\n") == 1
