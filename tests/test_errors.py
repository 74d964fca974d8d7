"""The CLI's error contract: a user's error is one line and exit 2; a bug is one line, a log and exit 1."""

from __future__ import annotations

import errno
import sqlite3

import pytest

from firmware_bridge.errors import BridgeError
from firmware_bridge.link import LinkError
from tinynas import cli
from tinynas.cli import models as model_commands
from tinynas.data.windows import DataError
from tinynas.errors import StorageError, TinynasError, UsageError, is_disk_full, storage_message, user_message
from tinynas.study import StudyError


def _run_raising(monkeypatch, capsys, exc: BaseException) -> tuple[int, list[str]]:
    def boom(args):
        raise exc

    monkeypatch.setattr(model_commands, "_cmd_targets", boom)
    code = cli.main(["targets"])
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("exc, expected", [
    (DataError("class fist has no windows"), "class fist has no windows"),
    (LinkError("cannot open /dev/ttyACM0"), "cannot open /dev/ttyACM0"),
    (StudyError("nothing to resume"), "nothing to resume"),
    (UsageError("--workers must be at least 1"), "--workers must be at least 1"),
    (OSError(errno.ENOSPC, "No space left on device", "/data/run/journal.sqlite"),
     "/data/run/journal.sqlite: no space left on the device (free some space"),
    (PermissionError(errno.EACCES, "Permission denied", "/etc/shadow"), "/etc/shadow: permission denied"),
    (FileNotFoundError(errno.ENOENT, "No such file or directory", "card.json"), "card.json: no such file"),
    (sqlite3.OperationalError("database or disk is full"), "the disk is full"),
])
def test_user_errors_are_one_line_and_exit_2(monkeypatch, capsys, exc, expected):
    code, lines = _run_raising(monkeypatch, capsys, exc)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith("tinynas: error: ")
    assert expected in lines[0]


def test_a_bug_is_one_line_with_a_log_of_its_traceback(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    code, lines = _run_raising(monkeypatch, capsys, KeyError("surprise"))
    assert code == 1
    assert len(lines) == 1 and lines[0].startswith("tinynas: internal error: KeyError")
    assert "report" in lines[0]
    logs = list((tmp_path / "tinynas").glob("tinynas-crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in lines[0]
    text = logs[0].read_text()
    assert "Traceback" in text and "surprise" in text and "boom" in text


def test_every_project_error_derives_from_a_package_base():
    import inspect

    import firmware_bridge.link
    import firmware_bridge.plan
    import firmware_bridge.protocol
    import firmware_bridge.session_format
    import tinynas.cost.budget
    import tinynas.cost.targets
    import tinynas.deploy.evaluate
    import tinynas.deploy.measure
    import tinynas.service.config
    import tinynas.service.runner
    import tinynas.service.status_server
    import tinynas.space
    import tinynas.study.journal
    import tinynas.study.settings

    modules = [firmware_bridge.plan, firmware_bridge.link, firmware_bridge.protocol,
               firmware_bridge.session_format, tinynas.cost.budget, tinynas.deploy.evaluate, tinynas.study.journal,
               tinynas.deploy.measure, tinynas.service.config, tinynas.service.runner, tinynas.service.status_server,
               tinynas.space, tinynas.study.settings, tinynas.cost.targets]
    found = [cls for module in modules for _, cls in inspect.getmembers(module, inspect.isclass)
             if issubclass(cls, Exception) and cls.__module__ == module.__name__]
    assert len(found) >= 14
    for cls in found:
        assert issubclass(cls, (TinynasError, BridgeError)), cls


def test_storage_helpers():
    full = OSError(errno.ENOSPC, "No space left on device", "x")
    assert is_disk_full(full) and is_disk_full(sqlite3.OperationalError("database or disk is full"))
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied"))
    assert "writing journal x: no space left" in storage_message(full, "writing journal")
    assert user_message(StorageError("the journal cannot be written")) == "the journal cannot be written"
    assert user_message(ValueError("plain")) is None


def test_an_interrupt_speaks_of_the_journal_only_where_there_is_one(monkeypatch, capsys):
    code, lines = _run_raising(monkeypatch, capsys, KeyboardInterrupt())
    assert code == 130 and lines == ["tinynas: interrupted"]
