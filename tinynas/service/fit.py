"""Does a collection plan's window fit the target? Checked before anyone spends time collecting.

The smallest network of the space, A(1, 0), needs RAM in proportion to the window length; a window
longer than the target can hold leaves the search nothing to train (issue 16: bearing4 records 6,000
samples, and even A(1,0) then needs 12.6 KiB on a 6 KiB STM32C011F6P6). A gesture window is one
whole movement and cannot be cut, so such a plan is refused with the longest window that would fit;
a continuous recording (a machine state) can be, so the service searches on windows of that length.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinynas.cost.estimate import estimate
from tinynas.cost.targets import Target, kib
from tinynas.errors import UsageError
from tinynas.space import Architecture

MIN_WINDOW = 16
"""Shorter windows than this are too short to classify anything: a plan that needs them is refused."""


class PlanDoesNotFit(UsageError):
    """A plan whose windows no network of the space can take on the target."""


def _smallest_fits(target: Target, length: int, channels: int, classes: int, runtime: str = "tflm") -> bool:
    return estimate(Architecture(length, channels, classes, k=1, c=0), runtime=runtime).fits(target)


def longest_fitting_window(target: Target, length: int, channels: int, classes: int, runtime: str = "tflm") -> int:
    """The longest window <= `length` samples on which A(1,0) fits `target`; 0 if none does.

    RAM and MACs grow with the window, so the fitting lengths are a prefix: a bisection finds its end.
    """
    if _smallest_fits(target, length, channels, classes, runtime):
        return length
    if not _smallest_fits(target, 1, channels, classes, runtime):
        return 0
    low, high = 1, length  # fits at low, not at high
    while high - low > 1:
        middle = (low + high) // 2
        if _smallest_fits(target, middle, channels, classes, runtime):
            low = middle
        else:
            high = middle
    return low


@dataclass(frozen=True)
class PlanFit:
    """What the search will train on: the recorded window, or a shorter one cut from the recordings."""

    recorded: int       # samples per recorded window
    window: int         # samples per window the search uses
    hop: int            # samples between the starts of cut windows (== window when nothing is cut)

    @property
    def cut(self) -> bool:
        """True when recordings are re-cut into shorter windows."""
        return self.window < self.recorded


def check_plan_fits(plan, target: Target, channels: int, sample_rate_hz: float, runtime: str = "tflm") -> PlanFit:
    """How a plan's windows fit `target` with `runtime`'s budget, or PlanDoesNotFit in one line saying which
    window would."""
    recorded = int(round(plan.window_seconds * sample_rate_hz))
    classes = len(plan.classes)
    window = longest_fitting_window(target, recorded, channels, classes, runtime)
    if window == recorded:
        return PlanFit(recorded, recorded, recorded)
    need = estimate(Architecture(recorded, channels, classes, k=1, c=0), runtime=runtime)
    what = (f"plan {plan.name} records {recorded}-sample windows ({plan.window_seconds:g} s at "
            f"{sample_rate_hz:g} Hz) x {channels} channel(s); on {target.name} even the smallest network A(1,0) "
            f"needs {kib(need.peak_ram_bytes)} RAM, {kib(need.flash_bytes)} flash, {need.macs:,} MACs "
            f"(the target has {kib(target.ram_bytes)}, {kib(target.flash_bytes)}, {target.mac_budget:,})")
    if window < MIN_WINDOW:
        raise PlanDoesNotFit(f"{what}: no window of {MIN_WINDOW} samples or more fits; choose a larger target "
                             f"or fewer channels")
    if plan.kind != "continuous":
        raise PlanDoesNotFit(f"{what}: use windows of at most {window} samples "
                             f"(window_seconds = {window / sample_rate_hz:.3g} in a plan file) or a larger target")
    # Half-overlapping windows: twice the training windows from the same recording; the split keeps
    # windows of one recording together, so the overlap cannot leak into the test set.
    return PlanFit(recorded, window, max(1, window // 2))
