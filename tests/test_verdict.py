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
