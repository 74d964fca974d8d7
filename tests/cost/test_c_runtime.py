"""The C runtime's arena plan: every read finds what was written there, replayed byte by byte.

The generated code (`tinynas.deploy.c_codegen`) runs each stage in this order: for pooled row j, for output
channel o, read the input rows the two convs at 2j and 2j+1 need, then write out[j][o]. The replay below
follows the same order over the plan's offsets and fails on the first read of a byte that was overwritten.
"""

from __future__ import annotations

import numpy as np
import pytest

from tinynas.cost.c_runtime import (
    CODE_FIXED_BYTES,
    STACK_BYTES,
    estimate_c,
    overlap_shift,
    pad_left,
    plan_c_arena,
    table_bytes,
)
from tinynas.space import GROWTH_RULES, Architecture, max_cells


def replay(arch: Architecture) -> None:
    plan = plan_c_arena(arch)
    owner = np.full(plan.arena_bytes, -1, dtype=np.int64)  # which (map, byte) each arena byte holds
    left = pad_left(arch.kernel_size)
    right = arch.kernel_size - 1 - left
    for stage, placement in enumerate(plan.maps):
        assert placement.offset >= 0 and placement.offset + placement.nbytes <= plan.arena_bytes
        rows_in, channels_in = arch.lengths[stage], (arch.filters[stage - 1] if stage else arch.input_channels)
        for j in range(placement.rows):
            for o in range(placement.channels):
                if stage > 0:  # stage 0 reads the caller's input, outside the arena
                    source = plan.maps[stage - 1]
                    for row in range(max(0, 2 * j - left), min(rows_in, 2 * j + 1 + right + 1)):
                        for channel in range(channels_in):
                            index = row * channels_in + channel
                            assert owner[source.offset + index] == (stage - 1) * 10**9 + index, \
                                f"{arch.name()}: stage {stage} row {j} reads an overwritten byte"
                index = j * placement.channels + o
                owner[placement.offset + index] = stage * 10**9 + index
    # The last conv reads the last map while it adds into the sums; then the features are written
    # from the sums, which must survive until each is read.
    sums = range(plan.sums_offset, plan.sums_offset + plan.sums_bytes)
    if plan.maps:
        last = plan.maps[-1]
        assert set(sums).isdisjoint(range(last.offset, last.offset + last.nbytes))
    assert set(sums).isdisjoint(range(plan.features_offset, plan.features_offset + plan.features_bytes))
    assert plan.sums_offset % 4 == 0 and plan.arena_bytes % 4 == 0
    assert plan.features_offset + plan.features_bytes <= plan.arena_bytes


def architectures(count: int, seed: int) -> list[Architecture]:
    rng = np.random.default_rng(seed)
    found = []
    for _ in range(count):
        length = int(rng.integers(2, 200))
        found.append(Architecture(length, int(rng.integers(1, 9)), int(rng.integers(2, 12)),
                                  k=int(rng.integers(1, 12)), c=int(rng.integers(0, min(max_cells(length), 6) + 1)),
                                  kernel_size=int(rng.choice((1, 3, 5, 7, 9))),
                                  growth=str(rng.choice(GROWTH_RULES))))
    return found


@pytest.mark.parametrize("arch", [Architecture(512, 1, 10, 2, 4), Architecture(400, 8, 26, 8, 1),
                                  Architecture(64, 3, 5, 3, 2, kernel_size=9), Architecture(7, 2, 3, 4, 2)],
                         ids=lambda a: f"{a.name()}-{a.input_length}x{a.input_channels}")
def test_plan_replays_without_clobbering(arch):
    replay(arch)


def test_random_plans_replay_without_clobbering():
    for arch in architectures(150, seed=11):
        replay(arch)


def test_overlap_saves_ram_over_two_separate_maps():
    arch = Architecture(512, 1, 10, k=4, c=3)
    plan = plan_c_arena(arch)
    separate = max(a.nbytes + b.nbytes for a, b in zip(plan.maps, plan.maps[1:]))
    chain = max(m.offset + m.nbytes for m in plan.maps)
    assert chain < separate
    # The shift is at least a row of the output map whenever the output is written beside the input.
    assert overlap_shift(10, 4, 6, 3) >= 6


def test_estimate_adds_io_stack_tables_and_code():
    arch = Architecture(512, 1, 10, k=2, c=4)
    cost = estimate_c(arch)
    assert cost.ram_bytes == plan_c_arena(arch).arena_bytes + 512 + 10 + STACK_BYTES
    assert cost.flash_bytes == table_bytes(arch) + cost.code_bytes and cost.code_bytes > CODE_FIXED_BYTES
    # Weights dominate the tables: every conv weight and dense weight is there once.
    weights = sum(f * 3 * c for f, c in zip(arch.filters, (1, *arch.filters[:-1]))) + arch.filters[-1] * 10
    assert weights <= table_bytes(arch) <= weights + 12 * (sum(arch.filters) + 10) + 64
