"""What a study derives from its data and settings before searching: the split, the preprocessing, the search
space, the final recipe with its augmentation, and (anomaly task) the normal windows with synthetic anomalies.

Made once, when the study first needs it (`Study.prepared`), not when the study is made: a constructor stores,
a method works. Everything here is a function of the windows, the settings and the seed, so when it is made
changes nothing it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tinynas.anomaly.task import prepare as prepare_anomaly
from tinynas.augment import parse_augmentation, parse_kernels
from tinynas.data.holdout import without_test_side
from tinynas.data.preprocess import Preprocessing
from tinynas.data.splits import Split, make_split
from tinynas.data.windows import Windows
from tinynas.modes import Task
from tinynas.search import SearchSpace, final_recipe
from tinynas.study.crossval import Folds, choose_folds
from tinynas.study.settings import StudySettings
from tinynas.trial import Fidelity

if TYPE_CHECKING:
    from tinynas.anomaly.task import AnomalyData


@dataclass(frozen=True)
class Prepared:
    """A study's data-derived settings."""

    windows: Windows
    """What the candidates train on: the user's windows, or (anomaly task) their normal ones with synthetic
    anomalies (`tinynas.anomaly.task`)."""
    anomaly: AnomalyData | None
    split: Split
    preprocessing: Preprocessing
    space: SearchSpace
    kernels_note: str
    final_fidelity: Fidelity
    """The final recipe (the given one, or the strategy's own) with its augmentation (`--augment`)."""
    augmentation_note: str
    folds: Folds | None = None
    """The folds candidates are ranked on (`tinynas.study.crossval`); None: the split's validation side."""


class PreparedViews:
    """What a holder of a `Prepared` (`self.prepared`: the study, the final stage's record) reads of it, by name."""

    # Declared for the type checker only: a dataclass holder would take a class attribute as its default.
    if TYPE_CHECKING:
        @property
        def prepared(self) -> Prepared: ...

    @property
    def windows(self) -> Windows:
        """What the candidates train on (the anomaly task's normal windows and synthetic anomalies)."""
        return self.prepared.windows

    @property
    def anomaly(self) -> AnomalyData | None:
        return self.prepared.anomaly

    @property
    def split(self) -> Split:
        return self.prepared.split

    @property
    def preprocessing(self) -> Preprocessing:
        return self.prepared.preprocessing

    @property
    def space(self) -> SearchSpace:
        return self.prepared.space


def prepare(windows: Windows, settings: StudySettings, test_windows: Windows | None) -> Prepared:
    """The split, preprocessing, space and final recipe of a study of `windows` under `settings`."""
    s = settings
    anomaly = None
    if s.task == Task.ANOMALY:
        anomaly = prepare_anomaly(windows, s.split, s.seed, s.false_alarm_rate)
        windows = anomaly.windows
    recipe = s.final_fidelity or final_recipe(s.strategy)
    if recipe.augmentation is None:
        augmentation, augmentation_note = parse_augmentation(s.augment, windows.provenance)
        if anomaly is not None and s.augment == "auto" and (augmentation.noise or augmentation.gain
                                                            or augmentation.channel_gain):
            # A louder machine and added noise are what a fault looks like (vibration alarms are set on the
            # RMS level): a preset that changes gains or adds noise to normal windows would teach the scorer
            # that they are normal. On CWRU 0 hp, dropping the gain raised the worst fault's AUROC from
            # 0.90-0.99 to 1.00 (benchmarks/results/anomaly.md).
            augmentation = replace(augmentation, noise=0.0, gain=0.0, channel_gain=0.0)
            augmentation_note += " without its gains and noise (a louder or noisier machine is what a fault looks like)"
        final_fidelity = replace(recipe, augmentation=augmentation)
    else:
        final_fidelity, augmentation_note = recipe, "given with the final recipe"
    searched, kernels_note = parse_kernels(s.kernels, windows.provenance)
    # The first kernel size is every strategy's (3 is the method's); `fast` races the others too.
    space = SearchSpace(windows.window_length, windows.channels, windows.classes,
                        kernel_size=searched[0], kernel_sizes=searched if len(searched) > 1 else ())
    if anomaly is not None:
        # The test side sets the threshold, so a --test-data set (normal and fault windows) only evaluates.
        split = anomaly.split
        preprocessing = Preprocessing.fit(windows, anomaly.train_normal, s.normalize)
        if test_windows is not None:
            preprocessing.check_input(test_windows, "test data")
    else:
        split = make_split(windows, s.split, seed=s.seed)
        if test_windows is not None:  # a separate test set (--test-data): the split's test side trains instead
            split = without_test_side(split, len(test_windows))
        preprocessing = Preprocessing.fit(windows, split.train, s.normalize)
        if test_windows is not None:
            preprocessing.check(test_windows, "test data")
    folds = choose_folds(windows, split, s.selection, s.seed) if anomaly is None else None
    return Prepared(windows=windows, anomaly=anomaly, split=split, preprocessing=preprocessing, space=space,
                    kernels_note=kernels_note, final_fidelity=final_fidelity, augmentation_note=augmentation_note,
                    folds=folds)
