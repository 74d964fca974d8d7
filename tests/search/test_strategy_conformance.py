"""The battery every strategy passes (as Optuna tests every storage)."""

import numpy as np
import pytest

from tests.support.scripted_study import ScriptedStudy
from tinynas.search import STRATEGIES, SearchSpace, make_strategy
from tinynas.search.tpe import optuna_available
from tinynas.space import SpecError
from tinynas.trial import Fidelity, TrialState


def _score(k, c):
    return abs(np.log2(k) - 3) + abs(c - 2) * 0.3 + 0.01 * ((k * 7 + c * 3) % 5)


def _feasible(k, c):
    return k * (c + 2) <= 60


def _make(name, space, seed=0):
    return make_strategy(name, space, seed=seed, is_feasible=lambda a: _feasible(a.k, a.c))


@pytest.fixture(params=sorted(STRATEGIES))
def name(request):
    if request.param == "tpe" and not optuna_available():
        pytest.skip("optuna is not installed")
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
    # A proposal is an architecture at a fidelity: multi-fidelity strategies revisit at a higher one.
    assert len(study.proposed) == len(set(study.proposed))


def test_replay_rebuilds_the_state(name, space):
    full = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=5))
    cut = max(1, len(full.trials) // 2)
    # Replay the first half of the journal into a fresh strategy, then let it continue live.
    replayed = _make(name, space, seed=5)
    resumed = ScriptedStudy(_score, _feasible)
    original = resumed.trial
    journal = {(t.architecture.k, t.architecture.c, t.fidelity): t for t in full.trials[:cut]}
    resumed.trial = lambda proposal, number: journal.get(
        (proposal.architecture.k, proposal.architecture.c, proposal.fidelity)) or original(proposal, number)
    resumed.drive(replayed)
    assert resumed.proposed == full.proposed


def test_finishes_within_a_bounded_number_of_proposals(name, space):
    study = ScriptedStudy(_score, _feasible).drive(_make(name, space), limit=5000)
    assert len(study.proposals) <= 3 * (space.max_k + 1) * (space.max_c + 1)


def test_seeded_strategies_are_deterministic(name, space):
    first = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=9))
    again = ScriptedStudy(_score, _feasible).drive(_make(name, space, seed=9))
    assert first.proposals == again.proposals


def test_fast_strategy_races_the_frontier_with_the_final_recipe_largest_compute_first(space):
    from tinynas.cost.estimate import macs

    final = Fidelity(epochs=60, batch_size=16, learning_rate=0.01)
    strategy = make_strategy("fast", space, seed=0, is_feasible=lambda a: _feasible(a.k, a.c), final_fidelity=final)
    study = ScriptedStudy(_score, _feasible).drive(strategy)
    raced = [(k, c) for k, c, _ in study.proposed]
    widest = {c: max(k for k in range(1, space.max_k + 1) if _feasible(k, c)) for c in range(space.max_c + 1)
              if _feasible(1, c)}
    assert sorted(raced) == sorted((k, c) for c, k in widest.items()), "each frontier candidate exactly once"
    compute = [macs(space.architecture(k, c)) for k, c in raced]
    assert compute == sorted(compute, reverse=True)
    # Every candidate is trained with the study's final recipe, so the winner is exported as trained.
    fidelities = {fidelity for *_, fidelity in study.proposed}
    assert {(f.epochs, f.learning_rate, f.batch_size, f.subset) for f in fidelities} == {(60, 0.01, 16, 1.0)}
    assert all(f.patience > 0 and f.curve_stop for f in fidelities)
    assert strategy.finished
    best = min(study.trials, key=strategy.objective)
    assert (best.architecture.k, best.architecture.c) == min(raced, key=lambda kc: _score(*kc))


def test_fast_frontier_finds_the_widest_stem_past_an_infeasible_gap(space):
    # A(5, c) does not fit but A(6, c) does: memory alignment makes feasibility non-monotone in k.
    def feasible(k, c):
        return k != 5 and k * (c + 2) <= 20

    study = ScriptedStudy(_score, feasible).drive(
        make_strategy("fast", space, seed=0, is_feasible=lambda a: feasible(a.k, a.c)))
    raced = {(k, c) for k, c, _ in study.proposed}
    assert (6, 1) in raced and (10, 0) in raced


def test_fast_races_the_frontier_of_every_kernel_size_of_the_space():
    from dataclasses import replace as with_options

    from tinynas.cost.estimate import macs

    space = with_options(SearchSpace(input_length=64, input_channels=2, classes=4, max_k=64), kernel_sizes=(3, 9))
    strategy = make_strategy("fast", space, seed=0, is_feasible=lambda a: _feasible(a.k, a.c))
    kernels = []
    original = strategy.ask

    def ask():
        proposal = original()
        if proposal is not None:
            kernels.append((proposal.architecture.k, proposal.architecture.c, proposal.architecture.kernel_size))
        return proposal

    strategy.ask = ask
    ScriptedStudy(_score, _feasible).drive(strategy)
    assert strategy.finished
    frontier = {(k, c) for k, c, _ in kernels}
    assert {(k, c, 3) for k, c in frontier} | {(k, c, 9) for k, c in frontier} == set(kernels)
    compute = [macs(space.architecture(*kck)) for kck in kernels]
    assert compute == sorted(compute, reverse=True)
    with pytest.raises(SpecError, match="kernel size 5 is outside"):
        space.architecture(2, 1, 5)
