"""The service's persistent state: where it is and what it serves, written atomically, with a last good copy.

`state.json` is what a power cut must not lose. Every save writes it and `state.json.bak` (each atomically),
so a damaged `state.json` (truncated by a full disk, edited by hand, overwritten by something else) is
recovered from the copy; when both are unusable the service starts IDLE and the damaged file is set aside
(renamed, never deleted) for a person to look at. Either way the reason is one line in `state.error`.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import re
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from tinynas.atomic import atomic_write_text
from tinynas.card_checks import DamagedCard, check_held_out, is_number, walk_numbers
from tinynas.errors import TinynasError, UsageError
from tinynas.modes import FlowMode, FlowPhase, Task
from tinynas.service.gate import GateOutcome

log = logging.getLogger(__name__)

class Phase(str, enum.Enum):
    """The service's phases (a `str`, so `state.json` and `status` keep their plain names)."""

    IDLE = "IDLE"
    COLLECTING = "COLLECTING"
    SEARCHING = "SEARCHING"
    DEPLOYING = "DEPLOYING"
    SERVING = "SERVING"
    RECALIBRATING = "RECALIBRATING"
    """A served model is recalibrated or adapted (re-wear / new condition) while it keeps serving."""

    def __str__(self) -> str:
        return self.value



STATES = tuple(phase.value for phase in Phase)

USER_NAME_MAX = 64
_USER_NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]*")


def user_name_problem(name) -> str | None:
    """Why `name` cannot name a profile folder, or None if it can (it becomes profiles/<name>/)."""
    if not isinstance(name, str) or not name:
        return "a user name is needed"
    if len(name) > USER_NAME_MAX:
        return f"user name too long ({len(name)} characters, at most {USER_NAME_MAX})"
    if not _USER_NAME.fullmatch(name):
        return (f"user name {name!r} not allowed: use letters, digits, '-', '_' and '.', "
                f"not starting with '.' (it names a folder)")
    return None


def check_user_name(name) -> str:
    """`name` if it is a safe profile name, else UsageError in one line."""
    problem = user_name_problem(name)
    if problem:
        raise UsageError(problem)
    return name


class DamagedState(TinynasError, ValueError):
    """A state file that cannot be trusted (why, in one line)."""


REWEAR_RUNNING = tuple(phase.value for phase in FlowPhase if phase.running)
"""Phases of a re-wear flow that is still going; it ends accepted, rejected, failed or cancelled."""


@dataclass(frozen=True)
class RewearFlow:
    """The re-wear / new-condition flow (`rewear.py`), current or last: saved in `state.json` as `rewear`."""

    user: str
    mode: FlowMode        # labelled (the onboarding plan, recalibrate) or unlabelled (recorded seconds, adapt)
    phase: FlowPhase      # running (collecting, recalibrating, adapting), then accepted / rejected / failed / cancelled
    session: str          # the new recording
    staging: str          # where the child writes the changed model (ours: removed on a rerun)
    final: str            # the changed model's folder once accepted
    source: str           # the model it starts from (its model.tflite; "from" in state.json)
    window: int           # the model's window length, in samples
    started: float
    text: str = ""        # what status shows
    seconds: float | None = None   # unlabelled: how long to record
    plan: dict | None = None       # labelled: the plan recorded (firmware_bridge.plan.Plan's fields)
    phase_started: float | None = None
    figures: dict = field(default_factory=dict)  # what was compared (verify, test, confidence, chosen, compared)
    finished: float | None = None
    condition: str | None = None   # a classical scorer's new operating condition, kept beside the earlier ones

    def __post_init__(self) -> None:
        # Built from a name (a caller, state.json) or a member: the record always holds the member, and an unknown
        # name is a ValueError here (from_dict says it as a damaged state).
        object.__setattr__(self, "mode", FlowMode(self.mode))
        object.__setattr__(self, "phase", FlowPhase(self.phase))

    @property
    def running(self) -> bool:
        return self.phase.running

    def moved(self, **changes) -> RewearFlow:
        """The flow with `changes` (it is never changed in place: a saved state holds the one it was given)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """As `state.json` and status keep it (absent values left out)."""
        data = {key: value for key, value in asdict(self).items() if value is not None}
        data["from"] = data.pop("source")
        return data

    @classmethod
    def from_dict(cls, data: dict) -> RewearFlow:
        """The flow `state.json` holds; DamagedState naming what is missing or wrong."""
        values = {("source" if key == "from" else key): value for key, value in data.items()}
        known = cls.__dataclass_fields__
        for key in ("user", "mode", "phase", "session", "staging", "final", "source"):
            if not isinstance(values.get(key), str):
                raise DamagedState(f"the re-wear flow has no {'from' if key == 'source' else key}")
        if not isinstance(values.get("window"), int) or not isinstance(values.get("started"), (int, float)):
            raise DamagedState("the re-wear flow has no window length or start time")
        if not isinstance(values.get("plan") or {}, dict) or not isinstance(values.get("figures") or {}, dict):
            raise DamagedState("the re-wear flow's plan or figures are not objects")
        if not isinstance(values.get("condition") or "", str):
            raise DamagedState("the re-wear flow's condition is not a name")
        if values["mode"] not in FlowMode.__members__.values() or values["phase"] not in FlowPhase.__members__.values():
            raise DamagedState(f"the re-wear flow's mode {values['mode']!s} or phase {values['phase']!s} is not known")
        return cls(**{key: value for key, value in values.items() if key in known})


@dataclass(frozen=True)
class Deployed:
    """The verified model being served: `state.json`'s `deployed`, and `deployment.json` beside each deployed model
    (`models.py`: `tinynas serve` serves it again from there)."""

    user: str
    model: str            # its model.tflite
    card: str             # its served card.json
    accuracy: float | None = None  # int8 accuracy on held-out windows; None for an anomaly scorer (or not measured)
    task: Task = Task.CLASSIFY
    held_out: dict | None = None   # the accuracy's count, interval and per-class figures (verdict); after a
    # recalibration, the new windows it was checked on and how ("measure": rewear._checked_on)
    classes: list | None = None
    card_int8_test_accuracy: float | None = None
    study: str | None = None       # the study it came from
    session: str | None = None     # the recording it was trained on
    plan: dict | None = None       # that recording's plan (firmware_bridge.plan.Plan's fields): re-wear reuses it
    serving: dict | None = None    # serving's rules (idle.ServingRule, or an anomaly scorer's alarm)
    anomaly: dict | None = None    # a scorer's threshold, its false-alarm rate and alarm
    made: float | None = None
    replaced: str | None = None    # a re-wear's: the model it replaced
    changed_by: str | None = None  # "recalibrate" or "adapt"
    condition: str | None = None   # a classical scorer keeping several conditions: the operator's (None: live)
    today: dict | None = None      # a rejected re-wear's: what this model did on that day's wear (signs recognised
    # on the stream, the classes it failed): the page says it instead of the onboarding's figure

    def __post_init__(self) -> None:
        object.__setattr__(self, "task", Task(self.task))  # the member, whether given it or its name

    @property
    def scorer(self) -> bool:
        """An anomaly scorer (no classes to prompt; an alarm instead of an answer)."""
        return self.task == Task.ANOMALY

    @property
    def id(self) -> str:
        """Its folder's name among the user's deployed models."""
        return Path(self.model).parent.name

    def moved(self, **changes) -> Deployed:
        """The record with `changes` (never changed in place)."""
        return replace(self, **changes)

    def to_dict(self) -> dict:
        """As `state.json`, `deployment.json` and status keep it (absent values left out; accuracy always there)."""
        return {key: value for key, value in asdict(self).items() if value is not None or key == "accuracy"}

    @classmethod
    def from_dict(cls, data) -> Deployed:
        """The record a file holds (unknown keys ignored); DamagedState naming what is missing or wrong."""
        if not isinstance(data, dict):
            raise DamagedState("deployed is not an object")
        for key in ("user", "model", "card"):
            if not isinstance(data.get(key), str) or not data.get(key):
                raise DamagedState(f"the deployed model has no {key}")

        try:
            walk_numbers(data, "the deployed model")
        except DamagedCard as exc:
            raise DamagedState(str(exc)) from None
        for key in ("accuracy", "card_int8_test_accuracy"):
            value = data.get(key)
            if value is not None and not (is_number(value) and 0 <= value <= 1):
                raise DamagedState(f"the deployed model's {key} is not a number from 0 to 1")
        made = data.get("made")
        if made is not None and not (is_number(made) and 0 <= made < 1e11):
            raise DamagedState("the deployed model's made is not a time")
        if not isinstance(data.get("condition") or "", str):
            raise DamagedState("the deployed model's condition is not a name")
        if data.get("task", Task.CLASSIFY) not in Task.__members__.values():
            raise DamagedState(f"the deployed model's task {data.get('task')!r} is not known")
        if data.get("task") == "anomaly" and not isinstance(data.get("anomaly"), dict):
            raise DamagedState("the deployed anomaly scorer has no threshold")
        for key in ("held_out", "plan", "serving", "anomaly", "today"):
            if not isinstance(data.get(key) or {}, dict):
                raise DamagedState(f"the deployed model's {key} is not an object")
        failing = (data.get("today") or {}).get("failing", [])
        if not (isinstance(failing, list) and all(isinstance(item, str) for item in failing)):
            raise DamagedState("the deployed model's today.failing is not a list of classes")
        try:
            check_held_out(data.get("held_out") or {}, "the deployed model's held_out")
        except DamagedCard as exc:
            raise DamagedState(str(exc)) from None
        anomaly = data.get("anomaly") or {}
        rate = anomaly.get("false_alarm_rate")
        if data.get("task") == "anomaly" and not (is_number(rate) and 0 < rate < 1):
            raise DamagedState("the deployed scorer's false_alarm_rate is not a rate above 0 and below 1")
        for key in ("threshold", "threshold_steps"):
            if anomaly.get(key) is not None and not is_number(anomaly[key]):
                raise DamagedState(f"the deployed scorer's {key} is not a number")
        classes = data.get("classes")
        if classes is not None and not (isinstance(classes, list) and all(isinstance(c, str) for c in classes)):
            raise DamagedState("the deployed model's classes are not a list of names")
        for key in ("user", "model", "card", "study", "session", "replaced", "changed_by"):
            if data.get(key) is not None and not isinstance(data[key], str):
                raise DamagedState(f"the deployed model's {key} is not text")
        known = cls.__dataclass_fields__
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclass
class ServiceState:
    """What must survive a power cut: the current phase, its folders and the verified model."""

    state: Phase = Phase.IDLE
    user: str = ""
    plan: str = ""
    session: str = ""     # folder of the session being collected
    study: str = ""       # folder of the study being searched
    deployed: Deployed | None = None  # the verified model being served
    error: str = ""
    updated: float = 0.0
    paused: str = ""      # why a collection waits for the user (COLLECTING only); empty when running
    rewear: RewearFlow | None = None  # the re-wear / new-condition flow (rewear.py): current or last
    history: list = field(default_factory=list)  # models served, newest last: {user, id, at} (models.remember)
    gate: GateOutcome | None = None  # what the deploy gate said of a model it did not serve (gate.py), until the next

    def __setattr__(self, name: str, value) -> None:
        # The phase is set all over the service: the record holds the member whether given it or its name, and an
        # unknown name is a ValueError where it is set, not a state file no start can read.
        super().__setattr__(name, Phase(value) if name == "state" else value)

    def to_dict(self) -> dict:
        """JSON-ready dict (no re-wear flow, no deployed model, no gate outcome: `{}`, as state files have always held
        them)."""
        return {**asdict(self), "rewear": self.rewear.to_dict() if self.rewear else {},
                "deployed": self.deployed.to_dict() if self.deployed else {},
                "gate": self.gate.to_dict() if self.gate else {}}


def _flow(data, phase) -> RewearFlow | None:
    """The re-wear flow of a saved state. A damaged record of a flow that is over (it is only shown) is dropped with
    a log line, not the state with it: the served model must not go for a status line's sake."""
    if not data:
        return None
    try:
        if not isinstance(data, dict):
            raise DamagedState("rewear is not an object")
        return RewearFlow.from_dict(data)
    except DamagedState as exc:
        if phase in (Phase.RECALIBRATING, Phase.COLLECTING) and (
                not isinstance(data, dict) or data.get("phase") in REWEAR_RUNNING):
            raise  # a running flow cannot go on without it
        log.warning("the last re-wear flow's record was damaged (%s): dropped", exc)
        return None


def _parse(text: str) -> ServiceState:
    """A ServiceState from `text`, or DamagedState saying what is wrong."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DamagedState(f"not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise DamagedState(f"holds a JSON {type(data).__name__}, not an object")
    known = ServiceState.__dataclass_fields__
    values = {key: value for key, value in data.items() if key in known}
    for key in ("state", "user", "plan", "session", "study", "error", "paused"):
        if not isinstance(values.get(key, ""), str):
            raise DamagedState(f"{key} is not a string")
    if not isinstance(values.get("updated", 0.0), (int, float)):
        raise DamagedState("updated is not a number")
    if values.get("state", Phase.IDLE) not in STATES:
        raise DamagedState(f"unknown state {values['state']!r}")
    flow = _flow(values.pop("rewear", {}), values.get("state"))
    deployed = values.pop("deployed", {})
    gate = GateOutcome.from_dict(values.pop("gate", {}))  # only shown: a damaged one is dropped
    state = ServiceState(**values, rewear=flow, deployed=Deployed.from_dict(deployed) if deployed != {} else None,
                         gate=gate)
    if state.user and user_name_problem(state.user):
        raise DamagedState(user_name_problem(state.user))
    if not isinstance(state.history, list):
        raise DamagedState("history is not a list")
    if state.state in (Phase.COLLECTING, Phase.SEARCHING, Phase.DEPLOYING, Phase.RECALIBRATING) and not state.user:
        raise DamagedState(f"state {state.state} without a user")
    if state.state == Phase.COLLECTING and not state.session:
        raise DamagedState("state COLLECTING without a session folder")
    if state.state in (Phase.SEARCHING, Phase.DEPLOYING) and not state.study:
        raise DamagedState(f"state {state.state} without a study folder")
    if state.state in (Phase.SERVING, Phase.RECALIBRATING) and not state.deployed:
        raise DamagedState(f"state {state.state} without a deployed model")
    if state.state == Phase.RECALIBRATING and not (state.session and state.rewear):
        raise DamagedState("state RECALIBRATING without its session or flow")
    return state


def backup_path(path: Path) -> Path:
    """The last good copy of `path`."""
    return Path(path).with_name(Path(path).name + ".bak")


def _read(path: Path) -> ServiceState | None:
    """The state in `path`, None if there is no such file; DamagedState if it cannot be used."""
    try:
        raw = Path(path).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DamagedState(f"unreadable ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise DamagedState("not text (binary content)") from None
    return _parse(text)


def load_state(path: Path, repair: bool = False) -> ServiceState:
    """The saved state; a damaged one is recovered from its last good copy, else a fresh IDLE state.

    The reason is put in `error` (and logged). With `repair` (the running service) the recovered state
    is saved back, and a file that could not be recovered is renamed aside (`state.json.damaged-<time>`);
    without it (`service status`) nothing on disk changes.
    """
    path = Path(path)
    try:
        state = _read(path)
    except DamagedState as exc:
        problem = f"{path} was damaged ({exc})"
    else:
        if state is not None:
            return state
        if not backup_path(path).exists():
            return ServiceState()
        problem = f"{path} was missing"
    try:
        state = _read(backup_path(path))
    except DamagedState as exc:
        state, how = None, f"its copy {backup_path(path).name} too ({exc})"
    else:
        how = f"recovered from {backup_path(path).name}" if state is not None else "no last good copy"
    if state is None:
        state = ServiceState()
        how += "; started IDLE"
    if repair and path.exists():
        # Never deleted: a person may want to see what wrote it.
        aside = path.with_name(f"{path.name}.damaged-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        os.replace(path, aside)
        how += f"; the damaged file kept as {aside.name}"
    state.error = f"{problem}; {how}"
    log.warning("%s", state.error)
    if repair:
        save_state(path, state)
    return state


def save_state(path: Path, state: ServiceState) -> None:
    """Write the state and its last good copy, each atomically (temp file, fsync, rename)."""
    state.updated = time.time()
    text = json.dumps(state.to_dict(), indent=2) + "\n"
    # The copy first: a power cut between the two writes leaves two good files (old and new).
    atomic_write_text(backup_path(path), text)
    atomic_write_text(path, text)
