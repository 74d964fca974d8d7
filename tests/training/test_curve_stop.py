import math

import numpy as np

from tinynas.training.curve_stop import CurveStop, keras_callback


def test_a_plateau_above_the_incumbent_is_stopped_early():
    rule = CurveStop(incumbent=0.3, min_epochs=5, window=5)
    curve = [1.2, 0.9, 0.8, 0.78, 0.775, 0.774, 0.774, 0.7739]
    stops = [epoch for epoch in range(1, len(curve) + 1) if rule.should_stop(curve[:epoch], total_epochs=100)]
    assert stops and stops[0] <= 8


def test_a_curve_still_falling_fast_enough_keeps_training():
    rule = CurveStop(incumbent=0.3, min_epochs=5)
    curve = [1.0 - 0.05 * epoch for epoch in range(8)]  # 0.05 per epoch, 92 epochs left: can reach 0.3
    assert not any(rule.should_stop(curve[:e], 100) for e in range(1, 9))


def test_a_candidate_already_better_is_never_stopped():
    rule = CurveStop(incumbent=0.5)
    assert not rule.should_stop([0.9, 0.6, 0.45, 0.45, 0.45, 0.45], 100)


def test_no_incumbent_no_stop_and_min_epochs_respected():
    assert not CurveStop(incumbent=math.inf).should_stop([5, 5, 5, 5, 5, 5], 100)
    assert not CurveStop(incumbent=0.1, min_epochs=10).should_stop([5] * 9, 100)
    assert not CurveStop(incumbent=0.1).should_stop([math.nan] * 6, 100)


def test_stops_within_a_bounded_number_of_epochs_on_random_plateaus():
    rng = np.random.default_rng(0)
    for _ in range(50):
        floor = rng.uniform(0.6, 1.5)
        curve = list(floor + 0.5 * np.exp(-np.arange(100) / rng.uniform(1, 3)))
        rule = CurveStop(incumbent=0.4)
        stop = next(e for e in range(1, 101) if rule.should_stop(curve[:e], 100) or e == 100)
        assert stop <= 30, (floor, stop)


def test_keras_callback_stops_training():
    from tinynas.space import Architecture
    from tinynas.training.train import fit
    from tinynas.trial import Fidelity

    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 32, 1)).astype(np.float32)
    y = np.arange(24) % 2  # pure noise: the validation loss cannot reach 0.01
    callback = keras_callback(CurveStop(incumbent=0.01, min_epochs=3, window=3), total_epochs=60)
    result = fit(Architecture(32, 1, 2, k=1, c=1), x[:16], y[:16], x[16:], y[16:], Fidelity(60, 8, 1e-3),
                 callbacks=[callback])
    assert callback.stopped_epoch is not None and len(result.val_loss) == callback.stopped_epoch < 60


def test_a_better_incumbent_found_while_training_is_used():
    rule = CurveStop(incumbent=math.inf, min_epochs=5)
    plateau = [1.0, 0.8, 0.75, 0.74, 0.739, 0.7389, 0.7388]
    assert not rule.should_stop(plateau, 100)  # nothing to beat yet

    class Model:
        stop_training = False

    latest = {"value": None}
    callback = keras_callback(rule, 100, incumbent=lambda: latest["value"])
    callback.set_model(Model())
    for epoch, value in enumerate(plateau):
        if epoch == 5:
            latest["value"] = 0.3  # a parallel candidate finished with 0.3
        callback.on_epoch_end(epoch, {"val_loss": value})
        if callback.model.stop_training:
            break
    assert callback.stopped_epoch == 6
