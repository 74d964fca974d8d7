"""TFLite Micro's whole footprint on the chip against the Arm builds it was measured on.

`benchmarks/results/tflm-footprint.json` holds what `benchmarks/tflm_arm/footprint.sh` measured: TFLite Micro
(snapshot 90b983c2) built for a Cortex-M0 and a Cortex-M4F, 7 models run under QEMU, every firmware minus a
baseline that does not call TFLM. The model here must cover each measured footprint and stay within a stated
margin of it, so that a `--runtime tflm` winner fits the chip and the budget is not wasted.
"""

import json
import re
from pathlib import Path

import pytest

from tinynas.cost.budget import Budget, tflm_fits
from tinynas.cost.estimate import estimate
from tinynas.cost.targets import builtin_targets
from tinynas.cost.tflm_footprint import STACK_MARGIN_BYTES, build_for
from tinynas.space import Architecture

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "tflm-footprint.json"
CORES = {"m0": "Cortex-M0", "m4": "Cortex-M4F"}
RAM_MARGIN_BYTES = STACK_MARGIN_BYTES + 32
"""The stated margin: the stack's own margin, and the 32-bit arena estimate's 8-24 bytes above the short-enum
build (tflm-arm-tail.md) rounded up to the arena's 16-byte alignment."""


def _measured() -> list[tuple[str, str, Architecture, dict]]:
    """(core, op set, architecture, figures) of every model the release build ran, function-static objects."""
    rows = []
    for summary in json.loads(RESULTS.read_text())["summary"]:
        if summary["build_type"] != "release" or summary["variant"] not in ("ops3", "ops4"):
            continue
        for model in summary["per_model"]:
            k, c, kernel = re.fullmatch(r"A\((\d+),(\d+)(?:, kernel=(\d+))?\)", model["model"]).groups()
            length, channels = (int(v) for v in model["input"].split("x"))
            arch = Architecture(length, channels, model["classes"], k=int(k), c=int(c),
                                kernel_size=int(kernel or 3))
            # A firmware registers the ops its model uses: a network with cells needs the four-op build.
            if (arch.c > 0) == (summary["variant"] == "ops4"):
                rows.append((CORES[summary["core"]], summary["variant"], arch, model))
    return rows


MEASURED = _measured()


def test_every_core_and_op_set_was_measured():
    assert {(core, ops) for core, ops, _, _ in MEASURED} == {(core, ops) for core in CORES.values()
                                                             for ops in ("ops3", "ops4")}
    assert len(MEASURED) >= 10 and all(m["output_equals_wheel"] for *_, m in MEASURED)


@pytest.mark.parametrize("core, ops, arch, measured", MEASURED,
                         ids=[f"{core}-{arch.name()}" for core, _, arch, _ in MEASURED])
def test_the_whole_footprint_covers_the_arm_build_within_the_margin(core, ops, arch, measured):
    cost = estimate(arch, runtime="tflm", accounting="chip", core=core)
    stack = max(measured["stack_allocate"], measured["stack_invoke"])
    chip_ram = measured["arena_used"] + measured["static_ram"] + stack
    assert cost.interpreter_ram_bytes == measured["static_ram"]
    assert cost.code_bytes == measured["code_flash"]
    assert stack <= cost.stack_bytes <= stack + STACK_MARGIN_BYTES
    assert chip_ram <= cost.peak_ram_bytes <= chip_ram + RAM_MARGIN_BYTES, (cost.peak_ram_bytes, chip_ram)
    assert cost.flash_bytes == cost.model_bytes + measured["code_flash"]


def test_cost_prints_arena_interpreter_and_stack_apart(capsys):
    from tinynas.cli import main

    assert main(["cost", "--input", "512x1", "--classes", "10", "--k", "2", "--c", "4", "--runtime", "tflm",
                 "--target", "nRF52840"]) == 0
    text = capsys.readouterr().out
    assert "arena       3,712 B: head 1,536 + tail 2,172" in text
    assert "interpreter 784 B of static RAM" in text
    assert "stack       736 B (AllocateTensors and Invoke); measured on a Cortex-M4F build" in text
    assert "model 5,477 + TFLite Micro code 31,968" in text


def test_a_core_measured_on_neither_build_takes_the_larger_figures():
    ispu, basis = build_for("ISPU")
    m0, _ = build_for("Cortex-M0+")
    m4, _ = build_for("Cortex-M7")
    assert m0.core == "Cortex-M0" and m4.core == "Cortex-M4F"
    assert ispu.code_bytes == max(m0.code_bytes, m4.code_bytes) and ispu.stack_bytes == max(m0.stack_bytes,
                                                                                            m4.stack_bytes)
    assert "not measured" in basis


def test_tflite_micro_is_refused_in_one_line_where_its_code_cannot_fit():
    """The method's three targets cannot hold TFLite Micro's code (38-43 KB in the release build) at all."""
    targets = builtin_targets()
    cannot = sorted(key for key, target in targets.items() if tflm_fits(target) is not None)
    assert cannot == ["lsm6dso16is", "stm32c011f6p6", "stm32f030f4p6"]
    for key in cannot:
        with pytest.raises(Exception, match=f"target {targets[key].name} cannot hold TFLite Micro: its code takes "
                                            r".* KiB of .* KiB flash, before any model; use --runtime c") as info:
            Budget.resolve(targets[key], "tflm").check_space_fits(512, 1, 10)
        assert "\n" not in str(info.value)
        Budget.resolve(targets[key], "tflm", "method").check_space_fits(512, 1, 10)  # the method's rule
        Budget.resolve(targets[key], "c").check_space_fits(512, 1, 10)
