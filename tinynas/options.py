"""Option values checked at the command-line boundary, before any data is loaded or any file written.

argparse checks types (an integer is an integer); this module checks ranges and the things a
typo should never reach: a study folder half-made by `--workers 0`, 100 epochs trained for
`--epochs 0`, eight TensorFlow workers started on two cores. Each check raises a one-line
`UsageError` naming the option, the value and what to give instead.
"""

from __future__ import annotations

import math
import os

from tinynas.errors import UsageError

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


def check_range(option: str, value: int | float | None, low: float, high: float | None = None,
                hint: str = "") -> None:
    """Refuse `value` outside [low, high] (None means "not given" and passes)."""
    if value is None:
        return
    if isinstance(value, float) and not math.isfinite(value):
        raise UsageError(f"{option} must be a finite number, got {value}")
    if value < low or (high is not None and value > high):
        bounds = f"between {_show(low)} and {_show(high)}" if high is not None else f"at least {_show(low)}"
        raise UsageError(f"{option} must be {bounds}, got {_show(value)}{hint}")


def _show(number: int | float) -> str:
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


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
        raise UsageError(f"--workers must be auto or a whole number, got {text!r}") from None


def check_workers(workers: int | str, threads: int) -> None:
    """At least one worker and thread; refuse more of either than the machine has cores.

    Each worker trains one candidate at a time in its own process; more workers than cores only
    time-slice, so every candidate gets less of its budget and the search finds less (refused, not
    capped, so that what runs is what was asked for). "auto" is within the cores by construction.
    """
    n = cores()
    check_range("--threads", threads, 1)
    if threads > n:
        raise UsageError(f"--threads {threads} is more than this machine's {n} core(s) (use --threads {n} or fewer)")
    if workers == "auto":
        return
    if isinstance(workers, str):
        raise UsageError(f"--workers must be auto or a whole number, got {workers!r}")
    check_range("--workers", workers, 1)
    check_range("--threads", threads, 1)
    if workers > n:
        raise UsageError(f"--workers {workers} is more than this machine's {n} core(s): each worker trains on its "
                         f"own core (use --workers {n} or fewer, or auto)")


def check_seed(seed: int) -> None:
    """A seed NumPy and TensorFlow accept."""
    check_range("--seed", seed, 0, MAX_SEED)


def check_budget(text: str) -> float:
    """The time budget in seconds: readable, at least a second, at most a month."""
    from tinynas.units import UnitError, parse_duration

    try:
        seconds = parse_duration(text)
    except UnitError as exc:
        raise UsageError(f"--budget: {exc}") from None
    if seconds < MIN_BUDGET_SECONDS:
        raise UsageError(f"--budget {text} is less than a second: no candidate can train (use e.g. 90s, 30m)")
    if seconds > MAX_BUDGET_SECONDS:
        raise UsageError(f"--budget {text} is more than 30 days (a typo? use e.g. 90s, 30m, 2h)")
    return seconds


def check_training(epochs: int | None, batch_size: int | None, learning_rate: float | None,
                   final_epochs: int | None) -> None:
    """Epochs, batch size and learning rate when given; 0 is refused, never read as "unset"."""
    check_range("--epochs", epochs, 1, MAX_EPOCHS)
    check_range("--batch-size", batch_size, 1, MAX_BATCH_SIZE)
    if learning_rate is not None and not (math.isfinite(learning_rate) and 0 < learning_rate <= MAX_LEARNING_RATE):
        raise UsageError(f"--learning-rate must be above 0 and at most {MAX_LEARNING_RATE:g}, got {learning_rate}"
                         " (e.g. 0.001)")
    check_range("--final-epochs", final_epochs, 1, MAX_EPOCHS)


def check_c_prefix(prefix: str) -> None:
    """--c-prefix: a name the generated C can start its identifiers with."""
    from tinynas.deploy.c_codegen import CodegenError, check_prefix

    try:
        check_prefix(prefix)
    except CodegenError as exc:
        raise UsageError(f"--c-prefix: {exc}") from None
