"""The battery every strategy passes (as Optuna tests every storage)."""

import numpy as np
import pytest

from scripted_study import ScriptedStudy
from tinynas.search import STRATEGIES, make_strategy
from tinynas.trial import TrialState


def _score(k, c):
    return abs(np.log2(k) - 3) + abs(c - 2) * 0.3 + 0.01 * ((k * 7 + c * 3) % 5)


def _feasible(k, c):
    return k * (c + 2) <= 60


def _make(name, space, seed=0):
    return make_strategy(name, space, seed=seed, is_feasible=lambda a: _feasible(a.k, a.c))


@pytest.fixture(params=sorted(STRATEGIES))
def name(request):
    return request.param


def test_proposals_are_in_the_space(name, space):
    study = ScriptedStudy(_score, _feasible).drive(_make(name, space))
    assert study.proposals
    for k, c in study.proposals:
        assert space.contains(k, c)


def test_only_feasible_proposals_reach_training(name, space):
    study = ScriptedStudy(_score, _feasible).drive(_make(name, space))
    assert all(_feasible(k, c) for k, c in study.trained)
    infeasible = [t for t in study.trials if t.state is TrialState.INFEASIBLE]
    assert all((t.architecture.k, t.architecture.c) not in study.trained for t in infeasible)


def test_no_finished_proposal_is_proposed_again(name, space):
    study = ScriptedStudy(_score, _feasible).drive(_make(name, space))
    assert len(study.proposals) == len(set(study.proposals))


def test_replay_rebuilds_the_state(name, space):
    full = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=5))
    cut = max(1, len(full.trials) // 2)
    # Replay the first half of the journal into a fresh strategy, then let it continue live.
    journal = {(t.architecture.k, t.architecture.c): t for t in full.trials[:cut]}
    replayed = _make(name, space, seed=5)
    resumed = ScriptedStudy(_score, _feasible)
    original = resumed.trial
    resumed.trial = lambda proposal, number: journal.get(
        (proposal.architecture.k, proposal.architecture.c)) or original(proposal, number)
    resumed.drive(replayed)
    assert resumed.proposals == full.proposals


def test_finishes_within_a_bounded_number_of_proposals(name, space):
    study = ScriptedStudy(_score, _feasible).drive(_make(name, space), limit=5000)
    assert len(study.proposals) <= (space.max_k + 1) * (space.max_c + 1)


def test_seeded_strategies_are_deterministic(name, space):
    first = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=9))
    again = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=9))
    assert first.proposals == again.proposals
