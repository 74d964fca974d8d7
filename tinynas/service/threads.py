"""The service's side threads, each a loop until the service stops: the device stream reader, live
inference, the status file writer, the stop-request watcher and the refuser of new flows while one runs.

The state machine runs in the main thread (`runner.Service`); these only read its state, except the
inference loop, which records why a deployed model cannot be served, and the refuser, which records why a request
was refused (`ServiceContext.update(error=...)`; neither changes the phase).

Every side thread runs under `supervise`: an exception is logged with its traceback, counted in
`status` ("threads"), and the loop is started again after a short pause, so no thread can die silently
(a dead stream reader made the service deaf while it said "running"). A loop that fails at once again
and again is retried more slowly (up to every `MAX_BACKOFF_SECONDS`), never given up on and never spun.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from firmware_bridge.protocol import Samples
from tinynas.anomaly.conditions import LIVE
from tinynas.card import read_card, task_of
from tinynas.modes import Task
from tinynas.service.chip_check import check_chip
from tinynas.service.context import ServiceContext
from tinynas.service.inference import LiveClassifier, LiveScorer
from tinynas.service.onboarding import refuse_while_busy
from tinynas.service.paths import request_time_ns
from tinynas.service.status import write_status_file
from tinynas.verdict import served_accuracy

log = logging.getLogger(__name__)


MAX_BACKOFF_SECONDS = 5.0

FAULT_VARIABLE = "TINYNAS_INJECT_FAULT"
"""Fault injection for the end-to-end tests: `read_stream@COLLECTING` makes the stream reader raise once,
the first time it runs while the service is in that phase (as the race that killed it did)."""


class InjectedFault(RuntimeError):
    """The fault a test asked for (FAULT_VARIABLE)."""


def _inject(name: str, service: ServiceContext) -> None:
    wanted = os.environ.get(FAULT_VARIABLE, "")
    if not wanted or name in service.injected:
        return
    thread, _, phase = wanted.partition("@")
    if thread == name and (not phase or service.state.state == phase):
        service.injected.add(name)
        raise InjectedFault(f"fault injected into {name} ({FAULT_VARIABLE}={wanted})")


def supervise(service: ServiceContext, name: str, loop: Callable[[ServiceContext], None]) -> threading.Thread:
    """Run `loop(service)` in a daemon thread, restarted after any exception until the service stops."""
    health = service.thread_health.setdefault(name, {"restarts": 0, "last_error": "", "last_error_time": None})

    def run() -> None:
        pause = 0.2
        while not service.stopping.is_set():
            started = time.monotonic()
            try:
                loop(service)
            except Exception as exc:  # noqa: BLE001 - logged, counted, restarted: a side thread must not die
                log.error("the %s thread failed and is restarted: %s\n%s", name, exc, traceback.format_exc())
                health.update(restarts=health["restarts"] + 1, last_error=f"{type(exc).__name__}: {exc}",
                              last_error_time=time.time())
            else:
                if service.stopping.is_set():
                    return
                log.error("the %s thread returned while the service runs: started again", name)
                health["restarts"] += 1
            # Failing at once again and again: retry more slowly, never spin.
            pause = min(MAX_BACKOFF_SECONDS, pause * 2) if time.monotonic() - started < 5.0 else 0.2
            service.stopping.wait(pause)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def read_stream(service: ServiceContext) -> None:
    """Hand every sample chunk to the ring (live inference) and every message to the recorder, if one runs."""
    device = service.device
    assert device is not None  # started once the device said HELLO
    while not service.stopping.is_set():
        message = device.link.get(timeout=0.1)
        if message is None:
            continue
        if isinstance(message, Samples):
            device.ring.add(message)
        recorder = service.recorder
        if recorder is not None:
            _inject("read_stream", service)
            recorder.handle(message)  # (a recorder closed meanwhile ignores it)


STALE_SECONDS = 2.0
"""A served prediction is marked stale when the newest sample is older than this (or than 4 hops): the page
must not show the last prediction as live while the device is unplugged or silent."""


def serve(service: ServiceContext) -> None:
    """Live inference with whatever verified model is deployed (swapped when a new one is)."""
    device = service.device
    assert device is not None  # started once the device said HELLO
    loaded = None
    while not service.stopping.wait(max(0.02, service.config.hop_seconds / 2)):
        service.serving_stale = _stale(service)
        deployed = service.state.deployed
        if (deployed.model if deployed else None) != loaded:
            loaded = deployed.model if deployed else None
            service.classifier = None
            if deployed is not None and loaded:
                try:
                    card = read_card(Path(deployed.card).parent).to_dict()  # checked whole: never half-served
                    hop = int(round(service.config.hop_seconds * device.hello.sample_rate_hz))
                    config = service.config
                    service.classifier = (LiveScorer(loaded, card, device.ring, hop, config.alarm_k, config.alarm_n)
                                          if task_of(card) == Task.ANOMALY else
                                          LiveClassifier(loaded, card, device.ring, hop, config.smoothing))
                except Exception as exc:  # noqa: BLE001 - a damaged model must not end serving for good
                    log.error("cannot serve %s: %s", loaded, exc)
                    service.update(error=f"cannot serve {loaded}: {exc}; onboard again to deploy a new model")
                    continue
                if deployed.scorer:
                    log.info("serving %s (anomaly scorer, threshold set for %.2g false alarms)", loaded,
                             (deployed.anomaly or {})["false_alarm_rate"])
                else:
                    log.info("serving %s (%s)", loaded, served_accuracy(deployed.held_out, deployed.accuracy))
        if service.classifier is not None:
            if isinstance(service.classifier, LiveScorer) and deployed is not None:
                kept = {c.name for c in service.classifier.section.conditions}
                # The operator's condition, or the live signal's (also when a state names one no longer kept).
                service.classifier.condition = deployed.condition if deployed.condition in kept else LIVE
            service.predictions.write(service.classifier.step())


def _stale(service: ServiceContext) -> str:
    """Why live predictions are not current ("" when they are)."""
    device = service.device
    if device is None:
        return "no device"
    age = device.link.health()["last_sample_age_seconds"]
    limit = max(STALE_SECONDS, 4 * service.config.hop_seconds)
    if age is None or age > limit:
        since = "no samples yet" if age is None else f"no samples for {age:.0f} s"
        where = "the device is unplugged" if not device.link.connected.is_set() else "the device is silent"
        return f"{since}: {where} - the last prediction is not live"
    return ""


def write_status(service: ServiceContext) -> None:
    """Write the status snapshot to `status.json` twice a second (what `tinynas service status` reads)."""
    while not service.stopping.wait(0.5):
        write_status_file(service)


def refuse_new_flows(service: ServiceContext) -> None:
    """Refuse a new onboarding or recalibration while a flow runs (`onboarding.refuse_while_busy`), within 0.2 s,
    whatever the main thread's step is doing (a collection, a search)."""
    while not service.stopping.wait(0.2):
        refuse_while_busy(service)


def watch_requests(service: ServiceContext) -> None:
    """Turn a stop request into SIGTERM, so that it stops the service as systemd does, from any phase."""
    requests = service.paths.requests
    while not service.stopping.wait(0.2):
        for path in sorted(requests.glob("*-stop.json")) if requests.exists() else []:
            path.unlink(missing_ok=True)
            left = request_time_ns(path)
            if left is not None and left < service.started_ns:
                # Left for a service that had ended: it must not stop this one (the next start of a unit).
                log.info("ignoring a stop request left before this service started")
                continue
            log.info("stop requested")
            os.kill(os.getpid(), signal.SIGTERM)


EARLY_THREADS = (write_status, watch_requests, refuse_new_flows)
"""Run from the start, before any device is there (status page and stop requests work without one)."""
DEVICE_THREADS = (read_stream, serve, check_chip)
"""Run once the device said HELLO."""
