"""What the deploy gate tells the user when it does not serve a new model: one more step, in proportion.

The gate (`tinynas.verdict.deploy_gate`) decides on the interval of the held-out windows (or of the recordings
overlapping windows were cut from) and, when they cannot decide, counts the held-out ones that would. A person
records repetitions, not held-out windows: the split keeps about a fifth of the recordings apart. Unbounded, that
count asked for 15 more repetitions per class when one of 4 held-out windows was wrong (~8.5 min) and for 120
(~68 min) when two were. Here the ask is:

- in whole held-out recordings: a step adds at least one recording per class to the held-out side (with a fifth
  held out, 5 repetitions per class), so that every step is a new measurement;
- at most the plan's own repetitions per step: a need beyond it is asked one step at a time (the next step is
  decided on what this one shows), and said so;
- with the minutes it takes at the plan's own pace, and, for a plan shorter than RECOMMENDED_REPETITIONS, the advice
  to use such a plan next time;
- shown as a normal state (the page's amber "one more step"), with what the unserved model got per class.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

RECOMMENDED_REPETITIONS = 15
"""Repetitions per class at which the gate decided in 5 of 5 seeds on ISL (4 letters, 12 held-out windows:
`benchmarks/results/repetitions.md`); gestures4's own."""


@dataclass(frozen=True)
class GateOutcome:
    """The gate's decision on a model it did not serve, for the status page and `tinynas service status`."""

    user: str
    decision: str
    """"undecided" (one more step) or "refuse" (record again)."""
    text: str
    """The held-out count and what it shows, in words."""
    more_per_class: int = 0
    """Repetitions per class to record with `onboard --more` (0: none asked)."""
    minutes: float = 0.0
    adds_held_out: int = 0
    """Held-out windows (or recordings, `unit`) the step adds (whole recordings)."""
    needed_per_class: int = 0
    """What the held-out count alone would ask; above `more_per_class` when the step is bounded."""
    advice: str = ""
    recall: dict[str, float | None] = field(default_factory=dict)
    """The unserved model's recall per class on the held-out windows (None: no window of the class held out)."""
    command: str = ""
    unit: str = "windows"
    """What the held-out count counts: windows, or the recordings overlapping windows were cut from
    (`tinynas.verdict.RECORDINGS`); `adds_held_out` is in the same unit."""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: object) -> GateOutcome | None:
        """The record a state file holds ({} or a damaged one: None, it is only shown)."""
        if not isinstance(data, dict) or not data:
            return None
        try:
            outcome = cls(**{key: value for key, value in data.items() if key in cls.__dataclass_fields__})
        except TypeError:
            return None
        ok = (isinstance(outcome.user, str) and outcome.decision in ("undecided", "refuse")
              and isinstance(outcome.text, str) and isinstance(outcome.more_per_class, int)
              and isinstance(outcome.recall, dict) and outcome.unit in ("windows", "recordings"))
        return outcome if ok else None

    def words(self) -> str:
        """One line for the log and `tinynas service status`."""
        if self.decision == "refuse":
            return f"{self.user}'s new model was not served: {self.text}; {self.command}"
        return (f"one more step for {self.user}: {self.text}; record {self.more_per_class} more per class "
                f"(about {self.minutes:.0f} min{', then the gate decides again' if self.bounded else ''}): "
                f"{self.command}" + (f"; {self.advice}" if self.advice else ""))

    @property
    def bounded(self) -> bool:
        return self.needed_per_class > self.more_per_class


def prompt_seconds(plan) -> float:
    """How long one prompt of `plan` takes at its own pace (countdown, what it records, rest)."""
    return plan.countdown + plan.block_seconds + plan.rest_seconds


def ask(needed_per_class: int, plan, classes: int, test_share: float) -> tuple[int, float, int]:
    """(repetitions per class to ask for, minutes, held-out recordings they add) for a need of `needed_per_class` more
    recordings per class (`test_share`: the share of recordings held out): whole held-out recordings, at most the
    plan's own repetitions per step. A machine's block records `plan.segments` recordings per repetition."""
    share = min(max(test_share, 1e-3), 1.0)
    each = max(1, plan.segments)
    step = math.ceil(1 / min(1.0, share * each))  # one more held-out recording per class
    bound = max(step, math.ceil(plan.repetitions / step) * step)
    per_class = min(bound, math.ceil(math.ceil(max(needed_per_class, 1) / each) / step) * step)
    minutes = per_class * classes * prompt_seconds(plan) / 60
    return per_class, minutes, max(classes, round(per_class * each * classes * share))


def outcome(verdict, held: dict, class_names, plan, user: str, test_share: float, hint: str) -> GateOutcome:
    """What a gate that did not deploy tells `user` (`verdict` a `tinynas.verdict.GateVerdict`; `held` its held-out
    count with per-class `recall`)."""
    recall = {str(name): value for name, value in zip(class_names, held.get("recall") or [])}
    unit = "recordings" if held.get("unit") == "recordings" else "windows"
    if verdict.decision == "undecided" and verdict.more_per_class:
        per_class, minutes, adds = ask(verdict.more_per_class, plan, len(class_names), test_share)
        advice = (f"a plan of {RECOMMENDED_REPETITIONS} repetitions (gestures4's) gives the gate enough held-out "
                  f"windows from the first recording" if plan.kind == "gesture"
                  and plan.repetitions < RECOMMENDED_REPETITIONS else "")
        return GateOutcome(user, "undecided", verdict.text, per_class, round(minutes, 1),
                           adds, verdict.more_per_class, advice, recall,
                           f"tinynas onboard --user {user} --more {per_class}{hint}", unit)
    place = ("with the sensor mounted firmly and each state held steady while it is recorded"
             if plan.kind == "continuous" else "with the sensor placed as during the recording")
    return GateOutcome(user, "refuse", verdict.text, recall=recall,
                       command=f"record again {place}: tinynas onboard --user {user}{hint}", unit=unit)
