import numpy as np
import pytest

from tests.support.data_files import write_isl_recording
from tinynas.data.isl import load_isl
from tinynas.data.windows import DataError


def test_real_isl_loads_702_windows_with_session_groups(real_isl):
    windows = load_isl(real_isl)
    assert windows.x.shape == (702, 400, 8)
    assert windows.classes == 26 and windows.class_names[0] == "A" and windows.class_names[-1] == "Z"
    assert np.bincount(windows.y).tolist() == [27] * 26
    assert sorted(set(windows.sessions)) == ["2020-06-26", "2020-06-27"]
    assert len(set(windows.groups)) == 702
    assert windows.x.min() >= -128 and windows.x.max() <= 127


def test_generated_layout_loads_emg_and_imu(small_isl):
    emg = load_isl(small_isl)
    assert emg.x.shape == (15, 400, 8) and emg.class_names == ("A", "B", "C")
    both = load_isl(small_isl / "Dataset", imu=True)
    assert both.x.shape == (15, 400, 18) and both.channel_names[8] == "gyro_x"
    assert np.array_equal(both.x[:, :, :8], emg.x)
    # Later repetitions of a letter have later times.
    a = np.flatnonzero(emg.y == 0)
    assert (np.diff(emg.time_index[a]) > 0).all()


def test_truncated_file_names_the_file(small_isl):
    victim = small_isl / "Dataset" / "B" / "B03-guid.json"
    victim.write_text(victim.read_text()[:500])
    with pytest.raises(DataError, match="B03-guid.json: not valid JSON") as info:
        load_isl(small_isl)
    assert "\n" not in str(info.value)


def test_wrong_shape_names_the_file(small_isl):
    write_isl_recording(small_isl / "Dataset" / "C" / "bad.json", np.zeros((300, 8)), "26/06/20/12:00:00")
    with pytest.raises(DataError, match="bad.json: EMG has shape \\(300, 8\\)"):
        load_isl(small_isl)


def test_not_the_layout(tmp_path):
    with pytest.raises(DataError, match="is not the ISL layout"):
        load_isl(tmp_path)


def test_sessions_are_the_recording_days_in_provenance(small_isl):
    windows = load_isl(small_isl)
    assert windows.provenance["sessions"] == {"2020-06-26": 10, "2020-06-27": 5}
    assert windows.sessions.tolist() == ["2020-06-26"] * 10 + ["2020-06-27"] * 5


def test_real_re_worn_session_loads_as_one_session(real_isl_session3):
    windows = load_isl(real_isl_session3)
    assert windows.x.shape == (52, 400, 8) and windows.classes == 26
    assert np.bincount(windows.y).tolist() == [2] * 26
    assert windows.provenance["sessions"] == {"2020-07-09": 52}
