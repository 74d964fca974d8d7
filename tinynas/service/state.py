"""The service's persistent state: where it is and what it serves, written atomically."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tinynas.atomic import atomic_write_text

STATES = ("IDLE", "COLLECTING", "SEARCHING", "DEPLOYING", "SERVING")


@dataclass
class ServiceState:
    """What must survive a power cut: the current phase, its folders and the verified model."""

    state: str = "IDLE"
    user: str = ""
    plan: str = ""
    session: str = ""     # folder of the session being collected
    study: str = ""       # folder of the study being searched
    deployed: dict = field(default_factory=dict)  # the verified model being served (user, model, card, accuracy)
    error: str = ""
    updated: float = 0.0

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


def load_state(path: Path) -> ServiceState:
    """The saved state, or a fresh IDLE one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return ServiceState()
    except (OSError, json.JSONDecodeError) as exc:
        raise RuntimeError(f"{path}: unreadable service state ({exc})") from None
    known = set(ServiceState.__dataclass_fields__)
    return ServiceState(**{key: value for key, value in data.items() if key in known})


def save_state(path: Path, state: ServiceState) -> None:
    """Write the state atomically (temp file, fsync, rename)."""
    state.updated = time.time()
    atomic_write_text(path, json.dumps(state.to_dict(), indent=2) + "\n")
