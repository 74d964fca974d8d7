import json

import pytest

from tinynas.deploy.network import build_model
from tinynas.space import Architecture, SpecError, as_model_input, max_cells


def test_filters_grow_by_half_rounded_up():
    assert Architecture(512, 1, 10, k=3, c=4).filters == (3, 5, 8, 12, 18)
    assert Architecture(512, 1, 10, k=1, c=3).filters == (1, 2, 3, 5)


def test_neighbour_growth_rules_and_channel_rounding():
    assert Architecture(512, 1, 10, k=3, c=2, growth="double").filters == (3, 6, 12)
    assert Architecture(512, 1, 10, k=3, c=2, channel_multiple=4).filters == (4, 8, 8)
    assert Architecture(512, 1, 10, k=3, c=2, growth="none").filters == (3, 3, 3)


def test_lengths_halve_per_cell():
    assert Architecture(400, 8, 26, k=4, c=3).lengths == (400, 200, 100, 50)


def test_max_cells_stops_when_length_reaches_one():
    assert max_cells(512) == 9
    assert max_cells(400) == 8
    assert max_cells(1) == 0
    Architecture(512, 1, 10, k=1, c=9)
    with pytest.raises(SpecError, match="c=10 cells is too many for 512 samples"):
        Architecture(512, 1, 10, k=1, c=10)


@pytest.mark.parametrize("kwargs, message", [
    (dict(k=0, c=1), "k \\(stem filters\\) must be >= 1"),
    (dict(k=2, c=-1), "c \\(cells\\) must be >= 0"),
    (dict(k=2, c=1, kernel_size=4), "kernel_size must be a positive odd integer"),
    (dict(k=2, c=1, growth="triple"), "growth must be one of"),
    (dict(k=2.5, c=1), "k must be an integer"),
    (dict(k=2, c=1, channel_multiple=0), "channel_multiple must be >= 1"),
])
def test_bad_specs_give_one_line_errors(kwargs, message):
    with pytest.raises(SpecError, match=message) as info:
        Architecture(512, 1, 10, **kwargs)
    assert "\n" not in str(info.value)


def test_bad_shapes_and_classes():
    with pytest.raises(SpecError, match="classes must be >= 2"):
        Architecture(512, 1, 1, k=1, c=0)
    with pytest.raises(SpecError, match="input_channels must be >= 1"):
        Architecture(512, 0, 4, k=1, c=0)


def test_json_round_trip_is_stable_and_hashable():
    arch = Architecture(400, 8, 26, k=4, c=3, kernel_size=5)
    again = Architecture.from_json(arch.to_json())
    assert again == arch and hash(again) == hash(arch)
    assert again.digest() == arch.digest()
    assert len({arch, again}) == 1
    # The canonical form is part of the journal format: keys sorted, compact.
    assert arch.to_json() == json.dumps(json.loads(arch.to_json()), sort_keys=True, separators=(",", ":"))
    assert Architecture(400, 8, 26, k=4, c=3).digest() != arch.digest()


def test_json_rejects_unknown_or_missing_fields():
    with pytest.raises(SpecError, match="unknown architecture field"):
        Architecture.from_dict({"input_length": 5, "input_channels": 1, "classes": 2, "k": 1, "c": 0,
                                "dropout": 0.1})
    with pytest.raises(SpecError, match="missing field"):
        Architecture.from_dict({"input_length": 5, "classes": 2, "k": 1, "c": 0})
    with pytest.raises(SpecError, match="not valid JSON"):
        Architecture.from_json("{nope")


def test_frozen():
    arch = Architecture(512, 1, 10, k=1, c=1)
    with pytest.raises(AttributeError):
        arch.k = 3


def test_keras_model_layout_and_params():
    from tinynas.cost.estimate import params

    arch = Architecture(400, 8, 26, k=4, c=3)
    model = build_model(arch, seed=0)
    assert tuple(model.input_shape) == (None, 1, 400, 8)
    assert tuple(model.output_shape) == (None, 26)
    assert model.count_params() == params(arch)
    kinds = [type(layer).__name__ for layer in model.layers]
    assert kinds.count("Conv2D") == 4 and kinds.count("MaxPooling2D") == 3
    assert "Conv1D" not in kinds


def test_as_model_input_adds_the_unit_axis():
    import numpy as np

    windows = np.zeros((5, 400, 8), dtype=np.float32)
    assert as_model_input(windows).shape == (5, 1, 400, 8)
    with pytest.raises(SpecError, match="must have shape"):
        as_model_input(np.zeros((400, 8)))
