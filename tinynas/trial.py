"""`Trial`: the frozen record of one candidate, the only thing that crosses between study,
strategy and journal."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

from tinynas.space import Architecture
from tinynas.train import Fidelity


class TrialState(str, enum.Enum):
    """Life of a candidate: decided by the cost model, then trained (or not)."""

    FEASIBLE = "feasible"        # fits the budget, waiting for a worker
    INFEASIBLE = "infeasible"    # rejected by the cost model, never trained
    RUNNING = "running"
    COMPLETE = "complete"
    FAILED = "failed"            # crashed, NaN loss, out of memory: recorded, search goes on
    INTERRUPTED = "interrupted"  # stopped by a deadline, Ctrl-C or a power cut

    @property
    def finished(self) -> bool:
        """True for states a strategy learns from."""
        return self in (TrialState.INFEASIBLE, TrialState.COMPLETE, TrialState.FAILED)


@dataclass(frozen=True)
class Trial:
    """One candidate: what was tried, at which fidelity, and what came of it."""

    number: int
    architecture: Architecture
    fidelity: Fidelity
    state: TrialState
    score: float | None = None          # lower is better (the method: min validation loss)
    val_loss: tuple[float, ...] = ()
    val_accuracy: tuple[float, ...] = ()
    costs: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    attempts: int = 0
    violations: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    """Measurements no strategy decides on: timings, why training stopped early, when it finished."""

    @property
    def best_val_accuracy(self) -> float | None:
        """Highest validation accuracy over the epochs, if trained."""
        return max(self.val_accuracy) if self.val_accuracy else None

    @property
    def comparable_score(self) -> float:
        """Score for comparisons: failed or missing scores rank last."""
        if self.score is None or math.isnan(self.score):
            return math.inf
        return self.score

    def evolve(self, **changes) -> Trial:
        """A copy with some fields changed (trials are immutable)."""
        return replace(self, **changes)

    def to_row(self) -> dict[str, Any]:
        """Columns for the journal."""
        return {
            "number": self.number, "architecture": self.architecture.to_json(),
            "digest": self.architecture.digest(), "fidelity": json.dumps(self.fidelity.to_dict(), sort_keys=True),
            "state": self.state.value, "score": self.score,
            "val_loss": json.dumps(list(self.val_loss)), "val_accuracy": json.dumps(list(self.val_accuracy)),
            "costs": json.dumps(self.costs, sort_keys=True), "seconds": self.seconds, "error": self.error,
            "attempts": self.attempts, "violations": json.dumps(list(self.violations)),
            "details": json.dumps(self.details, sort_keys=True),
        }

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Trial:
        """Inverse of `to_row`."""
        return cls(
            number=row["number"], architecture=Architecture.from_json(row["architecture"]),
            fidelity=Fidelity(**json.loads(row["fidelity"])), state=TrialState(row["state"]),
            score=row["score"], val_loss=tuple(json.loads(row["val_loss"])),
            val_accuracy=tuple(json.loads(row["val_accuracy"])), costs=json.loads(row["costs"]),
            seconds=row["seconds"], error=row["error"], attempts=row["attempts"],
            violations=tuple(json.loads(row["violations"])), details=json.loads(row.get("details") or "{}"),
        )
