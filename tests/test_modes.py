"""Modes are enums inside the records that hold them (issue 69): a record built from a name holds the member, a
name that is not a member is refused where it is set, and a state file holding one is a damaged state, said in one
line, not a comparison that is silently never true."""

import json

import pytest

from tinynas.modes import Accounting, FlowMode, FlowPhase, Runtime, Task
from tinynas.service.state import DamagedState, Deployed, Phase, RewearFlow, ServiceState, _parse
from tinynas.study.settings import StudySettings

FLOW = dict(user="ann", mode="labelled", phase="collecting", session="s", staging="t", final="f", source="m.tflite",
            window=400, started=1.0)


def test_a_flow_built_from_names_holds_members_and_says_its_change():
    flow = RewearFlow(**FLOW)
    assert flow.mode is FlowMode.LABELLED and flow.phase is FlowPhase.COLLECTING and flow.running
    assert flow.moved(phase="rejected").phase is FlowPhase.REJECTED and not flow.moved(phase="rejected").running
    assert FlowMode.LABELLED.change == "recalibrate" and FlowMode.UNLABELLED.change == "adapt"
    assert json.loads(json.dumps(flow.to_dict()))["phase"] == "collecting"  # as state.json has always held it


def test_a_flow_with_an_unknown_phase_is_a_damaged_state():
    with pytest.raises(DamagedState, match="phase"):
        RewearFlow.from_dict({**FLOW, "from": FLOW["source"], "phase": "half-done"})
    with pytest.raises(ValueError):
        RewearFlow(**{**FLOW, "mode": "guessed"})


def test_the_service_phase_is_a_member_and_an_unknown_one_is_refused_where_set():
    state = ServiceState()
    state.state = "SERVING"
    assert state.state is Phase.SERVING
    with pytest.raises(ValueError):
        state.state = "SERVNG"
    with pytest.raises(DamagedState, match="unknown state"):
        _parse(json.dumps({"state": "SERVNG"}))
    assert Deployed(user="ann", model="m", card="c", task="anomaly").task is Task.ANOMALY


def test_study_settings_hold_members():
    settings = StudySettings(runtime="tflm", accounting="arena", task="anomaly")
    assert settings.runtime is Runtime.TFLM and settings.accounting is Accounting.ARENA
    assert settings.task is Task.ANOMALY
    assert StudySettings().runtime == "auto"  # resolved against the target later, not a member of its own
