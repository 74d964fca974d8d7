"""What a user can ask the service, from a terminal (`tinynas onboard`, `tinynas serve`) or from the status page's
buttons: each request is checked here first (refused in one line, nothing left behind), then left as a request file
(`paths.request`) that the running service picks up. One owner, so that the page can do nothing the CLI cannot,
and checks the same.
"""

from __future__ import annotations

from pathlib import Path

from tinynas.anomaly.conditions import LIVE, check_condition_name
from tinynas.anomaly.section import read_section
from tinynas.card import read_card
from tinynas.errors import TinynasError, UsageError, user_message
from tinynas.options import check_range
from tinynas.service.busy import busy_with, refusal
from tinynas.service.config import ServiceConfig, config_hint, page_plans, page_url
from tinynas.service.fit import check_plan_fits
from tinynas.service.models import choose
from tinynas.service.onboarding import MAX_MORE
from tinynas.service.paths import ServicePaths, read_status, request, running_pid
from tinynas.service.rewear_request import condition_problem, served_model_problem
from tinynas.service.state import Phase, check_user_name, load_state

PAGE_ACTIONS = ("onboard", "more", "continue", "cancel", "redo", "recalibrate", "serve", "condition")
"""What the page's buttons may ask (stopping the service stays a terminal's command)."""


def _follow(config: ServiceConfig) -> str:
    return f"follow it with `tinynas service status{config_hint(config)}` or {page_url(config)}"


def _not_busy(config: ServiceConfig, asked: str) -> None:
    """UsageError when another flow runs (or is under way in a stopped service's state): `asked` is refused, never
    queued to start by itself once that flow ends (`busy`)."""
    paths = ServicePaths(config.data_dir)
    said = refusal(load_state(paths.state), config, asked, running_pid(paths) is not None)
    if said:
        raise UsageError(said)


def onboard(config: ServiceConfig, user: str, plan_name: str | None = None) -> str:
    """Ask for a new user's (or machine's) collection, search and deployment with a plan (default: the config's)."""
    from firmware_bridge.plan import load_plan

    check_user_name(user)  # it names a folder under data_dir: refused here, before any request is left
    _not_busy(config, f"onboarding of {user}")
    name = plan_name or config.plan
    plan = load_plan(name)  # a bad plan is refused here, not later on the device
    plan.check_searchable()
    said = ""
    # The running service says which device it reads; without it the service checks the plan itself.
    device = read_status(ServicePaths(config.data_dir)).get("device") or {}
    device = device if isinstance(device, dict) else {}
    if device.get("channels") and device.get("sample_rate_hz"):
        fit = check_plan_fits(plan, config.chip_budget(), device["channels"], device["sample_rate_hz"])
        if plan.kind == "continuous":
            said = (f"plan {plan.name}: {len(plan.prompts())} blocks of {plan.block_seconds:g} s; the search on "
                    f"{config.target} will use {fit.window}-sample windows every {fit.hop} samples cut from them\n")
        elif fit.cut:
            said = (f"plan {plan.name}: {fit.recorded}-sample windows do not fit {config.target}; the search will "
                    f"use {fit.window}-sample windows cut from the recordings\n")
    request(config.data_dir, "onboard", user=user, plan=name)
    return said + f"onboarding of {user} requested (plan {name}); {_follow(config)}"


def more(config: ServiceConfig, user: str, count: object) -> str:
    """Ask for `count` more repetitions per class in the user's last session, and a search on all of it."""

    check_user_name(user)
    if isinstance(count, bool) or not isinstance(count, int):
        raise UsageError(f"--more must be a whole number, got {count!r}")
    check_range("--more", count, 1, MAX_MORE)
    _not_busy(config, f"more recordings for {user}")
    if ServicePaths(config.data_dir).latest_session(user) is None:  # said now, not after the request is left
        raise UsageError(f"{user} has no recorded session to add to on this device: onboard without --more first "
                         f"(tinynas onboard --user {user}{config_hint(config)})")
    request(config.data_dir, "onboard", user=user, more=count)
    return (f"{count} more repetition(s) per class for {user} requested; the service prompts only those, then "
            f"searches again on the whole session; {_follow(config)}")


def answer(config: ServiceConfig, kind: str, user: str) -> str:
    """continue / cancel a paused collection (or confirm a machine's state), or redo the window just kept."""
    check_user_name(user)
    what = {"continue": "continue of the paused collection (or confirmation of the machine's state)",
            "cancel": "cancel of the paused collection (or running recalibration)",
            "redo": "redo of the window just kept (while the rest after it lasts)"}
    if kind not in what:
        raise UsageError(f"unknown answer {kind!r}: one of {', '.join(what)}")
    paths = ServicePaths(config.data_dir)
    state = load_state(paths.state)
    if kind == "cancel" and state.state in (Phase.SEARCHING, Phase.DEPLOYING):  # said now, not ignored later
        raise UsageError(f"nothing to cancel: {busy_with(state, config, running_pid(paths) is not None)}")
    request(config.data_dir, kind, user=user)
    return f"{what[kind]} of {user} requested; {_follow(config)}"


def recalibrate(config: ServiceConfig, user: str, unlabelled: bool = False, condition: str | None = None) -> str:
    """Ask for the re-wear / new-condition flow of the user whose model is served; `condition`: a classical anomaly
    scorer keeps its earlier operating conditions and adds this one, so named."""

    check_user_name(user)
    deployed = load_state(ServicePaths(config.data_dir).state).deployed
    problem = served_model_problem(deployed, user)
    if problem:  # the service would refuse it too; said here at once
        raise UsageError(f"cannot recalibrate: {problem}")
    _not_busy(config, f"recalibration of {user}")
    assert deployed is not None  # else a problem
    extra = {}
    if condition is not None:
        problem = condition_problem(_served_card(deployed), condition)
        if problem:
            raise UsageError(f"cannot recalibrate: {problem}")
        extra = {"condition": check_condition_name(condition)}
    request(config.data_dir, "recalibrate", user=user, unlabelled=bool(unlabelled), **extra)
    kept = f" keeping its earlier conditions beside {extra['condition']!r}" if extra else ""
    return (f"{'adaptation to unlabelled data' if unlabelled else 'recalibration'} of {user}'s served model{kept} "
            f"requested (it keeps serving meanwhile); {_follow(config)}")


def condition(config: ServiceConfig, user: str, name: str) -> str:
    """Ask the service to read the served classical scorer's windows under the operating condition `name` (the
    operator knows the machine's load), or under the one each looks most like (`live`)."""

    check_user_name(user)
    deployed = load_state(ServicePaths(config.data_dir).state).deployed
    problem = served_model_problem(deployed, user)
    if problem:
        raise UsageError(f"cannot choose a condition: {problem}")
    assert deployed is not None  # else a problem
    name = name.strip()
    section = read_section(_served_card(deployed))
    kept = [c.name for c in section.conditions] if section is not None else []
    if name != LIVE and name not in kept:
        raise UsageError(f"condition {name!r}: the served model keeps "
                         + (f"{', '.join(repr(k) for k in kept)} (or {LIVE!r}: the one each window looks most like)"
                            if kept else f"one condition (add one: tinynas onboard --user {user} --recalibrate "
                                         f"--condition NAME)"))
    request(config.data_dir, "condition", user=user, condition=name)
    return (f"{user}'s windows read under " + ("the condition each looks most like" if name == LIVE else
                                               f"condition {name!r}") + f" requested; {_follow(config)}")


def _served_card(deployed) -> dict:
    """The served model's card (UsageError in one line when it cannot be read)."""
    try:
        return read_card(Path(deployed.card).parent).to_dict()
    except TinynasError as exc:
        raise UsageError(f"the served model's card cannot be read: {user_message(exc) or exc}") from None


def serve(config: ServiceConfig, user: str, model_id: str | None = None, previous: bool = False) -> str:
    """Ask for another of the deployed models to be served: `model_id`, the user's previous one, or their newest."""

    check_user_name(user)
    paths = ServicePaths(config.data_dir)
    state = load_state(paths.state)
    # Checked here too, so that a wrong id is said at once, not only in the service's status.
    model = choose(paths.root / "profiles", user, model_id, previous, state.history, state.deployed,
                   config_hint(config))
    request(config.data_dir, "serve", user=user, model=model.id)
    when = ("" if state.state in ("IDLE", "SERVING") else
            f" once the service is done with {state.state.lower()} (it switches only between onboardings)")
    running = "" if running_pid(paths) is not None else " when the service starts (it does not run now)"
    return (f"serving {user}'s model {model.id} requested{when or running}; follow it with "
            f"`tinynas service status{config_hint(config)}`")


def from_page(config: ServiceConfig, kind: str, fields: dict) -> str:
    """A page button's request (a JSON object of strings, numbers and booleans): checked as the CLI's, or UsageError."""
    if kind not in PAGE_ACTIONS:
        raise UsageError(f"unknown action {kind!r}")
    user = fields.get("user")
    if not isinstance(user, str):
        raise UsageError("a user name is needed")
    user = user.strip()
    if kind == "onboard":
        plan = fields.get("plan") or None
        if plan is not None and (not isinstance(plan, str) or plan not in page_plans(config)):
            # The page offers the presets and the config's plan: a file path typed into a form is not read.
            raise UsageError(f"plan {plan!r} is not offered here: one of {', '.join(page_plans(config))}")
        return onboard(config, user, plan)
    if kind == "more":
        count = fields.get("count")
        return more(config, user, int(count) if isinstance(count, str) and count.strip().isdigit() else count)
    if kind == "recalibrate":
        named = fields.get("condition") or None
        if named is not None and not isinstance(named, str):
            raise UsageError("a condition is a name")
        return recalibrate(config, user, bool(fields.get("unlabelled")), named)
    if kind == "condition":
        named = fields.get("condition")
        if not isinstance(named, str):
            raise UsageError("a condition is a name")
        return condition(config, user, named)
    if kind == "serve":
        model_id = fields.get("model") or None
        if model_id is not None and not isinstance(model_id, str):
            raise UsageError("a model id is a name (tinynas service models lists them)")
        return serve(config, user, model_id, bool(fields.get("previous")))
    return answer(config, kind, user)
