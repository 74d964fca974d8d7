"""A strategy that proposes given architectures in order: for callers whose subject is not the search (a test of the
final stage, of serving, of a sweep's bookkeeping), as Optuna's `FixedSampler` fixes parameters. Passed to `Study` as
an instance (`strategy=FixedCandidates(((2, 1), (3, 0)))`), never named on the command line."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tinynas.search.base import Proposal, SearchSpace, Strategy
from tinynas.trial import Fidelity, Trial


class FixedStrategy(Strategy):
    """Proposes each of its (k, c) in order, once; learns nothing from the results."""

    name = "fixed"
    default_fidelity = Fidelity(epochs=4, batch_size=16, learning_rate=3e-3)

    def __init__(self, space: SearchSpace, candidates: Sequence[tuple[int, int]] = (), **kwargs) -> None:
        super().__init__(space, **kwargs)
        self._queue = [space.architecture(k, c) for k, c in candidates]  # SpecError for one outside the space
        self._position = 0

    @property
    def finished(self) -> bool:
        return self._position >= len(self._queue)

    def ask(self) -> Proposal | None:
        if self.finished:
            return None
        self._position += 1
        return Proposal(self._queue[self._position - 1], self.fidelity)

    def tell(self, trial: Trial) -> None:
        """Nothing to learn: the candidates were fixed."""


@dataclass(frozen=True)
class FixedCandidates:
    """The choice of a fixed strategy, as `StudySettings.strategy` holds it: the study makes the strategy on its
    space (`make`); its name (`fixed:2x1,3x0`) is what the journal and card record."""

    candidates: tuple[tuple[int, int], ...]

    def __post_init__(self) -> None:
        if not self.candidates or not all(isinstance(k, int) and isinstance(c, int) for k, c in self.candidates):
            raise ValueError(f"fixed candidates are (k, c) pairs of whole numbers, got {self.candidates!r}")

    def __str__(self) -> str:
        return "fixed:" + ",".join(f"{k}x{c}" for k, c in self.candidates)

    def make(self, space: SearchSpace, **kwargs) -> FixedStrategy:
        return FixedStrategy(space, self.candidates, **kwargs)
