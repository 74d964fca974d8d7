"""A named pipe where one of our files should be is refused, never opened (an open() of a FIFO blocks until a writer
comes): the readers issue 68's rule scan (tests/test_rules.py) moved onto the checked readers."""

import os

import pytest

from tinynas.data.session import read_events
from tinynas.data.windows import DataError, Windows
from tinynas.service.paths import ServicePaths, read_status
from tinynas.study.journal import JournalError, inspect_journal


@pytest.fixture
def fifo(tmp_path):
    def make(name: str):
        path = tmp_path / name
        os.mkfifo(path)
        return path
    return make


def test_a_windows_file_that_is_a_pipe_is_one_clear_error(fifo):
    with pytest.raises(DataError, match="named pipe"):
        Windows.load(fifo("windows.npz"))


def test_a_journal_that_is_a_pipe_is_not_ours_and_left_alone(fifo):
    path = fifo("journal.sqlite")
    with pytest.raises(JournalError, match="a named pipe .FIFO., not a tinynas journal"):
        inspect_journal(path)
    assert path.exists()


def test_a_status_file_that_is_a_pipe_reads_as_no_status(tmp_path, fifo):
    fifo("status.json")
    assert read_status(ServicePaths(tmp_path)) == {}


def test_a_sessions_events_that_are_a_pipe_read_as_none(tmp_path, fifo):
    fifo("events.jsonl")
    assert read_events(tmp_path) == []
