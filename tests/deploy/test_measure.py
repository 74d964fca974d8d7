import numpy as np
import pytest

from tinynas.cost.estimate import LP64, estimate_arena
from tinynas.deploy.measure import MeasureError, measure_arena, measure_model, run_int8
from tinynas.space import SpecError


def test_measure_reports_flash_arena_and_accuracy(exported_tiny, vibration_split, tflite_micro):
    arch, tflite, paths = exported_tiny
    data, _, _, test = vibration_split
    result = measure_model(paths.tflite_path, data.x[test], data.y[test])
    assert result.flash_bytes == len(tflite)
    assert result.arena_bytes == result.arena_head_bytes + result.arena_tail_bytes
    assert result.arena_head_bytes == estimate_arena(arch, LP64).head_bytes
    assert 0.0 <= result.int8_accuracy <= 1.0
    assert result.seconds_per_window > 0


def test_measure_arena_lists_tflm_categories(exported_tiny, tflite_micro):
    _, tflite, _ = exported_tiny
    arena = measure_arena(tflite)
    assert arena.categories["NodeAndRegistration struct"] > 0


def test_not_a_tflite_file_is_a_clear_error(tmp_path):
    path = tmp_path / "model.tflite"
    path.write_bytes(b"hello world, not a model")
    with pytest.raises(MeasureError, match="is not a TFLite flatbuffer"):
        measure_model(path)
    with pytest.raises(MeasureError, match="cannot read"):
        measure_model(tmp_path / "missing.tflite")


def test_run_int8_rejects_wrong_windows(exported_tiny):
    _, tflite, _ = exported_tiny
    with pytest.raises(SpecError, match="the model expects"):
        run_int8(tflite, np.zeros((2, 400, 8), np.float32))
    with pytest.raises(SpecError, match="NaN or inf"):
        run_int8(tflite, np.full((2, 512, 1), np.inf, np.float32))


@pytest.mark.parametrize("damage", ["truncated", "random after the identifier", "flipped bytes"])
def test_a_damaged_model_is_refused_before_tflite_micro_sees_it(exported_tiny, tmp_path, damage):
    # LiteRT's verifier stops it: TFLite Micro trusts the FlatBuffer's offsets.
    _, tflite, _ = exported_tiny
    if damage == "truncated":
        broken = tflite[:len(tflite) // 2]
    elif damage == "flipped bytes":
        broken = tflite[:16] + bytes(b ^ 0xFF for b in tflite[16:48]) + tflite[48:]
    else:
        broken = tflite[:8] + np.random.default_rng(0).bytes(len(tflite) - 8)
    path = tmp_path / "model.tflite"
    path.write_bytes(broken)
    with pytest.raises(MeasureError, match=r"model.tflite: not a TFLite model LiteRT can load \(damaged"):
        measure_model(path)
