"""Search strategies behind one ask/tell interface (`base.Strategy`)."""

from __future__ import annotations

from tinynas.errors import UsageError
from tinynas.search.base import Proposal, SearchSpace, Strategy
from tinynas.search.fast import FastStrategy
from tinynas.search.greedy import GreedyStrategy
from tinynas.search.paper import PaperStrategy
from tinynas.search.random_search import RandomStrategy
from tinynas.search.tpe import TPEStrategy

STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (PaperStrategy, GreedyStrategy, RandomStrategy, FastStrategy, TPEStrategy)
}


def make_strategy(name: str, space: SearchSpace, **kwargs) -> Strategy:
    """Instantiate a strategy by name ('paper', 'greedy', 'random', 'fast', 'tpe')."""
    try:
        cls = STRATEGIES[name]
    except KeyError:
        raise UsageError(f"unknown strategy {name!r}; choose one of: {', '.join(STRATEGIES)}") from None
    return cls(space, **kwargs)


__all__ = ["STRATEGIES", "Proposal", "SearchSpace", "Strategy", "make_strategy"]
