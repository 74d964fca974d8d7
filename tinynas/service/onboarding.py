"""The requests a user sends the service: onboard and recalibrate (taken while IDLE or SERVING), and
continue / cancel of a paused collection.

A request that cannot be followed is refused with its reason in `status` (`Service._refuse`); the phase
does not change, and the next request is read.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from firmware_bridge.errors import BridgeError
from firmware_bridge.guide import load_plan
from tinynas.errors import TinynasError, user_message
from tinynas.service.state import user_name_problem

if TYPE_CHECKING:
    from tinynas.service.runner import Service

log = logging.getLogger(__name__)


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def take_request(service: Service) -> bool:
    """Start the first acceptable onboarding (or else re-wear) request; False when there was none."""
    for path, wanted in service._requests("onboard"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        user = user.strip() if isinstance(user, str) else user
        plan = wanted.get("plan") or service.config.plan
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):  # (the second only tells the type checker what the first knows)
            service._refuse(f"onboarding request ignored: {problem}")
            continue
        try:
            plan_object = load_plan(str(plan))
            service._plan_fit(plan_object)  # fail fast, before anyone performs a gesture
        except (TinynasError, BridgeError) as exc:
            service._refuse(f"onboarding of {user} refused: {exc}")
            continue
        session = service.paths.profile(user) / "sessions" / _stamp()
        service._save(state="COLLECTING", user=user, plan=str(plan), session=str(session), study="", error="",
                      paused="", rewear={})
        return True
    if _take_rewear(service):
        return True
    for kind in ("continue", "cancel"):  # nothing is paused: such a request has nothing to act on
        for path, wanted in service._requests(kind):
            path.unlink(missing_ok=True)
            log.info("ignoring %s request for %s: no collection is paused", kind, wanted.get("user"))
    return False


def _take_rewear(service: Service) -> bool:
    """Start the re-wear / new-condition flow of the first acceptable `recalibrate` request."""
    from tinynas.service import rewear

    for path, wanted in service._requests("recalibrate"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        user = user.strip() if isinstance(user, str) else user
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):  # (the second only tells the type checker what the first knows)
            service._refuse(f"recalibration request ignored: {problem}")
            continue
        try:
            flow = rewear.new_flow(service, user, bool(wanted.get("unlabelled")))
            if flow["mode"] == "labelled":
                service._plan_fit(rewear.flow_plan(flow))
        except (TinynasError, BridgeError) as exc:
            service._refuse(f"recalibration of {user} refused: {exc}")
            continue
        service._save(state="COLLECTING", user=user, session=flow["session"], study="", error="", paused="",
                      rewear=flow)
        return True
    return False


def while_paused(service: Service) -> None:
    """A paused collection waits for `tinynas onboard --user U --continue` (or --cancel)."""
    state = service.state
    for kind in ("continue", "cancel"):
        for path, wanted in service._requests(kind):
            path.unlink(missing_ok=True)
            if wanted.get("user") != state.user:
                service._refuse(f"{kind} request for {wanted.get('user')!r} ignored: the paused collection is "
                                f"{state.user}'s; {state.paused}")
                continue
            if kind == "continue":
                log.info("collection of %s continues", state.user)
                service._save(paused="", error="")
            else:
                kept = state.session
                service.collection = {}
                why = f"collection of {state.user} cancelled; its recordings are kept in {kept}"
                flow = service._ended_rewear("cancelled", why + "; the old model stays")
                service._save(state=service._idle_state(), paused="", session="", study="", error=why, rewear=flow)
            return
    service._stop.wait(0.2)


def pause(service: Service, exc: BaseException) -> None:
    """Stop collecting until the user acts; the accepted windows are on disk and the state resumable."""
    message = user_message(exc) or f"{type(exc).__name__}: {exc}"
    for path, _ in service._requests("continue"):  # a continue sent before this pause does not answer it
        path.unlink(missing_ok=True)
    advice = (f"{message}; then `tinynas onboard --user {service.state.user} --continue` "
              f"(or --cancel to stop this collection)")
    log.warning("%s", advice)
    service.collection.update(paused=advice, phase="paused", go=None, go_at=None)
    service._save(paused=advice, error=advice)
