"""The ask/tell interface every search strategy implements.

A strategy only decides what to try next. It never trains, never touches files and never
sees the clock: the study checks each proposal against the budget (telling the strategy at
once when it is infeasible), trains the feasible ones and tells it the results. A strategy
is deterministic given its seed and the results it is told, so replaying the journal
rebuilds its state exactly (resume = replay + continue).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, replace

from tinynas.space import Architecture, SpecError, max_cells
from tinynas.trial import Fidelity, Trial


@dataclass(frozen=True)
class SearchSpace:
    """The A(k, c) family on one input shape, with the neighbour options fixed."""

    input_length: int
    input_channels: int
    classes: int
    kernel_size: int = 3
    growth: str = "half"
    channel_multiple: int = 1
    max_k: int = 256
    kernel_sizes: tuple[int, ...] = ()
    """Kernel sizes a strategy may also try (the `fast` strategy races each); () = only `kernel_size`.
    A wide kernel is the usual remedy for vibration recorded at another speed (benchmarks/shift.py)."""

    @property
    def kernels(self) -> tuple[int, ...]:
        """Every kernel size of the space, `kernel_size` first."""
        return (self.kernel_size,) + tuple(k for k in self.kernel_sizes if k != self.kernel_size)

    @property
    def max_c(self) -> int:
        """Most cells the input length allows."""
        return max_cells(self.input_length)

    def contains(self, k: int, c: int) -> bool:
        """True if A(k, c) is a valid member of this space."""
        return 1 <= k <= self.max_k and 0 <= c <= self.max_c

    def architecture(self, k: int, c: int, kernel_size: int | None = None) -> Architecture:
        """A(k, c) with this space's options; SpecError outside the space."""
        if not self.contains(k, c):
            raise SpecError(f"A({k},{c}) is outside the space (k 1..{self.max_k}, c 0..{self.max_c})")
        if kernel_size is not None and kernel_size not in self.kernels:
            raise SpecError(f"kernel size {kernel_size} is outside the space ({', '.join(map(str, self.kernels))})")
        return Architecture(self.input_length, self.input_channels, self.classes, k, c,
                            kernel_size=kernel_size or self.kernel_size, growth=self.growth,
                            channel_multiple=self.channel_multiple)


FINAL_FIDELITY = Fidelity(epochs=100, batch_size=16, learning_rate=0.01)
"""The method's final training of the winner: 100 epochs, lr 0.01, batch 16, best-val weights."""


@dataclass(frozen=True)
class Proposal:
    """What a strategy wants evaluated: an architecture at a fidelity."""

    architecture: Architecture
    fidelity: Fidelity


class Strategy(ABC):
    """Proposes architectures (`ask`) and learns from finished trials (`tell`)."""

    name = "strategy"
    default_fidelity = Fidelity()

    def __init__(self, space: SearchSpace, seed: int = 0, fidelity: Fidelity | None = None,
                 is_feasible: Callable[[Architecture], bool] | None = None,
                 final_fidelity: Fidelity | None = None) -> None:
        self.space = space
        self.seed = seed
        self.fidelity = fidelity or self.default_fidelity
        # The study's recipe for the winner; a strategy that trains candidates with it lets the
        # study export the winner as trained instead of training it a second time.
        self.final_fidelity = final_fidelity
        # Only strategies that sample from the feasible set use this; it is the pure cost model.
        self.is_feasible = is_feasible

    @classmethod
    def final_recipe(cls, epochs: int | None = None) -> Fidelity:
        """The winner's final recipe when the user gives none (`epochs`, if given, sets its length): the
        method's, unless the strategy has its own."""
        return FINAL_FIDELITY if epochs is None else replace(FINAL_FIDELITY, epochs=epochs)

    @abstractmethod
    def ask(self) -> Proposal | None:
        """The next proposal, or None when it must first hear about pending ones (or is finished)."""

    @abstractmethod
    def tell(self, trial: Trial) -> None:
        """A proposal's outcome: infeasible (told at once), complete or failed."""

    @property
    @abstractmethod
    def finished(self) -> bool:
        """True once the strategy has nothing more to propose."""

    def objective(self, trial: Trial) -> float:
        """What this strategy minimises; default the method's minimum validation loss."""
        return trial.comparable_score

