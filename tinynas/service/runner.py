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
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import threading
import time
from pathlib import Path

import numpy as np

from firmware_bridge.errors import BridgeError
from firmware_bridge.guide import GuidedCollection, Prompter, load_plan
from firmware_bridge.link import Link
from firmware_bridge.protocol import Samples
from firmware_bridge.recorder import Recorder
from firmware_bridge.ring import SampleRing
from tinynas.atomic import atomic_write_text
from tinynas.errors import TinynasError, user_message
from tinynas.interrupts import sigterm_as_interrupt
from tinynas.process_memory import memory_bytes
from tinynas.service.config import ServiceConfig
from tinynas.service.inference import LiveClassifier, PredictionLog
from tinynas.service.state import load_state, save_state, user_name_problem
from tinynas.service.status_server import StatusServer

log = logging.getLogger(__name__)


class ServiceError(TinynasError, RuntimeError):
    """A service that cannot run (no device, bad config)."""


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S")


class ServicePaths:
    """Where a service keeps its files under `data_dir`."""

    def __init__(self, data_dir: str | Path) -> None:
        self.root = Path(data_dir)
        self.state = self.root / "state.json"
        self.status = self.root / "status.json"
        self.requests = self.root / "requests"
        self.pid = self.root / "service.pid"
        self.predictions = self.root / "predictions.jsonl"

    def profile(self, user: str) -> Path:
        """The folder of one user's (or machine's) sessions, studies and models."""
        return self.root / "profiles" / user


REQUESTS = ("onboard", "recalibrate", "continue", "cancel", "stop")


def request(data_dir: str | Path, kind: str, **fields) -> Path:
    """Leave a request for a running service; it picks it up within a second.

    onboard (user, plan): collect, search and deploy for a new user; recalibrate (user, unlabelled): the
    re-wear / new-condition flow for the user whose model is served; continue / cancel (user): resume or
    drop a paused collection (its windows stay on disk), cancel also a running recalibration; stop: end
    the service cleanly.
    """
    folder = ServicePaths(data_dir).requests
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{time.time_ns()}-{kind}.json"
    atomic_write_text(path, json.dumps({"kind": kind, **fields}))
    return path


class _StatusPrompter(Prompter):
    def __init__(self, service: Service) -> None:
        self.service = service

    def say(self, text: str) -> None:
        log.info("collect: %s", text)
        self.service.collection["last_line"] = text

    def wants_redo(self, seconds: float) -> bool:
        time.sleep(seconds)
        return False


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
        self._stop = threading.Event()
        self._lock = threading.Lock()

    # ---- status -------------------------------------------------------------------------
    def status(self) -> dict:
        """Everything the status page shows, JSON-ready."""
        state = self.state
        status = {"state": state.state, "user": state.user, "error": state.error, "time": time.time(),
                  "deployed": state.deployed, "collection": dict(self.collection),
                  "search": self._search_status(), "predictions": list(self.predictions.last),
                  "link": self.link.counters.to_dict() if getattr(self, "link", None) else {},
                  "memory": memory_bytes(), "pid": os.getpid(), "paused": state.paused, "rewear": state.rewear,
                  "device": ({"channels": self.hello.channels, "sample_rate_hz": self.hello.sample_rate_hz}
                             if getattr(self, "hello", None) else {})}
        return status

    def _search_status(self) -> dict:
        if self.state.state != "SEARCHING" or not self.state.study:
            return {}
        study = Path(self.state.study)
        result: dict = {"trials": 0}
        journal = study / "journal.sqlite"
        if journal.exists():
            import sqlite3

            try:
                with sqlite3.connect(f"file:{journal}?mode=ro", uri=True, timeout=1) as db:
                    result["trials"] = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
                    row = db.execute("SELECT value FROM meta WHERE key = 'search_seconds'").fetchone()
                    spent = json.loads(row[0]) if row else 0.0
                    from tinynas.study import parse_duration

                    result["seconds_left"] = max(0.0, parse_duration(self.config.budget) - spent)
            except sqlite3.Error:
                pass
        best = study / "best.json"
        if best.exists():
            try:
                result["best"] = json.loads(best.read_text())["name"]
            except (OSError, ValueError, KeyError):
                pass
        return result

    def _write_status(self) -> None:
        while not self._stop.wait(0.5):
            try:
                atomic_write_text(self.paths.status, json.dumps(self.status()) + "\n")
            except OSError as exc:
                log.warning("cannot write status: %s", exc)

    # ---- threads ------------------------------------------------------------------------
    def _read_stream(self) -> None:
        while not self._stop.is_set():
            message = self.link.get(timeout=0.1)
            if message is None:
                continue
            if isinstance(message, Samples):
                self.ring.add(message)
            recorder = self.recorder
            if recorder is not None:
                recorder.handle(message)

    def _serve(self) -> None:
        """Live inference with whatever verified model is deployed (swapped when a new one is)."""
        loaded = None
        while not self._stop.wait(max(0.02, self.config.hop_seconds / 2)):
            deployed = self.state.deployed
            if deployed.get("model") != loaded:
                loaded = deployed.get("model")
                self.classifier = None
                if loaded:
                    try:
                        card = json.loads(Path(deployed["card"]).read_text())
                        self.classifier = LiveClassifier(
                            loaded, card, self.ring, int(round(self.config.hop_seconds * self.hello.sample_rate_hz)),
                            self.config.smoothing)
                    except Exception as exc:  # noqa: BLE001 - a damaged model must not end serving for good
                        log.error("cannot serve %s: %s", loaded, exc)
                        self.state.error = f"cannot serve {loaded}: {exc}; onboard again to deploy a new model"
                        continue
                    log.info("serving %s (int8 accuracy %.3f)", loaded, deployed.get("accuracy", float("nan")))
            if self.classifier is not None:
                self.predictions.write(self.classifier.step())

    def _watch_requests(self) -> None:
        while not self._stop.wait(0.2):
            for path in sorted(self.paths.requests.glob("*-stop.json")) if self.paths.requests.exists() else []:
                path.unlink(missing_ok=True)
                log.info("stop requested")
                os.kill(os.getpid(), signal.SIGTERM)

    # ---- the state machine --------------------------------------------------------------
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
        found = []
        if not self.paths.requests.exists():
            return found
        for path in sorted(self.paths.requests.glob(f"*-{kind}.json")):
            try:
                wanted = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(wanted, dict):
                    raise ValueError("not a JSON object")
            except (OSError, ValueError) as exc:
                log.warning("ignoring unreadable request %s: %s", path.name, exc)
                path.unlink(missing_ok=True)
                continue
            found.append((path, wanted))
        return found

    def _idle_state(self) -> str:
        return "SERVING" if self.state.deployed else "IDLE"

    def _refuse(self, why: str) -> None:
        """Tell the user (status, log) why a request was not followed; the phase does not change."""
        log.warning("%s", why)
        self._save(error=why)

    def _take_onboarding(self) -> bool:
        for path, wanted in self._requests("onboard"):
            path.unlink(missing_ok=True)
            user = wanted.get("user")
            user = user.strip() if isinstance(user, str) else user
            plan = wanted.get("plan") or self.config.plan
            problem = user_name_problem(user)
            if problem:
                self._refuse(f"onboarding request ignored: {problem}")
                continue
            try:
                plan_object = load_plan(str(plan))
                self._plan_fit(plan_object)  # fail fast, before anyone performs a gesture
            except (TinynasError, BridgeError) as exc:
                self._refuse(f"onboarding of {user} refused: {exc}")
                continue
            session = self.paths.profile(user) / "sessions" / _stamp()
            self._save(state="COLLECTING", user=user, plan=str(plan), session=str(session), study="", error="",
                       paused="", rewear={})
            return True
        if self._take_rewear():
            return True
        for kind in ("continue", "cancel"):  # nothing is paused: such a request has nothing to act on
            for path, wanted in self._requests(kind):
                path.unlink(missing_ok=True)
                log.info("ignoring %s request for %s: no collection is paused", kind, wanted.get("user"))
        return False

    def _take_rewear(self) -> bool:
        """Start the re-wear / new-condition flow of the first acceptable `recalibrate` request."""
        from tinynas.service import rewear

        for path, wanted in self._requests("recalibrate"):
            path.unlink(missing_ok=True)
            user = wanted.get("user")
            user = user.strip() if isinstance(user, str) else user
            problem = user_name_problem(user)
            if problem:
                self._refuse(f"recalibration request ignored: {problem}")
                continue
            try:
                flow = rewear.new_flow(self, user, bool(wanted.get("unlabelled")))
                if flow["mode"] == "labelled":
                    self._plan_fit(rewear.flow_plan(flow))
            except (TinynasError, BridgeError) as exc:
                self._refuse(f"recalibration of {user} refused: {exc}")
                continue
            self._save(state="COLLECTING", user=user, session=flow["session"], study="", error="", paused="",
                       rewear=flow)
            return True
        return False

    def _rewear_running(self) -> bool:
        """Whether the current COLLECTING / RECALIBRATING phase belongs to a re-wear flow."""
        return self.state.rewear.get("phase") in ("collecting", "recalibrating", "adapting")

    def _plan_fit(self, plan):
        """How the plan's windows fit the target on this device (PlanDoesNotFit if they cannot)."""
        from tinynas.cost.targets import resolve_target
        from tinynas.service.fit import check_plan_fits

        return check_plan_fits(plan, resolve_target(self.config.target), self.hello.channels,
                               self.hello.sample_rate_hz)

    def _while_paused(self) -> None:
        """A paused collection waits for `tinynas onboard --user U --continue` (or --cancel)."""
        for kind in ("continue", "cancel"):
            for path, wanted in self._requests(kind):
                path.unlink(missing_ok=True)
                if wanted.get("user") != self.state.user:
                    self._refuse(f"{kind} request for {wanted.get('user')!r} ignored: the paused collection is "
                                 f"{self.state.user}'s; {self.state.paused}")
                    continue
                if kind == "continue":
                    log.info("collection of %s continues", self.state.user)
                    self._save(paused="", error="")
                else:
                    kept = self.state.session
                    self.collection = {}
                    why = f"collection of {self.state.user} cancelled; its recordings are kept in {kept}"
                    flow = self._ended_rewear("cancelled", why + "; the old model stays")
                    self._save(state=self._idle_state(), paused="", session="", study="", error=why, rewear=flow)
                return
        self._stop.wait(0.2)

    def _pause(self, exc: BaseException) -> None:
        """Stop collecting until the user acts; the accepted windows are on disk and the state resumable."""
        message = user_message(exc) or f"{type(exc).__name__}: {exc}"
        for path, _ in self._requests("continue"):  # a continue sent before this pause does not answer it
            path.unlink(missing_ok=True)
        advice = (f"{message}; then `tinynas onboard --user {self.state.user} --continue` "
                  f"(or --cancel to stop this collection)")
        log.warning("%s", advice)
        self.collection["paused"] = advice
        self._save(paused=advice, error=advice)

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

    def run(self) -> None:
        """Open the device, start the side threads, and step the state machine until stopped."""
        with sigterm_as_interrupt():  # systemd stops the service with SIGTERM: stop as on Ctrl-C
            self._run()

    def _run(self) -> None:
        self.paths.pid.write_text(str(os.getpid()))
        try:
            self.link = Link(self.config.port, baudrate=self.config.baudrate).open()
        except Exception as exc:
            raise ServiceError(str(exc)) from None
        try:
            self.hello = self.link.wait_hello(30)
            self.ring = SampleRing(self.hello.channels, int(30 * self.hello.sample_rate_hz))
            server = StatusServer(self.status, self.config.http_host, self.config.http_port,
                                  self.config.http_token).start()
            threads = [threading.Thread(target=target, name=target.__name__, daemon=True)
                       for target in (self._read_stream, self._serve, self._write_status, self._watch_requests)]
            for thread in threads:
                thread.start()
            log.info("service up: device %s, %d channels at %g Hz; status on http://%s:%d/",
                     self.hello.device_id, self.hello.channels, self.hello.sample_rate_hz, *server.address[:2])
            try:
                self._loop()
            finally:
                self._stop.set()
                server.stop()
                for thread in threads:
                    thread.join(timeout=5)
        except KeyboardInterrupt:
            log.info("stopping: state %s kept for the next start", self.state.state)
        finally:
            self._stop.set()
            self.link.close()
            self.predictions.close()
            if self.recorder is not None:
                self.recorder.close()
            self.paths.pid.unlink(missing_ok=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            phase = self.state.state
            try:
                if phase in ("IDLE", "SERVING"):
                    if not self._take_onboarding():
                        self._stop.wait(0.2)
                elif phase == "COLLECTING":
                    if self.state.paused:
                        self._while_paused()
                    else:
                        self._collect()
                elif phase == "SEARCHING":
                    self._search()
                elif phase == "DEPLOYING":
                    self._deploy()
                elif phase == "RECALIBRATING":
                    from tinynas.service.rewear import recalibrate_step

                    recalibrate_step(self)
                else:  # load_state accepts only known states; kept as a guard
                    self._failed(phase, ServiceError(f"unknown state {phase!r}"))
            except (KeyboardInterrupt, SystemExit):
                raise
            except Exception as exc:  # noqa: BLE001 - see _failed: the service must outlive any one onboarding
                if phase == "COLLECTING":
                    self._pause(exc)
                else:
                    self._failed(phase, exc)
                    self._stop.wait(0.2)  # a failure in IDLE itself must not spin

    def _collect(self) -> None:
        from tinynas.service import rewear

        flow = self.state.rewear if self._rewear_running() else None
        if flow and flow["mode"] == "unlabelled":
            recorder = Recorder(self.state.session, self.hello, user=self.state.user, labels=rewear.UNLABELLED,
                                plan={"name": "unlabelled", "seconds": flow["seconds"]})
            self.recorder = recorder
            try:
                rewear.record_unlabelled(self, flow, recorder)
            finally:
                self.recorder = None
                recorder.close()
            self.collection = {}
            self._save(state="RECALIBRATING")
            return
        try:
            plan = rewear.flow_plan(flow) if flow else load_plan(self.state.plan)
            self._plan_fit(plan)
        except (TinynasError, BridgeError) as exc:
            # The plan or the target changed since the request: nothing to resume until that is fixed.
            self._failed("COLLECTING", exc)
            return
        self.collection = {"total": len(plan.prompts()), "accepted": 0, "plan": plan.name}

        def announced(label: str, attempt: int) -> None:
            self.prompt_number += 1
            self.collection.update(prompt=label, number=self.prompt_number, attempt=attempt, go=None,
                                   accepted=sum(guide.done_counts().values()))  # what status shows, kept current

        def go(label: str, sample: int) -> None:
            self.collection["go"] = sample
            if self.on_prompt is not None:
                self.on_prompt(label, sample)

        recorder = Recorder(self.state.session, self.hello, user=self.state.user, labels=plan.classes,
                            plan=plan.to_dict())
        self.recorder = recorder
        try:
            guide = GuidedCollection(recorder, plan, _StatusPrompter(self), on_prompt=go, on_announce=announced)
            done = guide.done_counts()
            self.collection["accepted"] = sum(done.values())
            guide.run()
        finally:
            self.recorder = None
            recorder.close()
        self.collection = {"total": len(plan.prompts()), "accepted": len(plan.prompts()), "plan": plan.name}
        if flow:
            self._save(state="RECALIBRATING")
            return
        study = self.paths.profile(self.state.user) / "studies" / Path(self.state.session).name
        self._save(state="SEARCHING", study=str(study))

    def _search(self) -> None:
        from tinynas.cost.targets import resolve_target
        from tinynas.data.checks import check_windows
        from tinynas.progress import Progress
        from tinynas.study import Study, parse_duration
        from tinynas.study.journal import Journal
        from tinynas.trial import Fidelity

        study = Path(self.state.study)
        journal_path = study / "journal.sqlite"
        finished = False
        if journal_path.exists():
            with Journal(journal_path) as journal:
                finished = bool(journal.get_meta("finished")) and (study / "card.json").exists()
        if not finished:
            windows, data_spec = self._windows()
            findings = check_windows(windows)
            for finding in findings:
                log.warning("data check: %s", finding.message)
            errors = [f.message for f in findings if f.severity == "error"]
            if errors:
                # Tell the user before a search is wasted on it; the recording is kept on disk.
                self._save(state="SERVING" if self.state.deployed else "IDLE",
                           error=f"recording of {self.state.user} not used: {'; '.join(errors)}; record again")
                return
            Study(study, windows, resolve_target(self.config.target), strategy=self.config.strategy,
                  budget_seconds=parse_duration(self.config.budget), seed=0,
                  fidelity=Fidelity(self.config.epochs, self.config.batch_size, self.config.learning_rate),
                  final_fidelity=Fidelity(self.config.final_epochs, self.config.batch_size, 0.01),
                  workers=self.config.workers, normalize=self.config.normalize,
                  resume=journal_path.exists(), data_spec=data_spec,
                  progress=Progress(interactive=False)).run()
        self._save(state="DEPLOYING")

    def _windows(self):
        """The session's windows as the search uses them, and their data spec.

        When the plan's window is too long for the target (a continuous recording such as bearing4 on a
        small MCU), the recordings are cut into the longest windows the target can hold.
        """
        from tinynas.data.spec import load_windows

        spec = f"session:{self.state.session}"
        fit = self._plan_fit(load_plan(self.state.plan))
        if fit.cut:
            spec += f"?window={fit.window}&hop={fit.hop}"
            log.info("plan windows of %d samples do not fit %s: searching on %d-sample windows cut from them",
                     fit.recorded, self.config.target, fit.window)
        return load_windows(spec), spec

    def _deploy(self) -> None:
        from tinynas.data.preprocess import Preprocessing
        from tinynas.data.splits import make_split
        from tinynas.deploy.litert import Int8Model

        study = Path(self.state.study)
        card = json.loads((study / "card.json").read_text())
        windows, _ = self._windows()
        test = make_split(windows, "auto", seed=0).test
        model = Int8Model((study / "model.tflite").read_bytes())
        inputs = Preprocessing.from_card(card).apply(windows.x[test])
        accuracy = float(np.mean(model.logits(inputs).argmax(axis=1) == windows.y[test]))
        if accuracy < self.config.min_accuracy:
            error = (f"new model for {self.state.user} reached {accuracy:.1%} on held-out windows, below "
                     f"{self.config.min_accuracy:.0%}: not deployed")
            log.warning("%s", error)
            self._save(state="SERVING" if self.state.deployed else "IDLE", error=error)
            return
        target = self.paths.profile(self.state.user) / "deployed" / study.name
        staging = target.with_name(target.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        # The float weights, training windows and split too: a served model is a model folder that
        # `recalibrate` / `adapt` can open (tinynas.deploy.modeldir).
        for name in ("model.tflite", "model.c", "model.h", "card.json", "report.md", "model.weights.h5",
                     "windows.npz", "split.npz"):
            if (study / name).exists():
                shutil.copy2(study / name, staging / name)
        for file in staging.iterdir():
            with open(file, "rb") as handle:
                os.fsync(handle.fileno())
        shutil.rmtree(target, ignore_errors=True)
        os.replace(staging, target)
        deployed = {"user": self.state.user, "model": str(target / "model.tflite"), "card": str(target / "card.json"),
                    "accuracy": accuracy, "card_int8_test_accuracy": card.get("int8_test_accuracy"),
                    "classes": card.get("classes"), "study": str(study), "session": self.state.session,
                    "plan": load_plan(self.state.plan).to_dict()}
        self._save(state="SERVING", deployed=deployed, error="")
