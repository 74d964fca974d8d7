"""Time per inference on the chip: instructions of the generated C runtime, fitted to emulated counts.

A budget of RAM and flash says nothing of time; the method's MAC rule (CoreMark x 10^4) is a throughput proxy
that knows neither the kernels nor the sensor's cadence. This module counts what the generated C
(`tinynas.deploy.c_codegen`) executes for an architecture, per core family, from the shape of every loop it
runs: conv rows, blocks of four output channels, the inner dot products (per SMLAD step of four bytes on the
DSP path, per byte on the Armv6-M one), the edge rows' corrections, every output's requantization (stored,
max-pooled or summed), the MEAN and the dense head. Each feature's cost in instructions is fitted by
non-negative least squares to counts QEMU measured (`-icount`: instructions, not cycles) on random models
(`benchmarks/latency.py fit`; `tests/cost/test_latency.py` holds the fit within 15 % of a fresh measurement on
30 other random architectures per core).

Cycles are instructions x a cycles-per-instruction estimate per core, taken from the Arm Technical Reference
Manuals' timings applied to the inner loop's instruction mix (stated in `CORES`; QEMU models no pipeline, flash
wait states are not modelled). Cores no emulator here runs are scaled from a stated figure and say so: the
ISPU from ST's measured cycles per MAC on it, Xtensa from the Cortex-M0 count (the portable kernels) by
CoreMark per MHz. No TensorFlow: the search checks every candidate with this before training it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tinynas.cost.c_runtime import pad_left
from tinynas.space import Architecture

FEATURES = ("constant", "stages", "rows", "blocks", "dot4_calls", "dot4_steps", "dot4_tail_bytes", "dot1_calls",
            "dot1_steps", "dot1_tail_bytes", "outputs_store", "outputs_max", "outputs_sum", "edge_channels",
            "edge_weight_bytes", "head_channels", "head_macs", "classes")
"""What the generated C does per inference, counted from the architecture alone (`c_features`):

- stages: conv_pool / conv_sum calls; rows: conv rows computed (conv_row calls);
- blocks: runs of at most four output channels per row (conv_sums + emit_run calls);
- dot4_calls / dot1_calls: four-channel and one-channel dot products; dot*_steps: their 4-byte SIMD steps on the
  DSP path, their bytes on Armv6-M; dot*_tail_bytes: the n % 4 bytes the DSP path finishes one at a time;
- outputs_store / _max / _sum: outputs requantized and stored (first pooled row), max-pooled, or summed for MEAN;
- edge_channels / edge_weight_bytes: at an edge row, the channels whose padded taps' weights are summed, and
  those weights;
- head_channels, head_macs, classes: the MEAN over the last map and the dense layer."""


@dataclass(frozen=True)
class CoreTiming:
    """How one core family runs the generated C: its kernels, its instruction costs, and its cycles per
    instruction (an estimate, with its basis)."""

    family: str
    kernels: str
    """Which kernels the C preprocessor picks for it: "dsp" (SMLAD) or "v6m" (the Armv6-M loop); the fit."""
    cycles_per_instruction: float
    basis: str
    scale: float = 1.0
    """Cycles per cycle of the fitted family (a core no emulator here runs, scaled from a stated figure)."""
    cycles_per_mac: float = 0.0
    """When set, cycles = MACs x this (a core whose only published speed is per MAC)."""


# Fitted by `python benchmarks/latency.py fit` (results/latency-fit.md): instructions per unit of each FEATURE,
# non-negative least squares over random architectures measured under QEMU (arm-none-eabi-gcc 12.2 -Os).
COEFFICIENTS: dict[str, dict[str, float]] = {
    "v6m": {"stages": 519.574, "blocks": 66.777, "dot4_steps": 15.143, "dot1_calls": 10.354, "dot1_steps": 8.177,
        "outputs_store": 127.487, "outputs_sum": 96.126, "edge_channels": 53.157, "edge_weight_bytes": 5.736,
        "head_channels": 12.094, "head_macs": 9.75},
    "dsp": {"stages": 48.878, "blocks": 59.529, "dot4_steps": 25.192, "dot4_tail_bytes": 12.244, "dot1_calls": 22.568,
        "dot1_steps": 13.418, "dot1_tail_bytes": 6.426, "outputs_store": 52.597, "outputs_sum": 41.808,
        "edge_channels": 40.866, "edge_weight_bytes": 5.285, "head_channels": 33.082, "head_macs": 5.268},
}
"""Features absent from a family's table cost nothing there (the fit set them to 0: another feature carries it)."""

TIME_HEADROOM = 1.25
"""A candidate keeps a time budget if its estimate x this does: the fit's worst error on fresh architectures was 5 %
(results/latency-fit.md), the cycles per instruction are an estimate, and flash wait states and the interrupts of
the sensor's own code are not modelled."""

ARMV6M = ("cortex-m0", "cortex-m0+", "cortex-m1")
"""Armv6-M cores: the generated C's Armv6-M loop (`__ARM_ARCH_6M__`)."""
DSP = ("cortex-m4", "cortex-m7", "cortex-m33", "cortex-m35p", "cortex-m55", "cortex-m85")

# Cycles per instruction, from the Arm TRMs' timings applied to the inner loop (the bulk of every inference):
# Armv6-M: 5 LDRSB (2 cycles each) + 4 MULS + 4 ADD + 1 ADDS (1) + a taken BNE (3 on the M0, 2 on the M0+)
# over 15 instructions; Cortex-M4: 5 LDR (2, not back to back) + 10 SXTB16 + 8 SMLAD + CMP (1) + a taken BNE
# (~3) over 25.
CORES: dict[str, CoreTiming] = {
    "cortex-m0": CoreTiming("cortex-m0", "v6m", 23 / 15, "Cortex-M0 TRM (DDI 0432C) timings on the inner loop, "
                            "single-cycle multiplier; flash wait states not modelled"),
    "cortex-m0+": CoreTiming("cortex-m0+", "v6m", 22 / 15, "Cortex-M0+ TRM (DDI 0484C) timings on the inner loop, "
                             "single-cycle multiplier; flash wait states not modelled"),
    "cortex-m4": CoreTiming("cortex-m4", "dsp", 32 / 25, "Cortex-M4 TRM (DDI 0439D) timings on the inner loop; "
                            "flash wait states not modelled"),
    "ispu": CoreTiming("ispu", "v6m", 1.0, "ST's measured 18.42 cycles per MAC of a quantized network on the ISPU "
                       "(ST Edge AI, st-mems-ispu tutorials, at 5 MHz); no emulator, no published cycle timing",
                       cycles_per_mac=18.42),
    "xtensa": CoreTiming("xtensa", "v6m", 23 / 15, "no emulator here: the Cortex-M0 count (the portable kernels) "
                         "scaled by CoreMark per MHz, Cortex-M0 2.33 against ESP32-S3 2.55 (613 at 240 MHz)",
                         scale=2.33 / 2.55),
}


def core_timing(core: str) -> tuple[CoreTiming, str]:
    """The timing that stands for a target's `core` (its `core` text), and a note when it is a stand-in."""
    name = core.strip().lower()
    if name.startswith("cortex-m0+"):
        return CORES["cortex-m0+"], ""
    if name.startswith(ARMV6M):
        return CORES["cortex-m0"], ""
    if name.startswith(DSP):
        return CORES["cortex-m4"], "" if name.startswith("cortex-m4") else "timed as a Cortex-M4 (DSP kernels)"
    if name.startswith("ispu"):
        return CORES["ispu"], ""
    if name.startswith("xtensa"):
        return CORES["xtensa"], ""
    what = f"core {core!r}" if core else "no core given"
    return CORES["cortex-m0"], f"{what}: not modelled, timed as a Cortex-M0 (the portable kernels, the slowest)"


def _edge_rows(rows: int, computed: int, kernel: int) -> list[int]:
    """For each computed conv row that is an edge row (a tap on the padding), its taps inside the map."""
    left = pad_left(kernel)
    found = []
    for x in range(computed):
        first = x - left
        if first < 0 or first + kernel > rows:
            k0 = -first if first < 0 else 0
            k1 = rows - first if first + kernel > rows else kernel
            found.append(max(0, k1 - k0))
    return found


def c_features(arch: Architecture, kernels: str) -> dict[str, float]:
    """How many times the generated C does each thing of FEATURES for one inference of `arch`."""
    simd = kernels == "dsp"
    f = dict.fromkeys(FEATURES, 0.0)
    f["constant"] = 1.0
    cin = arch.input_channels
    last = len(arch.filters) - 1
    for index, (cout, rows) in enumerate(zip(arch.filters, arch.lengths)):
        pooled = index < last
        computed = rows // 2 * 2 if pooled else rows
        n = arch.kernel_size * cin
        edges = _edge_rows(rows, computed, arch.kernel_size)
        lengths = [n] * (computed - len(edges)) + [taps * cin for taps in edges]
        fours, rest = divmod(cout, 4)
        f["stages"] += 1
        f["rows"] += computed
        f["blocks"] += computed * (fours + (1 if rest else 0))
        f["dot4_calls"] += computed * fours
        f["dot1_calls"] += computed * rest
        for length in lengths:
            steps, tail = divmod(length, 4) if simd else (length, 0)
            f["dot4_steps"] += fours * steps
            f["dot4_tail_bytes"] += fours * tail
            f["dot1_steps"] += rest * steps
            f["dot1_tail_bytes"] += rest * tail
        for length in lengths[computed - len(edges):]:
            f["edge_channels"] += cout
            f["edge_weight_bytes"] += cout * (n - length)
        if pooled:
            f["outputs_store"] += computed // 2 * cout
            f["outputs_max"] += computed // 2 * cout
        else:
            f["outputs_sum"] += computed * cout
        cin = cout
    f["head_channels"] = float(cin)
    f["head_macs"] = float(cin * arch.classes)
    f["classes"] = float(arch.classes)
    return f


def c_instructions(arch: Architecture, kernels: str) -> float:
    """Instructions one inference of `arch` executes in the generated C on a core with `kernels` ("dsp", "v6m")."""
    weights = COEFFICIENTS[kernels]
    return sum(weights.get(name, 0.0) * count for name, count in c_features(arch, kernels).items())


@dataclass(frozen=True)
class TimeEstimate:
    """One inference of an architecture on a core: instructions, cycles, and (at a clock) seconds."""

    instructions: float
    cycles: float
    core: str
    cycles_per_instruction: float
    basis: str

    def seconds(self, clock_mhz: float) -> float:
        return self.cycles / (clock_mhz * 1e6)

    def to_dict(self) -> dict:
        return asdict(self)


def estimate_time(arch: Architecture, core: str, mac_count: int) -> TimeEstimate:
    """The generated C's instructions and cycles for one inference of `arch` (`mac_count` MACs: the cost model's
    count) on `core` (a target's core text)."""
    timing, note = core_timing(core)
    instructions = c_instructions(arch, timing.kernels)
    if timing.cycles_per_mac:
        cycles = timing.cycles_per_mac * mac_count
    else:
        cycles = instructions * timing.cycles_per_instruction * timing.scale
    basis = timing.basis + (f"; {note}" if note else "")
    return TimeEstimate(instructions=round(instructions), cycles=round(cycles), core=timing.family,
                        cycles_per_instruction=timing.cycles_per_instruction, basis=basis)
