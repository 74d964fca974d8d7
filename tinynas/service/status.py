"""The service's status snapshot: what `status.json`, the status page and `tinynas service status` show."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from firmware_bridge.errors import BridgeError
from firmware_bridge.plan import load_plan
from tinynas.anomaly.conditions import LIVE
from tinynas.atomic import atomic_write_text
from tinynas.cost.targets import resolve_target
from tinynas.errors import TinynasError
from tinynas.folders import JOURNAL, best_name
from tinynas.process_memory import memory_bytes
from tinynas.service import status_views
from tinynas.service.config import config_hint, page_plans
from tinynas.service.context import ServiceContext
from tinynas.service.models import stored_models
from tinynas.service.state import Phase
from tinynas.study.journal import progress
from tinynas.units import parse_duration


def snapshot(service: ServiceContext) -> dict:
    """Everything the status page shows, JSON-ready."""
    state = service.state
    device = service.device
    status: dict[str, Any] = {"state": state.state, "user": state.user, "error": state.error, "time": time.time(),
              "deployed": state.deployed.to_dict() if state.deployed else {},
              "collection": service.collection.to_dict(),
              "search": search_progress(service), "predictions": list(service.predictions.last),
              "link": device.health() if device is not None else {},
              "memory": memory_bytes(), "pid": os.getpid(), "paused": state.paused,
              "rewear": state.rewear.to_dict() if state.rewear else {},
              "gate": state.gate.to_dict() if state.gate else {},
              "device": ({"connected": device.link.connected.is_set(), "port": service.config.port,
                          "channels": device.hello.channels, "sample_rate_hz": device.hello.sample_rate_hz,
                          "device_id": device.hello.device_id,
                          "answers_tests": bool(device.link.latest_hello and device.link.latest_hello.answers_tests)}
                         if device is not None else
                         {"connected": False, "port": service.config.port, "waiting": service.waiting_for_device}),
              "threads": {name: dict(health) for name, health in service.thread_health.items()},
              "serving": {"stale": service.serving_stale} if state.deployed else {},
              "smoothing": service.config.smoothing,
              "config_hint": config_hint(service.config)}
    collection = status["collection"]
    if collection.get("total") and collection.get("seconds_per_window"):
        collection["seconds_left"] = round(max(0, collection["total"] - collection.get("accepted", 0))
                                           * collection["seconds_per_window"], 1)
    if state.deployed is not None and state.deployed.scorer:
        status["alarm"] = alarm_status(service)
    return status


_WRITING = threading.Lock()
"""Snapshot and write as one step: a snapshot taken before a state change never lands after the change's own."""


def write_status_file(service: ServiceContext) -> None:
    """Write the snapshot to `status.json` (what `tinynas service status` reads); a full disk is logged, not raised."""
    try:
        with _WRITING:
            atomic_write_text(service.paths.status, json.dumps(snapshot(service)) + "\n")
    except OSError as exc:
        logging.getLogger(__name__).warning("cannot write status: %s", exc)


def alarm_status(service: ServiceContext) -> dict:
    """An anomaly scorer's alarm as status shows it: raised or not (since when), the last score and the threshold;
    with several operating conditions kept, the one the last window was read under and the operator's choice.

    The debounce is the service's (alarm_k of alarm_n): what the live scorer raises the alarm by, whatever the
    served card recorded when it was deployed, and all there is for a folder the command line made (`tinynas
    search --task anomaly` writes no serving.alarm)."""
    assert service.state.deployed is not None and service.state.deployed.anomaly is not None  # a scorer is served
    anomaly = service.state.deployed.anomaly
    log = service.predictions
    last = log.last[-1] if log.last else {}
    config = service.config
    return {"raised": bool(last.get("alarm")), "since": log.alarm_since, "score": last.get("score"),
            "threshold": anomaly.get("threshold"), "false_alarm_rate": anomaly.get("false_alarm_rate"),
            "debounce": f"{config.alarm_k} of the last {config.alarm_n} windows above the threshold",
            "stale": service.serving_stale, "condition": last.get("condition"),
            "chosen": service.state.deployed.condition or LIVE}


def page_snapshot(service: ServiceContext) -> dict:
    """`snapshot` plus what only the status page draws: the live signal while recording, the search's trials,
    the served model and its classes, predictions per minute. Computed per request (the status file
    `tinynas service status` reads, written twice a second, stays small)."""

    status = snapshot(service)
    device = service.device
    if status["state"] in (Phase.COLLECTING, Phase.RECALIBRATING) and device is not None:
        hello = device.hello
        status["collection"]["trace"] = status_views.trace(device.ring, hello.sample_rate_hz, hello.sample_format,
                                                           rest=service.collection.rest)
    if status["state"] == Phase.SEARCHING and service.state.study:
        search = status["search"]
        search["trials_list"] = status_views.trials(Path(service.state.study))
        complete = [t for t in search["trials_list"] if t["name"] == search.get("best")]
        if complete:
            search["best_val_accuracy"] = complete[-1]["val_accuracy"]
            search["best_ram_bytes"] = complete[-1]["ram_bytes"]
            search["best_measure"] = complete[-1]["measure"]
        for trial in search["trials_list"]:
            trial["best"] = trial["name"] == search.get("best")
        search["ram_budget_bytes"] = _ram_budget(service)
        search["family_note"] = _family_note(service)
    status["plans"] = page_plans(service.config)
    status["models"] = _models(service)
    if state_deployed := service.state.deployed:
        status["model"] = status_views.served_model(state_deployed, service.config.hop_seconds)
        status["chip_check"] = service.chip_check
        status["classes"] = status["model"].get("classes")
        status["predictions_per_minute"] = status_views.per_minute(list(service.predictions.times))
        if "alarm" in status:
            status["alarm"]["history"] = [[round(t, 2), score] for t, score in service.predictions.scores]
    return status


def _family_note(service: ServiceContext) -> str:
    """An anomaly search's page: what happens to its best network when it ends ("" for a classifier's)."""
    try:
        anomaly = load_plan(service.state.plan).task == "anomaly"
    except (OSError, ValueError, TinynasError, BridgeError):
        return ""
    scorer = service.config.scorer
    if not anomaly or scorer == "network":
        return ""
    if scorer == "classical":
        return "the classical scorer (features + Gaussian) is served whatever the networks reach (config: scorer)"
    return ("when the search ends, its best network is compared with the classical scorer (features + Gaussian) "
            "fitted on the same windows: the one that flags more held-out synthetic faults at the false-alarm rate "
            "is served, the cheaper when they tie")


_MODELS: dict[str, tuple[float, tuple, list]] = {}
MODELS_SECONDS = 5.0
"""How long the page's list of models is reused: it reads every model's card, and changes only at a deployment."""


def _models(service: ServiceContext) -> list[dict]:
    """Every user's deployed models as the page's switch lists them (cached for MODELS_SECONDS)."""

    key = str(service.paths.root)
    served = (service.state.deployed.model if service.state.deployed else None,)
    cached = _MODELS.get(key)
    if cached is None or cached[1] != served or time.monotonic() - cached[0] > MODELS_SECONDS:
        rows = [model.summary(service.state.deployed) for model in stored_models(service.paths.root / "profiles")]
        _MODELS[key] = cached = (time.monotonic(), served, rows)
    return cached[2]


def _ram_budget(service: ServiceContext) -> int | None:
    try:
        return resolve_target(service.config.target).ram_bytes
    except TinynasError:
        return None


def search_progress(service: ServiceContext) -> dict:
    """Trials so far, seconds of budget left and the best model of a running search ({} when none runs).

    Read from the study's journal (read-only, short timeout) and best.json while the search writes them: a
    locked or half-written file only leaves that figure out of this snapshot.
    """
    if service.state.state != Phase.SEARCHING or not service.state.study:
        return {}
    study = Path(service.state.study)
    result: dict = {"trials": 0}

    seen = progress(study / JOURNAL)
    if seen is not None:
        result["trials"], spent = seen
        result["budget_seconds"] = parse_duration(service.config.budget)
        clock = service.search_clock
        if clock is not None:  # the journal saves the time spent only as candidates finish
            spent = max(spent, clock[1] + time.time() - clock[0])
        result["seconds_left"] = max(0.0, result["budget_seconds"] - spent)
    best = best_name(study)
    if best is not None:
        result["best"] = best
    return result
