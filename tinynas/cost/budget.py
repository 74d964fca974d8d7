"""`Budget`: what a model must fit, as one value: the chip's budgets, the runtime that runs it, the rule that
counts it, and the time one inference may take.

A target alone does not say whether a network fits: TFLite Micro's interpreter takes RAM and flash of its own, the
generated C runtime does not, and the method's accounting counts another arena. So the search, the feasibility
check of every proposal, the report's chart and the adaptation's re-check take one `Budget`, never a target with a
runtime and an accounting travelling beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinynas.cost.estimate import Cost, estimate
from tinynas.cost.latency import TIME_HEADROOM
from tinynas.cost.runtime import (
    DEFAULT_ACCOUNTING,
    DEFAULT_RUNTIME,
    RuntimeChoice,
    check_accounting,
    check_runtime,
    resolve_runtime,
)
from tinynas.cost.targets import Target
from tinynas.errors import TinynasError
from tinynas.modes import Accounting, Runtime
from tinynas.space import Architecture
from tinynas.units import kib


class BudgetError(TinynasError, ValueError):
    """A target budget that no architecture of the space can meet."""


@dataclass(frozen=True)
class Budget:
    """A target's RAM, flash and MAC budgets, counted for `runtime` (concrete: "c" or "tflm") by `accounting`."""

    target: Target
    runtime: Runtime
    accounting: Accounting
    reason: str = ""
    """Why this runtime (`--runtime auto` resolved against the target, or the option asked for)."""
    latency_seconds: float | None = None
    """The most one inference may take at the target's clock (`--latency`, the service's hop), the estimate with
    TIME_HEADROOM; None: time is not budgeted."""

    def __post_init__(self) -> None:
        # Strings from a card or a journal become the modes; an unknown one is refused where the value is made.
        object.__setattr__(self, "runtime", Runtime(check_runtime(self.runtime)))
        object.__setattr__(self, "accounting", Accounting(check_accounting(self.accounting, self.runtime)))
        if self.latency_seconds is not None:
            if not self.target.clock_mhz:
                raise BudgetError(f"target {self.target.name} has no clock, so time per inference cannot be "
                                  f"budgeted: add clock_mhz = <MHz> to its target file (or leave out --latency)")
            if self.runtime == Runtime.TFLM:
                raise BudgetError("time per inference (--latency) is budgeted for tinynas's generated C runtime; "
                                  "TFLite Micro's reference kernels are not timed here: use --runtime c or auto")

    @classmethod
    def resolve(cls, target: Target, runtime: str = DEFAULT_RUNTIME, accounting: str = DEFAULT_ACCOUNTING,
                latency_seconds: float | None = None) -> Budget:
        """The budget for `runtime` as asked (auto, c or tflm) on `target`, with at most `latency_seconds` per
        inference (None: the target file's `latency`, if any): one line (UsageError) if it cannot be."""
        choice = resolve_runtime(runtime, target, accounting)
        latency = latency_seconds if latency_seconds is not None else target.latency_seconds
        return cls(target, Runtime(choice.runtime), Accounting(choice.accounting), choice.reason, latency)

    def estimate(self, arch: Architecture) -> Cost:
        """The cost model's figures for `arch` on this target's core, for this runtime, counted this way."""
        return estimate(arch, runtime=self.runtime, accounting=self.accounting, core=self.target.core)

    def seconds(self, cost: Cost) -> float | None:
        """The estimated time of one inference at the target's clock (None: no clock, or no time model)."""
        if not self.target.clock_mhz or cost.cycles <= 0:
            return None
        return cost.cycles / (self.target.clock_mhz * 1e6)

    def check(self, cost: Cost) -> list[str]:
        """Why a candidate of estimated `cost` does not fit: RAM, flash, MACs, and time ([] if it fits)."""
        found = cost.violations(self.target)
        seconds = self.seconds(cost)
        if self.latency_seconds is not None and seconds is not None and seconds * TIME_HEADROOM > self.latency_seconds:
            found.append(f"time {1000 * seconds:,.1f} ms per inference at {self.target.clock_mhz:g} MHz "
                         f"(+{100 * (TIME_HEADROOM - 1):.0f} % headroom) > {1000 * self.latency_seconds:g} ms")
        return found

    def violations(self, arch: Architecture) -> list[str]:
        """Why `arch` does not fit, in words ([] if it fits)."""
        return self.check(self.estimate(arch))

    def time_section(self, cost: Cost) -> dict:
        """What a card keeps of the time budget and the model's estimate (`ModelCard.time`)."""
        return {"latency_seconds": self.latency_seconds, "headroom": TIME_HEADROOM, "seconds": self.seconds(cost),
                "basis": cost.time_basis}

    def fits(self, arch: Architecture) -> bool:
        return not self.violations(arch)

    def choice(self) -> RuntimeChoice:
        """The runtime, the accounting and the reason (the card's `runtime_choice`)."""
        return RuntimeChoice(str(self.runtime), str(self.accounting), self.reason)

    def check_space_fits(self, input_length: int, input_channels: int, classes: int) -> None:
        """BudgetError in one line if even the smallest architecture, A(1, 0), misses the target.

        When TFLite Micro's own code, static RAM and stack leave no room for any model, the message says so and
        points to the C runtime: the chip cannot hold TFLite Micro at all.
        """
        target = self.target
        cost = self.estimate(Architecture(input_length, input_channels, classes, k=1, c=0))
        problems = self.check(cost)
        if not problems:
            return
        if self.runtime == Runtime.TFLM and cost.code_bytes + cost.interpreter_ram_bytes:
            interpreter = tflm_overhead_violations(cost, target)
            if interpreter:
                raise BudgetError(f"target {target.name} cannot hold TFLite Micro: {'; '.join(interpreter)}, "
                                  f"before any model; use --runtime c (or auto), tinynas's C runtime")
        # Said only for the C runtime, so that the TFLite Micro message reads as it always has.
        where = " with the C runtime" if self.runtime == Runtime.C else ""
        raise BudgetError(
            f"target {target.name} cannot hold even the smallest network A(1,0) for "
            f"{input_length}x{input_channels} input and {classes} classes{where}: {'; '.join(problems)}")


def tflm_overhead_violations(cost: Cost, target: Target) -> list[str]:
    """Why TFLite Micro itself (its code; its static RAM and stack) does not fit `target`, or []."""
    found = []
    ram = cost.interpreter_ram_bytes + cost.stack_bytes
    if ram >= target.ram_bytes:
        found.append(f"its static RAM and stack take {kib(ram)} of {kib(target.ram_bytes)} RAM")
    if cost.code_bytes >= target.flash_bytes:
        found.append(f"its code takes {kib(cost.code_bytes)} of {kib(target.flash_bytes)} flash")
    return found


def tflm_fits(target: Target, accounting: str = DEFAULT_ACCOUNTING) -> str | None:
    """None if `target` can hold TFLite Micro and a model; else why not, in words."""
    cost = Budget(target, Runtime.TFLM, Accounting(accounting)).estimate(Architecture(1, 1, 2, k=1, c=0))
    problems = tflm_overhead_violations(cost, target)
    return "; ".join(problems) if problems else None
