"""The generated C runtime against TFLite Micro's interpreter (reference kernels): bit for bit.

20 random architectures (kernel sizes 1-9, 0-5 cells, odd lengths, 1-8 channels, per-tensor and per-channel
heads as the converter makes them), each run on 1,000 windows: real CWRU / ISL windows where the shape is
theirs and the data is present (../shared/data), random int8 windows (uniform over the whole range, and
Gaussian through the input quantization) for the rest.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest

from devtools.random_weights import calibration_windows, randomized_model
from tinynas.c_names import CNameError, check_prefix
from tinynas.deploy.c_codegen import CodegenError, compile_tflite, read_integer_model
from tinynas.deploy.export import convert_int8
from tinynas.deploy.measure import tflite_micro_outputs
from tinynas.space import Architecture, max_cells

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
ARCHITECTURES = 20
WINDOWS = 1000
SHAPES = ((512, 1), (400, 8), (75, 3), (33, 2))

HOST_MAIN = r"""
#include <stdio.h>
#include "model_compiled.h"
int main(void) {
  static int8_t input[TINYNAS_INPUT_SIZE];
  int8_t output[TINYNAS_OUTPUT_SIZE];
  while (fread(input, 1, sizeof input, stdin) == sizeof input) {
    if (tinynas_infer(input, output) != 0) return 1;
    fwrite(output, 1, sizeof output, stdout);
  }
  return 0;
}
"""


def random_architectures(count: int, seed: int) -> list[Architecture]:
    rng = np.random.default_rng(seed)
    found = []
    for index in range(count):
        length, channels = SHAPES[index % len(SHAPES)]
        found.append(Architecture(length, channels, int(rng.choice((2, 4, 10, 26))), k=int(rng.integers(1, 13)),
                                  c=int(rng.integers(0, min(max_cells(length), 5) + 1)),
                                  kernel_size=int(rng.choice((1, 3, 5, 7, 9)))))
    return found


def real_windows(shape: tuple[int, int]) -> np.ndarray | None:
    """Real windows of this shape (standardised per channel), or None without the data."""
    try:
        if shape == (512, 1) and (SHARED_DATA / "cwru").is_dir():
            from tinynas.data.cwru import load_cwru

            x = load_cwru(SHARED_DATA / "cwru").x
        elif shape == (400, 8) and (SHARED_DATA / "isl").is_dir():
            from tinynas.data.isl import load_isl

            x = load_isl(SHARED_DATA / "isl").x
        else:
            return None
    except Exception:
        return None
    x = x.astype(np.float32)
    return (x - x.mean(axis=(0, 1))) / (x.std(axis=(0, 1)) + 1e-6)


def quantize(windows: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return np.clip(np.round(windows / scale) + zero_point, -128, 127).astype(np.int8)


def int8_windows(arch: Architecture, model_input, seed: int) -> tuple[np.ndarray, int]:
    """WINDOWS int8 windows (flattened) for `arch` and how many of them are real."""
    rng = np.random.default_rng(seed)
    shape = (arch.input_length, arch.input_channels)
    real = real_windows(shape)
    parts, real_count = [], 0
    if real is not None:
        take = rng.choice(len(real), size=min(len(real), WINDOWS // 2), replace=False)
        parts.append(quantize(real[take], model_input.scale, model_input.zero_point))
        real_count = len(take)
    uniform = (WINDOWS - real_count) // 2
    parts.append(rng.integers(-128, 128, size=(uniform, *shape), dtype=np.int8))
    gaussian = rng.normal(size=(WINDOWS - real_count - uniform, *shape)).astype(np.float32)
    parts.append(quantize(gaussian, model_input.scale, model_input.zero_point))
    return np.concatenate(parts).reshape(WINDOWS, -1), real_count


def host_outputs(tflite: bytes, windows: np.ndarray, folder: Path, compiler: str) -> np.ndarray:
    source, header = compile_tflite(tflite)
    (folder / "model_compiled.c").write_text(source)
    (folder / "model_compiled.h").write_text(header)
    (folder / "main.c").write_text(HOST_MAIN)
    binary = folder / "infer"
    built = subprocess.run([compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary),
                            str(folder / "main.c"), str(folder / "model_compiled.c")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(binary)], input=windows.tobytes(), capture_output=True, check=True, timeout=600)
    return np.frombuffer(ran.stdout, dtype=np.int8).reshape(len(windows), -1)


@pytest.mark.slow
def test_generated_c_is_bit_exact_with_tflite_micro(tflite_micro, c_compiler, tmp_path):
    real_total = 0
    for index, arch in enumerate(random_architectures(ARCHITECTURES, seed=1717)):
        tflite = convert_int8(randomized_model(arch, seed=index), calibration_windows(arch, 32, seed=index))
        model_input = read_integer_model(tflite).input
        windows, real_count = int8_windows(arch, model_input, seed=index)
        real_total += real_count
        folder = tmp_path / f"arch{index}"
        folder.mkdir()
        expected = tflite_micro_outputs(tflite, windows)
        got = host_outputs(tflite, windows, folder, c_compiler)
        mismatched = int((got != expected).any(axis=1).sum())
        assert mismatched == 0, f"{arch.name()} on {arch.input_length}x{arch.input_channels}: " \
                                f"{mismatched} of {WINDOWS} windows differ"
    print(f"{ARCHITECTURES} architectures x {WINDOWS} windows bit-exact ({real_total} real windows)")


def test_the_arena_is_the_planned_one(exported_tiny):
    arch, tflite, _ = exported_tiny
    from tinynas.cost.c_runtime import plan_c_arena

    source, header = compile_tflite(tflite)
    assert f"#define TINYNAS_ARENA_SIZE {plan_c_arena(arch).arena_bytes}\n" in header
    assert "static int32_t arena[TINYNAS_ARENA_SIZE / 4];" in source
    assert "malloc" not in source and "float" not in source


def test_not_a_chain_is_refused():
    with pytest.raises(CodegenError, match="TFL3"):
        read_integer_model(b"not a model at all")
    with pytest.raises(CodegenError):
        read_integer_model(b"\x00\x00\x00\x00TFL3" + b"\x00" * 64)


@pytest.mark.slow
def test_generated_model_runs_on_emulated_cortex_m0_and_m4(exported_tiny, arm_toolchain, tflite_micro, tmp_path):
    """The exported model's model_compiled.c, cross-compiled warning-free, gives TFLite Micro's outputs
    under QEMU on a Cortex-M0 (micro:bit) and a Cortex-M4 (MPS2-AN386)."""
    from devtools import emulate

    _, tflite, paths = exported_tiny
    assert paths.compiled_c_path is not None and paths.compiled_header_path is not None
    windows, _ = int8_windows(Architecture(512, 1, 4, 1, 0), read_integer_model(tflite).input, seed=5)
    windows = windows[:40]
    expected = tflite_micro_outputs(tflite, windows)
    for board in sorted(emulate.BOARDS):
        workdir = tmp_path / board
        workdir.mkdir()
        run = emulate.run_on_qemu(paths.compiled_c_path, paths.compiled_header_path, windows, board, workdir,
                                  timeout=600)
        assert np.array_equal(run.outputs, expected), board
        assert run.stack_peak > 0 and run.instructions_mean > 0
        assert run.model.bss == read_integer_model(tflite).plan.arena_bytes  # the arena is all its RAM


def test_damaged_or_foreign_models_are_refused_in_one_error(exported_tiny):
    _, tflite, _ = exported_tiny
    for damaged in (tflite[: len(tflite) // 2], tflite[:64], tflite[:8] + bytes(len(tflite) - 8)):
        with pytest.raises(CodegenError):
            read_integer_model(damaged)


TWO_MODELS_MAIN = r"""
#include <stdio.h>
#include "emg/model_compiled.h"
#include "motor/model_compiled.h"
int main(void) {
  static int8_t a[EMG_INPUT_SIZE], b[MOTOR_INPUT_SIZE];
  int8_t out_a[EMG_OUTPUT_SIZE], out_b[MOTOR_OUTPUT_SIZE];
  if (fread(a, 1, sizeof a, stdin) != sizeof a || fread(b, 1, sizeof b, stdin) != sizeof b) return 2;
  if (emg_infer(a, out_a) != 0 || motor_infer(b, out_b) != 0) return 1;
  fwrite(out_a, 1, sizeof out_a, stdout);
  fwrite(out_b, 1, sizeof out_b, stdout);
  return 0;
}
"""


def test_two_models_link_into_one_firmware_with_two_prefixes(exported_tiny, tflite_micro, c_compiler, tmp_path):
    """Everything but the prefixed entry point and macros is static: two runtimes link side by side and each
    gives what it gives alone. Both headers keep the export's file name (each model's folder), so the include
    guards must come from the prefix too."""
    _, first, _ = exported_tiny
    arch = random_architectures(1, seed=3)[0]
    second = convert_int8(randomized_model(arch, seed=3), calibration_windows(arch, 16, seed=3))
    inputs = []
    for prefix, tflite in (("emg", first), ("motor", second)):
        source, header = compile_tflite(tflite, "model_compiled.h", prefix=prefix)
        assert f"int {prefix}_infer(const int8_t *input, int8_t *output);" in header and "tinynas_infer" not in header
        (tmp_path / prefix).mkdir()
        (tmp_path / prefix / "model_compiled.c").write_text(source)
        (tmp_path / prefix / "model_compiled.h").write_text(header)
        model = read_integer_model(tflite)
        inputs.append(np.random.default_rng(len(inputs)).integers(
            -128, 128, (1, model.input_length * model.input_channels)).astype(np.int8))
    (tmp_path / "main.c").write_text(TWO_MODELS_MAIN)
    built = subprocess.run([c_compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(tmp_path / "fw"),
                            str(tmp_path / "main.c"), str(tmp_path / "emg" / "model_compiled.c"),
                            str(tmp_path / "motor" / "model_compiled.c")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(tmp_path / "fw")], input=inputs[0].tobytes() + inputs[1].tobytes(),
                         capture_output=True, check=True, timeout=60)
    both = np.frombuffer(ran.stdout, dtype=np.int8)
    expected = np.concatenate([tflite_micro_outputs(first, inputs[0])[0], tflite_micro_outputs(second, inputs[1])[0]])
    assert np.array_equal(both, expected.astype(np.int8))


@pytest.mark.parametrize("prefix", ["", "9lives", "int", "my-model", "a" * 25, "__x", "é"])
def test_a_prefix_that_is_not_a_c_name_is_refused_in_one_line(prefix):
    with pytest.raises(CNameError, match="is not a C name"):
        check_prefix(prefix)
