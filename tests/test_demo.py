import json

import pytest

from tinynas.demo import frontier, run_demo, stratified_split
from tinynas.targets import get_target


def test_frontier_only_holds_fitting_architectures():
    from tinynas.cost import estimate

    target = get_target("STM32F030F4P6")
    options = frontier(512, 1, 4, target)
    assert options
    for arch in options:
        assert estimate(arch).fits(target)
        bigger = arch.__class__(arch.input_length, arch.input_channels, arch.classes, arch.k + 1, arch.c)
        assert not estimate(bigger).fits(target)


def test_stratified_split_is_disjoint_and_keeps_every_class():
    import numpy as np

    labels = np.repeat(np.arange(4), 10)
    train, val, test = stratified_split(labels, (0.6, 0.2, 0.2), seed=1)
    assert not set(train) & set(val) and not set(train) & set(test) and not set(val) & set(test)
    assert len(train) + len(val) + len(test) == 40
    for part in (train, val, test):
        assert set(labels[part]) == {0, 1, 2, 3}


@pytest.mark.slow
def test_demo_writes_every_file(tmp_path):
    card = run_demo(tmp_path, epochs=2)
    for name in ("model.tflite", "model.c", "model.h", "card.json"):
        assert (tmp_path / name).stat().st_size > 0
    saved = json.loads((tmp_path / "card.json").read_text())
    assert saved["int8_test_accuracy"] == card["int8_test_accuracy"]
    assert saved["flash_bytes"] == (tmp_path / "model.tflite").stat().st_size
    assert saved["cost_estimate"]["peak_ram_bytes"] <= get_target("STM32C011F6P6").ram_bytes
