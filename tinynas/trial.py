"""`Trial`: the frozen record of one candidate, the only thing that crosses between study,
strategy and journal; and `Fidelity`, how hard a candidate is trained, which strategies choose,
the study records and training carries out (so it lives here, below all three)."""

from __future__ import annotations

import enum
import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tinynas.augment import Augmentation
from tinynas.errors import UsageError
from tinynas.space import Architecture

SCHEDULES = ("constant", "cosine")
"""Learning-rate schedules a training can follow (`Fidelity.schedule`)."""


@dataclass(frozen=True)
class Fidelity:
    """How hard to train a candidate (the method's defaults: 100 epochs, batch 16, Adam 1e-3).

    `subset` < 1 trains on a representative fraction of the training windows (per-class
    clustering, `tinynas.data.subset`); `patience` > 0 stops after that many epochs without a
    better validation loss; `curve_stop` stops once the learning curve cannot beat the incumbent
    (`tinynas.training.curve_stop`). The method uses none of the three. `augmentation` changes the
    training windows every epoch (`tinynas.augment`; None: the method's unchanged windows).
    `stop_after` > 0 ends the training after that many epochs whatever else the plan says: a replay
    of a stopped trial keeps the trial's plan (which also decides when XLA compiles) and stops where it did.
    `schedule` is how the learning rate moves over the planned epochs (`learning_rate_at`): "constant" (the
    method's) or "cosine" (from `learning_rate` down towards zero along half a cosine, set once per epoch).
    """

    epochs: int = 100
    batch_size: int = 16
    learning_rate: float = 1e-3
    subset: float = 1.0
    patience: int = 0
    curve_stop: bool = False
    augmentation: Augmentation | None = None
    stop_after: int = 0
    schedule: str = "constant"

    def __post_init__(self) -> None:
        # Stored fidelities (journals, jobs) hold the augmentation as a dict; "none" is stored as None.
        augmentation = self.augmentation
        if isinstance(augmentation, dict):
            augmentation = Augmentation.from_dict(augmentation)
        if augmentation is not None and not isinstance(augmentation, Augmentation):
            raise UsageError(f"invalid fidelity augmentation {augmentation!r}")
        object.__setattr__(self, "augmentation", augmentation if augmentation and augmentation.active else None)
        if self.epochs < 1 or self.batch_size < 1 or not self.learning_rate > 0:
            raise UsageError(f"invalid fidelity {self}: epochs and batch size >= 1, learning rate > 0")
        if not 0 < self.subset <= 1 or self.patience < 0 or self.stop_after < 0:
            raise UsageError(f"invalid fidelity {self}: subset in (0, 1], patience and stop_after >= 0")
        if self.schedule not in SCHEDULES:
            raise UsageError(f"invalid fidelity schedule {self.schedule!r}: use one of {', '.join(SCHEDULES)}")

    def learning_rate_at(self, epoch: int) -> float:
        """The learning rate of (0-based) `epoch` of the plan: a cosine schedule's last epoch still learns a
        little (its rate is set at the start of each epoch, never at zero)."""
        if self.schedule == "cosine":
            return self.learning_rate * 0.5 * (1 + math.cos(math.pi * min(epoch, self.epochs) / self.epochs))
        return self.learning_rate

    def with_learning_rate(self, learning_rate: float) -> Fidelity:
        """The same fidelity at another learning rate."""
        return replace(self, learning_rate=learning_rate)

    def to_dict(self) -> dict:
        """JSON-ready dict; `Fidelity(**d)` rebuilds it. No augmentation (or no `stop_after`, or the constant
        schedule): no key, as before it existed, so journals and trial keys written then still match."""
        data = asdict(self)
        if not self.stop_after:
            del data["stop_after"]
        if self.schedule == "constant":
            del data["schedule"]
        if self.augmentation is None:
            del data["augmentation"]
        else:
            data["augmentation"] = self.augmentation.to_dict()
        return data


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

    # What the study branches on, typed; stored in `details` so that every journal keeps its columns.
    @property
    def diagnosis(self) -> str:
        """The training fault the diagnoser stopped this attempt for ("" if none)."""
        return str(self.details.get("diagnosis", ""))

    @property
    def retry_learning_rate(self) -> float | None:
        """The safer learning rate of the retry this trial is (None: its first attempt)."""
        value = self.details.get("retry_learning_rate")
        return None if value is None else float(value)

    @property
    def fault(self) -> str | None:
        """The fault injected into its training (tests and fault studies), decided once at launch."""
        return self.details.get("fault")

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
