"""The time model against the emulated cores, and the time budget of a search.

The slow test is the model's promise: on 30 random architectures per core, drawn with a seed the fit never saw,
the estimate is within 15 % of what QEMU counts, and every window's outputs are the host build's and the reference
kernels'. The others check what the budget makes of the estimate, with no emulator.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from devtools.integer_models import BOARDS, count_on_cores, random_time_architectures
from tinynas.cost.budget import Budget, BudgetError
from tinynas.cost.energy import BATTERY_MAH, on_chip
from tinynas.cost.estimate import estimate, macs
from tinynas.cost.latency import CORES, TIME_HEADROOM, c_features, c_instructions, core_timing, estimate_time
from tinynas.cost.targets import Target, get_target
from tinynas.space import Architecture

KERNELS = {"microbit": "v6m", "mps2-an386": "dsp"}


@pytest.mark.slow
@pytest.mark.usefixtures("arm_toolchain")
def test_the_estimate_is_within_15_percent_of_qemus_count_on_30_fresh_architectures_per_core(tmp_path):
    archs = random_time_architectures(30, seed=2026)  # the fit used seeds 1 and 1001 (benchmarks/latency.py)
    errors: dict[str, list[float]] = {board: [] for board in BOARDS}
    for index, arch in enumerate(archs):
        for counted in count_on_cores(arch, 50_000 + index, tmp_path / str(index)):
            assert counted.identical, f"{arch.name()} on {counted.board}: outputs differ from the host build"
            estimated = c_instructions(arch, KERNELS[counted.board])
            errors[counted.board].append(estimated / counted.instructions - 1)
    for board, found in errors.items():
        worst = max(found, key=abs)
        assert len(found) == 30 and abs(worst) <= 0.15, f"{board}: worst error {worst:+.1%}"
        print(f"{board}: median abs error {sorted(map(abs, found))[15]:.1%}, worst {worst:+.1%}")


def test_every_feature_counts_what_the_c_does_for_a_small_network():
    arch = Architecture(16, 2, 3, k=5, c=1)  # filters 5, 8; rows 16, 8
    f = c_features(arch, "dsp")
    assert f["stages"] == 2 and f["rows"] == 16 + 8
    assert f["dot4_calls"] == 16 * 1 + 8 * 2 and f["dot1_calls"] == 16 * 1  # 5 = 4 + 1 channels; 8 = 4 + 4
    assert f["outputs_store"] == 8 * 5 and f["outputs_sum"] == 8 * 8  # pooled once per row pair; summed per row
    assert f["edge_channels"] == 2 * 5 + 2 * 8  # kernel 3: the first and the last row of each conv
    assert f["head_macs"] == 8 * 3
    # On Armv6-M, bytes: one block over 14 whole rows of 3 x 2 and 2 edge rows of 2 taps; then two blocks over 6
    # whole rows of 3 x 5 and 2 edge rows of 2 taps.
    assert c_features(arch, "v6m")["dot4_steps"] == 1 * (14 * 6 + 2 * 4) + 2 * (6 * 15 + 2 * 10)


def test_time_grows_with_the_work_and_each_core_says_what_it_stands_on():
    small, big = Architecture(400, 8, 4, k=4, c=2), Architecture(400, 8, 4, k=17, c=3)
    for core in ("Cortex-M0", "Cortex-M0+", "Cortex-M4F", "ISPU", "Xtensa LX7"):
        a, b = estimate_time(small, core, macs(small)), estimate_time(big, core, macs(big))
        assert 0 < a.cycles < b.cycles and a.basis == b.basis and a.basis
    m4 = estimate_time(big, "Cortex-M4F", macs(big))
    m0 = estimate_time(big, "Cortex-M0", macs(big))
    assert m4.instructions < m0.instructions  # the DSP kernels do 16 MACs in 25 instructions
    ispu = estimate_time(big, "ISPU", macs(big))
    assert ispu.cycles == round(CORES["ispu"].cycles_per_mac * macs(big)) and "ST" in ispu.basis
    timing, note = core_timing("RISC-V RV32IMC")
    assert timing is CORES["cortex-m0"] and "not modelled" in note


def _target(**changes) -> Target:
    base = dict(name="t", ram_bytes=64 << 10, flash_bytes=256 << 10, mac_budget=10**9, core="Cortex-M4F",
                clock_mhz=64.0, run_ua_per_mhz=50.0, supply_v=3.0)
    return Target(**{**base, **changes})


def test_a_latency_refuses_what_the_estimate_with_headroom_does_not_keep():
    arch = Architecture(400, 8, 4, k=17, c=3)
    target = _target()
    seconds = estimate(arch, runtime="c", core=target.core).cycles / 64e6
    kept = Budget.resolve(target, "c", latency_seconds=seconds * TIME_HEADROOM * 1.01)
    tight = Budget.resolve(target, "c", latency_seconds=seconds * TIME_HEADROOM * 0.99)
    assert kept.violations(arch) == []
    [why] = tight.violations(arch)
    assert why.startswith("time ") and "ms per inference at 64 MHz" in why and "headroom" in why
    assert Budget.resolve(target, "c").violations(arch) == []  # no latency: time is not budgeted


def test_a_latency_on_a_target_with_no_clock_or_for_tflite_micro_is_one_line():
    with pytest.raises(BudgetError, match="has no clock.*add clock_mhz"):
        Budget.resolve(_target(clock_mhz=None), "c", latency_seconds=0.25)
    with pytest.raises(BudgetError, match="TFLite Micro's reference kernels are not timed"):
        Budget.resolve(_target(), "tflm", latency_seconds=0.25)


def test_a_target_files_latency_is_the_default_and_the_option_wins(tmp_path):
    path = tmp_path / "t.toml"
    path.write_text('name = "t"\nram_bytes = 65536\nflash_bytes = 262144\nmac_budget = 1000000000\n'
                    'core = "Cortex-M0+"\nclock_mhz = 48\nlatency = "100ms"\n')
    target = get_target(str(path))
    assert target.latency_seconds == pytest.approx(0.1)
    assert Budget.resolve(target, "c").latency_seconds == pytest.approx(0.1)
    assert Budget.resolve(target, "c", latency_seconds=0.5).latency_seconds == pytest.approx(0.5)


def test_energy_is_current_times_voltage_times_time_and_the_battery_the_inference_alone():
    chip = on_chip(6_400_000, _target(), hop_seconds=0.25)  # 0.1 s at 64 MHz
    assert chip is not None and math.isclose(chip.seconds, 0.1) and math.isclose(chip.share_of_hop, 0.4)
    assert math.isclose(chip.energy_uj, 50.0 * 64 * 3.0 * 0.1)  # uA x V x s
    assert math.isclose(chip.battery_hours, BATTERY_MAH * 1000 / (50.0 * 64 * 0.4))
    assert "100.0 ms per inference at 64 MHz (40 % of the 0.25 s hop)" in chip.words()
    unknown = on_chip(6_400_000, _target(run_ua_per_mhz=None), hop_seconds=0.25)
    assert unknown is not None and unknown.energy_uj is None and unknown.battery_hours is None
    assert on_chip(6_400_000, _target(clock_mhz=None)) is None


def test_every_built_in_target_states_its_clock_and_where_its_current_comes_from():
    from tinynas.cost.targets import builtin_targets

    for target in builtin_targets().values():
        assert target.clock_mhz and target.datasheet, target.name
        assert (target.run_ua_per_mhz is None) == ("not" in target.datasheet and "ISPU" in target.datasheet), \
            target.name  # the one without a published current says so


@pytest.mark.parametrize("text", ["0", "-1", "nan", "1e400", str(10**400), "forever", "0ms", "2h"])
def test_a_latency_that_is_not_a_time_per_inference_is_one_line(text):
    from tinynas.errors import UsageError
    from tinynas.options import check_latency

    with pytest.raises(UsageError, match="--latency") as caught:
        check_latency(text)
    assert "\n" not in str(caught.value)


def test_the_fit_is_the_one_in_the_results(tmp_path):
    """The coefficients in the module are those `benchmarks/latency.py fit` wrote to its results."""
    import json

    from tinynas.cost.latency import COEFFICIENTS

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "latency-fit.json"
    written = json.loads(results.read_text())["coefficients"]
    assert {family: {name: value for name, value in table.items() if value}
            for family, table in written.items()} == COEFFICIENTS
