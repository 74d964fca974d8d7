import numpy as np
import pytest

from tinynas.data.windows import DataError, Windows


def _windows(**changes):
    fields = dict(x=np.zeros((6, 10, 2), np.float32), y=np.array([0, 0, 1, 1, 2, 2]),
                  groups=np.array(["a", "a", "b", "b", "c", "c"]), class_names=("x", "y", "z"),
                  sample_rate_hz=100.0)
    fields.update(changes)
    return Windows(**fields)


def test_valid_windows_expose_their_shape():
    windows = _windows()
    assert (len(windows), windows.window_length, windows.channels, windows.classes) == (6, 10, 2, 3)


@pytest.mark.parametrize("changes, message", [
    (dict(x=np.zeros((6, 10))), "must have shape \\(n, T, C\\)"),
    (dict(y=np.array([0, 1, 2])), "6 windows but labels have shape"),
    (dict(groups=np.array(["a"])), "6 windows but groups"),
    (dict(y=np.array([0, 0, 1, 1, 1, 1])), "class\\(es\\) with no windows: z"),
    (dict(y=np.array([0, 0, 1, 1, 2, 7])), "labels must lie in 0..2"),
    (dict(y=np.array([0.0, 0, 1, 1, 2, 2])), "labels must be integers"),
    (dict(class_names=(), y=np.zeros(6, int)), "no class names"),
    (dict(sample_rate_hz=0.0), "sample rate must be positive"),
    (dict(channel_names=("a", "b", "c")), "3 channel names for 2 channels"),
])
def test_bad_windows_are_rejected_in_one_line(changes, message):
    with pytest.raises(DataError, match=message) as info:
        _windows(**changes)
    assert "\n" not in str(info.value)


def test_nan_is_located():
    x = np.zeros((6, 10, 2), np.float32)
    x[4, 7, 1] = np.nan
    with pytest.raises(DataError, match="1 NaN/inf value\\(s\\), first in window 4 at sample 7, channel 1"):
        _windows(x=x)


def test_save_load_round_trip_and_digest(tmp_path):
    windows = _windows(x=np.random.default_rng(0).normal(size=(6, 10, 2)), provenance={"source": "test"})
    windows.save(tmp_path / "w.npz")
    again = Windows.load(tmp_path / "w.npz")
    assert np.array_equal(again.x, windows.x) and again.class_names == windows.class_names
    assert again.provenance == {"source": "test"}
    assert again.digest() == windows.digest()
    assert windows.subset([0, 2, 4]).digest() != windows.digest()


def test_unreadable_file_is_a_clear_error(tmp_path):
    path = tmp_path / "w.npz"
    path.write_bytes(b"garbage")
    with pytest.raises(DataError, match="cannot read windows from"):
        Windows.load(path)
