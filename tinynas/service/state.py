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
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tinynas.atomic import atomic_write_text
from tinynas.errors import TinynasError, UsageError

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


@dataclass
class ServiceState:
    """What must survive a power cut: the current phase, its folders and the verified model."""

    state: str = Phase.IDLE.value
    user: str = ""
    plan: str = ""
    session: str = ""     # folder of the session being collected
    study: str = ""       # folder of the study being searched
    deployed: dict = field(default_factory=dict)  # the verified model being served (user, model, card, accuracy)
    error: str = ""
    updated: float = 0.0
    paused: str = ""      # why a collection waits for the user (COLLECTING only); empty when running
    rewear: dict = field(default_factory=dict)  # the re-wear / new-condition flow (rewear.py): current or last
    history: list = field(default_factory=list)  # models served, newest last: {user, id, at} (models.remember)

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


class DamagedState(TinynasError, ValueError):
    """A state file that cannot be trusted (why, in one line)."""


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
    state = ServiceState(**values)
    if state.state not in STATES:
        raise DamagedState(f"unknown state {state.state!r}")
    if state.user and user_name_problem(state.user):
        raise DamagedState(user_name_problem(state.user))
    if not isinstance(state.rewear, dict):
        raise DamagedState("rewear is not an object")
    if not isinstance(state.history, list):
        raise DamagedState("history is not a list")
    if state.state in (Phase.COLLECTING, Phase.SEARCHING, Phase.DEPLOYING, Phase.RECALIBRATING) and not state.user:
        raise DamagedState(f"state {state.state} without a user")
    if state.state == Phase.COLLECTING and not state.session:
        raise DamagedState("state COLLECTING without a session folder")
    if state.state in (Phase.SEARCHING, Phase.DEPLOYING) and not state.study:
        raise DamagedState(f"state {state.state} without a study folder")
    deployed = state.deployed
    if not isinstance(deployed, dict):
        raise DamagedState("deployed is not an object")
    if deployed:
        for key in ("user", "model", "card"):
            if not isinstance(deployed.get(key), str) or not deployed.get(key):
                raise DamagedState(f"the deployed model has no {key}")
        accuracy = deployed.get("accuracy", 0.0)
        # An anomaly scorer has no accuracy (None): its figures are its threshold's (deployed["anomaly"]).
        if not isinstance(accuracy, (int, float)) and not (accuracy is None and deployed.get("task") == "anomaly"):
            raise DamagedState("the deployed model's accuracy is not a number")
        if deployed.get("task") == "anomaly" and not isinstance(deployed.get("anomaly"), dict):
            raise DamagedState("the deployed anomaly scorer has no threshold")
    if state.state in (Phase.SERVING, Phase.RECALIBRATING) and not deployed:
        raise DamagedState(f"state {state.state} without a deployed model")
    if state.state == Phase.RECALIBRATING and not (state.session and state.rewear.get("phase")):
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
