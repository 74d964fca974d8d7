"""A faster search: race the budget frontier with the final recipe, so that nothing is trained twice.

What the method spends its time on, and what this strategy does instead:

- It trains every (k, c) of every row it visits. Every winner measured here sat on the budget
  frontier (for its cell count, the widest stem that still fits: a tiny network gains accuracy with
  every filter it can afford), so this strategy proposes only the frontier, one candidate per
  feasible cell count: at most max_c + 1 candidates whatever the target's size.
- It trains each candidate for 100 epochs with the search recipe, then retrains the winner with
  the final recipe. Here every frontier candidate is trained once, with this strategy's own final recipe
  (FAST_RECIPE: 50 epochs, the rate falling along a cosine), on all training windows, and stops after
  FINAL_PATIENCE epochs without progress or, from its first verdict on (epoch 10), as soon as its
  learning curve can no longer beat the best candidate so far (`tinynas.training.curve_stop`, with the
  incumbent read live while candidates train in parallel). The study exports the winner as trained. The
  recipe and the stopping rule were chosen by replaying the race on recorded curves
  (`benchmarks/results/race-stopping.md` and `race-stopping-cosine50.md`): a shorter patience lost
  accuracy on ISL.
- Candidates go largest-compute first (multiply-accumulates per window, ties to fewer cells): the
  likeliest winners finish first and set the incumbent that stops the others early.

No proxy ranks the candidates. The proxies measured for this (`benchmarks/results/proxies-*.md`)
kept Kendall tau >= 0.8 only over architectures of very different sizes; among the frontier's
near-equal candidates a 25 % subset screening was close to chance on ISL (validation accuracy
0.1-0.2 for every candidate after 30 epochs, so the method's winner A(8,1) never reached the final
rung: `benchmarks/results/strategies-isl.md`, first run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from tinynas.cost.estimate import macs
from tinynas.search.base import Proposal, Strategy
from tinynas.space import Architecture
from tinynas.trial import Fidelity, Trial

FINAL_PATIENCE = 20
"""Epochs without a better validation loss before a candidate stops."""
FAST_RECIPE = Fidelity(epochs=50, batch_size=16, learning_rate=0.01, schedule="cosine")
"""`fast`'s own final recipe, which it races with: 50 epochs, the rate falling from the method's 0.01 along a
cosine. Replayed on the recorded curves of every raced candidate (four settings x four seeds,
benchmarks/results/race-stopping-cosine50.md), the race's winners scored -0.4 to +2.3 points (mean per setting,
float test accuracy) against the method's 100 epochs at a constant 0.01, with 18-34 % less training; the
annealed rate is what lets a shorter training reach it (the constant rate cut at 60 epochs lost up to a point)."""


class FastStrategy(Strategy):
    """Frontier candidates, largest compute first, raced with the final recipe and curve stopping."""

    name = "fast"
    default_fidelity = Fidelity(epochs=100, batch_size=16, learning_rate=1e-3)

    @classmethod
    def final_recipe(cls, epochs: int | None = None) -> Fidelity:
        return FAST_RECIPE if epochs is None else replace(FAST_RECIPE, epochs=epochs)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.is_feasible is None:
            raise ValueError("the fast strategy needs the cost model's feasibility check")
        self.race = replace(self.final_fidelity or self.fidelity, subset=1.0, patience=FINAL_PATIENCE,
                            curve_stop=True)
        self._queue: list[tuple[int, int, int]] | None = None
        """The frontier still to race, found on first use (a constructor stores; the cost model runs later)."""
        self._pending: set[tuple[int, int, int]] = set()

    def _remaining(self) -> list[tuple[int, int, int]]:
        if self._queue is None:
            assert self.is_feasible is not None  # checked when made
            self._queue = self._frontier(self.is_feasible)
        return self._queue

    def _frontier(self, is_feasible: Callable[[Architecture], bool]) -> list[tuple[int, int, int]]:
        """For every kernel size and feasible cell count the widest feasible stem, largest compute first.

        Every k is checked: feasibility is not monotone in k (memory alignment; on an LSM6DSO16IS
        with 400 x 8 windows A(8,1) fits and A(7,1) does not).
        """
        frontier = []
        for kernel in self.space.kernels:
            for c in range(self.space.max_c + 1):
                fitting = [k for k in range(1, self.space.max_k + 1)
                           if is_feasible(self.space.architecture(k, c, kernel))]
                if fitting:
                    frontier.append((max(fitting), c, kernel))
        return sorted(frontier, key=lambda kck: (-macs(self.space.architecture(*kck)), kck[1], kck[2]))

    @property
    def finished(self) -> bool:
        return not self._remaining() and not self._pending

    def ask(self) -> Proposal | None:
        queue = self._remaining()
        if not queue:
            return None
        k, c, kernel = queue.pop(0)
        self._pending.add((k, c, kernel))
        return Proposal(self.space.architecture(k, c, kernel), self.race)

    def tell(self, trial: Trial) -> None:
        # The study ranks the raced candidates itself (lowest objective); only completion matters here.
        if trial.fidelity == self.race:
            self._pending.discard((trial.architecture.k, trial.architecture.c, trial.architecture.kernel_size))
