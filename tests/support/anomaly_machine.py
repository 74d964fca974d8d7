"""A synthetic motor for the anomaly scorer's tests (tests/anomaly/test_scorer.py, test_family.py): its windows, a
small search recipe and budget, and the clock that ends a search after a few candidates whatever the machine."""

import numpy as np

from tinynas.data.synthetic import vibration
from tinynas.data.windows import Windows
from tinynas.progress import Progress
from tinynas.trial import Fidelity

LENGTH = 128
RATE = 0.05
RECIPE = Fidelity(epochs=6, batch_size=32, learning_rate=3e-3)
TARGET = dict(ram="6k", flash="32k", macs="1M")


def machine(seed, count=300, noise=0.5):
    """A synthetic motor's windows: normal running and the three faults, 10 windows per recording (`noise`: the
    sensor's noise floor against shaft harmonics of 0.3, 0.15 and 0.08)."""
    return vibration(windows_per_class=count, length=LENGTH, windows_per_recording=10, noise=noise, seed=seed)


def only(data, labels):
    keep = np.flatnonzero(np.isin(data.y, labels))
    names = tuple(data.class_names[i] for i in labels)
    relabel = {old: new for new, old in enumerate(labels)}
    return Windows(data.x[keep], np.array([relabel[v] for v in data.y[keep]]), data.groups[keep], names,
                   data.sample_rate_hz, data.channel_names, data.provenance)


class Results(Progress):
    """Counts trained candidates: the test's clock, so that the search ends after a few whatever the machine."""

    def __init__(self):
        super().__init__(interactive=False)
        self.results = 0

    def event(self, text):
        super().event(text)
        self.results += "val loss" in text or " failed: " in text
