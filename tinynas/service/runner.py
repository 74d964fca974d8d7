"""The service's state machine: IDLE -> COLLECTING -> SEARCHING -> DEPLOYING -> SERVING.

Every phase resumes after a power cut from `state.json` and its own crash-safe files: the
session (accepted windows), the study journal (finished trials), and the deployed folder (a
model is listed as deployed only after it was verified on held-out windows). While a new user is
onboarded, the previously deployed model keeps serving.

No failure ends the process (systemd would restart it into the same failure): a search or deployment
that fails leaves the service IDLE, or SERVING the previous model, with the reason in `status`. A
collection that cannot go on (a sign rejected three times, a silent device) pauses: its accepted
windows stay on disk, `status` says what to check, and `tinynas onboard --user U --continue` resumes it
(`--cancel` drops it, recordings kept). `tinynas onboard --user U --recalibrate` brings U's served model
back after a re-wear or a new condition without a new search (`rewear.py`), the old model serving meanwhile.

This module holds the `Service` and its loop; the steps live beside it: `onboarding` (the requests taken
while IDLE / SERVING, pause / continue / cancel), `collect`, `search_deploy`, `rewear` (RECALIBRATING),
`threads` (stream reader, inference, status writer, stop watcher), `status` (the status snapshot) and
`paths` (the files under `data_dir`, and `request`).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from firmware_bridge.recorder import Recorder
from tinynas.errors import TinynasError, user_message
from tinynas.interrupts import sigterm_as_interrupt
from tinynas.service import collect, onboarding, search_deploy, threads
from tinynas.service.config import ServiceConfig
from tinynas.service.device import Device, connect
from tinynas.service.inference import LiveClassifier, PredictionLog
from tinynas.service.paths import REQUESTS, ServicePaths, pending_requests, request
from tinynas.service.state import load_state, save_state
from tinynas.service.status import page_snapshot, snapshot
from tinynas.service.status_server import StatusServer

if TYPE_CHECKING:
    from tinynas.study.pool import WorkerPool

# REQUESTS, ServicePaths and request live in paths.py; the CLI and the tests import them from here.
__all__ = ["REQUESTS", "Service", "ServiceError", "ServicePaths", "request"]

log = logging.getLogger(__name__)


class ServiceError(TinynasError, RuntimeError):
    """A service that cannot run (no device, bad config)."""


class Service:
    """Runs until stopped (SIGTERM, Ctrl-C or a stop request)."""

    def __init__(self, config: ServiceConfig, on_prompt=None) -> None:
        self.config = config
        self.paths = ServicePaths(config.data_dir)
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.state = load_state(self.paths.state, repair=True)
        self.on_prompt = on_prompt
        self.collection: dict = {}
        self.prompt_number = 0
        self.recorder: Recorder | None = None
        self.classifier: LiveClassifier | None = None
        self.predictions = PredictionLog(self.paths.predictions)
        self.workers: WorkerPool | None = None
        """The search's training workers: started when recording starts, kept through the search."""
        self.device: Device | None = None
        """The sensor front-end, once it said HELLO (the service waits for it, serving the status page)."""
        self.waiting_for_device = ""
        """Why the service still waits for the device ("" once it is there)."""
        self.thread_health: dict[str, dict] = {}
        """Per side thread: restarts and the last error (threads.supervise)."""
        self.serving_stale = ""
        """Why the live predictions are not current ("" when they are)."""
        self.injected: set[str] = set()
        self._stop = threading.Event()
        self._lock = threading.Lock()

    def status(self) -> dict:
        """Everything the status page shows, JSON-ready."""
        return snapshot(self)

    # ---- what the steps share -----------------------------------------------------------------
    def _save(self, **changes) -> None:
        with self._lock:
            for key, value in changes.items():
                setattr(self.state, key, value)
            try:
                save_state(self.paths.state, self.state)
            except OSError as exc:
                # A full or read-only disk: keep going on the state in memory (status shows it) rather
                # than exit into a restart loop; the previous state.json and its copy are intact.
                log.error("cannot save the service state: %s", user_message(exc) or exc)
                if not self.state.error:
                    self.state.error = f"cannot save the service state: {user_message(exc) or exc}"
        log.info("state %s%s", self.state.state, f" ({self.state.user})" if self.state.user else "")

    def _requests(self, kind: str) -> list[tuple[Path, dict]]:
        """Pending requests of one kind, oldest first; unreadable ones are dropped with a log line."""
        return pending_requests(self.paths.requests, kind)

    def _idle_state(self) -> str:
        return "SERVING" if self.state.deployed else "IDLE"

    def _refuse(self, why: str) -> None:
        """Tell the user (status, log) why a request was not followed; the phase does not change."""
        log.warning("%s", why)
        self._save(error=why)

    def _rewear_running(self) -> bool:
        """Whether the current COLLECTING / RECALIBRATING phase belongs to a re-wear flow."""
        return self.state.rewear.get("phase") in ("collecting", "recalibrating", "adapting")

    def require_device(self) -> Device:
        """The connected device (the state machine runs only once there is one)."""
        if self.device is None:
            raise ServiceError("no device yet")
        return self.device

    def _plan_fit(self, plan):
        """How the plan's windows fit the target on this device (PlanDoesNotFit if they cannot)."""
        from tinynas.cost.targets import resolve_target
        from tinynas.service.fit import check_plan_fits

        hello = self.require_device().hello
        return check_plan_fits(plan, resolve_target(self.config.target), hello.channels,
                               hello.sample_rate_hz, self.config.runtime)

    def _windows(self):
        """The session's windows as the search uses them, and their data spec (search_deploy.session_windows)."""
        return search_deploy.session_windows(self)

    def _failed(self, phase: str, exc: BaseException) -> None:
        """A search or deployment that failed leaves the service IDLE (or SERVING the previous model).

        Never re-raised: systemd would restart the service into the same failure forever, and no new
        request would ever be read.
        """
        message = user_message(exc)
        if message is None:
            log.error("%s failed with an internal error", phase, exc_info=exc)
            message = f"internal error {type(exc).__name__}: {exc} (a bug: please report it with the log)"
        if phase in ("IDLE", "SERVING"):
            error = f"reading requests failed: {message}"
        else:
            kept = f"; recordings kept in {self.state.session}" if self.state.session else ""
            error = f"{phase.lower()} for {self.state.user} failed: {message}{kept}; onboard again when fixed"
        log.error("%s", error)
        self.collection = {}
        self._save(state=self._idle_state(), paused="", error=error,
                   rewear=self._ended_rewear("failed", error + "; the old model stays"))

    def _ended_rewear(self, phase: str, text: str) -> dict:
        """state.rewear after the phase ended early (unchanged when no re-wear flow was running)."""
        if not self._rewear_running():
            return self.state.rewear
        return {**self.state.rewear, "phase": phase, "text": text, "finished": time.time()}

    # ---- running --------------------------------------------------------------------------------
    def run(self) -> None:
        """Open the device, start the side threads, and step the state machine until stopped."""
        with sigterm_as_interrupt():  # systemd stops the service with SIGTERM: stop as on Ctrl-C
            self._run()

    def _run(self) -> None:
        self.paths.pid.write_text(str(os.getpid()))
        server = None
        side = []
        try:
            # The page and the stop watcher first: without the device the person beside the Pi is told why.
            server = StatusServer(lambda: page_snapshot(self), self.config.http_host, self.config.http_port,
                                  self.config.http_token).start()
            side += [threads.supervise(self, loop.__name__, loop) for loop in threads.EARLY_THREADS]
            log.info("status on http://%s:%d/; waiting for the device on %s", *server.address[:2], self.config.port)
            self.device = connect(self.config.port, self.config.baudrate, self._stop, self._set_waiting)
            if self.device is None:
                return
            hello = self.device.hello
            side += [threads.supervise(self, loop.__name__, loop) for loop in threads.DEVICE_THREADS]
            log.info("service up: device %s, %d channels at %g Hz", hello.device_id, hello.channels,
                     hello.sample_rate_hz)
            self._loop()
        except KeyboardInterrupt:
            log.info("stopping: state %s kept for the next start", self.state.state)
        finally:
            self._stop.set()
            if server is not None:
                server.stop()
            for thread in side:
                thread.join(timeout=5)
            self._cool_workers()
            if self.device is not None:
                self.device.link.close()
            self.predictions.close()
            if self.recorder is not None:
                self.recorder.close()
            self.paths.pid.unlink(missing_ok=True)

    def _set_waiting(self, text: str) -> None:
        self.waiting_for_device = text

    def _warm_workers(self) -> None:
        """Start the search's workers while the user records, so that TensorFlow's import (5-10 s here, an
        estimated 15-45 s on a Pi 4) is done by the time the search needs them, not after."""
        if self.workers is not None:
            return
        from tinynas.machine import auto_workers
        from tinynas.study.pool import WorkerPool

        if self.config.workers != "auto":
            self.workers = WorkerPool(int(self.config.workers)).warm()
            return
        chosen = auto_workers()
        log.info("search: %s", chosen.describe())
        self.workers = WorkerPool(chosen.workers, private_limit_bytes=chosen.private_limit_bytes).warm()

    def _cool_workers(self) -> None:
        """Stop the workers: serving and re-wear need their memory, not them."""
        if self.workers is not None:
            self.workers.close()
            self.workers = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            phase = self.state.state
            try:
                if phase in ("COLLECTING", "SEARCHING"):
                    self._warm_workers()
                else:
                    self._cool_workers()
                if phase in ("IDLE", "SERVING"):
                    if not onboarding.take_request(self):
                        self._stop.wait(0.2)
                elif phase == "COLLECTING":
                    if self.state.paused:
                        onboarding.while_paused(self)
                    else:
                        collect.collect(self)
                elif phase == "SEARCHING":
                    search_deploy.search(self)
                elif phase == "DEPLOYING":
                    search_deploy.deploy(self)
                elif phase == "RECALIBRATING":
                    from tinynas.service.rewear import recalibrate_step

                    recalibrate_step(self)
                else:  # load_state accepts only known states; kept as a guard
                    self._failed(phase, ServiceError(f"unknown state {phase!r}"))
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - see _failed: the service must outlive any one onboarding
                if phase == "COLLECTING":
                    onboarding.pause(self, exc)
                else:
                    self._failed(phase, exc)
                    self._stop.wait(0.2)  # a failure in IDLE itself must not spin
