"""Ranking candidates on the few windows a person records: cross-validation over recordings (issue 54)."""

import numpy as np
import pytest

from tinynas.cost.targets import resolve_target
from tinynas.data.spec import load_windows
from tinynas.data.splits import Split, make_split
from tinynas.errors import UsageError
from tinynas.study import Study
from tinynas.study.crossval import CV_BELOW_PER_CLASS, MAX_FOLDS, check_selection, choose_folds, recording_folds
from tinynas.trial import Fidelity, TrialState

# A plan's size: 15 recordings of one window per class (gestures4's 15 repetitions), 1 per class to validate on.
SMALL = "synthetic:emg?windows_per_class=15&windows_per_recording=1&length=64&seed=3"


def _recordings(windows, indices):
    return set(windows.groups[indices])


def test_folds_hold_whole_recordings_every_window_once_and_every_class_in_each():
    windows = load_windows("synthetic:vibration?windows_per_class=24&windows_per_recording=3&length=64")
    split = make_split(windows, "auto", seed=0)
    pool = np.concatenate([split.train, split.val])
    folds = recording_folds(windows, pool, seed=0)
    assert folds is not None and len(folds.validation) == MAX_FOLDS
    together = np.concatenate(folds.validation)
    assert sorted(together) == sorted(pool)  # every training and validation window judged exactly once
    assert not set(together) & set(split.test)  # the test side is never part of it
    for number, fold in enumerate(folds.validation):
        assert not _recordings(windows, fold) & _recordings(windows, folds.training(number))  # whole recordings
        assert set(windows.y[fold]) == set(range(windows.classes))  # each class dealt across the folds
    sizes = [len(fold) for fold in folds.validation]
    assert max(sizes) - min(sizes) <= windows.classes * 3  # balanced to a recording per class


def test_a_class_with_one_recording_cannot_be_cross_validated():
    windows = load_windows("synthetic:vibration?windows_per_class=4&windows_per_recording=2&length=64")
    one_each = np.array([np.flatnonzero(windows.groups == g)[0] for g in np.unique(windows.groups)])
    keep = one_each[np.isin(windows.y[one_each], [0])][:1]
    pool = np.concatenate([keep, np.flatnonzero(windows.y != 0)])
    assert recording_folds(windows, pool, seed=0) is None


def test_auto_cross_validates_only_where_the_validation_side_is_small():
    small = load_windows(SMALL)
    split = make_split(small, "auto", seed=0)
    assert np.bincount(small.y[split.val]).min() < CV_BELOW_PER_CLASS
    folds = choose_folds(small, split, "auto", seed=0)
    assert folds is not None and "fewer than 5" in folds.reason
    assert choose_folds(small, split, "validation", seed=0) is None
    large = load_windows("synthetic:vibration?windows_per_class=100&windows_per_recording=10&length=64")
    big_split = make_split(large, "auto", seed=0)
    assert choose_folds(large, big_split, "auto", seed=0) is None
    assert choose_folds(large, big_split, "cross-validation", seed=0) is not None
    held_out = Split(split.train, split.val, split.test, "leave one session out", held_out="day2")
    assert choose_folds(small, held_out, "auto", seed=0) is None  # validating on the other donning is the point
    with pytest.raises(UsageError, match="--selection must be one of"):
        check_selection("best")


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    out = tmp_path_factory.mktemp("cv")
    windows = load_windows(SMALL)
    result = Study(out, windows, resolve_target("STM32C011F6P6"), strategy="fast", budget_seconds=600, seed=0,
                   final_fidelity=Fidelity(epochs=4, batch_size=16, learning_rate=0.01, schedule="cosine"),
                   data_spec=SMALL, workers=1).run()
    return out, windows, result


@pytest.mark.slow
def test_a_small_recording_is_searched_by_cross_validation_and_the_test_side_stays_untouched(searched):
    _, windows, result = searched
    split = make_split(windows, "auto", seed=0)
    complete = [t for t in result.trials if t.state is TrialState.COMPLETE]
    assert complete
    for trial in complete:
        folds = trial.details["cross_validation"]
        assert folds["folds"] >= 2 and len(folds["fold_losses"]) == folds["trained"]
        if folds["trained"] == folds["folds"]:
            assert trial.score == pytest.approx(np.mean(folds["fold_losses"]))
            assert folds["windows"] == len(split.train) + len(split.val)  # every one judged once
    card = result.card
    assert card.final_training["retrained"] is True
    assert f"all {len(split.train) + len(split.val)} training and validation windows" in card.final_training["on"]
    assert card.int8_test["windows"] == len(split.test)  # the gate's windows: never selected on nor trained on
    chosen = card.selection
    pool = len(split.train) + len(split.val)
    assert chosen["rule"] == "cross-validation" and chosen["judged"] == pool == len(chosen["confidence"])
    assert chosen["hits"] == sum(chosen["correct"])
    # Serving's "unknown" threshold is calibrated on those answers (4 validation windows could not set one).
    from firmware_bridge.plan import Plan
    from tinynas.service.idle import MIN_CALIBRATION, idle_rule

    rule = idle_rule(Plan("m", windows.class_names, kind="continuous", window_seconds=1.0), "",
                     np.asarray(chosen["confidence"]), np.asarray(chosen["correct"], dtype=bool), "out of fold")
    assert (rule.unknown_below > 0) == (chosen["hits"] >= MIN_CALIBRATION)


@pytest.mark.slow
def test_a_cross_validated_trial_replays(searched):
    from tinynas.study.replay import replay_trial

    out, _, result = searched
    trial = next(t for t in result.trials if t.state is TrialState.COMPLETE)
    replay = replay_trial(out, trial.number)
    assert replay.reproduced, replay.summary()
    assert replay.result.cross_validation["fold_losses"] == pytest.approx(
        trial.details["cross_validation"]["fold_losses"], abs=1e-6)


def test_the_selection_is_part_of_what_a_resume_must_match():
    windows = load_windows(SMALL)
    made = {selection: Study("unused", windows, resolve_target("STM32C011F6P6"), strategy="fast",
                             selection=selection).fingerprint() for selection in ("auto", "validation")}
    assert made["auto"]["cross_validation"]["folds"] == MAX_FOLDS and "cross_validation" not in made["validation"]
