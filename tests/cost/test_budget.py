"""`Budget`: the target, the runtime and the accounting as one value."""

import dataclasses

import pytest

from tinynas.cost.budget import Budget
from tinynas.cost.estimate import estimate
from tinynas.cost.targets import get_target
from tinynas.errors import UsageError
from tinynas.modes import Accounting, Runtime
from tinynas.space import Architecture


def test_a_budget_resolves_auto_and_counts_as_the_estimate_does():
    chip = get_target("STM32C011F6P6")
    budget = Budget.resolve(chip)
    assert (budget.runtime, budget.accounting) == (Runtime.C, Accounting.CHIP) and budget.reason.startswith("auto")
    arch = Architecture(512, 1, 4, k=3, c=2)
    assert budget.estimate(arch) == estimate(arch, runtime="c", core=chip.core)
    assert budget.fits(arch) == estimate(arch, runtime="c", core=chip.core).fits(chip)
    assert budget.choice().to_dict() == {"runtime": "c", "accounting": "chip", "reason": budget.reason}


def test_a_budget_is_frozen_and_refuses_a_rule_its_runtime_cannot_be_counted_by():
    chip = get_target("STM32F030F4P6")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Budget.resolve(chip).runtime = Runtime.TFLM  # type: ignore[misc]
    with pytest.raises(UsageError, match="the C runtime is counted whole"):
        Budget(chip, Runtime.C, Accounting.ARENA)
    with pytest.raises(UsageError, match="unknown runtime 'auto'"):
        Budget(chip, "auto", Accounting.CHIP)  # type: ignore[arg-type]
    from_card = Budget(chip, "tflm", "arena")  # type: ignore[arg-type]  # strings as a card holds them
    assert from_card.runtime is Runtime.TFLM and from_card.accounting is Accounting.ARENA


def test_the_c_runtimes_arena_has_a_field_of_its_own_and_older_costs_read_into_it():
    arch = Architecture(512, 1, 4, k=3, c=2)
    cost = estimate(arch, runtime="c")
    assert cost.c_arena_bytes > 0 and (cost.arena_head_bytes, cost.arena_tail_bytes, cost.arena_bytes) == (0, 0, 0)
    assert f"C runtime arena {cost.c_arena_bytes:,}" in cost.ram_words()
    assert estimate(arch, runtime="tflm").c_arena_bytes == 0
    older = {**cost.to_dict(), "arena_head_bytes": cost.c_arena_bytes, "arena_bytes": cost.c_arena_bytes}
    del older["c_arena_bytes"]  # a card or journal written before the field: the C arena in TFLite Micro's fields
    assert type(cost).from_dict(older) == cost
