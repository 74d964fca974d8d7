"""The requests a user sends the service: onboard and recalibrate (taken while IDLE or SERVING), and
continue / cancel of a paused collection.

A request that cannot be followed is refused with its reason in `status` (`ServiceContext.refuse`); the phase
does not change, and the next request is read.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from firmware_bridge.errors import BridgeError
from firmware_bridge.plan import load_plan
from tinynas.anomaly.conditions import LIVE
from tinynas.anomaly.section import read_section
from tinynas.atomic import atomic_write_text
from tinynas.card import read_card
from tinynas.data.session import read_manifest
from tinynas.errors import TinynasError, user_message
from tinynas.modes import FlowMode
from tinynas.service.busy import FLOWS, refusal
from tinynas.service.collection import Collection
from tinynas.service.config import config_hint
from tinynas.service.context import Phase, ServiceContext, Transition, to
from tinynas.service.models import choose
from tinynas.service.rewear_request import RewearRefused, flow_plan, new_flow, served_model_problem
from tinynas.service.state import user_name_problem

log = logging.getLogger(__name__)


MAX_MORE = 100
"""Most repetitions per class one `onboard --more` adds."""


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


def take_request(service: ServiceContext) -> Transition | None:
    """The transition into the first acceptable onboarding (or else re-wear) request; None when there was none."""
    with service.flow_requests:  # not refused meanwhile (refuse_while_busy) as if a flow ran
        return _take_request(service)


def refuse_while_busy(service: ServiceContext) -> None:
    """Refuse every onboarding and recalibration request while a flow runs, in one line saying what runs and how to
    cancel it (`busy.refusal`): never kept to start by itself once the flow ends. Called by a side thread
    (threads.refuse_new_flows) every 0.2 s, whatever the main thread is busy with."""
    with service.flow_requests:
        if service.state.state not in FLOWS:
            return
        for kind in ("onboard", "recalibrate"):
            for path, wanted in service.requests(kind):
                path.unlink(missing_ok=True)
                user = wanted.get("user")
                asked = (f"recalibration of {user}" if kind == "recalibrate" else
                         f"more recordings for {user}" if "more" in wanted else f"onboarding of {user}")
                service.refuse(refusal(service.state, service.config, asked))


def _take_request(service: ServiceContext) -> Transition | None:
    for path, wanted in service.requests("onboard"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        user = user.strip() if isinstance(user, str) else user
        plan = wanted.get("plan") or service.config.plan
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):  # (the second only tells the type checker what the first knows)
            service.refuse(f"onboarding request ignored: {problem}")
            continue
        if "more" in wanted:  # even a "more" of 0 or junk: refused as such, never read as a fresh onboarding
            more = _more(service, user, wanted["more"])
            if more is not None:
                return more
            continue
        try:
            plan_object = load_plan(str(plan))
            plan_object.check_searchable()
            service.plan_fit(plan_object)  # fail fast, before anyone performs a gesture
        except (TinynasError, BridgeError) as exc:
            service.refuse(f"onboarding of {user} refused: {exc}")
            continue
        session = service.paths.profile(user) / "sessions" / _stamp()
        return to(Phase.COLLECTING, user=user, plan=str(plan), session=str(session), study="", error="", gate=None,
                  paused="", rewear=None)
    rewear = _take_rewear(service)
    if rewear is not None:
        return rewear
    switch = _take_serve(service)
    if switch is not None:
        return switch
    _take_condition(service)
    for kind in ("continue", "cancel", "redo"):  # nothing is paused or recorded: such a request has nothing to act on
        for path, wanted in service.requests(kind):
            path.unlink(missing_ok=True)
            log.info("ignoring %s request for %s: no collection is paused", kind, wanted.get("user"))
    return None


MORE_FILE = "plan-more.json"
"""The plan a session was extended to (`onboard --more N`), kept in the session folder beside its recordings."""


def _more(service: ServiceContext, user: str, more) -> Transition | None:
    """Extend the user's newest session by `more` repetitions per class and collect only those (the windows already
    recorded are kept and used), then search again on all of them."""
    import json

    from firmware_bridge.plan import Plan

    if not isinstance(more, int) or isinstance(more, bool) or not 1 <= more <= MAX_MORE:
        service.refuse(f"onboarding request of {user} ignored: --more must be a whole number in 1..{MAX_MORE}")
        return None
    session = service.paths.latest_session(user)
    if session is None:
        service.refuse(f"nothing to add to: {user} has no recorded session; onboard without --more first")
        return None
    try:
        manifest = read_manifest(session)
        extended = session / MORE_FILE
        base = load_plan(str(extended)) if extended.is_file() else Plan(**_plan_fields(manifest.get("plan")))
        plan = Plan(**{**base.to_dict(), "repetitions": base.repetitions + more,
                       "order": tuple(base.order) + tuple(base.classes) * more if base.order else ()})
        plan.check_searchable()
        service.plan_fit(plan)
        atomic_write_text(extended, json.dumps(plan.to_dict(), indent=2) + "\n")
    except (OSError, ValueError, TypeError, TinynasError, BridgeError) as exc:
        service.refuse(f"more recordings for {user} refused: {user_message(exc) or exc}")
        return None
    log.info("extending %s by %d repetitions per class", session, more)
    return to(Phase.COLLECTING, user=user, plan=str(extended), session=str(session), study="", error="", gate=None,
              paused="", rewear=None)


def _plan_fields(data) -> dict:
    """A session manifest's plan as Plan's keyword arguments (TypeError when it is not one)."""
    if not isinstance(data, dict) or not data.get("classes"):
        raise TypeError("the session's manifest holds no plan to extend")
    return {key: tuple(value) if isinstance(value, list) else value for key, value in data.items()}


def _take_serve(service: ServiceContext) -> Transition | None:
    """Serve the model the first acceptable `serve` request names (`tinynas serve`); nothing is deleted."""

    for path, wanted in service.requests("serve"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):
            service.refuse(f"serve request ignored: {problem}")
            continue
        model_id = wanted.get("model")
        try:
            model = choose(service.paths.root / "profiles", user, model_id if isinstance(model_id, str) else None,
                           bool(wanted.get("previous")), service.state.history, service.state.deployed)
            assert model.card is not None  # choose() never returns a damaged folder
            shape = model.card.input_shape() or (0, 0)
            channels = service.require_device().hello.channels
            if shape[-1] != channels:
                raise TinynasError(f"model {model.id} reads {shape[-1]} channels, the device sends {channels}")
        except (TinynasError, TypeError, IndexError) as exc:
            service.refuse(f"serving {user}'s model refused: {user_message(exc) or exc}")
            continue
        log.info("serving %s's model %s (asked for)", user, model.id)
        return to(Phase.SERVING, deployed=model.deployed, user=user, error="", rewear=None)
    return None


def _take_condition(service: ServiceContext) -> None:
    """Read the served classical scorer's windows under the operating condition a `condition` request names (or the
    one each looks most like: `live`), kept in the state until another model is served."""

    for path, wanted in service.requests("condition"):
        path.unlink(missing_ok=True)
        deployed, name = service.state.deployed, wanted.get("condition")
        problem = served_model_problem(deployed, str(wanted.get("user")))
        if problem is None and isinstance(name, str):
            assert deployed is not None  # else a problem
            try:
                section = read_section(read_card(Path(deployed.card).parent).to_dict())
            except TinynasError as exc:
                problem = user_message(exc) or str(exc)
            else:
                kept = [c.name for c in section.conditions] if section is not None else []
                if name != LIVE and name not in kept:
                    problem = f"condition {name!r} is not one the served model keeps ({', '.join(kept) or 'one'})"
        if problem or not isinstance(name, str) or deployed is None:
            service.refuse(f"condition request ignored: {problem or 'no condition named'}")
            continue
        log.info("reading %s's windows under %s", deployed.user,
                 "the condition each looks most like" if name == LIVE else f"condition {name!r}")
        service.update(deployed=deployed.moved(condition=None if name == LIVE else name))


def _take_rewear(service: ServiceContext) -> Transition | None:
    """Start the re-wear / new-condition flow of the first acceptable `recalibrate` request."""

    for path, wanted in service.requests("recalibrate"):
        path.unlink(missing_ok=True)
        user = wanted.get("user")
        user = user.strip() if isinstance(user, str) else user
        problem = user_name_problem(user)
        if problem or not isinstance(user, str):  # (the second only tells the type checker what the first knows)
            service.refuse(f"recalibration request ignored: {problem}")
            continue
        try:
            condition = wanted.get("condition")
            if condition is not None and not isinstance(condition, str):
                raise RewearRefused(f"condition {condition!r} is not a name")
            flow = new_flow(service, user, bool(wanted.get("unlabelled")), condition)
            if flow.mode is FlowMode.LABELLED:
                service.plan_fit(flow_plan(flow))
        except (TinynasError, BridgeError) as exc:
            service.refuse(f"recalibration of {user} refused: {exc}")
            continue
        return to(Phase.COLLECTING, user=user, session=flow.session, study="", error="", paused="",
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
            return cancelled(service)
    service.stopping.wait(0.2)
    return None


def cancelled(service: ServiceContext) -> Transition:
    """The end of a collection its user cancelled (paused or running): every window accepted stays in the session
    folder; the service rests again, serving the model it served before (or IDLE)."""
    state = service.state
    service.collection = Collection()
    why = f"collection of {state.user} cancelled; its recordings are kept in {state.session}"
    log.info("%s", why)
    flow = service.ended_rewear("cancelled", why + "; the old model stays")
    return to(service.idle_phase(), paused="", session="", study="", error=why, rewear=flow)


def pause(service: ServiceContext, exc: BaseException) -> Transition:
    """Stop collecting until the user acts; the accepted windows are on disk and the state resumable."""
    message = user_message(exc) or f"{type(exc).__name__}: {exc}"
    for path, _ in service.requests("continue"):  # a continue sent before this pause does not answer it
        path.unlink(missing_ok=True)

    advice = (f"{message}; then `tinynas onboard --user {service.state.user} --continue{config_hint(service.config)}`"
              f" (or --cancel to stop this collection)")
    log.warning("%s", advice)
    service.collection.update(paused=advice, phase="paused", go=None, go_at=None, paused_at=time.time())
    return to(Phase.COLLECTING, paused=advice, error=advice)
