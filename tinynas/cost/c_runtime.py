"""Memory plan and cost of the generated C runtime (`tinynas.deploy.c_codegen`), without TensorFlow.

The C runtime runs an A(k, c) network as fused stages, one per convolution:

* stage 0 is the stem conv; stage i >= 1 is cell i's conv. Each stage's conv + ReLU is followed in the same
  loop by the next cell's 1x2 max-pool, so only the *pooled* map is ever stored (half the rows of the conv's
  output). The last stage instead adds its outputs straight into the MEAN's int32 sums, so its map is
  never stored at all;
* a final stage (MEAN's requantization + FULLY_CONNECTED) writes the caller's output.

Consecutive maps share bytes. Stage i reads map i (rows of `Ci` bytes) and writes map i+1 (rows of `Co`
bytes), one pooled row j at a time; row j needs input rows from `2j - pad_left` on, so everything below that
row is dead once row j is being computed. Map i+1 is placed `shift` bytes *below* map i, the smallest shift
for which every written row lands on dead bytes:

    start(i+1) + (j + 1) * Co <= start(i) + max(0, 2j - pad_left) * Ci      for every pooled row j.

(Whole rows are kept apart, so the shift can be one byte more than a byte-by-byte bound would need.)
`tests/cost/test_c_runtime.py` replays every read and write of the plan byte by byte to prove it, and the
exactness test compares the generated code with TFLite Micro on real windows. The map read by stage 0 is the
caller's input (read in place, never copied) and the output is the caller's buffer, so neither is in the
arena; `CRuntimeCost.ram_bytes` adds both back, so it compares fairly with TFLite Micro's arena, which
holds them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tinynas.space import Architecture, round_up

ACCUMULATOR_BYTES = 4
"""Each MEAN sum is an int32."""


@dataclass(frozen=True)
class MapPlacement:
    """One stored activation map: the pooled output of stage `stage` (rows x channels int8 bytes)."""

    stage: int
    rows: int
    channels: int
    offset: int

    @property
    def nbytes(self) -> int:
        """Bytes of the map."""
        return self.rows * self.channels


@dataclass(frozen=True)
class CArenaPlan:
    """Where every buffer of the C runtime's static arena lives (byte offsets from the arena start)."""

    maps: tuple[MapPlacement, ...]
    sums_offset: int
    sums_bytes: int
    features_offset: int
    features_bytes: int
    arena_bytes: int


def pad_left(kernel_size: int) -> int:
    """Zero-padding before the first sample of a 'same' conv with stride 1 (TFLite's rule: total // 2)."""
    return (kernel_size - 1) // 2


def overlap_shift(rows_out: int, channels_in: int, channels_out: int, kernel_size: int) -> int:
    """Bytes the pooled output map starts below its input map: the least that keeps whole rows apart."""
    left = pad_left(kernel_size)
    return max(0, max(((j + 1) * channels_out - max(0, 2 * j - left) * channels_in for j in range(rows_out)),
                      default=0))


def plan_c_arena(arch: Architecture) -> CArenaPlan:
    """The C runtime's arena for `arch`: overlapping pooled maps, then the MEAN sums and features."""
    return plan_chain(arch.lengths, arch.filters, arch.kernel_size)


def plan_chain(lengths: tuple[int, ...], filters: tuple[int, ...], kernel_size: int) -> CArenaPlan:
    """The arena for convs of `filters` outputs on `lengths` rows each (a 1x2 max-pool between two convs)."""
    stages = len(filters)
    # Map i (stored for stages 0..stages-2) is the pooled output of stage i: lengths[i+1] rows x filters[i].
    starts: list[int] = []
    shapes: list[tuple[int, int]] = []
    position = 0
    for stage in range(stages - 1):
        rows, channels = lengths[stage + 1], filters[stage]
        if stage > 0:
            position -= overlap_shift(rows, filters[stage - 1], channels, kernel_size)
        starts.append(position)
        shapes.append((rows, channels))
    lowest = min(starts, default=0)
    maps = tuple(MapPlacement(stage, rows, channels, start - lowest)
                 for stage, (start, (rows, channels)) in enumerate(zip(starts, shapes)))
    chain_end = max((m.offset + m.nbytes for m in maps), default=0)
    sums_offset = round_up(chain_end, ACCUMULATOR_BYTES)
    sums_bytes = ACCUMULATOR_BYTES * filters[-1]
    features_bytes = filters[-1]
    # The features (MEAN's int8 outputs) are written once every map is dead: over the maps if they fit.
    features_offset = 0 if chain_end >= features_bytes else sums_offset + sums_bytes
    arena = round_up(max(sums_offset + sums_bytes, features_offset + features_bytes), ACCUMULATOR_BYTES)
    return CArenaPlan(maps, sums_offset, sums_bytes, features_offset, features_bytes, arena)


# Measured on arm-none-eabi-gcc 12.2 -Os builds of 40 random architectures (0-7 cells, five input shapes) for the
# Cortex-M0 and the Cortex-M4F (`benchmarks/latency.py fit` measures the stack of every run; results/latency-fit.md)
# and set just above every measurement:
STACK_BYTES = 256
"""Peak stack of tinynas_infer: 136-248 B measured (the deepest chain: infer, conv_pool, conv_sums, the dot
kernel pushing eight registers, its bias and output pointers passed on the stack)."""
CODE_FIXED_BYTES = 1024
CODE_POOL_BYTES = 400
CODE_PER_CELL_BYTES = 85
"""Flash beyond the tables (code, one constant stage descriptor per conv): 744-978 B with no cell, 1,247-1,431 B
with one, 1,930 B with seven (the Cortex-M4F's DSP kernels are the larger); the max-pool's code comes with the
first cell."""


def code_bytes(arch: Architecture) -> int:
    """Flash the generated code and stage descriptors take beside the tables (an upper bound, measured)."""
    return CODE_FIXED_BYTES + (CODE_POOL_BYTES if arch.c else 0) + CODE_PER_CELL_BYTES * arch.c


@dataclass(frozen=True)
class CRuntimeCost:
    """RAM and flash of the generated C runtime on a 32-bit microcontroller."""

    arena_bytes: int
    io_bytes: int
    stack_bytes: int
    ram_bytes: int
    tables_bytes: int
    code_bytes: int
    flash_bytes: int

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


def table_bytes(arch: Architecture) -> int:
    """Constant bytes the generated code holds: int8 weights, int32 biases and requantization tables."""
    total, channels = 0, arch.input_channels
    for filters in arch.filters:
        # weights, bias and folded bias (int32), multiplier (int32), shift (int8)
        total += round_up(filters * arch.kernel_size * channels, 4) + filters * (4 + 4 + 4) + round_up(filters, 4)
        channels = filters
    return total + round_up(arch.classes * channels, 4) + arch.classes * (4 + 4) + round_up(arch.classes, 4)


def estimate_c(arch: Architecture) -> CRuntimeCost:
    """RAM (arena + the caller's input and output + stack) and flash (tables + code) of the C runtime."""
    arena = plan_c_arena(arch).arena_bytes
    io = arch.input_length * arch.input_channels + arch.classes
    tables, code = table_bytes(arch), code_bytes(arch)
    return CRuntimeCost(arena_bytes=arena, io_bytes=io, stack_bytes=STACK_BYTES,
                        ram_bytes=arena + io + STACK_BYTES, tables_bytes=tables, code_bytes=code,
                        flash_bytes=tables + code)
