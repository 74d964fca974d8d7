"""The status snapshot: the time a search has left between journal saves, the time a collection has left, the
config hint of the page's commands, and the service log's timestamps."""

import re
import time

import pytest

from tinynas.service.collection import Collection
from tinynas.service.config import ServiceConfig
from tinynas.service.context import ServiceContext
from tinynas.service.status import search_progress, snapshot
from tinynas.study.journal import Journal


def test_a_search_that_has_saved_no_candidate_yet_still_counts_its_time(tmp_path):
    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"), budget="600s")).open()
    study = tmp_path / "study"
    study.mkdir()
    with Journal(study / "journal.sqlite"):  # created, no candidate finished: no search_seconds saved yet
        pass
    service.state.state, service.state.study = "SEARCHING", str(study)
    service.search_clock = (time.time() - 42.0, 100.0)  # 100 s spent before a restart, 42 s since
    progress = search_progress(service)
    assert progress["budget_seconds"] == 600
    assert 600 - 100 - 42 - 5 <= progress["seconds_left"] <= 600 - 100 - 42  # not "600 s of 600 s left"


def test_a_collection_says_how_long_it_has_left_and_the_page_names_the_config(tmp_path):
    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"), source="/etc/tinynas.toml")).open()
    assert snapshot(service)["collection"] == {}  # no collection running: as the status always said it
    service.collection = Collection(total=60, accepted=20, seconds_per_window=7.0)
    status = snapshot(service)
    assert status["collection"] == {"total": 60, "accepted": 20, "seconds_per_window": 7.0, "seconds_left": 280.0}
    with pytest.raises(AttributeError, match="no field 'acepted'"):
        service.collection.update(acepted=21)  # a misspelt field is a bug, not a key no one reads
    assert status["config_hint"] == " --config /etc/tinynas.toml"
    assert snapshot(ServiceContext(ServiceConfig(data_dir=str(tmp_path / "other"))).open())["config_hint"] == ""


def test_the_service_log_lines_carry_their_local_time(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "t.toml"
    # No device at a port that does not exist: the service waits for it, logging; stopped by a stop request.
    config.write_text(f'data_dir = "{tmp_path / "data"}"\nport = "{tmp_path / "no-such-port"}"\nhttp_port = 0\n')
    service = subprocess.Popen([sys.executable, "-m", "tinynas.cli", "service", "run", "--config", str(config)],
                               stderr=subprocess.PIPE, text=True)
    try:
        first = service.stderr.readline()
    finally:
        service.terminate()
        service.wait(30)
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} (INFO|WARNING) ", first), first


@pytest.mark.parametrize("plan, scorer, said", [
    ("motor-normal", "auto", "compared with the classical scorer"),
    ("motor-normal", "classical", "served whatever the networks reach"),
    ("motor-normal", "network", ""), ("gestures4", "auto", ""), ("no-such-plan", "auto", "")])
def test_an_anomaly_search_says_what_happens_to_its_best_network(tmp_path, plan, scorer, said):
    from tinynas.service.status import _family_note

    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"), scorer=scorer)).open()
    service.state.plan = plan
    note = _family_note(service)
    assert (said in note) if said else note == ""
