"""What `tinynas hil` says of the accuracy on the chip: windows cut with a hop from a few recordings are not
independent, so the count and its interval are over the recordings (issue 68), with the windows beside them."""

import numpy as np

from tinynas.hil.check import HilReport
from tinynas.verdict import held_out


def _report(answers, labels, groups) -> HilReport:
    report = HilReport(board="microbit", model_hash="0" * 16, counts="instructions", windows=len(labels),
                       checked=len(labels), hits=int(np.sum(np.asarray(answers) == np.asarray(labels))))
    report.accuracy = held_out(np.asarray(answers), np.asarray(labels), groups).to_dict()
    return report


def test_windows_of_few_recordings_are_counted_as_recordings():
    labels = np.repeat([0, 1], 40)  # 80 windows cut from 2 recordings
    answers = labels.copy()
    answers[:3] = 1
    text = _report(answers, labels, np.repeat([7, 8], 40)).text()
    assert "accuracy on the chip: 2 of 2 recordings (77 of 80 windows, cut from them with a hop" in text
    assert "95% interval 34.2%-100.0%" in text  # Wilson for 2 of 2: nothing like the windows' 91-99 %


def test_independent_windows_are_counted_as_windows():
    labels = np.array([0, 1, 0, 1])
    text = _report(np.array([0, 1, 1, 1]), labels, np.arange(4)).text()
    assert "accuracy on the chip: 3 of 4 (75.0%" in text
