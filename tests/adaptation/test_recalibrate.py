import json
from dataclasses import replace

import numpy as np
import pytest

from tinynas.adaptation.recalibrate import Recipe, hold_out, recalibrate
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError
from tinynas.deploy.evaluate import evaluate

from .conftest import NEW_SESSION, shifted


@pytest.fixture(scope="module")
def new_session():
    """Labelled windows of a re-worn armband: channels rotated, gains changed; 4 recordings per class."""
    return shifted(load_windows(NEW_SESSION))


def test_recalibrate_improves_a_shifted_session_and_keeps_the_original(model_dir, new_session, tmp_path):
    tune, verify = hold_out(new_session)
    assert len(verify) and not set(tune) & set(verify)
    out = tmp_path / "recalibrated"
    result = recalibrate(model_dir, new_session, out, spec="shifted", recipe=Recipe(epochs=15), seed=0)
    assert result.accepted, result.reason
    assert result.verify_after > result.verify_before  # held-out recordings of the new session
    assert result.test_after >= result.test_before - 0.10  # the original test windows are not forgotten
    assert evaluate(out, new_session.subset(verify)).accuracy == pytest.approx(result.verify_after, abs=1e-3)
    card = json.loads((out / "card.json").read_text())
    entry = card["history"][-1]
    assert entry["kind"] == "recalibrate" and entry["labels_used"] is True
    assert entry["fine_tune_windows"] == len(tune) and entry["replayed_windows"] > 0
    assert card["architecture"] == json.loads((model_dir / "card.json").read_text())["architecture"]


def test_a_change_that_is_not_better_is_rejected_and_nothing_is_written(model_dir, new_session, tmp_path):
    # Verification on windows whose labels are scrambled: no fine-tuning can be "better" there reliably,
    # and a recipe of one tiny step cannot beat the old model on held-out data by chance every time;
    # the contract tested is that a rejection writes nothing.
    rng = np.random.default_rng(0)
    scrambled = replace(new_session, y=rng.permutation(new_session.y))
    out = tmp_path / "maybe"
    result = recalibrate(model_dir, new_session, out, verify=scrambled, recipe=Recipe(epochs=1, learning_rate=0.5),
                         seed=0)
    if result.accepted:
        assert result.verify_after >= result.verify_before and (out / "card.json").exists()
    else:
        assert not out.exists() or not any(out.iterdir())
        assert "rejected" in result.reason


def test_recalibrate_refuses_unknown_classes_and_missing_classes(model_dir, new_session, tmp_path):
    unknown = load_windows("synthetic:emg?classes=5&windows_per_class=6&length=64&channels=4&windows_per_recording=3")
    with pytest.raises(DataError, match="does not know: E") as info:
        recalibrate(model_dir, unknown, tmp_path / "a")
    assert "\n" not in str(info.value)
    keep = new_session.y != 0
    partial = replace(new_session, x=new_session.x[keep], y=new_session.y[keep] - 1, groups=new_session.groups[keep],
                      class_names=new_session.class_names[1:],
                      sessions=new_session.sessions[keep] if new_session.sessions is not None else None,
                      time_index=new_session.time_index[keep] if new_session.time_index is not None else None)
    with pytest.raises(DataError, match="no window of 1 class"):
        recalibrate(model_dir, partial, tmp_path / "b")
    other_rate = load_windows(NEW_SESSION + "&sample_rate_hz=400")
    with pytest.raises(DataError, match="400 Hz"):
        recalibrate(model_dir, other_rate, tmp_path / "c")
    assert not any((tmp_path / name).exists() for name in "abc")


@pytest.mark.parametrize("args, message", [
    (("--data", "synthetic:emg?classes=5&windows_per_class=6&length=64&channels=4&windows_per_recording=3"),
     "does not know: E"),
    (("--data", "synthetic:emg?classes=4&windows_per_class=6&length=80&channels=4&windows_per_recording=3"),
     "80 samples long"),
    (("--data", NEW_SESSION, "--epochs", "0"), "recalibration settings out of range"),
])
def test_recalibrate_cli_bad_input_is_one_line_and_exit_2(model_dir, tmp_path, args, message):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "tinynas.cli", "recalibrate", str(model_dir), *args,
                          "--out", str(tmp_path / "new")], capture_output=True, text=True, timeout=600)
    assert run.returncode == 2, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("tinynas: error:") and message in lines[0], run.stderr
    assert not (tmp_path / "new").exists()
