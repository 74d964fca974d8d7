import json
from dataclasses import replace

import numpy as np
import pytest

from tests.support.armband import NEW_SESSION, shifted
from tinynas.adaptation.recalibrate import NEXT_STEP, Recipe, decide, next_step, recalibrate
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError
from tinynas.verdict import Paired


@pytest.fixture(scope="module")
def new_session():
    """Labelled windows of a re-worn armband: channels rotated, gains changed; 4 recordings per class."""
    return shifted(load_windows(NEW_SESSION))


def test_repetition_folds_hold_out_each_repetition_of_every_class_recorded_twice():
    from tinynas.adaptation.recalibrate import MAX_FOLDS, repetition_folds
    from tinynas.data.windows import Windows

    # class 0: one recording (never held out); class 1: two; class 2: four (more than MAX_FOLDS = 3).
    groups = np.array(["a0", "b0", "b1", "c0", "c1", "c2", "c3", "c3"])
    y = np.array([0, 1, 1, 2, 2, 2, 2, 2])
    time_index = np.array([0, 2, 1, 3, 4, 5, 6, 7])  # b1 was recorded before b0
    windows = Windows(np.zeros((8, 4, 1), np.float32), y, groups, ("x", "y", "z"), 100.0, time_index=time_index)
    folds = repetition_folds(windows)
    assert MAX_FOLDS == 3 and [groups[f].tolist() for f in folds] == [["b1", "c0", "c3", "c3"], ["b0", "c1"], ["c2"]]
    once = Windows(np.zeros((3, 4, 1), np.float32), np.array([0, 1, 1]), np.array(["a", "b", "b"]), ("x", "y"), 100.0)
    assert repetition_folds(once) == []


def test_recalibrate_cross_validates_over_repetitions_then_trains_on_all(model_dir, new_session, tmp_path):
    out = tmp_path / "recalibrated"
    result = recalibrate(model_dir, new_session, out, spec="shifted", recipe=Recipe(epochs=15), seed=0)
    assert result.accepted, result.reason
    selection = result.selection
    # Every candidate was compared on the same held-out windows (4 recordings per class: 3 folds), adapt among them.
    assert selection["folds"] == 3 and selection["windows"] == len(new_session)
    assert set(selection["accuracy"]) == {"old model", "adapt", "fine-tune", "fine-tune, mixed statistics"}
    chosen = selection["chosen"]
    assert selection["accuracy"][chosen] == max(
        selection["accuracy"][c] for c in selection["accuracy"] if c != "old model")
    assert selection["accuracy"][chosen] >= selection["accuracy"]["adapt"]
    assert result.cross_validated and result.verify_windows == len(new_session)
    assert (result.verify_before, result.verify_after) == (
        selection["accuracy"]["old model"], selection["accuracy"][chosen])
    assert result.verify_after > result.verify_before  # the shifted session: the old model is poor on it
    assert result.test_after >= result.test_before - 0.10  # the original test windows are not forgotten
    card = json.loads((out / "card.json").read_text())
    entry = card["history"][-1]
    assert entry["kind"] == "recalibrate" and entry["labels_used"] is True and entry["chosen"] == chosen
    assert entry["fine_tune_windows"] == len(new_session)  # the model served has seen every new window
    assert entry["selection"]["hits"] == selection["hits"]
    assert card["architecture"] == json.loads((model_dir / "card.json").read_text())["architecture"]
    assert "cross-validation over 3 repetitions" in result.text() and "chosen: " in result.text()


def test_recalibration_is_never_worse_than_adapt_on_the_same_windows(model_dir, new_session, tmp_path, monkeypatch):
    """Fine-tuning made harmful (after real training, the head answers class 0 whatever the input): adapt wins the
    cross-validation, and what is written is adapt's model: only the batch-norm statistics differ from the source."""
    import tinynas.adaptation.recalibrate as module
    from tinynas.deploy.modeldir import ModelDir

    train = module._train

    def harmful(source, x, y, recipe, seed, say):
        model, replayed = train(source, x, y, recipe, seed, say)
        if recipe is not None:
            kernel, bias = model.layers[-1].get_weights()
            model.layers[-1].set_weights([np.zeros_like(kernel), np.eye(len(bias))[0].astype(bias.dtype) * 10])
        return model, replayed

    monkeypatch.setattr(module, "_train", harmful)
    out = tmp_path / "adapted-instead"
    # max_forgetting 1: AdaBN to the shifted session costs the original test windows ~30 points, refused otherwise.
    result = recalibrate(model_dir, new_session, out, recipe=Recipe(epochs=2, max_forgetting=1.0), seed=0)
    accuracy = result.selection["accuracy"]
    assert result.selection["chosen"] == "adapt" and accuracy["fine-tune"] == accuracy["fine-tune, mixed statistics"] \
        == pytest.approx(1 / 4), result.selection
    assert result.accepted and result.verify_after == accuracy["adapt"], result.reason
    entry = json.loads((out / "card.json").read_text())["history"][-1]
    assert entry["chosen"] == "adapt" and entry["recipe"] is None and entry["replayed_windows"] == 0
    source, written = ModelDir.open(model_dir).keras_model(), ModelDir.open(out).keras_model()
    for before, after in zip(source.layers, written.layers):
        same = all(np.array_equal(a, b) for a, b in zip(before.get_weights(), after.get_weights()))
        assert same != (type(before).__name__ == "BatchNormalization"), before.name


def test_one_repetition_is_fine_tuned_with_nothing_held_out(model_dir, new_session, tmp_path):
    first = np.array(sorted(np.concatenate([np.flatnonzero(new_session.groups == g)
                                            for g in {new_session.groups[new_session.y == c][0]
                                                      for c in range(new_session.classes)}])))
    one = new_session.subset(first)
    result = recalibrate(model_dir, one, tmp_path / "one", recipe=Recipe(epochs=5, max_forgetting=1.0), seed=0)
    assert result.selection is None and result.verify_before is None and result.accepted
    assert "no held-out windows of the new session" in result.reason


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


def test_the_decision_rests_on_paired_windows_not_on_a_few_windows_accuracy():
    # The new model is taken unless it is worse on more of today's and the onboarding's windows than it is better
    # on, or the onboarding windows are forgotten beyond the allowance and beyond chance (95 %).
    assert decide(Paired(1, 0, 8), Paired(0, 1, 4), 1.0, 0.75, 0.10) == []  # 0.75 -> 0.875 today, one old lost
    worse = decide(Paired(0, 2, 8), Paired(0, 0, 4), 1.0, 1.0, 0.10)
    assert worse and worse[0].startswith("worse on more windows than better (all: better on 0, worse on 2 of 12")
    # Six of twelve onboarding windows lost with nothing gained: forgotten, at 95 % confidence.
    forgot = decide(Paired(8, 0, 16), Paired(0, 6, 12), 1.0, 0.5, 0.10)
    assert any(problem.startswith("forgot the onboarding test windows") for problem in forgot)
    # Two of four: within chance on a test of four (the sign test cannot tell), and more gained today.
    assert decide(Paired(8, 0, 16), Paired(0, 2, 4), 1.0, 0.5, 0.10) == []
    assert decide(Paired(0, 0, 0), Paired(0, 0, 0), None, None, 0.10) == []
    assert Paired(0, 5, 12).p_worse < 0.05 < Paired(0, 4, 12).p_worse
    # Forgetting allowed whole (max_forgetting 1): today's windows alone decide.
    assert decide(Paired(5, 3, 48), Paired(0, 6, 24), 1.0, 0.75, 1.0) == []
    assert decide(Paired(3, 5, 48), Paired(6, 0, 24), 0.75, 1.0, 1.0)[0].startswith(
        "worse on more windows than better (today's wear: better on 3, worse on 5 of 48 windows)")



def test_a_rejected_re_wear_says_which_class_to_record_again():
    # Live (benchmarks/results/live.md, seed 5): the old model missed point 0 of 2 today, the recalibration fixed it
    # but lost 3 of 12 onboarding signs and was rejected; the next step names point, not only "record again".
    said = next_step(["point: 0 of 2"])
    assert said.startswith("point is not recognised on today's wear") and "doing point" in said
    assert "fist, point are not recognised" in next_step(["fist: 1 of 3", "point: 0 of 2"])
    assert next_step([]) == NEXT_STEP

def test_a_re_wear_whose_classes_fail_on_the_stream_is_judged_there_and_accepted_once_recalibrated(model_dir,
                                                                                                    tmp_path):
    """Today's armband, put on again, fails classes live: the verdict is taken on today's stream (signs recognised
    as serving answers them, each repetition held out once), names the classes the old model fails today, and
    accepts the recalibration that recognises them."""
    windows, check = _todays_stream(tmp_path / "today")
    result = recalibrate(model_dir, windows, tmp_path / "recalibrated", recipe=Recipe(epochs=15), seed=0, check=check)
    today_pair = result.paired["today"]
    assert today_pair["unit"] == "signs on today's stream" and today_pair["windows"] == 12
    assert "on today's stream as serving answers" in today_pair["measure"]
    failing = result.stream["failing_today"]
    assert failing and all(": " in item and " of 3" in item for item in failing)  # e.g. "B: 0 of 3"
    assert result.accepted, result.reason
    assert "today the old model recognises" in result.reason and failing[0] in result.reason
    old, new = result.stream["today"]["old model"], result.stream["today"][result.selection["chosen"]]
    assert new["recognised"] > old["recognised"] and today_pair["better"] > today_pair["worse"]


def test_the_same_re_wear_recording_is_decided_the_same_way_with_the_same_figures_run_to_run(model_dir, tmp_path):
    """A person who asks twice is told the same thing: the decision, its reason and every paired figure."""
    windows, check = _todays_stream(tmp_path / "today")
    runs = [recalibrate(model_dir, windows, tmp_path / f"run{n}", recipe=Recipe(epochs=4), seed=0, check=check)
            for n in range(2)]
    first, second = runs
    assert first.paired["today"]["windows"] == 12  # judged on the stream, so the stream's figures are compared
    assert (first.accepted, first.reason, first.selection) == (second.accepted, second.reason, second.selection)
    for figures in ("paired", "stream"):
        assert json.dumps(getattr(first, figures), sort_keys=True) == json.dumps(getattr(second, figures),
                                                                                 sort_keys=True)


def _todays_stream(folder):
    """A re-worn armband's session recorded as the guide records it: 3 repetitions of each class, each sign 3
    windows of today's (shifted) signal, rest between, and its stream check as serving would answer it."""
    from tests.support.sessions import write_session
    from tinynas.adaptation.recalibrate import StreamCheck
    from tinynas.data.recording import load_recording
    from tinynas.data.session import load_session

    today = shifted(load_windows(NEW_SESSION))
    rng = np.random.default_rng(4)
    signs = []
    for _repetition in range(3):
        for label, name in enumerate(today.class_names):
            mine = today.x[today.y == label]
            signs.append((name, np.concatenate(mine[rng.choice(len(mine), 3, replace=False)])))  # 3 windows long
    rest = rng.normal(0, 0.5, (2000, 4)).astype(np.float32)
    write_session(folder, signs, rate=200.0, rest=rest, classes=today.class_names, window=64,
                  idle_seconds=0.6, seed=4, channel_names=today.channel_names)
    return load_session(folder), StreamCheck(load_recording(folder), hop_seconds=0.1, smoothing=3)
