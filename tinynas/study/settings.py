"""What a search is asked to do, in one frozen record, and the fingerprint a resume must match.

`StudySettings` holds every option of a study (the CLI, the service, the demo and the benchmarks
fill it the same way) and checks them before any file is written. `fingerprint` is what the
journal keeps of a search: the settings as they were resolved against the data (preset recipe,
kernel sizes, split), so that `--resume` with other options is refused in one line.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from tinynas.anomaly.choice import check_scorer
from tinynas.anomaly.task import check_task
from tinynas.anomaly.threshold import check_rate
from tinynas.c_names import check_prefix
from tinynas.cost.runtime import (
    DEFAULT_ACCOUNTING,
    DEFAULT_RUNTIME,
    LEGACY_ACCOUNTING,
    check_accounting,
    check_runtime,
)
from tinynas.errors import TinynasError, UsageError
from tinynas.modes import Accounting, Runtime, Task
from tinynas.options import RANGES
from tinynas.search.base import FINAL_FIDELITY
from tinynas.search.fixed import FixedCandidates
from tinynas.study.crossval import check_selection
from tinynas.trial import Fidelity

__all__ = ["FINAL_FIDELITY", "StudyError", "StudySettings", "check_resumable", "fingerprint"]


class StudyError(TinynasError, RuntimeError):
    """A study that cannot start or continue (wrong folder, mismatched resume, nothing finished)."""


@dataclass(frozen=True)
class StudySettings:
    """Every option of a study. Checked when made, so that every caller gets the same one-line errors."""

    strategy: str | FixedCandidates = "paper"
    """A strategy's name, or fixed candidates (`tinynas.search.fixed`: for callers whose subject is not the
    search)."""
    budget_seconds: float = 1800.0
    max_candidates: int | None = None
    """`--candidates`: the search ends once this many candidates (architectures) have been trained, or when its time
    budget runs out, whichever comes first (None: the budget and the strategy alone)."""
    seed: int = 0
    fidelity: Fidelity | None = None
    """The strategy's search recipe (None: the strategy's own default)."""
    final_fidelity: Fidelity | None = None
    """The winner's final recipe (None: the strategy's own, `Strategy.final_recipe`); its augmentation, when
    None, comes from `augment`."""
    workers: int | str = 1
    """Training processes, or "auto": `tinynas.machine.auto_workers` picks from the cores and free memory."""
    threads_per_worker: int = 1
    max_jobs_per_worker: int | None = None
    split: str = "auto"
    normalize: str = "none"
    augment: str = "auto"
    """`--augment`: auto (the sensor's preset), none, a preset name or kind=value,..."""
    kernels: str = "auto"
    """`--kernels`: the searched kernel sizes (auto: the sensor's)."""
    track_test: bool = False
    """Benchmarks only: measure every trained candidate on the test split (anytime curves). No strategy
    or objective reads it."""
    check_data: bool = True
    """Data faults (a flat channel, mixed-up labels) stop the study before it searches."""
    health: bool = True
    """Health monitor + diagnoser in every candidate's training (stops unstable ones early)."""
    retry_unstable: bool = True
    """A candidate the diagnoser stopped is retried once at a safer learning rate."""
    data_spec: str = ""
    test_spec: str = ""
    runtime: Runtime | str = DEFAULT_RUNTIME
    """`--runtime`: what runs the model, TFLite Micro ("tflm"), tinynas's generated C runtime ("c") or "auto"
    (the C runtime where the target can run it: `tinynas.cost.runtime.resolve_runtime`)."""
    accounting: Accounting = DEFAULT_ACCOUNTING
    """`--accounting`: how RAM and flash are counted: chip (the whole footprint), arena or method."""
    c_prefix: str = "tinynas"
    """`--c-prefix`: the generated C runtime's names start with it (export only: not part of the search)."""
    task: Task = Task.CLASSIFY
    """`--task`: classify (one class per state) or anomaly (a scorer learnt from normal windows only,
    `tinynas.anomaly`)."""
    false_alarm_rate: float = 0.01
    """`--false-alarm-rate`: the anomaly task's share of normal windows its threshold may flag."""
    scorer: str = "auto"
    """`--scorer`: the anomaly task's exported family: auto (`tinynas.anomaly.choice`'s rule), network or classical.
    Not part of a resumed search's settings: it decides only after the search."""
    latency_seconds: float | None = None
    """`--latency`: the most one inference may take at the target's clock (None: the target file's `latency`, else
    time is not budgeted); a candidate whose estimate (with `tinynas.cost.latency.TIME_HEADROOM`) takes longer is
    refused before training, as one over the RAM is."""
    selection: str = "auto"
    """`--selection`: how candidates are ranked: on the split's validation side, by cross-validation over recordings
    (`tinynas.study.crossval`), or auto (cross-validation where the validation side is small)."""

    def __post_init__(self) -> None:
        check_runtime(self.runtime, allow_auto=True)
        check_accounting(self.accounting, None if self.runtime == "auto" else self.runtime)

        check_task(self.task)
        # Held as members once checked, whether given a member or its name (the CLI's and the config's strings).
        object.__setattr__(self, "task", Task(self.task))
        object.__setattr__(self, "accounting", Accounting(self.accounting))
        if self.runtime != DEFAULT_RUNTIME:
            object.__setattr__(self, "runtime", Runtime(self.runtime))
        check_rate(self.false_alarm_rate)
        check_scorer(self.scorer)

        check_selection(self.selection)
        RANGES["latency_seconds"].check("the time per inference (seconds)", self.latency_seconds)
        RANGES["candidates"].check("--candidates", self.max_candidates)

        check_prefix(self.c_prefix)  # before the search, not after it at the export
        if self.workers != "auto":
            _check_whole("workers", self.workers, "auto or ")
        _check_whole("threads per worker", self.threads_per_worker)
        if self.max_jobs_per_worker is not None:
            _check_whole("jobs per worker", self.max_jobs_per_worker)
        budget = self.budget_seconds
        if isinstance(budget, bool) or not isinstance(budget, numbers.Real) or not math.isfinite(budget) \
                or budget <= 0:
            raise UsageError(f"the time budget must be a positive number of seconds, got {budget!r}")
        if budget > (RANGES["budget_seconds"].high or math.inf):
            raise UsageError(f"the time budget must be at most 30 days ({RANGES['budget_seconds'].high:.0f} s), "
                             f"got {budget!r}")
        for name, value in (("fidelity", self.fidelity), ("final fidelity", self.final_fidelity)):
            if value is not None and not isinstance(value, Fidelity):
                raise UsageError(f"the {name} must be a Fidelity, got {type(value).__name__}")
            if value is not None:  # the command line's and the service config's ranges (tinynas.options.RANGES)
                for field_name in ("epochs", "batch_size", "learning_rate"):
                    RANGES[field_name].check(f"the {name}'s {field_name}", getattr(value, field_name))


def fingerprint(*, data_digest: str, target: dict, strategy: str, seed: int, fidelity: Fidelity, space: dict,
                split: str, normalize: str, test_data_digest: str | None, final_fidelity: Fidelity,
                runtime: str = "tflm", accounting: str = LEGACY_ACCOUNTING,
                anomaly: dict | None = None, folds: dict | None = None,
                latency_seconds: float | None = None) -> dict[str, Any]:
    """What a resumed search must share with the journal's: the resolved settings as JSON."""
    settings: dict[str, Any] = {"data_digest": data_digest, "target": target, "strategy": strategy, "seed": seed,
                                "fidelity": fidelity.to_dict(),
                                # As journals written before `kernel_sizes` existed, when it is not used.
                                "space": {key: value for key, value in space.items()
                                          if key != "kernel_sizes" or value},
                                "split": split}
    # Only when used, so that journals written before these options existed still resume.
    if normalize != "none":
        settings["normalize"] = normalize
    if test_data_digest is not None:
        settings["test_data_digest"] = test_data_digest
    if runtime != Runtime.TFLM:  # another runtime budgets other candidates as feasible: another search
        settings["runtime"] = runtime
    elif accounting != LEGACY_ACCOUNTING:  # so is another rule for TFLite Micro (the C runtime has only one)
        settings["accounting"] = accounting
    if anomaly is not None:  # the task and its false-alarm rate (the threshold's calibration)
        settings["anomaly"] = anomaly
    if folds is not None:  # ranked by cross-validation: other scores, another search
        settings["cross_validation"] = folds
    if latency_seconds is not None:  # a time budget refuses other candidates: another search
        settings["latency_seconds"] = latency_seconds
    # The final recipe decides the winner's losses (fast trains every candidate with it) and its
    # retraining: a resume with another --final-epochs is another search.
    settings["final_fidelity"] = final_fidelity.to_dict()
    return settings


def check_resumable(stored: dict, current: dict, final_fidelity: Fidelity) -> None:
    """Refuse, in one line naming what differs, to resume a journal's search with other settings."""
    if "final_fidelity" not in stored and final_fidelity == FINAL_FIDELITY:
        # Journals written before the final recipe was recorded used the default one.
        stored = {**stored, "final_fidelity": current["final_fidelity"]}
    if isinstance(stored.get("split"), str) and current["split"].startswith(
            stored["split"] + "; not leave-one-session-out"):
        # Journals written before the split said why it is not leave-one-session-out: same indices.
        stored = {**stored, "split": current["split"]}
    if stored == current:
        return
    changed = sorted(key for key in set(current) | set(stored) if stored.get(key) != current.get(key))
    hint = "resume with the same options, or choose another --out"
    old_recipe = stored.get("final_fidelity")
    if ({"final_fidelity", "space"} & set(changed) and isinstance(old_recipe, dict)
            and "augmentation" not in old_recipe and final_fidelity.augmentation is not None):
        # Searches started before the sensor presets trained without augmentation, at kernel 3.
        hint = "it was started without augmentation at kernel 3: resume with --augment none --kernels 3"
    elif set(changed) <= {"runtime", "accounting"}:
        runtime = stored.get("runtime", "tflm")
        accounting = "" if runtime != Runtime.TFLM else f" --accounting {stored.get('accounting', LEGACY_ACCOUNTING)}"
        hint = f"it was searched with --runtime {runtime}{accounting}: resume with that, or another --out"
    raise StudyError(f"cannot resume: {', '.join(changed)} differ from the journal's search ({hint})")


def _check_whole(name: str, value, other: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise UsageError(f"{name} must be {other}a whole number >= 1, got {value!r}")
