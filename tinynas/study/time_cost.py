"""What a time budget cost the search, in words a user can act on: of the architectures the chip's RAM, flash and
MAC budgets allow, how many keep the time per inference, and the budget (a longer hop, or a chip that many times as
fast) that would let every one of them compete.

The latency benchmark (benchmarks/results/latency.md) measured the price: 26 signs at 10 MHz in a 0.25 s hop lost
55 points of accuracy. The search cannot say what a refused architecture would have scored (it never trains one),
but it can say how much of the space the hop closed and what would open it: the page and the report show it."""

from __future__ import annotations

from collections.abc import Callable

from tinynas.cost.budget import Budget
from tinynas.cost.latency import TIME_HEADROOM
from tinynas.search.base import SearchSpace


def time_cost(budget: Budget, space: SearchSpace) -> dict | None:
    """{"memory": architectures its RAM, flash and MAC budgets allow, "time": those that also keep the time budget,
    "all_at_seconds": the time budget at which all of them would (the slowest one's estimate with the headroom)};
    None when time is not budgeted or not estimated.

    RAM, flash and time all grow with k at a given kernel size and cell count, so each (kernel, cells) row is two
    bisections over k: a few hundred estimates, pure Python, once per search, where walking the space took seconds
    (tests/study/test_time_cost.py checks the counts against the whole space)."""
    if budget.latency_seconds is None:
        return None
    memory = kept = 0
    slowest = 0.0
    for kernel in space.kernels:
        for cells in range(space.max_c + 1):
            def cost(k: int, kernel: int = kernel, cells: int = cells):
                return budget.estimate(space.architecture(k, cells, kernel))

            fits = _last(space.max_k, lambda k: not cost(k).violations(budget.target))
            if not fits:
                continue
            seconds = budget.seconds(cost(fits))
            if seconds is None:
                return None
            memory += fits
            kept += _last(fits, lambda k: not budget.check(cost(k)))
            slowest = max(slowest, seconds)
    if not memory:
        return None
    return {"memory": memory, "time": kept, "all_at_seconds": round(slowest * TIME_HEADROOM, 6)}


def _last(high: int, holds: Callable[[int], bool]) -> int:
    """The largest k in 1..high for which `holds` (true up to some k, false after it), or 0."""
    low = 0  # holds(low) is true or low is 0
    while low < high:
        middle = (low + high + 1) // 2
        if holds(middle):
            low = middle
        else:
            high = middle - 1
    return low


def time_cost_words(section: dict | None, latency_seconds: float | None) -> str:
    """'the 250 ms budget kept 133 of the 775 architectures its RAM, flash and MAC budgets allow: all of them would
    compete at 2,624 ms per inference (a longer hop) or on a chip 10.5x as fast' ('' when there is nothing to say)."""
    if not section or latency_seconds is None:
        return ""
    memory, kept, needed = section.get("memory"), section.get("time"), section.get("all_at_seconds")
    if not (isinstance(memory, int) and isinstance(kept, int) and isinstance(needed, (int, float))):
        return ""
    budget = f"the {1000 * latency_seconds:,.0f} ms budget"
    if kept >= memory:
        return f"{budget} kept all {memory} architectures its RAM, flash and MAC budgets allow"
    return (f"{budget} kept {kept} of the {memory} architectures its RAM, flash and MAC budgets allow: all of them "
            f"would compete at {1000 * needed:,.0f} ms per inference (a longer hop) or on a chip "
            f"{needed / latency_seconds:.1f}x as fast")
