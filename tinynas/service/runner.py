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

This module holds the `Service` and its loop, the one place where a step's `Transition` is applied
(`context.py`: the phases, transitions and the context the steps share). The steps live beside it:
`onboarding` (the requests taken while IDLE / SERVING, pause / continue / cancel), `collect`,
`search_deploy`, `rewear` (RECALIBRATING), `threads` (stream reader, inference, status writer, stop
watcher), `status` (the status snapshot) and `paths` (the files under `data_dir`, and `request`).
"""

from __future__ import annotations

import logging
import os
import time

from tinynas.interrupts import sigterm_as_interrupt
from tinynas.machine import auto_workers
from tinynas.service import actions, collect, onboarding, search_deploy, threads
from tinynas.service.context import Phase, ServiceContext, ServiceError, Transition
from tinynas.service.device import connect
from tinynas.service.models import served_download
from tinynas.service.paths import REQUESTS, ServicePaths, request, running_pid
from tinynas.service.rewear import recalibrate_step
from tinynas.service.status import page_snapshot, snapshot, write_status_file
from tinynas.service.status_server import StatusServer
from tinynas.study.pool import WorkerPool, stop_launcher
from tinynas.training import scratch

# REQUESTS, ServicePaths and request live in paths.py, ServiceError in context.py; the CLI and the tests import
# them from here.
__all__ = ["REQUESTS", "Service", "ServiceError", "ServicePaths", "request"]

log = logging.getLogger(__name__)


class Service(ServiceContext):
    """Runs until stopped (SIGTERM, Ctrl-C or a stop request)."""

    def status(self) -> dict:
        """Everything the status page shows, JSON-ready."""
        return snapshot(self)

    def saved(self) -> None:
        # At once, not at the writer's next tick: `tinynas service status` never shows an older phase or
        # error than state.json (on a loaded Pi the tick can come seconds late).
        write_status_file(self)

    def _windows(self):
        """The session's windows as the search uses them, and their data spec (search_deploy.session_windows)."""
        return search_deploy.session_windows(self)

    # ---- running --------------------------------------------------------------------------------
    def run(self) -> None:
        """Open the device, start the side threads, and step the state machine until stopped."""
        with sigterm_as_interrupt():  # systemd stops the service with SIGTERM: stop as on Ctrl-C
            self._run()

    def _run(self) -> None:
        lock = self._lock_data_dir()
        server = None
        side = []
        try:
            self.open()  # only under the lock: a second service refused must not repair this one's state
            scratch.remove_orphans()  # of a recalibration child or workers killed with the last run
            self.started_ns = time.time_ns()
            self.paths.pid.write_text(str(os.getpid()))
            # The page and the stop watcher first: without the device the person beside the Pi is told why.
            server = StatusServer(lambda: page_snapshot(self), self.config.http_host, self.config.http_port,
                                  self.config.http_token,
                                  actions=lambda kind, fields: actions.from_page(self.config, kind, fields),
                                  downloads=lambda name: served_download(self.state.deployed, name)).start()
            side += [threads.supervise(self, loop.__name__, loop) for loop in threads.EARLY_THREADS]
            log.info("status on http://%s:%d/; waiting for the device on %s", *server.address[:2], self.config.port)
            self.device = connect(self.config.port, self.config.baudrate, self.stopping, self._set_waiting)
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
            self.stopping.set()
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
            try:  # only our own pid file: another service's must survive this one's end
                if self.paths.pid.read_text().strip() == str(os.getpid()):
                    self.paths.pid.unlink()
            except OSError:
                pass
            lock.close()

    def _lock_data_dir(self):
        """Hold `data_dir`'s lock for the life of this service, or ServiceError if another service holds it: two
        services on one data_dir would split the serial stream and race on state.json."""
        import fcntl

        self.paths.root.mkdir(parents=True, exist_ok=True)
        handle = open(self.paths.lock, "a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.close()
            other = running_pid(self.paths)
            who = f" (pid {other})" if other else ""
            raise ServiceError(f"another tinynas service already runs on {self.paths.root}{who}: stop it first "
                               f"(tinynas service stop)") from None
        return handle

    def _set_waiting(self, text: str) -> None:
        self.waiting_for_device = text

    def _warm_workers(self) -> None:
        """Start the search's workers while the user records, so that TensorFlow's import (5-10 s here, an
        estimated 15-45 s on a Pi 4) is done by the time the search needs them, not after."""
        if self.workers is not None:
            return

        if self.config.workers != "auto":
            self.workers = WorkerPool(int(self.config.workers)).warm()
            return
        chosen = auto_workers()
        log.info("search: %s", chosen.describe())
        self.workers = WorkerPool(chosen.workers, private_limit_bytes=chosen.private_limit_bytes).warm()

    def _cool_workers(self) -> None:
        """Stop the workers and their launcher: serving and re-wear need their memory, not them."""
        if self.workers is not None:
            self.workers.close()
            self.workers = None
            stop_launcher()

    def _loop(self) -> None:
        while not self.stopping.is_set():
            phase = self.state.state
            try:
                # A re-wear recording trains nothing in the pool (its change runs in a child of its own): no workers.
                if phase == Phase.SEARCHING or (phase == Phase.COLLECTING and not self.rewear_running()):
                    self._warm_workers()
                else:
                    self._cool_workers()
                transition = self._step(phase)
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - see failed(): the service must outlive any one onboarding
                transition = onboarding.pause(self, exc) if phase == Phase.COLLECTING else self.failed(phase, exc)
                if phase != Phase.COLLECTING:
                    self.stopping.wait(0.2)  # a failure in IDLE itself must not spin
            if transition is not None:
                self.apply(transition)  # the one place the phase changes

    def _step(self, phase: str) -> Transition | None:
        """Run the current phase's step once: its transition, or None to stay (and be stepped again)."""
        if phase in (Phase.IDLE, Phase.SERVING):
            transition = onboarding.take_request(self)
            if transition is None:
                self.stopping.wait(0.2)
            return transition
        if phase == Phase.COLLECTING:
            return onboarding.while_paused(self) if self.state.paused else collect.collect(self)
        if phase == Phase.SEARCHING:
            return search_deploy.search(self)
        if phase == Phase.DEPLOYING:
            return search_deploy.deploy(self)
        if phase == Phase.RECALIBRATING:
            return recalibrate_step(self)
        # load_state accepts only known states; kept as a guard
        return self.failed(phase, ServiceError(f"unknown state {phase!r}"))
