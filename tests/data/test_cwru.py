import numpy as np
import pytest

from tinynas.data.cwru import load_cwru
from tinynas.data.windows import DataError


def test_real_bearingnas10_loads_10_classes_of_200_windows(real_cwru):
    windows = load_cwru(real_cwru, "bearingnas10", channel="FE", windows_per_file=200, resample_normal=False)
    assert windows.x.shape == (2000, 512, 1)
    assert np.bincount(windows.y).tolist() == [200] * 10
    assert windows.class_names[:3] == ("normal", "IR007", "B007")
    assert windows.provenance["per_file"]["105"]["key"] == "X105_FE_time"
    assert "48 kHz" in windows.provenance["normal_baseline"]


def test_real_keys_are_found_by_suffix(real_cwru):
    windows = load_cwru(real_cwru, (3001, 3005), channel="DE")
    assert windows.provenance["per_file"]["3001"]["key"] == "X056_DE_time"


def test_real_normal_baseline_is_resampled_by_default(real_cwru):
    windows = load_cwru(real_cwru, (97, 105))
    assert np.bincount(windows.y)[0] == 243938 // 4 // 512
    assert windows.provenance["per_file"]["97"]["resampled_to_hz"] == 12_000


def test_generated_files_windows_hop_and_resampling(small_cwru):
    windows = load_cwru(small_cwru, (97, 105, 3001), channel="DE", window=512, hop=256)
    counts = np.bincount(windows.y)
    assert counts.tolist() == [(12_000 - 512) // 256 + 1] * 3  # 48 kHz normal resampled to 12 kHz
    assert windows.provenance["per_file"]["3001"]["key"] == "X056_DE_time"
    first = np.flatnonzero(windows.y == 1)
    assert windows.time_index[first][:3].tolist() == [0, 256, 512]


def test_missing_channel_names_file_and_keys(small_cwru):
    with pytest.raises(DataError, match="3001.mat: no channel FE .*keys: X056_DE_time"):
        load_cwru(small_cwru, (105, 3001), channel="FE")


def test_truncated_file_names_the_file(small_cwru):
    victim = small_cwru / "105.mat"
    victim.write_bytes(victim.read_bytes()[:3000])
    with pytest.raises(DataError, match="105.mat: not a readable MATLAB file") as info:
        load_cwru(small_cwru, (97, 105), channel="DE")
    assert "\n" not in str(info.value)


def test_too_few_windows_explains_the_resampling(small_cwru):
    with pytest.raises(DataError, match="pass resample=0"):
        load_cwru(small_cwru, (97, 105), channel="DE", windows_per_file=30)


def test_unknown_set_and_channel(small_cwru):
    with pytest.raises(DataError, match="unknown CWRU file set"):
        load_cwru(small_cwru, "all")
    with pytest.raises(DataError, match="unknown CWRU channel"):
        load_cwru(small_cwru, (105,), channel="XY")
