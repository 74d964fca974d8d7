"""The paper strategy against a literal transcription of the method's pseudo-code (docs/method.md)."""

import math

import numpy as np
import pytest

from tests.support.scripted_study import ScriptedStudy
from tinynas.search import make_strategy


def method_pseudocode(score, feasible, max_c):
    """The method's loop, transcribed line by line; yields every (k, c) it scores or checks."""
    checked = []
    k, step_exp, refining, best, trial_k = 1, 0, False, math.inf, 1
    while k // 2 ** step_exp > 0:
        local, c, c_local = math.inf, 0, None
        while True:
            if c > max_c:                      # the length limit: A(k, c) does not exist
                break
            checked.append((trial_k, c))
            if not feasible(trial_k, c):       # stops at the FIRST infeasible c
                break
            value = score(trial_k, c)
            if value <= local:
                local, c_local = value, c      # ties go to the larger c
            c += 1
        if local < best:
            best, k, c_best = local, trial_k, c_local  # strict improvement moves k
            assert c_best is not None
        else:
            refining = True
        if refining:
            step_exp += 1
        trial_k = k + k // 2 ** step_exp
    return checked


def _table(seed, peak_k):
    rng = np.random.default_rng(seed)
    noise = {}

    def score(k, c):
        if (k, c) not in noise:
            noise[(k, c)] = float(rng.uniform(0, 0.3))
        return abs(np.log2(k) - np.log2(peak_k)) + abs(c - 3) * 0.2 + noise[(k, c)]
    return score


@pytest.mark.parametrize("seed", range(12))
def test_proposals_match_the_method_step_by_step(space, seed):
    rng = np.random.default_rng(100 + seed)
    peak_k = int(rng.integers(1, 40))
    ram_limit = int(rng.integers(20, 400))
    score = _table(seed, peak_k)

    def feasible(k, c):
        return k * (c + 1) <= ram_limit

    expected = method_pseudocode(score, feasible, space.max_c)
    # score() memoises its noise: the strategy must see the same table.
    study = ScriptedStudy(score, feasible)
    study.drive(make_strategy("paper", space))
    assert study.proposals == expected


def test_hand_worked_example(space):
    # Scores improve up to k=4 and worsen after; every c beyond 2 is infeasible.
    scores = {1: 0.9, 2: 0.6, 4: 0.3, 8: 0.5, 6: 0.35, 5: 0.25}
    study = ScriptedStudy(lambda k, c: scores[k] - 0.01 * c, lambda k, c: c <= 2)
    strategy = make_strategy("paper", space)
    study.drive(strategy)
    ks = [k for k, c in study.proposals if c == 0]
    # double 1, 2, 4, 8 (fails) -> 4 + 4/2 = 6 (fails) -> 4 + 4/4 = 5 (improves) -> 5 + 5/8 = 5 + 0: stop
    assert ks == [1, 2, 4, 8, 6, 5]
    assert study.proposals[:4] == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert (strategy.k, strategy.best_c) == (5, 2)
    assert strategy.finished


def test_ties_go_to_the_larger_c(space):
    study = ScriptedStudy(lambda k, c: 1.0 if k == 1 else 2.0, lambda k, c: c <= 3)
    strategy = make_strategy("paper", space)
    study.drive(strategy)
    assert (strategy.k, strategy.best_c) == (1, 3)


def test_failed_candidates_never_become_the_incumbent(space):
    study = ScriptedStudy(lambda k, c: float("nan") if c == 1 else 1.0 / k + c, lambda k, c: c <= 2)
    strategy = make_strategy("paper", space)
    study.drive(strategy)
    assert strategy.best_c != 1


def test_parallel_results_in_any_order_give_the_same_path(space):
    score = _table(3, 6)

    def feasible(k, c):
        return k * (c + 1) <= 90

    one = ScriptedStudy(score, feasible, parallel=1).drive(make_strategy("paper", space))
    three = ScriptedStudy(score, feasible, parallel=3).drive(make_strategy("paper", space))
    assert one.proposals == three.proposals
