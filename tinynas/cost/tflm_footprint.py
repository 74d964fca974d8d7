"""What TFLite Micro needs on the chip beyond its tensor arena: the interpreter's static RAM, stack and code.

The arena (`tinynas.cost.estimate.estimate_arena`) is not all a `--runtime tflm` firmware holds. A real
application also has, in RAM, the `MicroInterpreter` and `MicroMutableOpResolver` objects and whatever static
data the interpreter and kernels bring (.data + .bss), and the stack that `AllocateTensors()` and `Invoke()`
reach; in flash, beside the model, the interpreter's and the kernels' code and constants. On a 4-8 KiB part
these are not small (issue 37).

The figures below were measured on TFLite Micro itself (snapshot 90b983c2), built with arm-none-eabi-gcc 12.2
and picolibc for a Cortex-M0 (QEMU micro:bit) and a Cortex-M4F (QEMU MPS2-AN386) as a firmware author builds
it: a function-static `MicroMutableOpResolver` with exactly the model's ops and a function-static
`MicroInterpreter` (TFLM's person_detection example; placement new saves 408 B of the static RAM), TFLM's
`release` build (error strings stripped: what one ships on a small part) at its Makefile's optimization. Each
figure is the firmware minus a baseline firmware that holds the same arena and model but does not call TFLM
(`benchmarks/tflm_arm/footprint.sh`, results in `benchmarks/results/tflm-footprint.md`). None of them depends
on the model beyond its op set: static RAM, code and both stack peaks were the same to the byte for all 7
measured models. The stack is the peak over AllocateTensors() and Invoke(), painted and read back, plus
STACK_MARGIN_BYTES. The default (non-release) build needs much more (M0: 63-68 KB of code, 1,484 B of stack).

A(k, c) lowers to CONV_2D, MEAN and FULLY_CONNECTED, and to MAX_POOL_2D too once it has a cell, so there
are two op sets, and code is counted per op set. Cores: Armv6-M (Cortex-M0/M0+/M1/M23) take the Cortex-M0
build's figures, other Cortex-M cores the Cortex-M4's; a core measured on neither (an ISPU, Xtensa,
RISC-V) takes the larger of the two for each figure, and says so.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

STACK_MARGIN_BYTES = 64
"""Added to the measured peak stack: another compiler version or flags move it by a few words."""


@dataclass(frozen=True)
class TflmBuild:
    """TFLite Micro's measured footprint on one core, outside the arena (bytes)."""

    core: str
    static_ram_bytes: int
    """.data + .bss: the interpreter and resolver objects and the kernels' and interpreter's static data."""
    stack_bytes: int
    """Peak stack of AllocateTensors() and Invoke(), measured (the margin is added by `footprint`)."""
    code_bytes: int
    """Flash for the three ops of a network without cells (CONV_2D, MEAN, FULLY_CONNECTED)."""
    pool_static_ram_bytes: int
    """Static RAM MAX_POOL_2D adds once the network has a cell (one more resolver slot)."""
    pool_code_bytes: int
    """Flash MAX_POOL_2D adds once the network has a cell."""


# benchmarks/results/tflm-footprint.md, release build, function-static objects. On the M0 a third of the code
# is libgcc's soft-float arithmetic (TFLM computes its requantization multipliers in double at Prepare time).
CORTEX_M0 = TflmBuild(core="Cortex-M0", static_ram_bytes=752, stack_bytes=756, code_bytes=39_360,
                      pool_static_ram_bytes=32, pool_code_bytes=3_864)
CORTEX_M4 = TflmBuild(core="Cortex-M4F", static_ram_bytes=752, stack_bytes=672, code_bytes=29_320,
                      pool_static_ram_bytes=32, pool_code_bytes=2_648)

ARMV6M_CORES = ("cortex-m0", "cortex-m0+", "cortex-m1", "cortex-m23")


@dataclass(frozen=True)
class TflmFootprint:
    """TFLite Micro's bytes outside the arena for one network on one core, and which build they come from."""

    interpreter_ram_bytes: int
    stack_bytes: int
    code_bytes: int
    basis: str

    def to_dict(self) -> dict:
        """JSON-ready dict."""
        return asdict(self)


def build_for(core: str) -> tuple[TflmBuild, str]:
    """The measured build that stands for `core`, and a phrase saying which."""
    name = core.strip().lower()
    if name.startswith(ARMV6M_CORES):
        return CORTEX_M0, "measured on a Cortex-M0 build"
    if name.startswith("cortex-m"):
        return CORTEX_M4, "measured on a Cortex-M4F build"
    larger = TflmBuild(core="larger of Cortex-M0 and Cortex-M4F",
                       static_ram_bytes=max(CORTEX_M0.static_ram_bytes, CORTEX_M4.static_ram_bytes),
                       stack_bytes=max(CORTEX_M0.stack_bytes, CORTEX_M4.stack_bytes),
                       code_bytes=max(CORTEX_M0.code_bytes, CORTEX_M4.code_bytes),
                       pool_static_ram_bytes=max(CORTEX_M0.pool_static_ram_bytes, CORTEX_M4.pool_static_ram_bytes),
                       pool_code_bytes=max(CORTEX_M0.pool_code_bytes, CORTEX_M4.pool_code_bytes))
    what = f"core {core!r}" if core else "no core given"
    return larger, f"{what}: not measured, the larger of the Cortex-M0 and Cortex-M4F builds"


def footprint(cells: int, core: str = "") -> TflmFootprint:
    """TFLite Micro's static RAM, stack and code for a network of `cells` cells on `core`."""
    build, basis = build_for(core)
    code = build.code_bytes + (build.pool_code_bytes if cells > 0 else 0)
    ram = build.static_ram_bytes + (build.pool_static_ram_bytes if cells > 0 else 0)
    return TflmFootprint(interpreter_ram_bytes=ram,
                         stack_bytes=build.stack_bytes + STACK_MARGIN_BYTES, code_bytes=code, basis=basis)
