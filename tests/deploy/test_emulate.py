"""The emulated-MCU runner against a hand-written stand-in of the generated C model (interface.md).

The stand-in is a small dense layer applied `repeats` times, with int32 accumulators on the stack and
an int8 arena in .bss, so outputs, stack and instruction counts all have something to show. Its
outputs under QEMU must equal the same C compiled for the host. Skips only without the toolchain
(gcc-arm-none-eabi, picolibc-arm-none-eabi, qemu-system-arm), which CI installs.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from devtools import emulate
from tinynas.errors import UsageError

LENGTH, CHANNELS, OUTPUTS = 48, 2, 5
INPUTS = LENGTH * CHANNELS
BOARDS = sorted(emulate.BOARDS)

# Skips without the toolchain locally; fails in CI, where devtools/test.sh installs it (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("arm_toolchain")

HEADER = f"""#ifndef MODEL_COMPILED_H
#define MODEL_COMPILED_H
#include <stdint.h>
#define TINYNAS_INPUT_LENGTH {LENGTH}
#define TINYNAS_INPUT_CHANNELS {CHANNELS}
#define TINYNAS_INPUT_SIZE {INPUTS}          /* T*C */
#define TINYNAS_OUTPUT_SIZE {OUTPUTS}
#define TINYNAS_ARENA_SIZE {INPUTS}
#define TINYNAS_INPUT_SCALE 0.0123f
#define TINYNAS_INPUT_ZERO_POINT (-3)
#define TINYNAS_OUTPUT_SCALE 0.1f
#define TINYNAS_OUTPUT_ZERO_POINT 5
int tinynas_infer(const int8_t *input, int8_t *output);
#endif
"""

HOST_MAIN = """#include <stdio.h>
#include "model_compiled.h"
int main(int argc, char **argv)
{
    int8_t input[TINYNAS_INPUT_SIZE], output[TINYNAS_OUTPUT_SIZE];
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    if (argc != 3 || in == NULL || out == NULL) return 2;
    while (fread(input, 1, sizeof input, in) == sizeof input) {
        if (tinynas_infer(input, output) != 0) return 3;
        fwrite(output, 1, sizeof output, out);
    }
    return fclose(out) == 0 ? 0 : 4;
}
"""


def c_array(values: np.ndarray) -> str:
    """The body of a C initializer, with a brace per row (-Wmissing-braces)."""
    if values.ndim == 1:
        return ", ".join(str(int(v)) for v in values)
    return ", ".join("{" + c_array(row) + "}" for row in values)


def write_stand_in(folder: Path, repeats: int = 1, body: str = "") -> tuple[Path, Path]:
    """model_compiled.c/.h with the interface's names; `body` (C statements) replaces the dense layer."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(17)
    weights = rng.integers(-128, 128, (OUTPUTS, INPUTS))
    bias = rng.integers(-2000, 2000, OUTPUTS)
    mix = rng.integers(-128, 128, (INPUTS, OUTPUTS))
    dense = f"""
    int32_t acc[TINYNAS_OUTPUT_SIZE];
    int r, o, i;
    memcpy(arena, input, TINYNAS_INPUT_SIZE);
    for (r = 0; r < {repeats}; ++r) {{
        for (o = 0; o < TINYNAS_OUTPUT_SIZE; ++o) {{
            int32_t a = bias[o];
            for (i = 0; i < TINYNAS_INPUT_SIZE; ++i) a += (int32_t)arena[i] * weights[o][i];
            acc[o] = a;
        }}
        /* Feed the layer back into the arena, so that every repeat is real work. */
        for (i = 0; i < TINYNAS_INPUT_SIZE; ++i) {{
            int32_t v = 0;
            for (o = 0; o < TINYNAS_OUTPUT_SIZE; ++o) v += (acc[o] / 256) * mix[i][o];
            arena[i] = clamp(v / 128 + arena[i] / 2);
        }}
    }}
    for (o = 0; o < TINYNAS_OUTPUT_SIZE; ++o) output[o] = clamp(acc[o] / 1024 + TINYNAS_OUTPUT_ZERO_POINT);
    return 0;"""
    source = f"""#include <string.h>
#include "model_compiled.h"
static const int8_t weights[TINYNAS_OUTPUT_SIZE][TINYNAS_INPUT_SIZE] = {{{c_array(weights)}}};
static const int32_t bias[TINYNAS_OUTPUT_SIZE] = {{{c_array(bias)}}};
static const int8_t mix[TINYNAS_INPUT_SIZE][TINYNAS_OUTPUT_SIZE] = {{{c_array(mix)}}};
static int8_t arena[TINYNAS_ARENA_SIZE];
static int8_t clamp(int32_t v) {{ return (int8_t)(v > 127 ? 127 : v < -128 ? -128 : v); }}
int tinynas_infer(const int8_t *input, int8_t *output)
{{{body or dense}
}}
"""
    if body:  # keep the unused tables and helper out of -Werror's way
        source = source.replace("static const", "const").replace("static int8_t clamp", "int8_t clamp")
        source = source.replace("static int8_t arena", "int8_t arena")
    (folder / "model_compiled.h").write_text(HEADER)
    (folder / "model_compiled.c").write_text(source)
    return folder / "model_compiled.c", folder / "model_compiled.h"


def windows(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-128, 128, (count, INPUTS)).astype(np.int8)


def host_outputs(c_compiler: str, model_c: Path, folder: Path, data: np.ndarray) -> np.ndarray:
    (folder / "host_main.c").write_text(HOST_MAIN)
    binary = folder / "host_model"
    subprocess.run([c_compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", f"-I{model_c.parent}",
                    str(folder / "host_main.c"), str(model_c), "-o", str(binary)], check=True)
    data.tofile(folder / "host_in.bin")
    subprocess.run([str(binary), str(folder / "host_in.bin"), str(folder / "host_out.bin")], check=True)
    return np.fromfile(folder / "host_out.bin", np.int8).reshape(len(data), OUTPUTS)


@pytest.mark.parametrize("board", BOARDS)
def test_cross_compiles_warning_free(tmp_path, board):
    model_c, _ = write_stand_in(tmp_path / "model")
    sizes = emulate.cross_compile(model_c, board, tmp_path / "model.o")
    assert sizes.rodata >= 2 * OUTPUTS * INPUTS + 4 * OUTPUTS  # weights, mix, bias
    assert sizes.bss >= INPUTS and sizes.data == 0
    assert sizes.text > 0 and sizes.flash == sizes.text + sizes.rodata and sizes.ram == sizes.bss
    # -Werror holds: a warning fails the build with the compiler's own line.
    (tmp_path / "warn.c").write_text("int f(int unused) { return 0; }\n")
    with pytest.raises(emulate.EmulationError, match="unused-parameter"):
        emulate.cross_compile(tmp_path / "warn.c", board, tmp_path / "warn.o")


@pytest.mark.parametrize("board", BOARDS)
def test_qemu_matches_host_and_measures(tmp_path, board, c_compiler):
    model_c, model_h = write_stand_in(tmp_path / "model")
    data = windows(50)
    run = emulate.run_on_qemu(model_c, model_h, data, board, tmp_path / "work", timeout=60)
    np.testing.assert_array_equal(run.outputs, host_outputs(c_compiler, model_c, tmp_path, data))
    assert run.outputs.dtype == np.int8 and run.outputs.shape == (50, OUTPUTS)
    assert len(np.unique(run.outputs, axis=0)) > 40  # not a constant

    # The acc[] array of int32 is on the stack, with the saved registers: more than it, far less than all.
    assert 4 * OUTPUTS < run.stack_peak < 512 < run.stack_available
    # Two passes over a 5x96 matrix: some thousands of instructions, the same work for every window.
    assert 2 * OUTPUTS * INPUTS < run.instructions_min <= run.instructions_mean <= run.instructions_max < 200_000
    assert run.instructions_max - run.instructions_min < 0.1 * run.instructions_mean
    assert run.model.flash > 2 * OUTPUTS * INPUTS and run.model.ram >= INPUTS
    assert run.image_static_ram >= run.model.ram + INPUTS  # the harness's window buffer comes on top
    assert run.image.flash < emulate.BOARDS[board].flash_bytes and run.command[0] == "qemu-system-arm"


def test_instructions_grow_with_work(tmp_path):
    counts = {}
    for repeats in (1, 4):
        model_c, model_h = write_stand_in(tmp_path / f"r{repeats}", repeats)
        run = emulate.run_on_qemu(model_c, model_h, windows(4), "microbit", tmp_path / f"w{repeats}", timeout=60)
        counts[repeats] = run.instructions_mean
    assert 3.3 < counts[4] / counts[1] < 4.2


@pytest.mark.parametrize("board", BOARDS)
def test_instructions_are_counted_exactly_to_a_tick(tmp_path, board):
    # A loop of two instructions (subs, bne) run 20,000 + (input[0] & 255) times.
    model_c, model_h = write_stand_in(tmp_path / "model", body="""
    uint32_t n = 20000u + (uint8_t)input[0];
    __asm__ volatile(".syntax unified\\n1: subs %0, %0, #1\\n bne 1b\\n" : "+l"(n) : : "cc");
    output[0] = output[1] = output[2] = output[3] = output[4] = 0;
    return 0;""")
    data = windows(20)
    run = emulate.run_on_qemu(model_c, model_h, data, board, tmp_path / "work", timeout=60)
    expected = 2 * (20000 + data[:, 0].view(np.uint8).astype(np.float64))
    # Within a timer tick, plus the few instructions of the call and of the timer reads.
    assert np.all(np.abs(run.instructions - expected) <= run.instruction_resolution + 30)
    assert run.stack_peak == 0  # a leaf that pushes nothing


def test_a_hung_model_is_stopped_at_the_timeout(tmp_path):
    model_c, model_h = write_stand_in(tmp_path / "model", body="""
    volatile int spin = 1;
    (void)input; (void)output;
    while (spin) {}
    return 0;""")
    started = time.monotonic()
    with pytest.raises(emulate.EmulationTimeout, match="timeout"):
        emulate.run_on_qemu(model_c, model_h, windows(1), "microbit", tmp_path / "work", timeout=1.5)
    assert time.monotonic() - started < 30


def test_a_fault_ends_qemu_with_a_clear_error(tmp_path):
    # An unmapped address: a HardFault on the Cortex-M0, which the harness reports and exits on.
    model_c, model_h = write_stand_in(tmp_path / "model", body="""
    (void)input; (void)output;
    return *(volatile int *)0x60000000;""")
    with pytest.raises(emulate.EmulationError, match="fault"):
        emulate.run_on_qemu(model_c, model_h, windows(1), "microbit", tmp_path / "work", timeout=30)


def test_a_model_too_big_for_the_microbit_says_so(tmp_path):
    model_c, model_h = write_stand_in(tmp_path / "model")
    model_h.write_text(HEADER.replace(f"TINYNAS_ARENA_SIZE {INPUTS}", "TINYNAS_ARENA_SIZE 20000"))
    with pytest.raises(emulate.EmulationError, match="does not fit: RAM overflowed by"):
        emulate.run_on_qemu(model_c, model_h, windows(1), "microbit", tmp_path / "work", timeout=30)


def test_bad_arguments_and_missing_tools(tmp_path, monkeypatch):
    model_c, model_h = write_stand_in(tmp_path / "model")
    with pytest.raises(UsageError, match="int8 of shape"):
        emulate.run_on_qemu(model_c, model_h, windows(2)[:, :10], "microbit", tmp_path, timeout=10)
    with pytest.raises(UsageError, match="unknown board"):
        emulate.run_on_qemu(model_c, model_h, windows(2), "esp32", tmp_path, timeout=10)
    monkeypatch.setattr(emulate.shutil, "which", lambda name: None)
    assert emulate.missing_tools() == ["arm-none-eabi-gcc", "qemu-system-arm"]
    with pytest.raises(emulate.EmulatorMissingError, match="apt-get install gcc-arm-none-eabi picolibc-arm-none-eabi"):
        emulate.cross_compile(model_c, "microbit", tmp_path / "model.o")
