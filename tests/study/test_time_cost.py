"""What a time budget cost the search (tinynas.study.time_cost): counted over the space, said in words a user can
act on, kept on the card and checked there."""

import json

import pytest

from tinynas.card import read_card
from tinynas.card_checks import DamagedCard, check_time
from tinynas.cost.budget import Budget
from tinynas.cost.latency import TIME_HEADROOM
from tinynas.cost.targets import get_target
from tinynas.search.base import SearchSpace
from tinynas.study.time_cost import time_cost, time_cost_words

# A 26-sign armband on the 10 MHz sensor hub (the latency benchmark's costliest case), small enough to walk whole.
SPACE = SearchSpace(100, 8, 26, max_k=48, kernel_sizes=(3, 9))


def _whole_space(budget: Budget) -> tuple[int, int, float]:
    """Every architecture of SPACE estimated, no early stop: what time_cost must agree with."""
    memory = kept = 0
    slowest = 0.0
    for kernel in SPACE.kernels:
        for cells in range(SPACE.max_c + 1):
            for k in range(1, SPACE.max_k + 1):
                cost = budget.estimate(SPACE.architecture(k, cells, kernel))
                if not cost.violations(budget.target):
                    memory += 1
                    kept += not budget.check(cost)
                    slowest = max(slowest, budget.seconds(cost))
    return memory, kept, slowest


def test_the_hop_closes_part_of_the_space_and_the_budget_that_opens_it_all_is_exact():
    budget = Budget.resolve(get_target("LSM6DSO16IS"), "c", latency_seconds=0.25)
    spent = time_cost(budget, SPACE)
    memory, kept, slowest = _whole_space(budget)
    assert (spent["memory"], spent["time"]) == (memory, kept)  # the early stop at a k that misses loses nothing
    assert 0 < kept < memory  # the case is one where the hop costs something
    # At the budget it names, every architecture its RAM, flash and MAC budgets allow keeps the time; a little below,
    # one does not.
    opened = Budget.resolve(budget.target, "c", latency_seconds=spent["all_at_seconds"])
    assert time_cost(opened, SPACE)["time"] == memory
    tighter = Budget.resolve(budget.target, "c", latency_seconds=spent["all_at_seconds"] * 0.99)
    assert time_cost(tighter, SPACE)["time"] < memory
    words = time_cost_words(spent, 0.25)
    assert f"kept {kept} of the {memory} architectures its RAM, flash and MAC budgets allow" in words
    assert f"{spent['all_at_seconds'] / 0.25:.1f}x as fast" in words


@pytest.mark.parametrize("target", ["STM32F030F4P6", "nRF52840", "ESP32-S3"])
def test_the_bisection_counts_what_walking_the_whole_space_counts(target):
    budget = Budget.resolve(get_target(target), "c", latency_seconds=0.05)
    spent = time_cost(budget, SPACE)
    memory, kept, slowest = _whole_space(budget)
    assert (spent["memory"], spent["time"]) == (memory, kept)
    assert spent["all_at_seconds"] == pytest.approx(slowest * TIME_HEADROOM, rel=1e-5)


def test_without_a_time_budget_nothing_is_counted_or_said():
    budget = Budget.resolve(get_target("nRF52840"), "c")
    assert time_cost(budget, SPACE) is None and time_cost_words(None, None) == ""


def test_a_hop_every_architecture_keeps_is_said_as_such():
    budget = Budget.resolve(get_target("nRF52840"), "c", latency_seconds=60.0)
    spent = time_cost(budget, SPACE)
    assert spent["time"] == spent["memory"] and "kept all" in time_cost_words(spent, 60.0)


@pytest.mark.parametrize("space", [{"memory": -1, "time": 0, "all_at_seconds": 1.0}, [3],
                                   {"memory": 3, "time": 2, "all_at_seconds": "soon"},
                                   {"memory": 3, "time": 2.5, "all_at_seconds": 1.0}])
def test_a_damaged_time_cost_on_a_card_is_one_line(space):
    with pytest.raises(DamagedCard, match="'space'"):
        check_time({"latency_seconds": 0.25, "space": space})


def test_the_report_line_and_the_card_reader_carry_it(tmp_path):
    from tinynas.space import Architecture
    from tinynas.study.report import chip_time_line

    budget = Budget.resolve(get_target("LSM6DSO16IS"), "c", latency_seconds=0.25)
    arch = Architecture(100, 8, 26, k=2, c=1)
    cost = budget.estimate(arch)
    card = {"name": arch.name(), "classes": [f"s{i}" for i in range(26)], "cost_estimate": cost.to_dict(),
            "input": {"shape": [100, 8], "sample_rate_hz": 200.0}, "runtime": "c", "target": budget.target.to_dict(),
            "time": {**budget.time_section(cost), "space": time_cost(budget, SPACE)}}
    (tmp_path / "card.json").write_text(json.dumps(card))
    line = chip_time_line(read_card(tmp_path))
    assert "architectures its RAM, flash and MAC budgets allow" in line and "x as fast" in line
