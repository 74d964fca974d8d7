"""Does a collection plan's window fit the target? Checked before anyone spends time collecting.

The smallest network of the space, A(1, 0), needs RAM in proportion to the window length; a window
longer than the target can hold leaves the search nothing to train (issue 16: 6,000 samples need 12.6 KiB
even for A(1,0) on a 6 KiB STM32C011F6P6). A gesture window is one whole movement and cannot be cut, so
such a plan is refused with the longest window that would fit. A continuous recording (a machine state)
is cut into windows sized for the target and the sensor (`continuous_window`: the benchmarks' 512 samples
at 12 kHz, not the longest window A(1,0) could take, which would leave the search no room: issue 31).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tinynas.anomaly.task import SPLIT_FRACTIONS
from tinynas.anomaly.threshold import windows_needed
from tinynas.cost.budget import Budget, tflm_fits
from tinynas.errors import UsageError
from tinynas.modes import Runtime
from tinynas.space import Architecture
from tinynas.units import kib

MIN_WINDOW = 16
"""Shorter windows than this are too short to classify anything: a plan that needs them is refused."""


class PlanDoesNotFit(UsageError):
    """A plan whose windows no network of the space can take on the target."""


def _smallest_fits(budget: Budget, length: int, channels: int, classes: int) -> bool:
    return budget.fits(Architecture(length, channels, classes, k=1, c=0))


def longest_fitting_window(budget: Budget, length: int, channels: int, classes: int) -> int:
    """The longest window <= `length` samples on which A(1,0) fits `budget`; 0 if none does.

    RAM and MACs grow with the window, so the fitting lengths are a prefix: a bisection finds its end.
    """
    if _smallest_fits(budget, length, channels, classes):
        return length
    if not _smallest_fits(budget, 1, channels, classes):
        return 0
    low, high = 1, length  # fits at low, not at high
    while high - low > 1:
        middle = (low + high) // 2
        if _smallest_fits(budget, middle, channels, classes):
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


VIBRATION_WINDOW_SECONDS = 512 / 12000
"""About 43 ms of vibration per window: the benchmarks' 512 samples at 12 kHz, a few bearing-defect impacts at
shaft speeds of 1,000-3,600 rpm."""


def continuous_window(budget: Budget, channels: int, classes: int, sample_rate_hz: float) -> int:
    """The window a continuous plan is searched on when it names none: VIBRATION_WINDOW_SECONDS of signal at
    the sensor's rate as a power of two, halved until it leaves the search room on the target (the longest
    window A(1,0) fits, halved, so that networks larger than the smallest fit too); 0 if none fits."""
    wanted = max(MIN_WINDOW, VIBRATION_WINDOW_SECONDS * sample_rate_hz)
    window = 1 << int(math.log2(wanted) + 1e-9)
    longest = longest_fitting_window(budget, 2 * window, channels, classes)
    while window > MIN_WINDOW and window > max(MIN_WINDOW, longest // 2):
        window //= 2
    return window if window <= longest else 0


def check_plan_fits(plan, budget: Budget, channels: int, sample_rate_hz: float,
                    false_alarm_rate: float = 0.01) -> PlanFit:
    """How a plan's windows fit `budget`, or PlanDoesNotFit in one line saying which
    window would. An anomaly plan must also record enough windows to set its threshold for `false_alarm_rate`."""
    recorded = int(round(plan.window_seconds * sample_rate_hz))
    anomaly = getattr(plan, "task", "classify") == "anomaly"
    classes = 2 if anomaly else len(plan.classes)  # a scorer has two outputs: normal and synthetic anomalies
    target = budget.target
    if budget.runtime == Runtime.TFLM and (why := tflm_fits(target)) is not None:
        # No window fits a chip that cannot hold TFLite Micro itself: say that, not "no window fits".
        raise PlanDoesNotFit(f"target {target.name} cannot hold TFLite Micro: {why}, before any model; set "
                             f'runtime = "auto" (or "c", tinynas\'s C runtime) in the config')
    if plan.kind == "continuous":
        fit = _continuous_fit(plan, budget, recorded, channels, classes, sample_rate_hz)
        if anomaly:
            _check_calibration(plan, fit, sample_rate_hz, false_alarm_rate)
        return fit
    window = longest_fitting_window(budget, recorded, channels, classes)
    if window == recorded:
        return PlanFit(recorded, recorded, recorded)
    need = budget.estimate(Architecture(recorded, channels, classes, k=1, c=0))
    what = (f"plan {plan.name} records {recorded}-sample windows ({plan.window_seconds:g} s at "
            f"{sample_rate_hz:g} Hz) x {channels} channel(s); on {target.name} even the smallest network A(1,0) "
            f"needs {kib(need.peak_ram_bytes)} RAM, {kib(need.flash_bytes)} flash, {need.macs:,} MACs "
            f"(the target has {kib(target.ram_bytes)}, {kib(target.flash_bytes)}, {target.mac_budget:,})")
    if window < MIN_WINDOW:
        raise PlanDoesNotFit(f"{what}: no window of {MIN_WINDOW} samples or more fits; choose a larger target "
                             f"or fewer channels")
    raise PlanDoesNotFit(f"{what}: use windows of at most {window} samples "
                         f"(window_seconds = {window / sample_rate_hz:.3g} in a plan file) or a larger target")


def _continuous_fit(plan, budget: Budget, recorded: int, channels: int, classes: int,
                    sample_rate_hz: float) -> PlanFit:
    """A continuous plan's segments cut into target-sized windows: the plan's window_samples, else the one
    chosen for the target and the sensor; the hop is the plan's, else half a window (the split keeps the
    windows of one segment together, so the overlap cannot leak into the test set)."""
    where = f"plan {plan.name} on {budget.target.name} ({channels} channel(s) at {sample_rate_hz:g} Hz)"
    if plan.window_samples:
        window = plan.window_samples
        if window < MIN_WINDOW:
            raise PlanDoesNotFit(f"{where}: window_samples = {window}, at least {MIN_WINDOW} samples")
        if not _smallest_fits(budget, window, channels, classes):
            longest = longest_fitting_window(budget, window, channels, classes)
            raise PlanDoesNotFit(f"{where}: even the smallest network does not fit {window}-sample windows; "
                                 f"use window_samples <= {longest} or a larger target")
    else:
        window = continuous_window(budget, channels, classes, sample_rate_hz)
        if window < MIN_WINDOW:
            raise PlanDoesNotFit(f"{where}: no window of {MIN_WINDOW} samples or more fits; choose a larger target "
                                 f"or fewer channels")
    if window > recorded:
        raise PlanDoesNotFit(f"{where}: its {recorded}-sample segments (window_seconds = {plan.window_seconds:g}) "
                             f"are shorter than one {window}-sample window; record longer segments")
    hop = plan.hop_samples or max(1, window // 2)
    if getattr(plan, "task", "classify") == "anomaly" and not plan.hop_samples:
        hop = thinned_hop(plan.repetitions * plan.segments, recorded, window, hop)
    return PlanFit(recorded, window, hop)


SCORER_WINDOWS = 2048
"""The most normal windows an anomaly plan's search cuts from its recording (the hop raised to keep under it).
3 minutes of a motor at 12 kHz in 512-sample windows at half a window's hop are 8,280 windows: the service's
search (fast, 10 minutes) took 329 s here for its 10 candidates, which on a Pi 3-6x slower leaves 3-6 of them in
the budget; thinned to 1,980 windows, 150 s here (6.7-10 on a Pi), and the winner detected the held-out faults as
well (`benchmarks/results/scorer-budget.md`). A scorer learns from these and as many synthetic anomalies."""


def thinned_hop(segments: int, recorded: int, window: int, hop: int) -> int:
    """`hop`, raised until `segments` recordings of `recorded` samples give at most SCORER_WINDOWS windows of
    `window` samples (the windows then overlap less, or not at all: the recording is thinned, not cut short)."""
    per_segment = (recorded - window) // hop + 1
    if segments * per_segment <= SCORER_WINDOWS:
        return hop
    wanted = SCORER_WINDOWS // max(segments, 1)
    if wanted <= 1:
        return max(hop, recorded)
    # The smallest hop with (recorded - window) // hop + 1 <= wanted windows per segment.
    return max(hop, (recorded - window) // wanted + 1)


def _check_calibration(plan, fit: PlanFit, sample_rate_hz: float, rate: float) -> None:
    """PlanDoesNotFit unless the plan's normal running gives enough held-out windows for the threshold: the
    anomaly split holds out its latest 30 % (tinynas.anomaly.task.SPLIT_FRACTIONS)."""

    per_segment = (fit.recorded - fit.window) // fit.hop + 1
    held_out = int(plan.repetitions * plan.segments * per_segment * SPLIT_FRACTIONS[2])
    need = windows_needed(rate)
    if held_out < need:
        seconds = plan.repetitions * plan.block_seconds
        wanted = math.ceil(seconds * need / max(held_out, 1))
        raise PlanDoesNotFit(f"plan {plan.name} records {seconds:g} s of normal running: about {held_out} held-out "
                             f"windows of {fit.window} samples, and a threshold for {rate:.3g} false alarms needs "
                             f"{need}; record at least {wanted} s (raise hold_seconds or repetitions), or set "
                             f"false_alarm_rate to at least {1 / (held_out + 1):.3g}")
