"""The generated input preparation (model_prepare.c) against tinynas's own serving path, bit for bit.

For each normalization (none, channel, window), a randomized A(k, c) model is calibrated on windows prepared
the way training prepares them, exported with its card's preprocessing, and the generated
`tinynas_prepare` + `tinynas_infer` are compiled for this machine. Raw float windows of every awkward kind
(loud, faint, offset, all zeros, a clipped one, .5 steps that round either way) must give exactly the int8 input
serving gives (`Preprocessing.apply` then `Int8Model.quantize`) and exactly TFLite Micro's outputs on it.
"""

from __future__ import annotations

import io
import json
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

from devtools.random_weights import randomized_model
from tinynas.data.preprocess import Preprocessing
from tinynas.data.windows import Windows
from tinynas.deploy.bundle import firmware_zip
from tinynas.deploy.export import convert_int8, write_export
from tinynas.deploy.litert import Int8Model
from tinynas.deploy.measure import tflite_micro_outputs
from tinynas.space import Architecture

HOST_MAIN = r"""
#include <stdio.h>
#include "model_compiled.h"
int main(void) {
  static float raw[TINYNAS_INPUT_SIZE];
  static int8_t input[TINYNAS_INPUT_SIZE];
  int8_t output[TINYNAS_OUTPUT_SIZE];
  while (fread(raw, sizeof raw[0], TINYNAS_INPUT_SIZE, stdin) == TINYNAS_INPUT_SIZE) {
    tinynas_prepare(raw, input);
    if (tinynas_infer(input, output) != 0) return 1;
    fwrite(input, 1, sizeof input, stdout);
    fwrite(output, 1, sizeof output, stdout);
  }
  return 0;
}
"""
LENGTH, CHANNELS = 64, 3


def raw_windows(rng: np.random.Generator, count: int) -> np.ndarray:
    """Windows as a sensor gives them: per-window gains over four decades, channel offsets, extremes."""
    gains = 10.0 ** rng.uniform(-2, 2, size=(count, 1, 1))
    x = rng.normal(size=(count, LENGTH, CHANNELS)) * gains + rng.normal(size=(1, 1, CHANNELS)) * 3
    x[0] = 0.0  # silence
    x[1] = np.clip(x[1] * 1e4, -127, 127)  # a clipped, saturated window
    x[2] = np.round(rng.normal(size=(LENGTH, CHANNELS)) * 40)  # int8-like sensor counts
    return x.astype(np.float32)


def host_run(folder: Path, compiler: str, raw: np.ndarray, libm: bool) -> tuple[np.ndarray, np.ndarray]:
    (folder / "main.c").write_text(HOST_MAIN)
    binary = folder / "prepare"
    built = subprocess.run([compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(binary),
                            str(folder / "main.c"), str(folder / "model_compiled.c"), str(folder / "model_prepare.c"),
                            *(["-lm"] if libm else [])], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(binary)], input=raw.astype("<f4").tobytes(), capture_output=True, check=True,
                         timeout=600)
    both = np.frombuffer(ran.stdout, dtype=np.int8).reshape(len(raw), -1)
    return both[:, :LENGTH * CHANNELS], both[:, LENGTH * CHANNELS:]


@pytest.mark.parametrize("normalize", ["none", "channel", "window"])
def test_prepare_gives_the_served_input_and_outputs_bit_for_bit(normalize, tflite_micro, c_compiler, tmp_path):
    rng = np.random.default_rng(7)
    train = raw_windows(rng, 200)
    windows = Windows(train, np.arange(200) % 2, np.arange(200), ("a", "b"), 100.0)
    pre = Preprocessing.fit(windows, np.arange(200), normalize)
    arch = Architecture(LENGTH, CHANNELS, 2, k=4, c=1, kernel_size=3)
    tflite = convert_int8(randomized_model(arch, seed=3), pre.apply(train[:64]))
    exported = write_export(tmp_path, arch, tflite, {"classes": ["a", "b"], "preprocessing": pre.to_dict()})
    card = json.loads(exported.card_path.read_text())
    assert card["c_runtime"]["prepare_source"] == "model_prepare.c" and exported.prepare_path is not None
    assert "int tinynas_prepare(const float *window, int8_t *input);" in exported.compiled_header_path.read_text()

    raw = raw_windows(np.random.default_rng(8), 300)
    model = Int8Model(tflite)
    served = model.quantize(pre.apply(raw)).reshape(len(raw), -1)
    # .5 steps: quantized inputs that land exactly half-way must round as numpy does (to even).
    assert served.std() > 5, "the inputs hardly use the int8 range: the check would be weak"
    got_input, got_output = host_run(tmp_path, c_compiler, raw, libm=normalize == "window")
    differ = int((got_input != served).any(axis=1).sum())
    assert differ == 0, f"{differ} of {len(raw)} windows prepared differently from serving ({normalize})"
    expected = tflite_micro_outputs(tflite, served)
    assert np.array_equal(got_output, expected)
    if normalize == "window":
        # The point of it: a window 10x louder is the same input (up to the float's rounding).
        louder = model.quantize(pre.apply(raw[3:4] * 10)).reshape(-1)
        assert np.abs(louder.astype(int) - served[3].astype(int)).max() <= 1
        # The firmware bundle carries it, and builds and runs with the command its README gives.
        bundle = tmp_path / "bundle"
        zipfile.ZipFile(io.BytesIO(firmware_zip(tmp_path))).extractall(bundle)
        assert (bundle / "model_prepare.c").is_file()
        assert "tinynas_prepare(raw, window)" in (bundle / "main.c").read_text()
        build = next(line for line in (bundle / "README.txt").read_text().splitlines() if line.startswith("Build: "))
        assert build.endswith("-lm -o model && ./model")
        said = subprocess.run(build.removeprefix("Build: ").replace("cc ", f"{c_compiler} ", 1), shell=True,
                              cwd=bundle, capture_output=True, text=True, timeout=120)
        assert said.returncode == 0 and said.stdout.strip() in ("a", "b"), said.stderr


def test_half_way_values_round_to_even_in_c_as_in_numpy(c_compiler, tmp_path):
    # The input scale 0.5 puts x = k/4 exactly on .5 steps of the quantizer: both rounding ways get exercised.
    pre = Preprocessing(LENGTH, CHANNELS, 100.0, ("a", "b"))
    from tinynas.deploy.c_prepare import generate_prepare

    (tmp_path / "model_compiled.h").write_text(
        "#include <stdint.h>\n#define TINYNAS_INPUT_SIZE 192\n#define TINYNAS_INPUT_CHANNELS 3\n"
        "#define TINYNAS_INPUT_SCALE 0.5f\n#define TINYNAS_INPUT_ZERO_POINT (-3)\n"
        "int tinynas_prepare(const float *window, int8_t *input);\n")
    (tmp_path / "model_prepare.c").write_text(generate_prepare(pre, "model_compiled.h", "tinynas"))
    (tmp_path / "main.c").write_text(
        "#include <stdio.h>\n#include \"model_compiled.h\"\nint main(void) {\n"
        "  static float raw[192]; static int8_t input[192];\n"
        "  while (fread(raw, 4, 192, stdin) == 192) { tinynas_prepare(raw, input); fwrite(input, 1, 192, stdout); }\n"
        "  return 0;\n}\n")
    binary = tmp_path / "q"
    subprocess.run([c_compiler, "-std=c99", "-Wall", "-Werror", "-o", str(binary), str(tmp_path / "main.c"),
                    str(tmp_path / "model_prepare.c")], check=True)
    steps = (np.arange(-600, 600) / 4).astype(np.float32)  # -150 .. 150 by quarter steps: clamps too
    raw = np.resize(steps, (len(steps) // 192 + 1) * 192).reshape(-1, LENGTH, CHANNELS)
    ran = subprocess.run([str(binary)], input=raw.astype("<f4").tobytes(), capture_output=True, check=True)
    got = np.frombuffer(ran.stdout, dtype=np.int8).reshape(raw.shape)
    expected = np.clip(np.round(raw / np.float32(0.5)) + (-3), -128, 127).astype(np.int8)
    assert np.array_equal(got, expected)


QEMU_HEADER = """#include <stdint.h>
/* The harness's view: a raw float window in (as bytes), the prepared int8 input out. */
#define TINYNAS_INPUT_SIZE {raw_bytes}
#define TINYNAS_OUTPUT_SIZE {size}
int tinynas_infer(const int8_t *input, int8_t *output);
"""
QEMU_WRAPPER = """#include <string.h>
#include "model_prepare.c"
/* The emulation harness calls tinynas_infer on int8 buffers: here it hands tinynas_prepare a float window. */
int tinynas_infer(const int8_t *input, int8_t *output) {
  float window[TINYNAS_INPUT_SIZE];
  memcpy(window, input, sizeof window);
  (void)tinynas_prepare(window, output);
  return 0;
}
"""


@pytest.mark.parametrize("board", ["microbit", "mps2-an386"])
def test_prepare_on_emulated_cortex_m0_and_m4f_gives_the_served_input(board, arm_toolchain, tmp_path):
    """On the chips themselves: the Cortex-M0 has no FPU (float and double in software), the M4F a single-precision
    one (double still in software, sqrt from picolibc): each normalization must still give serving's bits."""
    from devtools.emulate import run_on_qemu
    from tinynas.deploy.c_prepare import float_literal, generate_prepare

    scale, zero = np.float32(0.0625), -3
    size = LENGTH * CHANNELS
    rng = np.random.default_rng(11)
    raw = raw_windows(rng, 40)
    # Steps of 1/32: with the scale 1/16 every other value is half-way, so both rounding ways are exercised.
    raw[3] = ((np.arange(size) - size // 2) / 32).reshape(LENGTH, CHANNELS)
    for normalize in ("none", "channel", "window"):
        folder = tmp_path / normalize
        folder.mkdir()
        train = raw_windows(rng, 60)
        pre = Preprocessing.fit(Windows(train, np.arange(60) % 2, np.arange(60), ("a", "b"), 100.0),
                                np.arange(60), normalize)
        (folder / "model_compiled.h").write_text(
            f"#include <stdint.h>\n#define TINYNAS_INPUT_SIZE {size}\n#define TINYNAS_INPUT_CHANNELS {CHANNELS}\n"
            f"#define TINYNAS_INPUT_SCALE {float_literal(scale)}\n#define TINYNAS_INPUT_ZERO_POINT ({zero})\n"
            "int tinynas_infer(const int8_t *input, int8_t *output);\n"
            "int tinynas_prepare(const float *window, int8_t *input);\n")
        (folder / "model_prepare.c").write_text(generate_prepare(pre, "model_compiled.h", "tinynas"))
        (folder / "wrapper.c").write_text(QEMU_WRAPPER)
        (folder / "harness_model.h").write_text(QEMU_HEADER.format(raw_bytes=4 * size, size=size))
        ran = run_on_qemu(folder / "wrapper.c", folder / "harness_model.h",
                          raw.reshape(len(raw), -1).astype("<f4").view(np.int8), board, folder / "qemu",
                          timeout=300)
        prepared = pre.apply(raw).reshape(len(raw), -1)
        expected = np.clip(np.round(prepared / scale) + zero, -128, 127).astype(np.int8)
        assert expected.std() > 5, "the inputs hardly use the int8 range: the check would be weak"
        differ = int((ran.outputs != expected).any(axis=1).sum())
        assert differ == 0, f"{differ} of {len(raw)} windows prepared differently on {board} ({normalize})"
