"""The modes a search and a model are made in, as enums (like the service's `Phase`): one owner of each name.

Each is a StrEnum: a member is its own name in JSON, cards, journals and messages, and compares equal to it, so a
card or a flag that says "c" is `Runtime.C`. A misspelled member is an AttributeError where a misspelled string
literal was a comparison that is silently never true.
"""

from __future__ import annotations

from enum import StrEnum


class Runtime(StrEnum):
    """What runs a model on a chip: TFLite Micro's interpreter, or tinynas's generated C (`tinynas.cost.runtime`)."""

    TFLM = "tflm"
    C = "c"


class Accounting(StrEnum):
    """How RAM and flash are counted for the budget (`--accounting`; `tinynas.cost.runtime` says each rule)."""

    CHIP = "chip"
    ARENA = "arena"
    METHOD = "method"


class Task(StrEnum):
    """What a search makes: a classifier of labelled windows, or a scorer of normal running (`--task`)."""

    CLASSIFY = "classify"
    ANOMALY = "anomaly"


class CellStatus(StrEnum):
    """Where a sweep's cell stands (`DIR/sweep.json`): not started, searching (or cut short: searched again on
    --resume, from its journal), finished with a model, or finished without one."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


class FlowMode(StrEnum):
    """How a re-wear flow learns today's wear: from a labelled recording of the onboarding's plan (recalibrate) or
    from recorded seconds with no labels (adapt)."""

    LABELLED = "labelled"
    UNLABELLED = "unlabelled"

    @property
    def change(self) -> str:
        """What a model this flow accepted was changed by (`deployment.json`'s `changed_by`)."""
        return "recalibrate" if self is FlowMode.LABELLED else "adapt"


class FlowPhase(StrEnum):
    """Where a re-wear flow stands: recording, then fine-tuning (labelled) or adapting (unlabelled), then one of
    four endings."""

    COLLECTING = "collecting"
    RECALIBRATING = "recalibrating"
    ADAPTING = "adapting"
    ACCEPTED = "accepted"
    REJECTED = "rejected"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def running(self) -> bool:
        return self in (FlowPhase.COLLECTING, FlowPhase.RECALIBRATING, FlowPhase.ADAPTING)
