"""The requests a user sends the service: onboard and recalibrate (taken while IDLE or SERVING), and
continue / cancel of a paused collection.

A request that cannot be followed is refused with its reason in `status` (`ServiceContext.refuse`); the phase
does not change, and the next request is read.
"""

from __future__ import annotations

import logging
import time

from firmware_bridge.errors import BridgeError
from firmware_bridge.guide import load_plan
from tinynas.errors import TinynasError, user_message
from tinynas.service.context import Phase, ServiceContext, Transition, to
from tinynas.service.state import user_name_problem

log = logging.getLogger(__name__)


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def take_request(service: ServiceContext) -> Transition | None:
    """The transition into the first acceptable onboarding (or else re-wear) request; None when there was none."""
    for path, wanted in service.requests("onboard"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        user = user.strip() if isinstance(user, str) else user
        plan = wanted.get("plan") or service.config.plan
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):  # (the second only tells the type checker what the first knows)
            service.refuse(f"onboarding request ignored: {problem}")
            continue
        try:
            plan_object = load_plan(str(plan))
            plan_object.check_searchable()
            service.plan_fit(plan_object)  # fail fast, before anyone performs a gesture
        except (TinynasError, BridgeError) as exc:
            service.refuse(f"onboarding of {user} refused: {exc}")
            continue
        session = service.paths.profile(user) / "sessions" / _stamp()
        return to(Phase.COLLECTING, user=user, plan=str(plan), session=str(session), study="", error="",
                  paused="", rewear={})
    rewear = _take_rewear(service)
    if rewear is not None:
        return rewear
    for kind in ("continue", "cancel"):  # nothing is paused: such a request has nothing to act on
        for path, wanted in service.requests(kind):
            path.unlink(missing_ok=True)
            log.info("ignoring %s request for %s: no collection is paused", kind, wanted.get("user"))
    return None


def _take_rewear(service: ServiceContext) -> Transition | None:
    """Start the re-wear / new-condition flow of the first acceptable `recalibrate` request."""
    from tinynas.service import rewear

    for path, wanted in service.requests("recalibrate"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        user = user.strip() if isinstance(user, str) else user
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):  # (the second only tells the type checker what the first knows)
            service.refuse(f"recalibration request ignored: {problem}")
            continue
        try:
            flow = rewear.new_flow(service, user, bool(wanted.get("unlabelled")))
            if flow["mode"] == "labelled":
                service.plan_fit(rewear.flow_plan(flow))
        except (TinynasError, BridgeError) as exc:
            service.refuse(f"recalibration of {user} refused: {exc}")
            continue
        return to(Phase.COLLECTING, user=user, session=flow["session"], study="", error="", paused="",
                  rewear=flow)
    return None


def while_paused(service: ServiceContext) -> Transition | None:
    """A paused collection waits for `tinynas onboard --user U --continue` (or --cancel): the collection again,
    or its end; None while nothing was asked."""
    state = service.state
    for kind in ("continue", "cancel"):
        for path, wanted in service.requests(kind):
            path.unlink(missing_ok=True)
            if wanted.get("user") != state.user:
                service.refuse(f"{kind} request for {wanted.get('user')!r} ignored: the paused collection is "
                                f"{state.user}'s; {state.paused}")
                continue
            if kind == "continue":
                log.info("collection of %s continues", state.user)
                return to(Phase.COLLECTING, paused="", error="")
            kept = state.session
            service.collection = {}
            why = f"collection of {state.user} cancelled; its recordings are kept in {kept}"
            flow = service.ended_rewear("cancelled", why + "; the old model stays")
            return to(service.idle_phase(), paused="", session="", study="", error=why, rewear=flow)
    service.stopping.wait(0.2)
    return None


def pause(service: ServiceContext, exc: BaseException) -> Transition:
    """Stop collecting until the user acts; the accepted windows are on disk and the state resumable."""
    message = user_message(exc) or f"{type(exc).__name__}: {exc}"
    for path, _ in service.requests("continue"):  # a continue sent before this pause does not answer it
        path.unlink(missing_ok=True)
    advice = (f"{message}; then `tinynas onboard --user {service.state.user} --continue` "
              f"(or --cancel to stop this collection)")
    log.warning("%s", advice)
    service.collection.update(paused=advice, phase="paused", go=None, go_at=None, paused_at=time.time())
    return to(Phase.COLLECTING, paused=advice, error=advice)
