"""`tinynas recalibrate`: bring a model back with a few labelled windows of the new session.

The deployed architecture is fine-tuned (no search): its batch-norm statistics are first
re-estimated on the new windows (`batchnorm.py`), then every weight is trained for a fixed, short
run on the new windows (repeated, augmented) mixed with replayed original training windows, so
that classes the new windows show poorly or not at all are not forgotten. The result is accepted
only if, on held-out windows of the new session, it is at least as accurate as the old model, and
on the original test windows it has not lost more than `max_forgetting`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np

from tinynas.adaptation.batchnorm import reestimate_batchnorm
from tinynas.adaptation.common import (
    AdaptationError,
    changed_card,
    check_new_data,
    check_shape,
    describe_data,
    export_within_budget,
    original_test,
    rounded_int8_accuracy,
)
from tinynas.augment import Augmentation
from tinynas.data.windows import DataError, Windows
from tinynas.deploy.modeldir import ModelDir, check_new_folder, write_model_dir


@dataclass(frozen=True)
class Recipe:
    """How to fine-tune (defaults from benchmarks/results/shift-*.md)."""

    epochs: int = 30
    learning_rate: float = 1e-3
    batch_size: int = 16
    repeat: int = 10
    """Each new window appears this many times per epoch (differently augmented each time)."""
    replay: float = 1.0
    """Replayed original training windows per (repeated) new window."""
    adabn: bool = True
    augmentation: Augmentation = field(default_factory=lambda: Augmentation(channel_gain=0.2, noise=0.1,
                                                                              time_shift=0.05))
    max_forgetting: float = 0.10
    """How much accuracy on the original test windows may be lost (the new session is what counts now;
    on tests of a few dozen windows, 0.05 is one or two windows)."""

    def __post_init__(self) -> None:
        limits = {"epochs": (1, 1000), "batch_size": (1, 4096), "repeat": (1, 1000), "learning_rate": (1e-7, 1),
                  "replay": (0, 100), "max_forgetting": (0, 1)}
        for name, (low, high) in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
                raise AdaptationError(f"recalibration settings out of range: {name} must be {low:g}..{high:g}, "
                                      f"got {value!r}")

    def to_dict(self) -> dict:
        return {**asdict(self), "augmentation": self.augmentation.to_dict()}


@dataclass(frozen=True)
class RecalibrateResult:
    """What `recalibrate` did and how old and new models score on the same windows."""

    out_dir: Path | None
    accepted: bool
    reason: str
    windows: int
    verify_windows: int
    seconds: float
    verify_before: float | None
    verify_after: float | None
    test_before: float | None
    test_after: float | None
    card: dict | None

    def text(self) -> str:
        lines = [f"recalibrated on {self.windows} labelled windows in {self.seconds:.1f} s: "
                 + (f"accepted -> {self.out_dir}" if self.accepted else "NOT accepted, nothing written")]
        if self.verify_before is not None:
            lines.append(f"  held-out windows of the new session ({self.verify_windows}): int8 accuracy "
                         f"{self.verify_before:.3f} -> {self.verify_after:.3f}")
        if self.test_before is not None:
            lines.append(f"  original test windows: int8 accuracy {self.test_before:.3f} -> {self.test_after:.3f}")
        lines.append(f"  {self.reason}")
        return "\n".join(lines)


def hold_out(windows: Windows) -> tuple[np.ndarray, np.ndarray]:
    """Indices (fine-tune, verify): per class with two recordings or more, its latest recording
    verifies; a class recorded once is used whole for fine-tuning."""
    tune, verify = [], []
    times = windows.time_index if windows.time_index is not None else np.arange(len(windows))
    for label in range(windows.classes):
        members = np.flatnonzero(windows.y == label)
        groups = windows.groups[members]
        if len(np.unique(groups)) < 2:
            tune += members.tolist()
            continue
        latest = max(np.unique(groups), key=lambda g: times[members[groups == g]].max())
        verify += members[groups == latest].tolist()
        tune += members[groups != latest].tolist()
    return np.array(sorted(tune), dtype=np.int64), np.array(sorted(verify), dtype=np.int64)


def _check_labels(model_dir: ModelDir, windows: Windows, what: str, allow_missing: bool) -> None:
    known = model_dir.preprocessing.class_names
    unknown = [name for name in windows.class_names if name not in known]
    if unknown:
        raise DataError(f"{what} has class(es) the model does not know: {', '.join(unknown)} "
                        f"(it knows {', '.join(known)}); recalibration cannot add classes: search again")
    missing = [name for name in known if name not in windows.class_names]  # Windows has no empty class
    if missing and not allow_missing:
        raise DataError(f"{what} has no window of {len(missing)} class(es): {', '.join(missing[:8])}"
                        f"{', ...' if len(missing) > 8 else ''}; record at least one per class "
                        f"(or pass --allow-missing-classes to rely on replay for them)")


def _fine_tune(model, x: np.ndarray, y: np.ndarray, recipe: Recipe, seed: int) -> None:
    from tinynas.quiet import import_tensorflow
    from tinynas.training.train import augmented_batches
    from tinynas.trial import Fidelity

    tf = import_tensorflow()
    tf.keras.utils.set_random_seed(seed)
    model.compile(optimizer=tf.keras.optimizers.Adam(recipe.learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fidelity = Fidelity(recipe.epochs, recipe.batch_size, recipe.learning_rate, augmentation=recipe.augmentation)
    model.fit(augmented_batches(x, y, fidelity, seed), epochs=recipe.epochs, verbose=0)


def recalibrate(model_path: str | Path, windows: Windows, out_dir: str | Path, *, spec: str = "",
                verify: Windows | None = None, verify_spec: str = "", recipe: Recipe = Recipe(), seed: int = 0,
                allow_missing: bool = False, progress=None) -> RecalibrateResult:
    """Fine-tune the model in `model_path` on labelled `windows`; write it to `out_dir` if accepted.

    `recipe` is a `Recipe` or a dict of its fields (`{"epochs": 10}`)."""
    from tinynas.arguments import require, seed_argument, windows_argument

    windows_argument(windows)
    if verify is not None:
        windows_argument(verify, "verify")
    if isinstance(recipe, dict):
        unknown = sorted(set(recipe) - {f.name for f in fields(Recipe)})
        if unknown:
            raise AdaptationError(f"recipe has no field {', '.join(map(repr, unknown))}; its fields: "
                                  f"{', '.join(f.name for f in fields(Recipe))}")
        recipe = Recipe(**recipe)
    require(recipe, Recipe, "recipe", "a Recipe or a dict of its fields")
    seed_argument(seed)
    source = ModelDir.open(model_path)
    if source.card.get("anomaly") is not None:
        raise AdaptationError(f"{source.path} is an anomaly scorer: it has no classes to fine-tune with labels; bring "
                              f"it to a new condition with `tinynas adapt` on that condition's normal windows (batch "
                              f"norm and its threshold are set again)")
    out = check_new_folder(out_dir, source.path)
    check_shape(source, windows, "the new data")
    check_new_data(source, windows, "the new data")
    _check_labels(source, windows, "the new data", allow_missing)
    if verify is not None:
        check_shape(source, verify, "the verification data")
        check_new_data(source, verify, "the verification data")
        _check_labels(source, verify, "the verification data", allow_missing=True)
    say = progress or (lambda text: None)
    started = time.perf_counter()
    pre = source.preprocessing
    labels = pre.labels_for(windows)
    if verify is None:
        tune, held = hold_out(windows)
        x_verify, y_verify = pre.apply(windows.x[held]), labels[held]
        verify_from = (f"the latest recording of each class recorded twice or more ({len(held)} windows)"
                       if len(held) else "")
    else:
        tune = np.arange(len(windows))
        x_verify, y_verify = pre.apply(verify.x), pre.labels_for(verify)
        verify_from = f"{verify_spec or 'the verification data'} ({len(verify)} windows)"
    x_new, y_new = pre.apply(windows.x[tune]), labels[tune]
    rng = np.random.default_rng(seed)
    x_parts, y_parts = [np.repeat(x_new, recipe.repeat, axis=0)], [np.repeat(y_new, recipe.repeat)]
    replayed = 0
    if recipe.replay and source.has_training_data:
        train = source.split["train"]
        replayed = min(len(train), int(round(recipe.replay * len(x_parts[0]))))
        chosen = np.sort(rng.choice(train, size=replayed, replace=False))
        x_parts.append(pre.apply(source.windows.x[chosen]))
        y_parts.append(pre.labels_for(source.windows)[chosen])
    elif recipe.replay:
        say("no training windows kept with the model: fine-tuning without replay (it may forget)")
    model = source.keras_model()
    if recipe.adabn:
        reestimate_batchnorm(model, x_new)
    say(f"fine-tuning {source.architecture.name()} on {len(x_new)} new windows x{recipe.repeat} "
        f"+ {replayed} replayed, {recipe.epochs} epochs")
    _fine_tune(model, np.concatenate(x_parts), np.concatenate(y_parts), recipe, seed)
    # No AdaBN after fine-tuning: the statistics of the mixed batches serve both sessions, where the
    # new session's alone cost the original test windows 12 points (tests/adaptation).
    say("converting to int8 and checking")
    tflite = export_within_budget(source, model, np.concatenate([x_new, x_parts[-1][:len(x_new)]]))
    old_tflite = (source.path / "model.tflite").read_bytes()
    verify_before = rounded_int8_accuracy(old_tflite, x_verify, y_verify)
    verify_after = rounded_int8_accuracy(tflite, x_verify, y_verify)
    x_test, y_test = original_test(source)
    test_before = rounded_int8_accuracy(old_tflite, x_test, y_test)
    test_after = rounded_int8_accuracy(tflite, x_test, y_test)
    seconds = time.perf_counter() - started
    problems = []
    # Both of a pair are None together: the same windows (none) went through both models.
    if verify_before is not None and verify_after is not None and verify_after < verify_before:
        problems.append(f"less accurate on held-out new windows ({verify_after:.3f} < {verify_before:.3f})")
    if test_before is not None and test_after is not None and test_after < test_before - recipe.max_forgetting:
        problems.append(f"forgot the original test windows ({test_after:.3f}, was {test_before:.3f}; "
                        f"at most {recipe.max_forgetting:.2f} may be lost)")
    if problems:
        reason = "rejected: " + "; ".join(problems) + ". The old model stays."
        return RecalibrateResult(None, False, reason, len(tune), len(y_verify), seconds, verify_before,
                                 verify_after, test_before, test_after, None)
    reason = ("accepted: " + (f"checked on {verify_from}" if verify_from else
                              "no held-out windows of the new session (record two repetitions, or give "
                              "verification data): "
                              "checked only that the original test windows are not forgotten"))
    entry = {"kind": "recalibrate", "data": describe_data(spec, windows), "fine_tune_windows": int(len(tune)),
             "replayed_windows": replayed, "recipe": recipe.to_dict(), "seed": seed, "seconds": round(seconds, 1),
             "labels_used": True, "verified_on": verify_from or None,
             "verify_int8_accuracy": {"before": verify_before, "after": verify_after},
             "original_test_int8_accuracy": {"before": test_before, "after": test_after}}
    card = changed_card(source, tflite, pre, entry, test_after)
    write_model_dir(out, source, model, tflite, card)
    return RecalibrateResult(out, True, reason, len(tune), len(y_verify), seconds, verify_before, verify_after,
                             test_before, test_after, card)
