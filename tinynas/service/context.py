"""What the service's steps share: the phases, the transition a step returns, and the context it runs in.

The service is a state machine (`runner.Service` runs it). A step (`collect`, `search_deploy`, `onboarding`,
`rewear`) takes the `ServiceContext` and returns the `Transition` it ends with, or None to stay in its phase;
only the runner applies a transition (`ServiceContext.apply`, which saves `state.json`). Within a phase a
step records progress with `update` (never the phase), and reads the rest through the context's public
members: the config, the files (`paths`), the device, the workers, the live collection record. Steps and the
status snapshot import this module, never the runner.

    IDLE / SERVING --onboard--> COLLECTING --> SEARCHING --> DEPLOYING --> SERVING (or back, refused)
    SERVING --recalibrate--> COLLECTING --> RECALIBRATING --> SERVING (the old model served throughout)
    COLLECTING --paused--> COLLECTING (paused; --continue resumes it, --cancel ends it: IDLE / SERVING)
    any step that fails --> IDLE / SERVING, the reason in `error`
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from firmware_bridge.recorder import Recorder
from tinynas.errors import TinynasError, user_message
from tinynas.service.collection import Collection
from tinynas.service.config import ServiceConfig
from tinynas.service.device import Device
from tinynas.service.fit import check_plan_fits
from tinynas.service.inference import LiveClassifier, PredictionLog
from tinynas.service.models import remember
from tinynas.service.paths import ServicePaths, pending_requests
from tinynas.service.state import Phase, RewearFlow, ServiceState, load_state, save_state

__all__ = ["CollectionCancelled", "Phase", "ServiceContext", "ServiceError", "Transition", "to"]

if TYPE_CHECKING:
    from tinynas.study.pool import WorkerPool

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Transition:
    """Where a step ends: the next phase and the state fields that change with it."""

    phase: Phase
    changes: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self.changes)


STATE_FIELDS = frozenset(f.name for f in fields(ServiceState))
"""What a transition or an update may change (read once: every progress update of a collection checks it)."""


def check_fields(changes: dict[str, Any]) -> None:
    """A change names a field of ServiceState, or it is a bug said at once (not a key dropped at save)."""
    unknown = sorted(changes.keys() - STATE_FIELDS)
    if unknown:
        raise ValueError(f"ServiceState has no field {', '.join(map(repr, unknown))}")


def to(phase: Phase, **changes: Any) -> Transition:
    """The transition to `phase` with `changes` (e.g. `to(Phase.SEARCHING, study=...)`)."""
    return Transition(phase, changes)


class ServiceError(TinynasError, RuntimeError):
    """A service that cannot run (no device, bad config)."""


class CollectionCancelled(Exception):
    """The user of the running collection asked to cancel it (`ServiceContext.check_cancel`): not an error, so never
    a pause (`collect.collect` ends the collection, its recordings kept)."""


class ServiceContext:
    """The service as its steps and threads see it (the runner adds the loop that steps it)."""

    def __init__(self, config: ServiceConfig, on_prompt=None) -> None:
        # Stores only: `open` reads (and repairs) what is on disk, once the runner holds data_dir's lock.
        self.config = config
        self.search_clock: tuple[float, float] | None = None
        """(when this search step started, its budget seconds already spent): the time left between journal saves."""
        self.paths = ServicePaths(config.data_dir)
        self.state = ServiceState()
        """What must survive a power cut: a fresh IDLE state until `open` reads the saved one."""
        self.on_prompt = on_prompt
        self.collection = Collection()
        """The running collection as `status` shows it (prompt, phase, counts, GO times); empty when none runs."""
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
        self.chip_check: dict = {}
        """The check of the served model on the front-end's chip (chip_check.py): {} where the front-end cannot
        run it, else its state ("checking", "done", "stopped", "refused") and what the page says."""
        self.injected: set[str] = set()
        self.started_ns = 0
        """When this service started running (time.time_ns): requests left before it are not for it."""
        self.stopping = threading.Event()
        """Set when the service stops: every loop and wait ends on it."""
        self.flow_requests = threading.Lock()
        """Held while onboarding and recalibration requests are taken (IDLE / SERVING) or refused (during a flow), so
        that a request is never both started and refused."""
        self._lock = threading.Lock()

    def open(self) -> ServiceContext:
        """Make data_dir and read the saved state, repairing a damaged one (`state.load_state`); the context."""
        self.paths.root.mkdir(parents=True, exist_ok=True)
        self.state = load_state(self.paths.state, repair=True)
        return self

    # ---- the state store ---------------------------------------------------------------------
    def apply(self, transition: Transition) -> None:
        """Enter the transition's phase with its changes, saved (the runner's alone to call)."""
        changes = dict(transition.changes)
        if "deployed" in changes:  # every model served is remembered: `tinynas serve --previous` rolls back to it

            changes["history"] = remember(self.state.history, changes["deployed"])
        self._store(state=str(transition.phase), **changes)

    def update(self, **changes: Any) -> None:
        """Record progress within the current phase (never the phase itself: steps return transitions)."""
        if "state" in changes:
            raise ValueError("a step changes the phase by returning a Transition, not with update()")
        self._store(**changes)

    def _store(self, **changes: Any) -> None:
        check_fields(changes)
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
        try:
            self.saved()
        except Exception as exc:  # noqa: BLE001 - the state is saved; the writer thread tries again in 0.5 s
            log.warning("cannot write status after saving the state: %s: %s", type(exc).__name__, exc)
        log.info("state %s%s", self.state.state, f" ({self.state.user})" if self.state.user else "")

    def saved(self) -> None:
        """Called after every saved state. The runner writes status.json here (a context has no status of its
        own: status reads the context, never the reverse)."""

    def refuse(self, why: str) -> None:
        """Tell the user (status, log) why a request was not followed; the phase does not change."""
        log.warning("%s", why)
        self.update(error=why)

    # ---- what the steps read -----------------------------------------------------------------
    def requests(self, kind: str) -> list[tuple[Path, dict]]:
        """Pending requests of one kind, oldest first; unreadable ones are dropped with a log line."""
        return pending_requests(self.paths.requests, kind)

    def cancel_requested(self, what: str) -> bool:
        """Whether the running flow's user asked to cancel it (`tinynas onboard --cancel`, the page's button); a cancel
        for another user is refused (`what`: the flow, e.g. "collection")."""
        asked = False
        for path, wanted in self.requests("cancel"):
            path.unlink(missing_ok=True)
            if wanted.get("user") == self.state.user:
                asked = True
            else:
                self.refuse(f"cancel request for {wanted.get('user')!r} ignored: the running {what} is "
                            f"{self.state.user}'s")
        return asked

    def check_cancel(self) -> None:
        """Raise CollectionCancelled when the running collection's user asked to cancel it: called wherever a
        collection waits (the guide's countdowns and samples, a confirmation, the rest after a window)."""
        if self.cancel_requested("collection"):
            raise CollectionCancelled

    def idle_phase(self) -> Phase:
        """Where the service rests: SERVING when a model is deployed, else IDLE."""
        return Phase.SERVING if self.state.deployed is not None else Phase.IDLE

    def rewear_running(self) -> bool:
        """Whether the current COLLECTING / RECALIBRATING phase belongs to a re-wear flow."""
        return self.state.rewear is not None and self.state.rewear.running

    def ended_rewear(self, phase: str, text: str) -> RewearFlow | None:
        """state.rewear after the phase ended early (unchanged when no re-wear flow was running)."""
        if self.state.rewear is None or not self.state.rewear.running:
            return self.state.rewear
        return self.state.rewear.moved(phase=phase, text=text, finished=time.time())

    def require_device(self) -> Device:
        """The connected device (the state machine runs only once there is one)."""
        if self.device is None:
            raise ServiceError("no device yet")
        return self.device

    def plan_fit(self, plan):
        """How the plan's windows fit the target on this device (PlanDoesNotFit if they cannot)."""

        hello = self.require_device().hello
        return check_plan_fits(plan, self.config.chip_budget(), hello.channels, hello.sample_rate_hz,
                               self.config.false_alarm_rate)

    def failed(self, phase: str, exc: BaseException) -> Transition:
        """Where a step that failed ends: IDLE (or SERVING the previous model), the reason in `error`.

        Never re-raised: systemd would restart the service into the same failure forever, and no new
        request would ever be read.
        """
        message = user_message(exc)
        if message is None:
            log.error("%s failed with an internal error", phase, exc_info=exc)
            message = f"internal error {type(exc).__name__}: {exc} (a bug: please report it with the log)"
        if phase in (Phase.IDLE, Phase.SERVING):
            error = f"reading requests failed: {message}"
        else:
            kept = f"; recordings kept in {self.state.session}" if self.state.session else ""
            error = f"{phase.lower()} for {self.state.user} failed: {message}{kept}; onboard again when fixed"
        log.error("%s", error)
        self.collection = Collection()
        return to(self.idle_phase(), paused="", error=error,
                  rewear=self.ended_rewear("failed", error + "; the old model stays"))
