"""`tinynas onboard --user U --more N`: the user's last session grows by N repetitions per class; nothing recorded
is dropped, and the search runs again in a study folder of its own."""

import json
from types import SimpleNamespace

from firmware_bridge.plan import Plan, load_plan
from firmware_bridge.protocol import Hello
from tinynas.service import onboarding
from tinynas.service.collect import _new_study
from tinynas.service.config import ServiceConfig
from tinynas.service.context import Phase, ServiceContext
from tinynas.service.paths import request


def _service(tmp_path):
    service = ServiceContext(ServiceConfig(data_dir=str(tmp_path / "data"), target="nRF52840")).open()
    # The device as the service knows it once it said HELLO (all the plan check reads).
    service.device = SimpleNamespace(hello=Hello("sim", "1.0", 4, 200.0, "int8"))
    return service


def _session(service, user, name, plan: Plan):
    folder = service.paths.profile(user) / "sessions" / name
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"format": "tinynas-session", "sample_rate_hz": 200.0,
                                                         "plan": plan.to_dict(), "channels": 4}))
    (folder / "windows.jsonl").write_text('{"label": "fist"}\n')
    return folder


def test_more_extends_the_newest_session_and_keeps_its_recordings(tmp_path):
    service = _service(tmp_path)
    plan = Plan("gestures4", ("rest", "fist", "open", "point"), repetitions=5, window_seconds=1.0)
    _session(service, "alice", "20261201-090000", plan)
    newest = _session(service, "alice", "20261202-090000", plan)
    recorded = (newest / "windows.jsonl").read_text()
    request(service.paths.root, "onboard", user="alice", more=3)
    transition = onboarding.take_request(service)
    assert transition.phase == Phase.COLLECTING
    assert transition.changes["session"] == str(newest)
    extended = load_plan(transition.changes["plan"])
    assert extended.repetitions == 8 and extended.classes == plan.classes
    assert (newest / "windows.jsonl").read_text() == recorded
    # Twice: the second adds to the first extension.
    request(service.paths.root, "onboard", user="alice", more=2)
    assert load_plan(onboarding.take_request(service).changes["plan"]).repetitions == 10


def test_more_without_a_session_is_refused_in_status(tmp_path):
    service = _service(tmp_path)
    request(service.paths.root, "onboard", user="bob", more=3)
    assert onboarding.take_request(service) is None
    assert "bob has no recorded session" in service.state.error


def test_more_with_an_absurd_count_is_refused(tmp_path):
    service = _service(tmp_path)
    _session(service, "alice", "20261201-090000", Plan("p", ("a", "b"), repetitions=5, window_seconds=1.0))
    request(service.paths.root, "onboard", user="alice", more=10**9)
    assert onboarding.take_request(service) is None
    assert "--more must be a whole number" in service.state.error


def test_a_session_searched_again_gets_a_study_folder_of_its_own(tmp_path):
    studies = tmp_path / "studies"
    assert _new_study(studies, "s1") == studies / "s1"
    (studies / "s1").mkdir(parents=True)
    assert _new_study(studies, "s1") == studies / "s1-2"
    (studies / "s1-2").mkdir()
    assert _new_study(studies, "s1") == studies / "s1-3"


def test_a_redo_asked_during_the_rest_redoes_the_window_just_kept(tmp_path):
    from tinynas.service.collect import _StatusPrompter

    service = _service(tmp_path)
    service.state.user = "alice"
    prompter = _StatusPrompter(service)
    request(service.paths.root, "redo", user="alice")
    assert prompter.wants_redo(30.0) is True  # at once, not after the rest
    assert service.collection.redo_until is None
    request(service.paths.root, "redo", user="mallory")  # another user's: refused, the rest runs out
    assert prompter.wants_redo(0.3) is False
    assert "redo request for 'mallory' ignored" in service.state.error


def test_more_skips_a_rewear_session(tmp_path):
    service = _service(tmp_path)
    plan = Plan("p", ("a", "b"), repetitions=5, window_seconds=1.0)
    onboarding_session = _session(service, "alice", "20261201-090000", plan)
    _session(service, "alice", "20261202-090000-rewear", Plan("p", ("a", "b"), repetitions=2, window_seconds=1.0))
    assert service.paths.latest_session("alice") == onboarding_session
