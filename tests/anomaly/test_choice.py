"""The rule that picks the scorer family a user gets: paired at the alarm's operating point, ties to the cheaper."""

import numpy as np
import pytest

from tinynas.anomaly.choice import Finalist, ScorerError, check_scorer, choose, discordant_p, flags, validation_rate
from tinynas.errors import UsageError


def _flags(count, detected, seed=0):
    out = np.zeros(count, bool)
    out[np.random.default_rng(seed).permutation(count)[:detected]] = True
    return out


def _pair(network_flags, classical_flags, network_ram=6000, classical_ram=3000, fits=True):
    return (Finalist("network", "A(4,5)", network_flags, 10.0, network_ram, 17000),
            Finalist("classical", "features + Gaussian", classical_flags, 3.0, classical_ram, 8000, fits,
                     "" if fits else "flash 8,000 > 4,096"))


def test_a_tie_goes_to_the_cheaper_either_way():
    same = _flags(120, 40)
    close = same.copy()
    close[np.flatnonzero(~same)[:3]] = True  # the network flags 3 more: chance could do that
    choice = choose(*_pair(close, same), rate=0.01)
    assert choice.family == "classical" and "a tie" in choice.why and choice.p_value > 0.05
    assert choose(*_pair(close, same, network_ram=2000), rate=0.01).family == "network"


def test_a_difference_beyond_chance_goes_to_the_better_whatever_it_costs():
    classical = _flags(120, 20)
    network = classical.copy()
    network[np.flatnonzero(~classical)[:25]] = True  # 25 windows only the network flags, none the other way
    choice = choose(*_pair(network, classical, network_ram=9000), rate=0.01)
    assert choice.family == "network" and choice.p_value < 0.05 and "detects more" in choice.why
    assert choose(*_pair(classical, network), rate=0.01).family == "classical"
    assert [f["detected"] for f in choice.finalists] == [45, 20]


def test_a_classical_scorer_that_does_not_fit_is_never_chosen():
    same = _flags(100, 30)
    choice = choose(*_pair(same, same, fits=False), rate=0.01)
    assert choice.family == "network" and "does not fit" in choice.why and "flash" in choice.why
    with pytest.raises(ScorerError, match="does not fit"):
        choose(*_pair(same, same, fits=False), rate=0.01, asked="classical")


def test_the_scorer_asked_for_is_taken_and_both_are_still_shown():
    better = _flags(100, 60)
    worse = better & _flags(100, 30, seed=3)
    choice = choose(*_pair(worse, better), rate=0.01, asked="network")
    assert choice.family == "network" and "--scorer network" in choice.why and len(choice.finalists) == 2
    assert choose(*_pair(better, worse), rate=0.01, asked="classical").family == "classical"
    with pytest.raises(UsageError, match="unknown scorer"):
        check_scorer("tree")


def test_the_operating_point_is_the_conformal_threshold_of_the_validation_normal_windows():
    normal = np.arange(200, dtype=float)  # 200 normal scores: at 1 % the threshold is the 199th smallest
    flagged, threshold = flags(normal, np.array([197.5, 198.5, 1000.0]), 0.01)
    assert threshold == 198.0 and flagged.tolist() == [False, True, True]
    assert validation_rate(0.01, 200) == 0.01
    assert validation_rate(0.01, 49) == pytest.approx(1 / 50)  # too few for 1 %: the lowest rate they state


def test_the_paired_test_counts_only_the_windows_one_family_flags():
    both = np.array([True] * 50 + [False] * 50)
    assert discordant_p(both, both) == 1.0
    one_way = both.copy()
    one_way[50:58] = True  # 8 windows only the first flags, none the other way: 2 x 0.5^8
    assert discordant_p(one_way, both) == pytest.approx(2 * 0.5 ** 8)
