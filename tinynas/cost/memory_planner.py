"""A replica of TFLite Micro's GreedyMemoryPlanner, so the arena head is known before training.

TFLM places every non-persistent buffer (activations, kernel scratch) in the arena head:
buffers sorted by size, largest first (a stable bubble sort over the buffers in reverse
order, so among equal sizes the later buffer goes first), each put at the lowest offset
where it fits between buffers whose lifetimes overlap its own. Sizes are rounded up to the
16-byte arena alignment. The head is the highest end offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinynas.space import round_up

ARENA_ALIGNMENT = 16
"""MicroArenaBufferAlignment(): every arena buffer starts and is sized on 16 bytes."""


def align_up(size: int, alignment: int = ARENA_ALIGNMENT) -> int:
    """Round `size` up to a multiple of `alignment`."""
    return round_up(size, alignment)


@dataclass(frozen=True)
class Buffer:
    """A buffer to place: bytes needed and the first and last operator index that use it."""

    size: int
    first_used: int
    last_used: int


def plan(buffers: list[Buffer]) -> list[int]:
    """Return the offset TFLM's greedy planner gives each buffer (sizes already aligned)."""
    count = len(buffers)
    if count == 0:
        return []
    # TFLM fills its sort array from the tail, then bubble-sorts by size descending (stable).
    order = list(range(count))[::-1]
    sizes = [buffers[i].size for i in order]
    swapped = True
    while swapped:
        swapped = False
        for i in range(1, count):
            if sizes[i - 1] < sizes[i]:
                sizes[i - 1], sizes[i] = sizes[i], sizes[i - 1]
                order[i - 1], order[i] = order[i], order[i - 1]
                swapped = True
    offsets = [0] * count
    placed: list[int] = []  # buffer ids ordered by offset, insertion after equal offsets
    for buffer_id in order:
        wanted = buffers[buffer_id]
        candidate = 0
        for other_id in placed:
            other = buffers[other_id]
            if other.first_used > wanted.last_used or wanted.first_used > other.last_used:
                continue
            if offsets[other_id] - candidate >= wanted.size:
                break
            candidate = max(candidate, offsets[other_id] + other.size)
        offsets[buffer_id] = candidate
        position = len(placed)
        for i, other_id in enumerate(placed):
            if offsets[other_id] > candidate:
                position = i
                break
        placed.insert(position, buffer_id)
    return offsets


def planned_size(buffers: list[Buffer]) -> int:
    """Bytes of arena the greedy plan needs: the highest end offset."""
    offsets = plan(buffers)
    return max((offset + buffer.size for offset, buffer in zip(offsets, buffers)), default=0)
