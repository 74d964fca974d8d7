"""Search strategies behind one ask/tell interface (`base.Strategy`)."""

from __future__ import annotations

from tinynas.errors import MissingDependencyError, UsageError
from tinynas.search.base import FINAL_FIDELITY, Proposal, SearchSpace, Strategy
from tinynas.search.fast import FastStrategy
from tinynas.search.fixed import FixedCandidates, FixedStrategy
from tinynas.search.greedy import GreedyStrategy
from tinynas.search.paper import PaperStrategy
from tinynas.search.random_search import RandomStrategy
from tinynas.search.tpe import TPEStrategy, optuna_available
from tinynas.trial import Fidelity

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (PaperStrategy, GreedyStrategy, RandomStrategy, FastStrategy, TPEStrategy)
}


def strategy_class(name: str) -> type[Strategy]:
    """The strategy called `name` ('paper', 'greedy', 'random', 'fast', 'tpe'); one line if there is none."""
    try:
        return STRATEGIES[name]
    except KeyError:
        raise UsageError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None


def check_strategy(name: str) -> None:
    """`--strategy`: a known strategy whose optional dependency is installed (one line if not)."""
    strategy_class(name)
    if name == "tpe" and not optuna_available():
        raise MissingDependencyError("--strategy tpe needs optuna, which is not installed: "
                                     "pip install 'tinynas[optuna]' (or use --strategy fast or paper)")


def make_strategy(name: str | FixedCandidates, space: SearchSpace, **kwargs) -> Strategy:
    """Instantiate a strategy by name ('paper', 'greedy', 'random', 'fast', 'tpe'), or the fixed one given."""
    if isinstance(name, FixedCandidates):
        return name.make(space, **kwargs)
    return strategy_class(name)(space, **kwargs)


def final_recipe(name: str | FixedCandidates, epochs: int | None = None) -> Fidelity:
    """Strategy `name`'s final recipe for the winner (`Strategy.final_recipe`)."""
    return (FixedStrategy if isinstance(name, FixedCandidates) else strategy_class(name)).final_recipe(epochs)


__all__ = ["FINAL_FIDELITY", "STRATEGIES", "FixedCandidates", "FixedStrategy", "Proposal", "SearchSpace", "Strategy",
           "check_strategy", "final_recipe", "make_strategy", "strategy_class"]
