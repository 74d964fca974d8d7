from dataclasses import replace

import numpy as np
import pytest

from tinynas.errors import UsageError
from tinynas.space import Architecture, SpecError
from tinynas.training.train import fit
from tinynas.trial import Fidelity

ARCH = Architecture(64, 2, 3, k=2, c=1)


def _data(n=24, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = rng.normal(size=(n, 64, 2)).astype(np.float32) + y[:, None, None]
    return x, y


def test_fit_keeps_best_weights_and_reports_curves():
    x, y = _data()
    result = fit(ARCH, x[:18], y[:18], x[18:], y[18:], Fidelity(epochs=3, batch_size=8))
    assert len(result.val_loss) == 3 and len(result.train_loss) == 3
    assert result.best_val_loss == min(result.val_loss)


def test_fit_without_validation_trains_the_recipe_and_keeps_its_last_epoch():
    """The winner of a cross-validated search trains on every window: no validation curve, all its epochs."""
    x, y = _data()
    empty_x, empty_y = np.zeros((0, 64, 2), np.float32), np.zeros(0, np.int64)
    result = fit(ARCH, x, y, empty_x, empty_y, Fidelity(epochs=4, batch_size=8, learning_rate=0.01,
                                                       schedule="cosine"))
    assert result.val_loss == [] and len(result.train_loss) == 4 and result.timings["epochs_run"] == 4
    from tinynas.space import as_model_input

    logits = result.model(as_model_input(x), training=False).numpy()
    assert np.isfinite(logits).all()
    with pytest.raises(SpecError, match="need validation windows"):
        fit(ARCH, x, y, empty_x, empty_y, Fidelity(epochs=4, patience=2))


@pytest.mark.parametrize("mutate, message", [
    (lambda x, y: (x[:, :32], y), "have shape \\(32, 2\\) but the model expects \\(64, 2\\)"),
    (lambda x, y: (np.where(x > 2, np.nan, x), y), "NaN or inf"),
    (lambda x, y: (x, y + 5), "labels must lie in 0..2"),
    (lambda x, y: (x, y[:-1]), "windows but"),
])
def test_bad_training_data_is_rejected_in_one_line(mutate, message):
    x, y = _data()
    bad_x, bad_y = mutate(x, y)
    with pytest.raises(SpecError, match=message):
        fit(ARCH, bad_x, bad_y, x, y, Fidelity(epochs=1))


def test_bad_fidelity():
    with pytest.raises(UsageError, match="invalid fidelity"):
        Fidelity(epochs=0)


def test_patience_stops_training_and_says_so():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(24, 64, 2)).astype(np.float32)
    y = np.arange(24) % 3  # noise: the validation loss stops improving early
    result = fit(ARCH, x[:18], y[:18], x[18:], y[18:], Fidelity(epochs=200, batch_size=8, patience=3))
    assert len(result.val_loss) < 200 and result.stopped == "patience"
    best = int(np.argmin(result.val_loss))
    assert len(result.val_loss) - 1 - best >= 3
    assert result.timings["epochs_run"] == len(result.val_loss) and result.timings["first_epoch"] > 0


def test_fidelity_rejects_a_bad_subset_or_patience():
    with pytest.raises(UsageError, match="subset"):
        Fidelity(subset=0)
    with pytest.raises(UsageError, match="patience"):
        Fidelity(patience=-1)


def test_augmented_training_is_seeded_and_differs_from_plain():
    from tinynas.augment import Augmentation

    x, y = _data()
    augmented = Fidelity(epochs=3, batch_size=8, augmentation=Augmentation(gain=0.3, noise=0.2))
    first = fit(ARCH, x[:18], y[:18], x[18:], y[18:], augmented, seed=1)
    again = fit(ARCH, x[:18], y[:18], x[18:], y[18:], augmented, seed=1)
    plain = fit(ARCH, x[:18], y[:18], x[18:], y[18:], Fidelity(epochs=3, batch_size=8), seed=1)
    assert first.train_loss == again.train_loss and first.val_loss == again.val_loss
    assert first.train_loss != plain.train_loss


def test_fidelity_with_augmentation_round_trips_and_old_dicts_still_load():
    from tinynas.augment import Augmentation

    fidelity = Fidelity(epochs=5, augmentation=Augmentation(speed=0.03))
    stored = fidelity.to_dict()
    assert stored["augmentation"] == {"speed": 0.03}
    assert Fidelity(**stored) == fidelity
    assert "augmentation" not in Fidelity(epochs=5).to_dict()  # as journals written before it existed
    assert Fidelity(epochs=5, augmentation=Augmentation()).augmentation is None


def test_xla_is_compiled_only_where_it_pays_back():
    from tinynas.training.epoch import XLA_MIN_STEPS, xla_from

    assert xla_from(100, 90) == 0  # the method's 100 epochs of 90 steps: compile at once
    assert xla_from(3, 4) is None  # a short training never compiles
    assert xla_from(100, 90, earliest_stop=20) == 0  # 20 certain epochs of 90 steps pay for it already
    assert xla_from(100, 90, earliest_stop=10) == 20  # 10 do not: rent 20 plain epochs, then compile
    assert xla_from(100, 31, earliest_stop=20) is None  # rent: 59 plain epochs, then too few steps left
    rent = -(-XLA_MIN_STEPS // 31)
    assert xla_from(200, 31, earliest_stop=20) == rent  # ... unless the plan is long enough
    assert xla_from(10, 90, earliest_stop=20) is None
    steps = -(-XLA_MIN_STEPS // 40)
    assert xla_from(40, steps) == 0 and xla_from(39, steps) is None


def test_a_raced_training_switches_to_xla_when_its_plain_steps_would_have_paid(monkeypatch):
    """With a threshold scaled to this small set (3 steps per epoch; 40 steps pay for a compilation), a
    curve-stopped training that cannot be stopped before epoch 10 runs 14 epochs without XLA (42 steps),
    then the rest compiled; a short plain one never compiles."""
    import tinynas.training.epoch as epoch

    monkeypatch.setattr(epoch, "XLA_MIN_STEPS", 40)
    x, y = _data()
    raced = fit(ARCH, x[:18], y[:18], x[18:], y[18:], Fidelity(epochs=30, batch_size=8, curve_stop=True))
    assert raced.timings["epochs_run"] == 30 and raced.timings["xla_epochs"] == 16
    assert raced.timings["program_epochs"] == 2
    assert raced.train_loss[-1] < raced.train_loss[0]  # the switch carries the optimizer's state over
    plain = fit(ARCH, x[:18], y[:18], x[18:], y[18:], Fidelity(epochs=3, batch_size=8))
    assert plain.timings["xla_epochs"] == 0 and plain.timings["program_epochs"] == 1


def test_a_replay_stopped_early_trains_as_the_trial_did(monkeypatch):
    """`stop_after` keeps the trial's plan, so the replay switches to XLA at the same epoch and its curve is
    the trial's to the digit; a plan cut to the stopped length would have compiled from the first epoch."""
    import tinynas.training.epoch as epoch

    monkeypatch.setattr(epoch, "XLA_MIN_STEPS", 40)
    x, y = _data()
    plan = Fidelity(epochs=30, batch_size=8, curve_stop=True)
    trial = fit(ARCH, x[:18], y[:18], x[18:], y[18:], plan)
    replay = fit(ARCH, x[:18], y[:18], x[18:], y[18:], replace(plan, stop_after=20))
    assert replay.timings["epochs_run"] == 20 and replay.timings["xla_epochs"] == 6
    assert replay.val_loss == trial.val_loss[:20]
    assert epoch.xla_from(20, 3) == 0  # what cutting the plan to 20 epochs would have done
    assert Fidelity(**replace(plan, stop_after=20).to_dict()).stop_after == 20
    assert "stop_after" not in plan.to_dict()  # as journals written before it existed


def test_a_cosine_schedule_falls_from_the_rate_towards_zero_and_round_trips():
    cosine = Fidelity(epochs=40, learning_rate=0.01, schedule="cosine")
    rates = [cosine.learning_rate_at(e) for e in range(40)]
    assert rates[0] == 0.01 and rates[20] == pytest.approx(0.005)
    assert all(a > b for a, b in zip(rates, rates[1:])) and 0 < rates[-1] < 1e-4
    assert Fidelity(epochs=40).learning_rate_at(39) == 1e-3  # constant: the method's
    assert Fidelity(**cosine.to_dict()) == cosine
    assert "schedule" not in Fidelity().to_dict()  # as journals written before schedules existed
    with pytest.raises(UsageError, match="schedule 'linear'"):
        Fidelity(schedule="linear")


def test_a_cosine_training_starts_as_the_constant_one_then_departs():
    """Epoch 0 runs at the full rate in both; from epoch 1 the cosine's lower rate trains other weights."""
    x, y = _data()
    constant = fit(ARCH, x[:18], y[:18], x[18:], y[18:], Fidelity(epochs=4, batch_size=8, learning_rate=0.01))
    cosine = fit(ARCH, x[:18], y[:18], x[18:], y[18:],
                 Fidelity(epochs=4, batch_size=8, learning_rate=0.01, schedule="cosine"))
    assert cosine.train_loss[0] == pytest.approx(constant.train_loss[0], rel=1e-5)
    assert cosine.val_loss[0] == pytest.approx(constant.val_loss[0], rel=1e-5)
    assert cosine.val_loss[1:] != pytest.approx(constant.val_loss[1:], rel=1e-5)
