"""What a re-wear request is: whose served model it may change, the flow it starts, and the plan that flow records."""

from __future__ import annotations

import time
from pathlib import Path

from firmware_bridge.plan import Plan
from tinynas.anomaly.conditions import check_condition_name
from tinynas.anomaly.section import read_section
from tinynas.anomaly.threshold import windows_needed
from tinynas.data.session import read_manifest
from tinynas.deploy.modeldir import ModelDir
from tinynas.errors import TinynasError
from tinynas.modes import FlowMode, FlowPhase
from tinynas.service.context import ServiceContext
from tinynas.service.state import Deployed, RewearFlow


class RewearRefused(TinynasError, ValueError):
    """A re-wear request that cannot be followed (no served model for the user, an old model folder)."""


def served_model_problem(deployed: Deployed | None, user: str) -> str | None:
    """Why `user` cannot re-wear (one line), or None when the served model is theirs."""
    if deployed is None:
        return f"{user} has no served model (nothing is served yet): onboard {user} first"
    if deployed.user != user:
        return (f"{user} has no served model (the service serves {deployed.user}'s): "
                f"onboard {user} first")
    return None


def onboarding_plan(deployed: Deployed, repetitions: int) -> Plan:
    """The plan the served model was collected with, with `repetitions` per class.

    Models deployed by this version record it; older ones are found through their study's session manifest.
    """
    stored = deployed.plan
    if not isinstance(stored, dict):
        session = deployed.session or ""
        if not session and deployed.study:
            study = Path(deployed.study)
            session = str(study.parent.parent / "sessions" / study.name)
        try:
            stored = read_manifest(Path(session)).get("plan")
        except (OSError, TinynasError):
            stored = None
    if not isinstance(stored, dict) or not stored.get("classes"):
        raise RewearRefused("the served model's collection plan is not known (its session is gone): "
                            "onboard again to make a model that can be recalibrated")
    try:
        return Plan(**{**stored, "classes": tuple(stored["classes"]), "repetitions": repetitions})
    except (TypeError, TinynasError) as exc:
        raise RewearRefused(f"the served model's collection plan is not usable ({exc})") from None


def condition_problem(card: dict, condition: str) -> str | None:
    """Why the served model (its `card`) cannot keep a new operating condition named `condition`, or None."""
    try:
        check_condition_name(condition)
        section = read_section(card)
    except TinynasError as exc:
        return str(exc)
    if section is None or section.classical is None:
        return (f"condition {condition!r}: conditions are kept side by side for a classical anomaly scorer only; the "
                f"served model is " + ("an int8 network scorer: recalibrate without --condition (the new condition "
                                       "replaces the old)" if section is not None else "a classifier"))
    return None


def new_flow(service: ServiceContext, user: str, unlabelled: bool, condition: str | None = None) -> RewearFlow:
    """The `state.rewear` of a new flow for `user` (RewearRefused in one line if it cannot start); `condition`: a
    classical scorer's new operating condition, kept beside the earlier ones."""

    deployed = service.state.deployed
    problem = served_model_problem(deployed, user)
    if problem:
        raise RewearRefused(problem)
    assert deployed is not None  # else a problem
    source = ModelDir.open(Path(deployed.model).parent)  # no float weights: refused before anyone records
    if condition is not None:
        problem = condition_problem(source.card, condition)
        if problem:
            raise RewearRefused(problem)
        condition = check_condition_name(condition)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    profile = service.paths.profile(user)
    scorer = deployed.scorer
    unlabelled = unlabelled or scorer  # a scorer's new condition is its normal running: nothing to label
    window = source.preprocessing.window_length
    flow = RewearFlow(user=user, mode=FlowMode.UNLABELLED if unlabelled else FlowMode.LABELLED,
                      phase=FlowPhase.COLLECTING,
                      session=str(profile / "sessions" / f"{stamp}-rewear"),
                      staging=str(profile / "deployed" / f"{stamp}-rewear.tmp"),
                      final=str(profile / "deployed" / f"{stamp}-rewear"), source=deployed.model,
                      window=window, started=time.time(), condition=condition)
    if unlabelled:
        # At least 6 windows long: each half then gives 5 half-overlapping windows, 10 in all (adapt needs 8).
        rate = service.require_device().hello.sample_rate_hz
        least = 6 * window / rate
        if scorer:  # the later half of the windows (hop half a window) sets the threshold again for its rate

            need = windows_needed(float((deployed.anomaly or {})["false_alarm_rate"]))
            least = max(least, 2 * ((need + 2) * (window // 2) + window) / rate)
        seconds = round(max(float(service.config.rewear_unlabelled_seconds), least), 3)
        return flow.moved(seconds=seconds,
                          text=f"recording {seconds:g} s of unlabelled data (the old model keeps serving)")
    plan = onboarding_plan(deployed, service.config.rewear_repetitions)
    text = (f"collecting {plan.repetitions} repetition(s) of each of {len(plan.classes)} classes "
            f"(the old model keeps serving)")
    if plan.repetitions < 2:
        text += "; with 1 repetition nothing of the new session is held out: the check can only be that nothing is " \
                "forgotten"
    return flow.moved(plan={**plan.to_dict(), "classes": list(plan.classes)}, text=text)


def flow_plan(flow: RewearFlow) -> Plan:
    """The Plan of a labelled flow (stored in state.rewear when it started)."""
    if flow.plan is None:
        raise RewearRefused(f"the {flow.mode} re-wear flow of {flow.user} has no plan")
    return Plan(**{**flow.plan, "classes": tuple(flow.plan["classes"])})

