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
    # A proposal is an architecture at a fidelity: multi-fidelity strategies revisit at more epochs.
    assert len(study.proposed) == len(set(study.proposed))


def test_replay_rebuilds_the_state(name, space):
    full = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=5))
    cut = max(1, len(full.trials) // 2)
    # Replay the first half of the journal into a fresh strategy, then let it continue live.
    replayed = _make(name, space, seed=5)
    resumed = ScriptedStudy(_score, _feasible)
    original = resumed.trial
    journal = {(t.architecture.k, t.architecture.c, t.fidelity.epochs): t for t in full.trials[:cut]}
    resumed.trial = lambda proposal, number: journal.get(
        (proposal.architecture.k, proposal.architecture.c, proposal.fidelity.epochs)) or original(proposal, number)
    resumed.drive(replayed)
    assert resumed.proposed == full.proposed


def test_finishes_within_a_bounded_number_of_proposals(name, space):
    study = ScriptedStudy(_score, _feasible).drive(_make(name, space), limit=5000)
    assert len(study.proposals) <= 3 * (space.max_k + 1) * (space.max_c + 1)


def test_seeded_strategies_are_deterministic(name, space):
    first = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=9))
    again = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=9))
    assert first.proposals == again.proposals


def test_fast_strategy_starts_on_the_frontier_and_halves(space):
    study = ScriptedStudy(_score, _feasible).drive(_make("fast", space))
    first_rung = [(k, c) for k, c, epochs in study.proposed if epochs == min(e for _, _, e in study.proposed)]
    for k, c in first_rung:
        assert _feasible(k, c)
    widest = {c: max(k for k in range(1, space.max_k + 1) if _feasible(k, c)) for c in range(space.max_c + 1)
              if _feasible(1, c)}
    assert {(k, c) for c, k in widest.items()} <= set(first_rung)
    rungs = sorted({epochs for _, _, epochs in study.proposed})
    assert rungs == [12, 34, 100]
    counts = [sum(1 for *_, e in study.proposed if e == rung) for rung in rungs]
    assert counts[0] > counts[1] > counts[2] >= 1
    # The winner by objective is a full-fidelity trial.
    strategy = _make("fast", space)
    best = min(study.trials, key=strategy.objective)
    assert best.fidelity.epochs == 100
