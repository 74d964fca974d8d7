"""The fixed-candidate strategy (issue 69; Optuna's FixedSampler): for tests whose subject is not the search, a Study
trains exactly the architectures given, in order, and records what it was asked to do."""

import pytest

from tests.support.scripted_loop import RECIPE, Clock, completed, scripted_loop
from tests.support.scripted_pool import ScriptedPool
from tests.support.scripted_study import ScriptedStudy
from tinynas.search import FixedCandidates, SearchSpace, make_strategy
from tinynas.space import SpecError
from tinynas.study.settings import StudySettings
from tinynas.trial import TrialState

SPACE = SearchSpace(128, 1, 4)


def test_it_proposes_the_given_candidates_in_order_once():
    strategy = make_strategy(FixedCandidates(((2, 1), (3, 0), (1, 2))), SPACE, fidelity=RECIPE)
    driven = ScriptedStudy(score=lambda k, c: 1.0 / k, feasible=lambda k, c: True, parallel=2).drive(strategy)
    assert driven.proposals == [(2, 1), (3, 0), (1, 2)] and strategy.finished


def test_a_study_given_fixed_candidates_trains_exactly_those(tmp_path):
    loop, journal = scripted_loop(tmp_path, ScriptedPool(lambda job: completed(1.0 / job.job_id)), Clock(),
                          strategy=FixedCandidates(((1, 0), (2, 1))))
    loop.run()
    trained = [(t.architecture.k, t.architecture.c) for t in journal.trials() if t.state is TrialState.COMPLETE]
    assert trained == [(1, 0), (2, 1)]
    journal.close()


def test_its_name_is_what_the_journal_records_and_bad_candidates_are_refused():
    assert str(StudySettings(strategy=FixedCandidates(((2, 1),))).strategy) == "fixed:2x1"
    with pytest.raises(ValueError):
        FixedCandidates(())
    with pytest.raises(SpecError):
        make_strategy(FixedCandidates(((0, 1),)), SPACE)
