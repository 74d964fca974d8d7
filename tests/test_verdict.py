"""Accuracies as verdicts: the Wilson interval, per-class figures and the deploy gate's three answers."""

import math

import pytest

from tinynas.verdict import HeldOut, deploy_gate, describe, held_out, per_class, wilson, windows_needed


@pytest.mark.parametrize(("hits", "n", "low", "high"), [
    # Reference values of the Wilson score interval at 95 % (e.g. Newcombe 1998, table I: 81/263 -> 0.2553-0.3662).
    (81, 263, 0.2553, 0.3662), (15, 148, 0.0624, 0.1605), (0, 20, 0.0, 0.1611), (1, 29, 0.0061, 0.1718),
])
def test_wilson_matches_published_values(hits, n, low, high):
    got = wilson(hits, n)
    assert got == pytest.approx((low, high), abs=6e-4)


@pytest.mark.parametrize("n", [1, 4, 13, 100])
def test_the_interval_holds_the_observed_rate_and_stays_in_unit_range(n):
    for hits in range(n + 1):
        low, high = wilson(hits, n)
        assert 0.0 <= low <= hits / n <= high <= 1.0


def test_no_windows_means_nothing_is_known():
    assert wilson(0, 0) == (0.0, 1.0)
    assert HeldOut(0, 0).accuracy is None
    assert describe(HeldOut(0, 0).to_dict()).startswith("not measured")


def test_a_held_out_figure_is_said_with_its_count_and_interval():
    held = held_out([0, 1, 2, 2], [0, 1, 2, 0])
    assert (held.hits, held.windows) == (3, 4)
    text = held.describe()
    assert "3 of 4 held-out windows" in text and "95% interval 30%-95%" in text
    assert describe({"accuracy": 1.0}) == "-"  # a figure without its count is not dressed up as one


def test_a_served_accuracy_says_what_it_was_measured_on():
    from tinynas.verdict import served_accuracy

    assert served_accuracy(HeldOut(11, 12).to_dict(), 0.9167).startswith("int8 accuracy 92% (11 of 12 held-out")
    # after a recalibration chosen by cross-validation: float figures on the new windows, never called int8
    checked = {**HeldOut(10, 12).to_dict(), "measure": "float, cross-validated over the new repetitions"}
    assert served_accuracy(checked, 0.8333) == ("accuracy 83% (10 of 12 new windows, float, cross-validated over "
                                                "the new repetitions; 95% interval 55%-95%)")
    # a re-wear judged on today's stream: signs, not windows
    signs = {**HeldOut(7, 8).to_dict(), "measure": "float, cross-validated over the new repetitions, on today's "
                                                   "stream as serving answers"}
    assert served_accuracy(signs).startswith("signs recognised 88% (7 of 8 signs of today's wear, float, ")
    assert served_accuracy(None, 0.5) == "int8 accuracy 0.500" and served_accuracy({}, None).endswith("not measured")


def test_per_class_recall_support_and_confusion():
    figures = per_class(predictions=[0, 1, 1, 2, 2], labels=[0, 1, 2, 2, 2], classes=4)
    assert figures["confusion"] == [[1, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0], [0, 0, 0, 0]]
    assert figures["support"] == [1, 1, 3, 0]
    assert figures["recall"][:3] == [1.0, 1.0, pytest.approx(0.6667, abs=1e-4)]
    assert figures["recall"][3] is None  # nothing measured is not 0 %


def test_four_perfect_windows_clear_a_half_but_three_of_four_cannot_tell():
    assert deploy_gate(HeldOut(4, 4), 0.5, classes=4, test_share=0.2).decision == "deploy"
    three = deploy_gate(HeldOut(3, 4), 0.5, classes=4, test_share=0.2)
    assert three.decision == "undecided" and three.more_per_class > 0
    assert "3 of 4 held-out windows" in three.text and "too few to tell whether it reaches 50%" in three.text


def test_a_four_window_coin_toss_is_not_deployed_and_the_gate_says_how_much_more_to_record():
    verdict = deploy_gate(HeldOut(2, 4), 0.5, classes=4, test_share=0.2)
    assert verdict.decision == "undecided"
    # Enough that a model 10 points above the minimum would show it: the count, recorded at the split's test share.
    needed = windows_needed(0.6, 0.5)
    assert verdict.more_per_class == math.ceil((needed - 4) / 4 / 0.2)
    assert "2 of 4 held-out windows" in verdict.text


def test_what_the_data_has_decided_is_said_plainly():
    assert deploy_gate(HeldOut(0, 4), 0.5, 4, 0.2).decision == "refuse"  # even the interval's top is below
    assert deploy_gate(HeldOut(50, 100), 0.5, 4, 0.2).decision == "refuse"  # enough windows: not above 50 %
    assert deploy_gate(HeldOut(70, 100), 0.5, 4, 0.2).decision == "deploy"
    assert deploy_gate(HeldOut(0, 0), 0.5, 4, 0.2).decision == "undecided"


@pytest.mark.parametrize(("accuracy", "minimum"), [(0.75, 0.5), (0.9, 0.8), (0.6, 0.5)])
def test_windows_needed_is_the_first_count_whose_lower_bound_clears_the_minimum(accuracy, minimum):
    n = windows_needed(accuracy, minimum)
    assert wilson(round(accuracy * n), n)[0] >= minimum
    assert windows_needed(minimum, minimum) is None


# ---- windows cut with a hop from long recordings share them: counted over the recordings (issue 68) ----

def _two_recordings(right_in_second: int):
    """122 overlapping windows of two held-out recordings (61 each, one class each): all of the first right, and
    `right_in_second` of the second."""
    labels = [0] * 61 + [1] * 61
    predictions = [0] * 61 + [1] * right_in_second + [0] * (61 - right_in_second)
    return predictions, labels, ["a/0"] * 61 + ["a/1"] * 61


def test_122_overlapping_windows_of_2_recordings_are_2_measurements_not_122():
    predictions, labels, groups = _two_recordings(52)  # 113 of 122 windows right
    windows = held_out(predictions, labels)
    assert (windows.hits, windows.windows) == (113, 122) and windows.interval[0] > 0.85  # what the gate used to say
    held = held_out(predictions, labels, groups)
    assert (held.hits, held.windows, held.unit, held.window_hits, held.window_count) == (2, 2, "recordings", 113, 122)
    assert held.interval == pytest.approx((0.3424, 1.0), abs=1e-4)
    assert held.describe() == ("100% (2 of 2 held-out recordings, 113 of their 122 windows right; "
                               "95% interval 34%-100%)")
    # The gate can no longer serve a model on two recordings: it cannot tell, and says it in recordings.
    verdict = deploy_gate(held, 0.5, classes=2, test_share=0.2)
    assert deploy_gate(windows, 0.5, classes=2, test_share=0.2).decision == "deploy"
    assert verdict.decision == "undecided" and "2 of 2 held-out recordings" in verdict.text


def test_a_recording_is_right_only_when_more_than_half_of_its_windows_are():
    assert held_out(*_two_recordings(31)).hits == 2  # 31 of 61
    assert held_out(*_two_recordings(30)).hits == 1  # 30 of 61: not most
    labels, groups = [1, 1, 1, 1], ["r", "r", "r", "r"]
    assert held_out([1, 1, 0, 0], labels, groups).hits == 0  # half is not most


def test_windows_each_from_a_recording_of_its_own_are_still_counted_as_windows():
    held = held_out([0, 1, 2, 2], [0, 1, 2, 0], groups=["a", "b", "c", "d"])
    assert held == HeldOut(3, 4) and "unit" not in held.to_dict() and held_out([], [], []) == HeldOut(0, 0)


def test_per_class_figures_count_recordings_with_the_same_rule():
    # Class 0: two recordings (one right, one mostly taken for 2); class 1: one recording, right.
    predictions = [0, 0, 0, 2, 2, 0, 1, 1, 0]
    labels = [0, 0, 0, 0, 0, 0, 1, 1, 1]
    groups = ["x", "x", "x", "y", "y", "y", "z", "z", "z"]
    figures = per_class(predictions, labels, classes=3, groups=groups)
    assert figures["unit"] == "recordings" and figures["support"] == [2, 1, 0]
    assert figures["recall"][:2] == [0.5, 1.0] and figures["recall"][2] is None
    assert figures["confusion"] == [[1, 0, 1], [0, 1, 0], [0, 0, 0]]  # its diagonal is the recall's count
    assert held_out(predictions, labels, groups).hits == 2


def test_a_count_over_recordings_survives_a_card_and_a_damaged_one_is_refused():
    from tinynas.card_checks import check_held_out
    from tinynas.errors import TinynasError

    held = held_out(*_two_recordings(52))
    section = held.to_dict()
    check_held_out(section, "int8_test")
    assert HeldOut.from_dict(section) == held and HeldOut.from_dict({}) is None
    with pytest.raises(TinynasError, match="counted over recordings"):
        check_held_out({**section, "window_hits": 500}, "int8_test")
