"""A gesture session read as it was lived: its stream, and the stream around each window for training."""

import numpy as np

from tests.support.sessions import write_session
from tinynas.data.recording import load_recording, with_context
from tinynas.data.session import load_session


def _session(tmp_path):
    rng = np.random.default_rng(1)
    rest = rng.normal(0, 1.0, (4000, 2)).astype(np.float32)
    signs = [(label, rng.normal(0, 8.0, (150, 2)).astype(np.float32)) for label in ("fist", "open", "rest", "fist")]
    signs[2] = ("rest", rng.normal(0, 1.0, (100, 2)).astype(np.float32))
    written = write_session(tmp_path / "s", signs, rate=100.0, rest=rest, classes=("rest", "fist", "open"),
                            rest_class="rest", window=100, idle_seconds=2.0)
    return written


def test_signs_are_where_they_were_performed_and_a_still_class_is_its_window(tmp_path):
    written = _session(tmp_path)
    recording = load_recording(tmp_path / "s")
    assert recording.still_class == "rest" and recording.window_length == 100
    for event, truth in zip(recording.events, written):
        assert event.label == truth["label"] and event.onset == (truth["onset"] if not event.still else
                                                                 truth["start"])
        if not event.still:
            assert abs(event.end - truth["end"]) <= 20  # two 0.1 s frames at 100 Hz
        else:
            assert event.end == event.onset + 100


def test_the_stream_around_each_window_is_kept_with_its_signs_span(tmp_path):
    written = _session(tmp_path)
    windows = load_session(tmp_path / "s")
    around = with_context(windows, load_recording(tmp_path / "s"))
    assert around.margin == 100 and around.context.shape == (4, 300, 2)
    assert np.array_equal(around.context[:, 100:200], windows.x)  # the window itself in the middle
    assert around.provenance["still_class"] == "rest" and around.digest() == windows.digest()
    for span, truth in zip(around.spans, written):
        first = truth["start"] - 100
        if truth["label"] == "rest":
            assert span.tolist() == [100, 200]
        else:
            assert span[0] == truth["onset"] - first and abs(span[1] - (truth["end"] - first)) <= 20
    # Saved and read back for the workers: the context comes with the windows.
    around.save(tmp_path / "w.npz")
    again = type(around).load(tmp_path / "w.npz")
    assert np.array_equal(again.context, around.context) and np.array_equal(again.spans, around.spans)
    assert again.subset([0, 1, 2]).context.shape == (3, 300, 2)
