"""The search loop's logic on a scripted pool (tests/study/scripted_pool.py): what it does with each way a candidate
ends, the budget, a resume, a full disk and Ctrl-C, decided by the test, not by TensorFlow or the machine's speed.

The same logic runs for real, with workers and TensorFlow, in tests/study/test_study.py (a NaN candidate failed, a
search killed mid-candidate resumed to the same trials, Ctrl-C through the command, the winner exported) and
test_worker.py. The budget's stop replaces test_study.py's real one (a random search on an injected clock: 22 s of
a worker in the slow tier for the same assertions).
"""

from __future__ import annotations

import json

import pytest

from tests.support.scripted_loop import DATA, RECIPE, Clock, Events
from tests.support.scripted_loop import completed as _complete
from tests.support.scripted_loop import scripted_loop as _loop
from tests.support.scripted_pool import ScriptedPool
from tinynas.data.spec import load_windows
from tinynas.errors import StorageError
from tinynas.search import make_strategy
from tinynas.study import Study
from tinynas.study.jobs import JobFactory
from tinynas.study.journal import Journal
from tinynas.study.loop import SearchLoop
from tinynas.study.outcomes import MAX_ATTEMPTS
from tinynas.study.outdir import open_journal
from tinynas.training.job import DISK_FULL
from tinynas.trial import TrialState


def test_the_budget_stops_the_search_with_the_best_so_far_and_journals_the_running_as_interrupted(tmp_path):
    clock, losses = Clock(), iter([0.9, 0.4, 0.7, 0.2, 0.1])

    def outcome(job):
        clock.now += 10.0  # each finished candidate takes 10 search seconds
        return _complete(next(losses))

    pool = ScriptedPool(outcome)
    loop, journal = _loop(tmp_path, pool, clock, budget=25.0)
    loop.run()
    trials = journal.trials()
    complete = [t for t in trials if t.state is TrialState.COMPLETE]
    assert len(complete) == 3 and journal.get_meta("search_seconds") == 30.0  # the third ended past the budget
    assert [t.state for t in trials if t.attempts and t.state is not TrialState.COMPLETE] == [TrialState.INTERRUPTED]
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["score"] == pytest.approx(0.4) and best["trial"] == loop.best.number  # 0.4 of 0.9, 0.4, 0.7
    assert pool.closed  # the candidate still training is stopped
    assert "time budget used up: stopping the search with the best so far" in loop.progress.events
    journal.close()


def test_candidates_bound_the_search_whatever_the_clock_and_a_resume_keeps_the_bound(tmp_path):
    """--candidates: the search ends after that many trained, however slow the machine (the clock never moves);
    a resume counts what the journal holds, and a candidate that failed counts as one tried."""
    clock = Clock()
    loop, journal = _loop(tmp_path, ScriptedPool(lambda job: _complete(1.0 / job.job_id)), clock, candidates=3)
    loop.run()
    trained = [t for t in journal.trials() if t.attempts]
    assert len({t.architecture.digest() for t in trained}) == 3 and all(t.state.finished for t in trained)
    assert "3 candidates trained (--candidates): stopping the search with the best so far" in loop.progress.events
    journal.close()

    again = ScriptedPool(lambda job: {"ok": False, "error": "NaN loss at epoch 1"})
    loop, journal = _loop(tmp_path, again, clock, resume=True, candidates=5)
    loop.run()
    assert len(again.submitted) == 2  # 5 in all: 3 from the journal, 2 more (both failed, both counted)
    assert len({t.architecture.digest() for t in journal.trials() if t.attempts}) == 5
    journal.close()


def test_a_failed_candidate_is_journaled_with_its_error_and_the_search_goes_on(tmp_path):
    clock = Clock()

    def outcome(job):
        clock.now += 10.0
        if job.job_id == 2:
            return {"ok": False, "error": "NaN loss at epoch 1"}
        return _complete(0.5)

    loop, journal = _loop(tmp_path, ScriptedPool(outcome), clock, budget=55.0)
    loop.run()
    trials = {t.number: t for t in journal.trials()}
    assert trials[2].state is TrialState.FAILED and trials[2].error == "NaN loss at epoch 1"
    assert sum(t.state is TrialState.COMPLETE for t in trials.values()) >= 4  # the others went on
    assert any("failed: NaN loss at epoch 1" in text for text in loop.progress.events)
    journal.close()


def test_a_resume_answers_finished_trials_from_the_journal_and_retries_the_interrupted_once_more(tmp_path):
    clock, waits = Clock(), []

    def interrupted_on_the_fourth_wait(job):
        waits.append(job.job_id)
        clock.now += 10.0
        return KeyboardInterrupt() if len(waits) == 4 else _complete(1.0 / job.job_id)

    loop, journal = _loop(tmp_path, ScriptedPool(interrupted_on_the_fourth_wait), clock, budget=100.0)
    with pytest.raises(KeyboardInterrupt):
        loop.run()
    before = {t.number: t for t in journal.trials()}
    journal.close()
    finished = {n for n, t in before.items() if t.state is TrialState.COMPLETE}
    stopped = {n for n, t in before.items() if t.state is TrialState.INTERRUPTED}
    assert len(finished) == 3 and stopped and all(before[n].attempts == 1 for n in stopped)

    clock.now, resumed = 0.0, ScriptedPool(lambda job: _complete(1.0 / job.job_id))
    loop, journal = _loop(tmp_path, resumed, clock, budget=100.0 - 40.0, resume=True)
    loop.run()
    after = {t.number: t for t in journal.trials()}
    trained_again = {job.job_id for job in resumed.submitted}
    assert not finished & trained_again  # answered from the journal, not trained again
    assert stopped <= trained_again and all(after[n].attempts == 2 for n in stopped)
    assert all(after[n] == before[n] for n in finished)
    journal.close()


def test_a_trial_interrupted_too_often_is_failed_not_retried_forever(tmp_path):
    clock = Clock()
    always = ScriptedPool(lambda job: KeyboardInterrupt(), size=1)  # every start of it is interrupted
    for attempt in range(MAX_ATTEMPTS):
        loop, journal = _loop(tmp_path, always, clock, resume=attempt > 0)
        with pytest.raises(KeyboardInterrupt):
            loop.run()
        journal.close()
    first = always.submitted[0].job_id
    assert [job.job_id for job in always.submitted] == [first] * MAX_ATTEMPTS

    def ten_candidates_fit_the_budget(job):
        clock.now += 100.0
        return _complete(0.5)

    fine = ScriptedPool(ten_candidates_fit_the_budget, size=1)
    loop, journal = _loop(tmp_path, fine, clock, resume=True, budget=1000.0)
    loop.run()
    trial = next(t for t in journal.trials() if t.number == first)
    assert trial.state is TrialState.FAILED and trial.error == f"interrupted {MAX_ATTEMPTS} times"
    assert first not in {job.job_id for job in fine.submitted}
    journal.close()


def test_a_full_disk_in_a_worker_stops_the_search_resumable_not_failing_the_candidate(tmp_path):
    clock = Clock()

    def outcome(job):
        clock.now += 10.0
        return {"ok": False, "error": "No space left on device", "failure": DISK_FULL} if job.job_id == 2 \
            else _complete(0.5)

    loop, journal = _loop(tmp_path, ScriptedPool(outcome), clock)
    with pytest.raises(StorageError, match="no space left on the device.*--resume"):
        loop.run()
    journal.close()
    with Journal(tmp_path / "journal.sqlite") as reopened:
        candidate = next(t for t in reopened.trials() if t.number == 2)
    assert candidate.state is TrialState.INTERRUPTED  # trained again by --resume, not held against it


def test_a_candidate_too_slow_for_the_latency_is_journaled_refused_for_time_and_never_trained(tmp_path):
    """The paper strategy walks c up to the first infeasible candidate: under a time budget that is the first too
    slow one, journaled with the time it would take (as RAM is said), shown on the page, never trained."""
    from tinynas.cost.targets import Target
    from tinynas.service.status_views import trials as page_trials

    chip = Target("slow chip", ram_bytes=1 << 20, flash_bytes=1 << 20, mac_budget=10**9, core="Cortex-M0",
                  clock_mhz=1.0)
    windows = load_windows(DATA)
    study = Study(tmp_path, windows, chip, strategy="paper", fidelity=RECIPE, final_fidelity=RECIPE, runtime="c",
                  latency_seconds=0.05)
    search = make_strategy("paper", study.space, seed=0, fidelity=RECIPE, final_fidelity=RECIPE,
                           is_feasible=study.budget.fits)
    journal = open_journal(tmp_path, False)
    jobs = JobFactory(0, tmp_path / "windows.npz", study.split, study.preprocessing.to_dict(), RECIPE, out_dir=tmp_path)
    trained: list[str] = []

    def outcome(job):
        trained.append(job.architecture.name())
        return _complete(1.0)

    SearchLoop(search, journal, ScriptedPool(outcome), jobs, study.budget, budget_seconds=1000.0, out_dir=tmp_path,
               progress=Events(), clock=Clock(), resume=False, retry_unstable=False).run()
    refused = [t for t in journal.trials() if t.state is TrialState.INFEASIBLE]
    assert refused and all(t.violations[0].startswith("time ") and "ms per inference at 1 MHz" in t.violations[0]
                           and "> 50 ms" in t.violations[0] for t in refused)
    assert not {t.architecture.name() for t in refused} & set(trained) and trained
    shown = {row["name"]: row["note"] for row in page_trials(tmp_path)}
    assert all(shown[t.architecture.name()].startswith("time ") for t in refused)
    journal.close()
