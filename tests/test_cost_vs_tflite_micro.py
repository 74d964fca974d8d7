"""The analytic cost model against the real converter and TFLite Micro's own allocator."""

import numpy as np
import pytest

from tinynas.deploy.random_weights import calibration_windows, random_architectures, randomized_model
from tinynas.cost.estimate import LP64, estimate, estimate_arena
from tinynas.deploy.export import convert_int8

ARCHITECTURES = 32


@pytest.fixture(scope="module")
def converted(tflite_micro):
    from tinynas.deploy.measure import measure_arena

    rows = []
    for index, arch in enumerate(random_architectures(ARCHITECTURES, seed=2026)):
        model = randomized_model(arch, seed=index)
        tflite = convert_int8(model, calibration_windows(arch, 16, seed=index))
        rows.append((arch, model, tflite, measure_arena(tflite)))
    return rows


@pytest.mark.slow
def test_arena_head_is_exact(converted):
    for arch, _, _, measured in converted:
        assert estimate_arena(arch, LP64).head_bytes == measured.arena_head_bytes, arch


@pytest.mark.slow
def test_arena_total_within_5_percent(converted):
    worst = 0.0
    for arch, _, _, measured in converted:
        estimated = estimate_arena(arch, LP64)
        error = abs(estimated.total_bytes - measured.arena_bytes) / measured.arena_bytes
        worst = max(worst, error)
        assert error <= 0.05, (arch, estimated, measured)
    print(f"worst arena total error {worst:.2%} over {len(converted)} architectures")


@pytest.mark.slow
def test_flash_within_5_percent(converted):
    for arch, _, tflite, _ in converted:
        estimated = estimate(arch).flash_bytes
        assert abs(estimated - len(tflite)) <= 0.05 * len(tflite), (arch, estimated, len(tflite))


@pytest.mark.slow
def test_macs_and_params_match_keras(converted):
    for arch, model, _, _ in converted:
        assert estimate(arch).params == model.count_params()
        convs = [layer for layer in model.layers if type(layer).__name__ == "Conv2D"]
        implied = sum(int(np.prod(layer.kernel.shape[1:])) * layer.output.shape[2] for layer in convs)
        dense = model.get_layer("head").kernel.shape
        assert estimate(arch).macs == implied + dense[0] * dense[1]


@pytest.mark.slow
def test_graph_lowering_matches_the_converter(converted):
    from tinynas.cost.graph import lower
    from tinynas.deploy.litert import litert_interpreter

    for arch, _, tflite, _ in converted[:6]:
        details = litert_interpreter(tflite).get_tensor_details()
        real = sorted(tuple(int(d) for d in t["shape"]) for t in details)
        ours = sorted(tensor.shape for tensor in lower(arch).tensors)
        assert real == ours, arch
