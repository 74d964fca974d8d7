"""The service's steps as a state machine: a step returns its transition, only the runner applies it."""

import json

import pytest

from tests.support.service_context import service_context
from tinynas.service import onboarding
from tinynas.service.context import Phase, to
from tinynas.service.paths import request


def test_an_onboarding_request_is_a_transition_that_only_apply_saves(tmp_path):
    context = service_context(tmp_path)
    request(context.paths.root, "onboard", user="alice", plan="gestures4")
    transition = onboarding.take_request(context)
    assert transition.phase == Phase.COLLECTING and transition.changes["user"] == "alice"
    assert context.state.state == "IDLE" and not context.paths.state.exists()  # nothing applied yet
    context.apply(transition)
    saved = json.loads(context.paths.state.read_text())
    assert saved["state"] == "COLLECTING" and saved["user"] == "alice" and saved["session"].endswith(
        tuple("0123456789"))
    assert onboarding.take_request(context) is None  # the request was taken once


def test_a_step_cannot_change_the_phase_with_update(tmp_path):
    context = service_context(tmp_path)
    with pytest.raises(ValueError, match="returning a Transition"):
        context.update(state="SERVING")
    context.update(error="something")
    assert context.state.state == "IDLE" and json.loads(context.paths.state.read_text())["error"] == "something"


def test_a_paused_collection_continues_or_ends_by_its_transition(tmp_path):
    context = service_context(tmp_path)
    context.apply(to(Phase.COLLECTING, user="bob", plan="gestures4", session=str(tmp_path / "s"), paused="why"))
    assert onboarding.while_paused(context) is None
    request(context.paths.root, "continue", user="eve")
    request(context.paths.root, "continue", user="bob")
    transition = onboarding.while_paused(context)
    assert transition == to(Phase.COLLECTING, paused="", error="")
    assert "ignored: the paused collection is bob's" in context.state.error
    request(context.paths.root, "cancel", user="bob")
    ended = onboarding.while_paused(context)
    assert ended.phase == Phase.IDLE and "cancelled" in ended.changes["error"]
    failed = context.failed(Phase.SEARCHING, RuntimeError("boom"))
    assert failed.phase == Phase.IDLE and "internal error RuntimeError: boom" in failed.changes["error"]


def test_status_json_shows_each_saved_phase_and_error_at_once(tmp_path):
    # `tinynas service status` reads status.json: it must never show an older phase than state.json,
    # whenever the writer thread's next tick comes (none runs here). The runner writes it (a context alone has no
    # status: status reads the context, never the reverse).
    from tinynas.service.runner import Service

    context = service_context(tmp_path, Service)
    context.apply(to(Phase.SEARCHING, user="alice"))
    assert json.loads(context.paths.status.read_text())["state"] == "SEARCHING"
    context.apply(to(Phase.IDLE, error="searching for alice failed: too big"))
    shown = json.loads(context.paths.status.read_text())
    assert shown["state"] == "IDLE" and shown["error"] == "searching for alice failed: too big"


def test_a_misspelled_state_field_is_an_error_not_a_change_dropped_at_save(tmp_path):
    context = service_context(tmp_path)
    with pytest.raises(ValueError, match="ServiceState has no field 'eror'"):
        to(Phase.IDLE, eror="typo")
    with pytest.raises(ValueError, match="no field 'colection'"):
        context.update(colection=None)
    context.apply(to(Phase.IDLE, error="spelled right"))
    assert json.loads(context.paths.state.read_text())["error"] == "spelled right"
