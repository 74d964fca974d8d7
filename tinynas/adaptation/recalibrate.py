"""`tinynas recalibrate`: bring a model back with a few labelled windows of the new session.

The deployed architecture is fine-tuned (no search): its batch-norm statistics are first
re-estimated on the new windows (`batchnorm.py`), then every weight is trained for a fixed, short
run on the new windows (repeated, augmented) mixed with replayed original training windows, so
that classes the new windows show poorly or not at all are not forgotten. The result is accepted unless, over
the held-out windows of the new session and the original test windows together, it is wrong on more windows where
the old model was right than the other way round, or it forgot the original test windows beyond `max_forgetting`
and beyond chance (`decide`: paired counts, so that one window never flips a verdict).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

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
)
from tinynas.arguments import require, seed_argument
from tinynas.augment import Augmentation
from tinynas.card import task_of
from tinynas.data.recording import Recording, SignEvent
from tinynas.data.windows import DataError, Windows, windows_argument
from tinynas.deploy.litert import Int8Model
from tinynas.deploy.measure import run_int8
from tinynas.deploy.modeldir import ModelDir, check_new_folder, write_model_dir
from tinynas.deploy.served import UNKNOWN, ServedPath, Smoothing
from tinynas.deploy.stream import StreamVerdict, judge, positions
from tinynas.folders import MODEL, read_model_file
from tinynas.modes import Task
from tinynas.options import RANGES
from tinynas.quiet import import_tensorflow
from tinynas.space import as_model_input
from tinynas.training.train import augmented_batches
from tinynas.trial import Fidelity
from tinynas.verdict import Paired, paired

STATISTICS = ("mixed", "new")
LAYERS = ("all", "head")


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
    """How much accuracy on the original test windows may be lost (the new session is what counts now); a loss
    above it is refused only where the paired sign test shows it (`decide`). 1 (all of it) leaves the original test
    windows out of the decision: only the new session's held-out windows then count."""
    statistics: str = "new"
    """Batch-norm statistics while fine-tuning: "new" stay those of the new session (AdaBN), as `adapt` leaves
    them; "mixed" follow the fine-tuning batches (new and replayed windows together; the rule before issue 36).
    On the re-worn ISL session, one labelled repetition, 3 seeds x 3 architectures, "new" was the better on all
    three (0.73-0.80 against 0.68-0.79; benchmarks/results/shift-isl-rewear.md)."""
    layers: str = "all"
    """The weights fine-tuned: "all", or "head" (the classifier only; the features stay the model's)."""

    def __post_init__(self) -> None:
        for name in ("epochs", "batch_size", "repeat", "learning_rate", "replay", "max_forgetting"):
            value = getattr(self, name)
            limit = RANGES[f"recalibrate_{name}" if f"recalibrate_{name}" in RANGES else name]
            # Any number in range is taken (an epoch count of 30.0 too, as before this table): `whole` is the
            # command line's and the config's concern.
            if not replace(limit, whole=False).allows(value):
                raise AdaptationError(f"recalibration settings out of range: {name} must be {limit.low:g}.."
                                      f"{limit.high:g}, got {value!r}")
        for name, allowed in (("statistics", STATISTICS), ("layers", LAYERS)):
            if getattr(self, name) not in allowed:
                raise AdaptationError(f"recalibration settings: {name} must be one of {', '.join(allowed)}, "
                                      f"got {getattr(self, name)!r}")

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
    selection: dict | None = None
    """The cross-validation that chose the recipe (`_cross_validate`), when the new windows held two repetitions."""
    cross_validated: bool = False
    """The held-out figures are the cross-validation's (float), not an int8 check on held-out windows."""
    paired: dict = field(default_factory=dict)
    """What the decision rests on: for today's wear and the onboarding test, the windows where the new model is
    right and the old wrong (better), the other way round (worse), and what measured them."""
    stream: dict = field(default_factory=dict)
    """Judged on the stream (a `StreamCheck`): each model's verdict on today's stream ("today") and on the
    onboarding's ("onboarding"), and the classes the old model fails today ("failing_today"); {} otherwise."""

    def text(self) -> str:
        lines = [f"recalibrated on {self.windows} labelled windows in {self.seconds:.1f} s: "
                 + (f"accepted -> {self.out_dir}" if self.accepted else "NOT accepted, nothing written")]
        if self.verify_before is not None:
            how = "cross-validated, float" if self.cross_validated else "int8"
            lines.append(f"  held-out windows of the new session ({self.verify_windows}; {how}): accuracy "
                         f"{self.verify_before:.3f} -> {self.verify_after:.3f}")
        if self.selection is not None:
            lines.append("  " + self.selection["text"])
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


class _Models:
    """The source model as each candidate starts from it: built once per way of training (the old model, AdaBN
    only, each fine-tuning recipe) and set back to the source's weights, and its optimizer to a fresh state, for
    each use. Building the model and tracing a new training step for every fold and candidate cost a quarter of a
    recalibration on 36 new windows (68 s -> 51 s with this; benchmarks/results/recalibration-time.md), and a
    larger share on fewer windows, where the training itself is short."""

    def __init__(self, source: ModelDir) -> None:
        self.source = source
        self._models: dict[Recipe | None, tuple[Any, list, list]] = {}  # -> (model, its weights, optimizer state)

    def fresh(self, recipe: Recipe | None = None):
        """The source model, to be trained with `recipe` (None: not trained), as it was exported."""
        key = recipe
        if key not in self._models:
            model = self.source.keras_model()
            optimizer_state = _compile(model, recipe) if recipe is not None else []
            self._models[key] = (model, model.get_weights(), optimizer_state)
            return model
        model, weights, optimizer_state = self._models[key]
        model.set_weights(weights)  # moving statistics too: every weight, trainable or not
        for variable, value in zip(model.optimizer.variables if recipe is not None else [], optimizer_state):
            variable.assign(value)
        return model


def _compile(model, recipe: Recipe) -> list:
    """Make `model` trainable as `recipe` says and compile it; the optimizer's state before any step."""

    tf = import_tensorflow()
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            # A frozen batch-norm layer runs in inference mode in Keras: its statistics stay as they are.
            layer.trainable = recipe.statistics == "mixed" and recipe.layers == "all"
        elif layer.weights:
            layer.trainable = recipe.layers == "all" or layer is model.layers[-1]
    model.compile(optimizer=tf.keras.optimizers.Adam(recipe.learning_rate),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.optimizer.build(model.trainable_variables)  # its moments exist now, so that a reuse can zero them
    return [variable.numpy() for variable in model.optimizer.variables]


def _fine_tune(model, x: np.ndarray, y: np.ndarray, recipe: Recipe, seed: int) -> None:
    """Train `model` (made and compiled for `recipe` by `_Models`) on `x`, `y`."""

    tf = import_tensorflow()
    # The same recording gives the same decision: seeded, and with deterministic kernels (the multi-threaded
    # reductions otherwise differ run to run, and a decision on a few windows followed them).
    tf.config.experimental.enable_op_determinism()
    tf.keras.utils.set_random_seed(seed)
    fidelity = Fidelity(recipe.epochs, recipe.batch_size, recipe.learning_rate, augmentation=recipe.augmentation)
    model.fit(augmented_batches(x, y, fidelity, seed), epochs=recipe.epochs, verbose=0)


@dataclass(frozen=True)
class StreamCheck:
    """Today's session, and the onboarding's, as the person lives with them: the re-wear verdict judges the old
    model and every recipe on the stream (`tinynas.deploy.stream`) with serving's rules and smoothing, counted in
    signs. `onboarding_groups` name the onboarding's held-out signs (its split's test windows)."""

    today: Recording
    onboarding: Recording | None = None
    onboarding_groups: frozenset[str] = frozenset()
    hop_seconds: float = 0.25
    smoothing: int = 3

    def hop(self, recording: Recording) -> int:
        return max(1, int(round(self.hop_seconds * recording.sample_rate_hz)))


def _float_served(model, card: dict, length: int) -> ServedPath:
    """A float Keras model (a fold's) served with the deployed card's preprocessing and rules."""
    return ServedPath(None, card, logits=lambda x: np.asarray(model(as_model_input(np.asarray(x, np.float32)),
                                                                    training=False)), length=length)


def _signs_recognised(served: ServedPath, recording: Recording, events: list[SignEvent], check: StreamCheck,
                      card: dict) -> tuple[np.ndarray, StreamVerdict]:
    """Which of `events` the served model recognises on the stream, and the verdict behind it."""
    if not events:
        return np.zeros(0, dtype=bool), StreamVerdict()
    found = positions(served, recording, check.hop(recording), Smoothing.from_card(card, check.smoothing), events)
    rest = served.rule.still_label if served.rule.still_label != UNKNOWN else None
    verdict = judge(found, events, rest, recording.sample_rate_hz, check.hop(recording))
    recognised = np.zeros(len(events), dtype=bool)
    for number, event in enumerate(events):
        mine = [p for p in found if p.event == number]
        recognised[number] = bool(mine) and sum(p.shown == event.label for p in mine) * 2 > len(mine)
    return recognised, verdict


def _merge(verdicts: list[StreamVerdict]) -> StreamVerdict:
    """Verdicts of disjoint signs as one (the folds of a cross-validation)."""
    total = StreamVerdict()
    for part in verdicts:
        for name in ("signs", "recognised", "sign_windows", "sign_right", "sign_unknown", "idle_windows",
                     "idle_right"):
            setattr(total, name, getattr(total, name) + getattr(part, name))
        total.latencies += part.latencies
        for label, counts in part.per_class.items():
            mine = total.per_class.setdefault(label, dict.fromkeys(counts, 0))
            for key, value in counts.items():
                mine[key] += value
        total.hop_seconds, total.smoothing = part.hop_seconds or total.hop_seconds, part.smoothing or total.smoothing
    return total


OLD_MODEL = "old model"
CANDIDATES = {
    "adapt": "AdaBN only (batch-norm statistics of the new windows, as `tinynas adapt`; no weight trained)",
    "fine-tune": "AdaBN, then the weights fine-tuned with replay, batch norm kept at the new session's statistics",
    "fine-tune, mixed statistics": "AdaBN, then the weights fine-tuned with replay, batch-norm statistics following "
                                   "the mixed new and replayed batches",
}
"""The recipes recalibration compares by cross-validation over the new repetitions; `adapt` is always one, so a
labelled recalibration is never worse than unlabelled adaptation on the same windows."""

MAX_FOLDS = 3
"""Repetitions beyond this share folds (each fold trains every candidate once: time on a Pi)."""


def repetition_folds(windows: Windows) -> list[np.ndarray]:
    """Held-out index sets for cross-validation by repetition: fold k holds out the k-th, (k + F)-th, ...
    recording (in time) of every class recorded twice or more (F folds, at most MAX_FOLDS); a class recorded once
    is never held out. Fewer than two folds: nothing to cross-validate."""
    times = windows.time_index if windows.time_index is not None else np.arange(len(windows))
    per_class = []
    for label in range(windows.classes):
        members = np.flatnonzero(windows.y == label)
        recordings = [members[windows.groups[members] == group] for group in np.unique(windows.groups[members])]
        per_class.append(sorted(recordings, key=lambda indices: times[indices].min()))
    count = min(MAX_FOLDS, max((len(recordings) for recordings in per_class if len(recordings) > 1), default=0))
    folds: list[list[int]] = [[] for _ in range(count)]
    for recordings in per_class:
        if len(recordings) > 1:
            for number, indices in enumerate(recordings):
                folds[number % count].extend(indices.tolist())
    return [np.array(sorted(fold), dtype=np.int64) for fold in folds if fold]


def _recipe_of(candidate: str, recipe: Recipe) -> Recipe | None:
    """The fine-tuning recipe of a candidate (None: AdaBN only): `recipe` with the candidate's statistics rule."""
    if candidate == "adapt":
        return None
    return replace(recipe, adabn=True, statistics="mixed" if candidate == "fine-tune, mixed statistics" else "new")


def _given(recipe: Recipe) -> str:
    """The candidate a recipe is, used as it is when there is nothing to cross-validate."""
    return "fine-tune, mixed statistics" if recipe.statistics == "mixed" else "fine-tune"


def _recipe_dict(candidate: str, recipe: Recipe) -> dict | None:
    fine_tuning = _recipe_of(candidate, recipe)
    return None if fine_tuning is None else fine_tuning.to_dict()


def _replayed(source: ModelDir, count: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`count` original training windows (model input, labels), drawn without replacement (none if not kept)."""
    pre = source.preprocessing
    if not source.has_training_data or count <= 0:
        return np.zeros((0, pre.window_length, pre.channels), np.float32), np.zeros(0, np.int64)
    train = source.split["train"]
    chosen = np.sort(np.random.default_rng(seed).choice(train, size=min(len(train), count), replace=False))
    return pre.apply(source.windows.x[chosen]), pre.labels_for(source.windows)[chosen]


def _train(models: _Models, x_new: np.ndarray, y_new: np.ndarray, recipe: Recipe | None, seed: int, say):
    """The source model brought to the new windows by one candidate recipe; (Keras model, windows replayed)."""
    source = models.source
    model = models.fresh(recipe)
    if recipe is None:
        reestimate_batchnorm(model, x_new)
        return model, 0
    x_parts, y_parts = [np.repeat(x_new, recipe.repeat, axis=0)], [np.repeat(y_new, recipe.repeat)]
    replayed = 0
    if recipe.replay:
        if not source.has_training_data:
            say("no training windows kept with the model: fine-tuning without replay (it may forget)")
        x_old, y_old = _replayed(source, int(round(recipe.replay * len(x_parts[0]))), seed)
        x_parts.append(x_old)
        y_parts.append(y_old)
        replayed = len(y_old)
    if recipe.adabn:
        reestimate_batchnorm(model, x_new)
    _fine_tune(model, np.concatenate(x_parts), np.concatenate(y_parts), recipe, seed)
    # No AdaBN after fine-tuning with "mixed" statistics: those of the mixed batches serve both sessions, where
    # the new session's alone cost the original test windows 12 points (tests/adaptation).
    return model, replayed


def _float_right(model, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Which windows the float model gets right."""

    # A direct call, not `predict`: a model per fold and candidate would make `predict` retrace (and warn) each time.
    logits = np.concatenate([np.asarray(model(as_model_input(np.asarray(x[start:start + 256], np.float32)),
                                              training=False)) for start in range(0, len(x), 256)])
    return np.argmax(logits, axis=1) == y


def _cross_validate(models: _Models, x: np.ndarray, y: np.ndarray, folds: list[np.ndarray], recipe: Recipe,
                    seed: int, say, check: StreamCheck | None = None, groups: np.ndarray | None = None) -> dict:
    """Every candidate trained on all new windows but one fold and scored on it, fold by fold; the old model on
    the same windows. The candidate with the most held-out windows right is chosen (a tie goes to the simpler,
    `adapt` first). Float accuracy: the int8 export is made once, for the model chosen.

    With a `check` (today's session as a stream; `groups`: each new window's recording), every model is judged as
    serving answers it: the held-out repetitions' signs on today's stream, with the deployed card's rules and
    smoothing; what counts (and is paired) is the signs recognised, not the windows the guide cut."""
    everything = np.arange(len(y))
    held = np.concatenate(folds)
    card = models.source.card
    length = models.source.preprocessing.window_length
    events: dict[str, SignEvent] = {} if check is None else {event.group: event for event in check.today.events}

    def fold_events(fold: np.ndarray) -> list[SignEvent]:
        assert groups is not None
        return [events[group] for group in dict.fromkeys(str(g) for g in groups[fold]) if group in events]

    stream = check is not None and groups is not None and all(fold_events(fold) for fold in folds)
    verdicts: dict[str, StreamVerdict] = {}
    if stream:
        assert check is not None
        judged = [event for fold in folds for event in fold_events(fold)]
        right = {}
        right[OLD_MODEL], verdicts[OLD_MODEL] = _signs_recognised(
            _float_served(models.fresh(), card, length), check.today, judged, check, card)
    else:
        right = {OLD_MODEL: _float_right(models.fresh(), x[held], y[held])}
    for candidate in CANDIDATES:
        answers, parts = [], []
        for number, fold in enumerate(folds, 1):
            say(f"cross-validating {candidate}: fold {number} of {len(folds)} ({len(fold)} windows held out)")
            tune = np.setdiff1d(everything, fold)
            model, _ = _train(models, x[tune], y[tune], _recipe_of(candidate, recipe), seed, say)
            if stream:
                assert check is not None
                recognised, verdict = _signs_recognised(_float_served(model, card, length), check.today,
                                                        fold_events(fold), check, card)
                answers.append(recognised)
                parts.append(verdict)
            else:
                answers.append(_float_right(model, x[fold], y[fold]))
        right[candidate] = np.concatenate(answers)
        if stream:
            verdicts[candidate] = _merge(parts)
    hits = {name: int(values.sum()) for name, values in right.items()}
    chosen = max(CANDIDATES, key=lambda name: hits[name])  # max keeps the first of equals: adapt before fine-tuning
    count = len(right[OLD_MODEL])
    accuracy = {name: round(value / max(count, 1), 4) for name, value in hits.items()}
    unit = f"{count} signs on today's stream, each held out once" if stream else \
        f"{len(held)} new windows, each held out once"
    text = (f"cross-validation over {len(folds)} repetitions ({unit}; float): "
            + ", ".join(f"{name} {value:.3f}" for name, value in accuracy.items()) + f"; chosen: {chosen}")
    return {"folds": len(folds), "windows": int(count), "hits": hits, "accuracy": accuracy, "chosen": chosen,
            "text": text, "right": {name: values.tolist() for name, values in right.items()},
            "unit": "signs" if stream else "windows",
            **({"stream": {name: verdict.to_dict() for name, verdict in verdicts.items()},
                "failing_today": verdicts[OLD_MODEL].failing()} if stream else {})}


NEXT_STEP = ("record the repetitions again with the armband as it sits now (a longer recording decides on more "
             "windows), or onboard again if it sits far from where it was")


def next_step(failing: list[str]) -> str:
    """What to record after a rejected re-wear: the classes the old model fails today named first (`failing`: its
    stream verdict's "point: 0 of 2"), since more of their repetitions is what could repair them."""
    if not failing:
        return NEXT_STEP
    names = ", ".join(dict.fromkeys(item.split(":")[0] for item in failing))
    return (f"{names} {'is' if ',' not in names else 'are'} not recognised on today's wear: record the repetitions "
            f"again with the armband as it sits now, doing {names} as in the onboarding (more repetitions of "
            f"{'it' if ',' not in names else 'them'} decide on more signs), or onboard again if it sits far from "
            f"where it was")
CONFIDENCE = 0.95
"""The onboarding test windows count as forgotten only when the loss is beyond chance at this confidence."""


TODAY, ONBOARDING = "today's wear", "onboarding test"
"""What each paired count measured, in every figure the user reads."""


def decide(today: Paired, onboarding: Paired, test_before: float | None, test_after: float | None,
           max_forgetting: float) -> list[str]:
    """Why the new model is not taken ([] when it is): worse on more of today's and the onboarding's windows
    together (today's alone where `max_forgetting` is 1) than it is better on; or the onboarding test windows
    forgotten, beyond `max_forgetting` and beyond chance (a one-sided sign test at CONFIDENCE). Paired counts
    decide: a window both models get right, or both wrong, says nothing, and one window moves a count by one,
    never the whole verdict of an 8-window accuracy."""
    problems = []
    if max_forgetting >= 1.0:  # forgetting allowed whole: the old windows no longer say what is right
        if today.worse > today.better:
            problems.append(f"worse on more windows than better ({today.describe(TODAY)})")
    elif (today + onboarding).worse > (today + onboarding).better:
        problems.append(f"worse on more windows than better ({(today + onboarding).describe('all')}: "
                        + "; ".join(part.describe(what) for part, what in ((today, TODAY), (onboarding, ONBOARDING))
                                    if part.windows) + ")")
    lost = (test_before or 0.0) - (test_after or 0.0)
    if onboarding.windows and lost > max_forgetting + 1e-9 and onboarding.p_worse < 1 - CONFIDENCE:
        problems.append(f"forgot the onboarding test windows ({test_before:.3f} -> {test_after:.3f}, "
                        f"{onboarding.describe(ONBOARDING)}: worse at {CONFIDENCE:.0%} confidence)")
    return problems


def _int8_right(tflite: bytes, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return run_int8(tflite, x).predictions == y if len(y) else np.zeros(0, dtype=bool)


def recalibrate(model_path: str | Path, windows: Windows, out_dir: str | Path, *, spec: str = "",
                verify: Windows | None = None, verify_spec: str = "", recipe: Recipe = Recipe(), seed: int = 0,
                allow_missing: bool = False, progress=None, check: StreamCheck | None = None) -> RecalibrateResult:
    """Fine-tune the model in `model_path` on labelled `windows`; write it to `out_dir` if accepted.

    `recipe` is a `Recipe` or a dict of its fields (`{"epochs": 10}`). With `check` (the windows' session and the
    onboarding's as streams), the decision is taken on signs recognised as serving answers them."""

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
    if task_of(source.card) == Task.ANOMALY:
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
    x_all = pre.apply(windows.x)
    folds = repetition_folds(windows)
    models = _Models(source)
    selection = None
    chosen = _given(recipe)
    if len(folds) >= 2:
        selection = _cross_validate(models, x_all, labels, folds, recipe, seed, say, check, windows.groups)
        chosen = selection["chosen"]
    if verify is not None:
        tune = np.arange(len(windows))
        x_verify, y_verify = pre.apply(verify.x), pre.labels_for(verify)
        verify_from = f"{verify_spec or 'the verification data'} ({len(verify)} windows)"
    elif selection is not None:  # every new window trains the model served: the folds have checked the recipe
        tune = np.arange(len(windows))
        x_verify, y_verify = x_all[:0], labels[:0]
        verify_from = selection["text"]
    else:
        tune, held = hold_out(windows)
        x_verify, y_verify = x_all[held], labels[held]
        verify_from = (f"the latest recording of each class recorded twice or more ({len(held)} windows)"
                       if len(held) else "")
    x_new, y_new = x_all[tune], labels[tune]
    say(f"{CANDIDATES[chosen]} on all {len(x_new)} new windows" if selection is not None else
        f"{CANDIDATES[chosen]} on {len(x_new)} new windows")
    model, replayed = _train(models, x_new, y_new, _recipe_of(chosen, recipe), seed, say)
    say("converting to int8 and checking")
    tflite = export_within_budget(source, model, np.concatenate([x_new, _replayed(source, len(x_new), seed)[0]]))
    old_tflite = read_model_file(source.path, MODEL)
    if len(y_verify):
        before_right, after_right = _int8_right(old_tflite, x_verify, y_verify), _int8_right(tflite, x_verify, y_verify)
    elif selection is not None:
        before_right = np.asarray(selection["right"][OLD_MODEL], dtype=bool)
        after_right = np.asarray(selection["right"][chosen], dtype=bool)
    else:
        before_right = after_right = np.zeros(0, dtype=bool)
    today_unit = "signs on today's stream" if selection is not None and selection.get("unit") == "signs" and \
        not len(y_verify) else "windows"
    today = paired(before_right, after_right, today_unit)
    verify_windows = today.windows
    verify_before = round(float(before_right.mean()), 4) if today.windows else None
    verify_after = round(float(after_right.mean()), 4) if today.windows else None
    cross_validated = selection is not None and not len(y_verify)
    onboarding_stream = None
    judged = ([event for event in check.onboarding.events if event.group in check.onboarding_groups]
              if check is not None and check.onboarding is not None else [])
    if judged:  # the onboarding's held-out signs on its stream, as serving answers them: old and new, int8
        assert check is not None and check.onboarding is not None
        old_test, old_verdict = _signs_recognised(ServedPath(Int8Model(old_tflite), source.card), check.onboarding,
                                                  judged, check, source.card)
        new_test, new_verdict = _signs_recognised(ServedPath(Int8Model(tflite), source.card), check.onboarding,
                                                  judged, check, source.card)
        onboarding = paired(old_test, new_test, "signs on the onboarding's stream")
        onboarding_stream = {"old": old_verdict.to_dict(), "new": new_verdict.to_dict()}
    else:
        x_test, y_test = original_test(source)
        old_test, new_test = _int8_right(old_tflite, x_test, y_test), _int8_right(tflite, x_test, y_test)
        onboarding = paired(old_test, new_test)
    test_before = round(float(old_test.mean()), 4) if len(old_test) else None
    test_after = round(float(new_test.mean()), 4) if len(new_test) else None
    seconds = time.perf_counter() - started
    measured = {"today": {**today.to_dict(), "measure": ("cross-validated over the new repetitions, float, on "
                                                         "today's stream as serving answers" if
                                                         today_unit != "windows" else
                                                         "cross-validated over the new repetitions, float")
                          if cross_validated else "int8 on held-out new windows"},
                "onboarding": {**onboarding.to_dict(), "measure": "int8 on the onboarding's held-out signs, on its "
                               "stream as serving answers" if onboarding_stream else
                               "int8 on the onboarding's test windows"}}
    stream = {**({"today": selection["stream"], "failing_today": selection["failing_today"]}
                 if selection is not None and "stream" in selection else {}),
              **({"onboarding": onboarding_stream} if onboarding_stream else {})}
    problems = decide(today, onboarding, test_before, test_after, recipe.max_forgetting)
    failing = stream.get("failing_today") or []
    said_today = (f"; today the old model recognises {', '.join(failing)} of their signs" if failing else "")
    if problems:
        reason = ("rejected: " + "; ".join(problems) + said_today + ". The old model stays. Next: "
                  + next_step(failing))
        return RecalibrateResult(None, False, reason, len(tune), verify_windows, seconds, verify_before,
                                 verify_after, test_before, test_after, None, selection, cross_validated, measured,
                                 stream)
    reason = ("accepted: " + "; ".join(part for part in (today.describe(TODAY) if today.windows else "",
                                                          onboarding.describe(ONBOARDING)
                                                          if onboarding.windows else "") if part) + said_today
              + (f" ({verify_from})" if verify_from else
                 " (no held-out windows of the new session: record two repetitions, or give verification data)"))
    entry = {"kind": "recalibrate", "data": describe_data(spec, windows), "fine_tune_windows": int(len(tune)),
             "replayed_windows": replayed, "recipe": _recipe_dict(chosen, recipe), "chosen": chosen,
             "selection": selection, "seed": seed, "seconds": round(seconds, 1),
             "labels_used": True, "verified_on": verify_from or None,
             "verify_int8_accuracy": {"before": verify_before, "after": verify_after} if len(y_verify) else None,
             "original_test_int8_accuracy": {"before": test_before, "after": test_after}}
    card = changed_card(source, tflite, pre, entry, test_after)
    write_model_dir(out, source, model, tflite, card)
    return RecalibrateResult(out, True, reason, len(tune), verify_windows, seconds, verify_before, verify_after,
                             test_before, test_after, card, selection, cross_validated, measured, stream)
