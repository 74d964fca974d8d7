import json

import numpy as np
import pytest

from tests.support.armband import NEW_SESSION, shifted
from tinynas.adaptation.adapt import adapt
from tinynas.adaptation.common import AdaptationError
from tinynas.cost.estimate import estimate
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError
from tinynas.deploy.modeldir import ModelDir, ModelDirError
from tinynas.options import UsageError


def _weights(model_dir_path):
    model = ModelDir.open(model_dir_path).keras_model()
    return {weight.path: weight.numpy() for weight in model.weights}


def test_search_keeps_float_weights_training_windows_and_split(model_dir):
    source = ModelDir.open(model_dir)
    assert source.has_training_data
    split = source.split
    assert len(split["test"]) == source.card["split"]["test"]
    assert not set(split["train"]) & set(split["test"])


def test_adapt_changes_only_batchnorm_statistics_and_keeps_the_budget(model_dir, tmp_path):
    new = shifted(load_windows(NEW_SESSION))
    out = tmp_path / "adapted"
    result = adapt(model_dir, new, out, spec="shifted")
    before, after = _weights(model_dir), _weights(out)
    assert before.keys() == after.keys()
    moving = [name for name in before if "moving_" in name]
    assert moving and all(not np.allclose(before[name], after[name]) for name in moving)
    assert all(np.array_equal(before[name], after[name]) for name in before if "moving_" not in name)
    card = json.loads((out / "card.json").read_text())
    source = ModelDir.open(model_dir)
    assert card["architecture"] == source.card["architecture"]
    assert card["history"][-1]["kind"] == "adapt"
    assert card["history"][-1]["adapted"] == ["batch-norm statistics"]
    assert card["history"][-1]["data"]["windows"] == len(new)
    assert card["history"][-1]["labels_used"] is False
    target = source.target()
    assert not list(estimate(source.architecture, accounting="arena").violations(target))
    assert card["flash_bytes"] == (out / "model.tflite").stat().st_size <= target.flash_bytes
    assert result.test_after is not None and result.new_data_after is not None
    # The adapted folder can be adapted again: it carries the training windows and split.
    assert ModelDir.open(out).has_training_data


def test_adapt_refuses_data_of_another_shape_rate_or_channel_count(model_dir, tmp_path):
    other = [
        ("synthetic:emg?classes=4&windows_per_class=12&length=80&channels=4&seed=9", "80 samples long"),
        ("synthetic:emg?classes=4&windows_per_class=12&length=64&channels=3&seed=9", "3 channel"),
        ("synthetic:emg?classes=4&windows_per_class=12&length=64&channels=4&sample_rate_hz=400&seed=9", "400 Hz"),
    ]
    for spec, message in other:
        with pytest.raises(DataError, match=message) as info:
            adapt(model_dir, load_windows(spec), tmp_path / "x", spec=spec)
        assert "\n" not in str(info.value)
    assert not (tmp_path / "x").exists()


def test_adapt_refuses_too_few_windows_and_its_own_folder(model_dir, tmp_path):
    few = load_windows("synthetic:emg?classes=2&windows_per_class=2&length=64&channels=4&windows_per_recording=2")
    with pytest.raises(AdaptationError, match="at least 8"):
        adapt(model_dir, few, tmp_path / "x")
    with pytest.raises(ModelDirError, match="the model's own folder"):
        adapt(model_dir, shifted(load_windows(NEW_SESSION)), model_dir)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    with pytest.raises(ModelDirError, match="not empty and holds no model of tinynas"):
        adapt(model_dir, shifted(load_windows(NEW_SESSION)), tmp_path / "busy")
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_adapt_cli_one_line_errors(model_dir, tmp_path):
    from tinynas.cli import main

    assert main(["adapt", str(tmp_path / "nothing"), "--data", NEW_SESSION, "--out", str(tmp_path / "a")]) == 2
    assert main(["adapt", str(model_dir), "--data", NEW_SESSION, "--out", str(tmp_path / "b"),
                 "--only", "weights"]) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    assert UsageError  # the CLI maps every project error to exit 2


def test_the_budget_is_rechecked_for_the_runtime_the_card_records(model_dir, tmp_path):
    import shutil

    from tinynas.adaptation.common import card_runtime

    source = ModelDir.open(model_dir)
    tflm, c = estimate(source.architecture, accounting="arena"), estimate(source.architecture, runtime="c")
    assert source.card["runtime"] == "tflm"
    # A chip with RAM for the C runtime but not for TFLite Micro's arena.
    between = {**source.card["target"], "ram_bytes": (tflm.peak_ram_bytes + c.peak_ram_bytes) // 2}
    new = shifted(load_windows(NEW_SESSION))
    for runtime in (None, "c"):
        copy = tmp_path / f"model-{runtime}"
        shutil.copytree(model_dir, copy)
        card = {key: value for key, value in source.card.items() if key != "runtime"}  # as an older card
        card = {**card, "target": between, **({"runtime": runtime} if runtime else {})}
        (copy / "card.json").write_text(json.dumps(card))
        assert card_runtime(card) == (runtime or "tflm")
        if runtime is None:
            with pytest.raises(AdaptationError, match="does not fit .*RAM"):
                adapt(copy, new, tmp_path / "refused", spec="shifted")
        else:
            adapt(copy, new, tmp_path / "adapted", spec="shifted")
            assert json.loads((tmp_path / "adapted" / "card.json").read_text())["runtime"] == "c"
    with pytest.raises(AdaptationError, match="unknown runtime 'tvm'"):
        card_runtime({"runtime": "tvm"})
