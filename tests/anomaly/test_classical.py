"""The classical scorer as a search candidate: fitted on normal windows only, ranked by the networks' criterion on
the same windows, its threshold by the same rule, its cost by what its generated C holds."""

import numpy as np
import pytest

from tinynas.anomaly import classical
from tinynas.anomaly.metrics import auroc
from tinynas.anomaly.task import prepare
from tinynas.data.synthetic import vibration
from tinynas.data.windows import Windows


def _machine(noise: float, length: int = 256, seed: int = 1):
    """(normal windows as a one-class data set, fault windows) of the synthetic machine."""
    made = vibration(windows_per_class=300, length=length, windows_per_recording=20, noise=noise, seed=seed)
    keep = made.y == 0
    normal = Windows(made.x[keep], np.zeros(int(keep.sum()), int), made.groups[keep], (made.class_names[0],),
                     made.sample_rate_hz, made.channel_names, made.provenance)
    return normal, made.x[~keep]


def test_the_candidate_is_measured_on_the_networks_windows_and_separates_real_faults():
    normal, faults = _machine(noise=0.5)
    data = prepare(normal, "auto", 0, 0.05)
    found = classical.candidate(data, 0.05)
    scorer = found.scorer
    # The Gaussian saw the normal training windows only: the held-out normal windows score like them, faults far.
    assert auroc(scorer.score(normal.x[data.calibration]), scorer.score(faults)) > 0.95
    # Its criterion is a cross-entropy on the validation side (normal and synthetic): better than chance (log 2).
    assert 0 < found.val_loss < np.log(2) and found.val_accuracy > 0.5
    assert found.threshold.rate == 0.05 and found.threshold.calibration_windows == len(data.calibration)
    assert found.cost["peak_ram_bytes"] > 2 * 256 and found.cost["flash_bytes"] > 0


def test_a_noisier_machine_gives_a_worse_criterion():
    """The criterion follows what the features can see: the same faults under more sensor noise are fainter."""
    clean = classical.candidate(prepare(_machine(0.5)[0], "auto", 0, 0.05), 0.05)
    noisy = classical.candidate(prepare(_machine(1.5)[0], "auto", 0, 0.05), 0.05)
    assert noisy.val_loss > clean.val_loss


def test_the_scorer_reads_int16_as_the_device_gives_it_and_round_trips_through_the_card():
    normal, faults = _machine(noise=0.5)
    synthetic = normal.x[::-1] * 1.5
    scorer = classical.fit(normal.x, synthetic)
    q = scorer.quantize(normal.x)
    assert q.dtype == np.int16 and np.abs(q).max() <= classical.INT16_MAX // classical.INPUT_HEADROOM + 1
    # A window louder than the headroom clips instead of wrapping round.
    loud = scorer.quantize(normal.x[:1] * 10)
    assert loud.max() == classical.INT16_MAX and loud.min() == -classical.INT16_MAX - 1
    again = classical.ClassicalScorer.from_dict(scorer.to_dict())
    np.testing.assert_allclose(again.score(faults[:50]), scorer.score(faults[:50]), rtol=1e-12)
    assert again.to_dict() == scorer.to_dict()


@pytest.mark.parametrize(("core", "unit"), [("Cortex-M0", False), ("Cortex-M0+", False), ("Cortex-M4F", True),
                                            ("Xtensa LX7", True), ("ISPU", False), ("", False)])
def test_the_code_is_costed_with_or_without_a_float_unit(core, unit):
    assert classical.has_float_unit(core) is unit
    costed = classical.cost(512, 1, core)
    other = classical.cost(512, 1, "Cortex-M4F" if not unit else "Cortex-M0")
    assert (costed["flash_bytes"] < other["flash_bytes"]) is unit and costed["peak_ram_bytes"] == other[
        "peak_ram_bytes"]


def test_a_window_that_is_not_a_power_of_two_is_costed_as_a_direct_dft():
    fft, dft = classical.cost(512, 1), classical.cost(500, 1)
    assert dft["macs"] > 10 * fft["macs"] and "direct DFT" in dft["note"] and "real FFT" in fft["note"]


def _dead_windows(length: int, channels: int, normal: np.ndarray) -> np.ndarray:
    """A dead sensor (all zero), one stuck at a value (positive, negative), and a window with one dead channel of
    `channels` beside normal running."""
    dead = np.zeros((4, length, channels), np.float32)
    dead[1], dead[2] = 0.37, -1.5
    dead[3] = normal[0]
    dead[3][:, 0] = 0.0 if channels > 1 else 0.2
    return dead


def test_a_dead_sensor_scores_a_number_and_is_anomalous():
    """A window that holds one value throughout (zero variance, zero RMS) had NaN features (log 0, 0 / 0): a NaN
    score is not above any threshold, so a dead sensor read as normal running."""
    normal, faults = _machine(noise=0.5)
    data = prepare(normal, "auto", 0, 0.05)
    found = classical.candidate(data, 0.05)
    dead = _dead_windows(256, 1, normal.x)
    scores = found.scorer.score(dead)
    assert np.isfinite(scores).all() and (scores >= classical.DEAD_SCORE).all()
    assert (scores > found.threshold.value).all()
    # One sample off the stuck value is a live (if odd) signal: scored as such, finite, not floored.
    nearly = dead[1].copy()
    nearly[5] += 0.01
    assert np.isfinite(found.scorer.score(nearly[None])).all()
    assert (found.scorer.score(normal.x[data.calibration]) < classical.DEAD_SCORE).all()
