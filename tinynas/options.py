"""Option values checked at the command-line boundary, before any data is loaded or any file written.

argparse checks types (an integer is an integer); this module checks ranges and the things a
typo should never reach: a study folder half-made by `--workers 0`, 100 epochs trained for
`--epochs 0`, eight TensorFlow workers started on two cores. Each check raises a one-line
`UsageError` naming the option, the value and what to give instead.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from tinynas.c_names import CNameError, check_prefix
from tinynas.errors import UsageError
from tinynas.units import MAX_LATENCY_SECONDS, UnitError, echoed, parse_duration, parse_latency

MAX_EPOCHS = 10_000
"""More epochs than any candidate or final training needs (the method uses 100)."""
MAX_BATCH_SIZE = 65_536
MAX_LEARNING_RATE = 10.0
"""Adam's default is 1e-3 and the final recipe's 1e-2; anything above 10 only diverges."""
MAX_SEED = 2**32 - 1
"""NumPy and TensorFlow seeds are 32-bit unsigned integers."""
MIN_BUDGET_SECONDS = 1.0
MAX_BUDGET_SECONDS = 30 * 86_400.0
"""A month: longer than any search; larger values are typos (e.g. 30000m for 30m)."""


def cores() -> int:
    """Processor cores of this machine: the ceiling for --workers and --threads."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Range:
    """The values an option may take: `low` to `high` (None: no top), whole numbers only or any number."""

    low: float
    high: float | None = None
    whole: bool = False
    low_open: bool = False
    """`low` itself is not allowed (a learning rate above 0)."""

    def allows(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if self.whole and not isinstance(value, int):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (value > self.low if self.low_open else value >= self.low) and (self.high is None or value <= self.high)

    def in_words(self) -> str:
        """As a config file's error says it ("an integer from 1 to 10000", "a number in (0, 10]")."""
        if self.whole:
            top = f" to {_show(self.high)}" if self.high is not None else " up"
            return f"an integer from {_show(self.low)}{top}"
        top = "inf)" if self.high is None else f"{self.high:g}]"
        return f"a number in {'(' if self.low_open else '['}{self.low:g}, {top}"

    def check(self, option: str, value: int | float | None, hint: str = "") -> None:
        """Refuse `value` in one line naming `option`, as the command line says it (None: not given, passes)."""
        if value is None:
            return
        if not self.allows(value):
            if self.low_open:
                top = f" and at most {_show(self.high)}" if self.high is not None else ""
                bounds = f"above {_show(self.low)}{top}"
            elif self.high is not None:
                bounds = f"between {_show(self.low)} and {_show(self.high)}"
            else:
                bounds = f"at least {_show(self.low)}"
            shown = _show(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)
            raise UsageError(f"{option} must be {bounds}, got {shown}{hint}")


RANGES: dict[str, Range] = {
    # A search's training (the command line's --epochs ..., the service config's keys of the same names, and the
    # recipes a StudySettings is given).
    "epochs": Range(1, MAX_EPOCHS, whole=True),
    "final_epochs": Range(1, MAX_EPOCHS, whole=True),
    "batch_size": Range(1, MAX_BATCH_SIZE, whole=True),
    "learning_rate": Range(0, MAX_LEARNING_RATE, low_open=True),
    "seed": Range(0, MAX_SEED, whole=True),
    "budget_seconds": Range(MIN_BUDGET_SECONDS, MAX_BUDGET_SECONDS),
    # The most candidates a search trains (--candidates, the service's `candidates`): a bound that does not race
    # the machine, as a time budget does.
    "candidates": Range(1, 100_000, whole=True),
    # The time one inference may take on the chip (--latency, the service's `latency`, a target file's).
    "latency_seconds": Range(0, MAX_LATENCY_SECONDS, low_open=True),
    # Fine-tuning a served model (`recalibrate`'s Recipe; the service's rewear_* keys): a few dozen windows,
    # so smaller ceilings than a search's.
    "recalibrate_epochs": Range(1, 1000, whole=True),
    "recalibrate_batch_size": Range(1, 4096, whole=True),
    "recalibrate_repeat": Range(1, 1000, whole=True),
    "recalibrate_learning_rate": Range(1e-7, 1.0),
    "recalibrate_replay": Range(0, 100),
    "max_forgetting": Range(0, 1),
    "rewear_repetitions": Range(1, 20, whole=True),
    "rewear_unlabelled_seconds": Range(1.0, 600.0),
}
"""Every numeric option that more than one door reads (command line, service config, Python API), and its range:
the one table they all check against, each in its own words."""


def check_range(option: str, value: int | float | None, low: float, high: float | None = None,
                hint: str = "") -> None:
    """Refuse `value` outside [low, high] (None means "not given" and passes): an option only one door has."""
    Range(low, high).check(option, value, hint)


def _show(number: int | float) -> str:
    """A number for a one-line message: whole numbers exactly, a huge one by its size (never via float, which a
    400-digit integer overflows)."""
    if isinstance(number, int) and not isinstance(number, bool):
        return echoed(number)
    return str(int(number)) if math.isfinite(number) and float(number).is_integer() else f"{number:g}"


def check_latency(text: str | float | None, option: str = "--latency") -> float | None:
    """A time per inference as written ('250ms', '0.25s'), in seconds; None if not given; one line if unreadable."""
    if text is None:
        return None
    try:
        return parse_latency(text)
    except UnitError as exc:
        raise UsageError(f"{option}: {exc}") from None


def check_positive(option: str, value: float, hint: str = "") -> None:
    """A finite number above zero (a rate, a speed, a period)."""
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{option} must be a number above 0, got {value}{hint}")


def check_probability(option: str, value: float) -> None:
    """A probability: 0 to 1."""
    if not (math.isfinite(value) and 0 <= value <= 1):
        raise UsageError(f"{option} must be a probability between 0 and 1, got {value}")


def parse_workers(text: str) -> int | str:
    """`--workers`: "auto" (`tinynas.machine.auto_workers` picks from the cores and free memory) or a count."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise UsageError(f"--workers must be auto or a whole number, got {echoed(text)}") from None


def check_workers(workers: int | str, threads: int) -> None:
    """At least one worker and thread; refuse more of either than the machine has cores.

    Each worker trains one candidate at a time in its own process; more workers than cores only
    time-slice, so every candidate gets less of its budget and the search finds less (refused, not
    capped, so that what runs is what was asked for). "auto" is within the cores by construction.
    """
    n = cores()
    check_range("--threads", threads, 1)
    if threads > n:
        raise UsageError(f"--threads {_show(threads)} is more than this machine's {n} core(s) (use --threads {n} or "
                         f"fewer)")
    if workers == "auto":
        return
    if isinstance(workers, str):
        raise UsageError(f"--workers must be auto or a whole number, got {workers!r}")
    check_range("--workers", workers, 1)
    check_range("--threads", threads, 1)
    if workers > n:
        raise UsageError(f"--workers {_show(workers)} is more than this machine's {n} core(s): each worker trains on "
                         f"its own core (use --workers {n} or fewer, or auto)")


def check_seed(seed: int) -> None:
    """A seed NumPy and TensorFlow accept."""
    RANGES["seed"].check("--seed", seed)


def check_budget(text: str) -> float:
    """The time budget in seconds: readable, at least a second, at most a month."""
    try:
        seconds = parse_duration(text)
    except UnitError as exc:
        raise UsageError(f"--budget: {exc}") from None
    if seconds < RANGES["budget_seconds"].low:
        raise UsageError(f"--budget {echoed(text)} is less than a second: no candidate can train (use e.g. 90s, "
                         f"30m)")
    if seconds > (RANGES["budget_seconds"].high or math.inf):
        raise UsageError(f"--budget {echoed(text)} is more than 30 days (a typo? use e.g. 90s, 30m, 2h)")
    return seconds


def check_training(epochs: int | None, batch_size: int | None, learning_rate: float | None,
                   final_epochs: int | None) -> None:
    """Epochs, batch size and learning rate when given; 0 is refused, never read as "unset"."""
    RANGES["epochs"].check("--epochs", epochs)
    RANGES["batch_size"].check("--batch-size", batch_size)
    RANGES["learning_rate"].check("--learning-rate", learning_rate, " (e.g. 0.001)")
    RANGES["final_epochs"].check("--final-epochs", final_epochs)


def check_c_prefix(prefix: str) -> None:
    """--c-prefix: a name the generated C can start its identifiers with."""

    try:
        check_prefix(prefix)
    except CNameError as exc:
        raise UsageError(f"--c-prefix: {exc}") from None
