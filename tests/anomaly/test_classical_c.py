"""The classical scorer's generated C against its Python score, on every window: the int16 input bit for bit, the
score within the stated float32 tolerance, the verdict wherever the score is not within that tolerance of the
threshold; and its code, linked for a Cortex-M0 and a Cortex-M4F, within the cost the search budgets it at."""

import subprocess

import numpy as np
import pytest

from tinynas.anomaly import classical
from tinynas.anomaly.classical_c import SCORE_TOLERANCE, generate_classical_c, host_scores
from tinynas.data.synthetic import vibration

HARNESS = r"""
#include <stdio.h>
#include "model_compiled.h"
int main(void) {
  static float window[TINYNAS_INPUT_SIZE];
  static int16_t input[TINYNAS_INPUT_SIZE];
  while (fread(window, sizeof(float), TINYNAS_INPUT_SIZE, stdin) == TINYNAS_INPUT_SIZE) {
    const int32_t clamped = tinynas_prepare(window, input);
    float score;
    const int32_t verdict = tinynas_score(input, &score);
    fwrite(input, sizeof(int16_t), TINYNAS_INPUT_SIZE, stdout);
    fwrite(&score, sizeof(float), 1, stdout);
    fwrite(&verdict, sizeof(int32_t), 1, stdout);
    fwrite(&clamped, sizeof(int32_t), 1, stdout);
  }
  return 0;
}
"""


def _windows(length: int, channels: int):
    """(normal, anomalous) windows: the synthetic machine's (one channel), or channels of it side by side."""
    made = vibration(windows_per_class=60, length=length, windows_per_recording=10, seed=4)
    x = np.concatenate([np.roll(made.x, shift, axis=0) for shift in range(channels)], axis=2)
    return x[made.y == 0], x[made.y != 0]


@pytest.mark.parametrize(("length", "channels"), [(256, 1), (200, 2), (8, 1)],
                         ids=["real FFT", "direct DFT, two channels", "short: empty bands"])
def test_the_c_score_is_the_python_score_on_every_window(tmp_path, c_compiler, length, channels):
    normal, faults = _windows(length, channels)
    scorer = classical.fit(normal[::2], faults[::3])
    threshold = float(np.quantile(scorer.score(normal[1::2]), 0.95))
    source, header = generate_classical_c(scorer, threshold, "model_compiled.h", "tinynas", "test")
    (tmp_path / "model_compiled.c").write_text(source)
    (tmp_path / "model_compiled.h").write_text(header)
    (tmp_path / "main.c").write_text(HARNESS)
    subprocess.run([c_compiler, "-std=c99", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(tmp_path / "run"),
                    str(tmp_path / "main.c"), str(tmp_path / "model_compiled.c"), "-lm"], check=True, timeout=120)
    # Every window: normal and faulty, and some ten times louder than the headroom (clamped).
    x = np.concatenate([normal, faults, faults[:10] * 10]).astype(np.float32)
    ran = subprocess.run([str(tmp_path / "run")], input=x.tobytes(), capture_output=True, check=True, timeout=120)
    size = length * channels
    record = np.dtype([("input", "<i2", (size,)), ("score", "<f4"), ("verdict", "<i4"), ("clamped", "<i4")])
    out = np.frombuffer(ran.stdout, dtype=record)
    assert len(out) == len(x)
    expected = scorer.quantize(x)
    np.testing.assert_array_equal(out["input"], expected.reshape(len(x), -1))
    raw = x.reshape(len(x), -1) / np.float32(scorer.input_scale)
    np.testing.assert_array_equal(out["clamped"], np.sum((raw > 32767) | (raw < -32768), axis=1))
    assert out["clamped"][-10:].min() > 0
    py = scorer.score_input(expected)
    error = np.abs(out["score"].astype(np.float64) - py) / (1 + py)
    assert error.max() <= SCORE_TOLERANCE, error.max()
    clear = np.abs(py - threshold) > SCORE_TOLERANCE * (1 + threshold)
    np.testing.assert_array_equal(out["verdict"][clear], (py > threshold)[clear])
    assert 0 < out["verdict"].sum() < len(x)


ENTRY = r"""
#include "model_compiled.h"
int16_t input[TINYNAS_INPUT_SIZE];
float score;
int entry(void) { return tinynas_score(input, &score); }
"""


@pytest.mark.parametrize(("core", "flags"), [("Cortex-M0", ["-mcpu=cortex-m0"]),
                                             ("Cortex-M4F", ["-mcpu=cortex-m4", "-mfloat-abi=hard",
                                                             "-mfpu=fpv4-sp-d16"])])
def test_the_linked_scorer_fits_the_cost_the_search_gives_it(tmp_path, arm_toolchain, core, flags):
    """Linked with what it calls (logf, sqrtf; the soft-float arithmetic where there is no float unit), its flash
    and static RAM are within the estimate."""
    normal, faults = _windows(512, 1)
    scorer = classical.fit(normal, faults)
    source, header = generate_classical_c(scorer, 10.0, "model_compiled.h", "tinynas")
    (tmp_path / "model_compiled.c").write_text(source)
    (tmp_path / "model_compiled.h").write_text(header)
    (tmp_path / "entry.c").write_text(ENTRY)
    elf = tmp_path / "scorer.elf"
    subprocess.run(["arm-none-eabi-gcc", "-Os", "-mthumb", *flags, "-std=c99", "--specs=picolibc.specs",
                    "-nostartfiles", "-ffunction-sections", "-fdata-sections", "-Wl,--gc-sections", "-Wl,-e,entry",
                    "-o", str(elf), str(tmp_path / "entry.c"), str(tmp_path / "model_compiled.c"), "-lm"],
                   check=True, timeout=120)
    sizes = subprocess.run(["arm-none-eabi-size", "-A", str(elf)], capture_output=True, text=True, check=True)
    section = {line.split()[0]: int(line.split()[1]) for line in sizes.stdout.splitlines()[2:] if
               len(line.split()) >= 2 and line.split()[1].isdigit()}
    costed = classical.cost(512, 1, core)
    assert section[".text"] + section.get(".data", 0) <= costed["flash_bytes"]
    # .bss holds the input (here a global), the channel buffer and the features; the stack is the estimate's rest.
    assert section[".bss"] <= costed["peak_ram_bytes"] - classical.STACK_BYTES + 16
    # The estimate is not loose either: within 1.5 KiB of what links.
    assert costed["flash_bytes"] - section[".text"] < 1536


@pytest.mark.parametrize(("length", "channels"), [(256, 1), (200, 2)], ids=["real FFT", "direct DFT, two channels"])
def test_a_dead_sensor_scores_the_same_number_in_c_and_is_anomalous_there_too(tmp_path, c_compiler, length,
                                                                              channels):
    """All zero (the bundle's main.c printed `score -nan: normal` for it), stuck at a value, or one dead channel of
    two: the C score is the Python score, a number, and the verdict anomalous in both."""
    normal, faults = _windows(length, channels)
    scorer = classical.fit(normal[::2], faults[::3])
    threshold = float(np.quantile(scorer.score(normal[1::2]), 0.95))
    source, header = generate_classical_c(scorer, threshold, "model_compiled.h", "tinynas", "test")
    dead = np.zeros((4, length, channels), np.float32)
    dead[1], dead[2] = 0.37, -1.5
    dead[3] = normal[0]
    dead[3][:, 0] = 0.0 if channels > 1 else 0.2
    got = host_scores(source, header, dead, tmp_path, c_compiler)
    python = scorer.score(dead)
    assert np.isfinite(got).all() and np.isfinite(python).all()
    assert (python >= classical.DEAD_SCORE).all() and (got[:, 1] == 1).all()
    assert np.all(np.abs(got[:, 0] - python) <= SCORE_TOLERANCE * (1 + python))


AWKWARD = ("as searched", "load /* heavy", "light */ again", 'say "hi"', "back\\slash ??/ and ??=", "temp\u00e9rature",
           "line\nbreak", "/*/")
"""Condition names that end or nest a C comment, close a string, escape a quote, start a trigraph, leave ASCII or
break a line: `adapt --condition` takes every printable one (a card's are checked the same way)."""

NAMES = r"""
#include <stdio.h>
#include "model_compiled.h"
int main(void) {
  static int16_t input[TINYNAS_INPUT_SIZE];  /* zeros: a dead sensor */
  float score = 0.0f;
  int under = -2;
  for (int k = 0; k < TINYNAS_CONDITIONS; ++k) {
    fputs(tinynas_condition_names[k], stdout);
    fputc(0, stdout);
  }
  const int verdict = tinynas_score_under(input, -1, &score, &under);
  printf("%d %d %g", verdict, under, (double)score);
  return 0;
}
"""


def test_awkward_condition_names_build_under_werror_and_read_back_as_given(tmp_path, c_compiler):
    """Each kept condition is named in the header's comment and in a C string: a name holding `/*` failed the
    bundle's -Wall -Werror build (a comment within a comment). Through tinynas.c_names both build under -Wall -Wextra
    -Werror -pedantic, and the strings are the names byte for byte; a dead window is anomalous under every one."""
    from tinynas.anomaly.conditions import Condition, read_under

    normal, faults = _windows(256, 1)
    scorer = classical.fit(normal[::2], faults[::3])
    kept = tuple(Condition(name, scorer, 20.0 + i) for i, name in enumerate(AWKWARD))
    source, header = generate_classical_c(scorer, kept[-1].threshold, "model_compiled.h", "tinynas",
                                          "a title with */ in it", kept)
    (tmp_path / "model_compiled.c").write_text(source)
    (tmp_path / "model_compiled.h").write_text(header)
    (tmp_path / "main.c").write_text(NAMES)
    built = subprocess.run([c_compiler, "-std=c99", "-pedantic", "-Wall", "-Wextra", "-Werror", "-o",
                            str(tmp_path / "run"), str(tmp_path / "main.c"), str(tmp_path / "model_compiled.c"),
                            "-lm"], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    ran = subprocess.run([str(tmp_path / "run")], capture_output=True, check=True, timeout=60).stdout
    *names, verdict = ran.split(b"\0")
    assert names == [name.encode() for name in AWKWARD]
    anomalous, under, score = verdict.split()
    relative, index = read_under(list(kept), np.zeros((1, 256, 1), np.float32))
    assert anomalous == b"1" and int(under) == int(index[0]) and relative[0] > 1
    assert abs(float(score) - relative[0] * kept[-1].threshold) <= SCORE_TOLERANCE * (1 + float(score))
