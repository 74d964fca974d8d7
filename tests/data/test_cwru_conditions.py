"""CWRU at every load: class names independent of the load, the load as the session, load detection."""

import numpy as np
import pytest

from tests.support.data_files import linked_mat_folder
from tinynas.data.cwru import CATALOGUE, FILE_SETS, load_cwru, number_of
from tinynas.data.spec import load_windows
from tinynas.data.splits import make_split
from tinynas.data.windows import DataError, Windows


def _both_loads(tmp_path, zero_hp, one_hp):
    return linked_mat_folder(tmp_path / "both", zero_hp, one_hp)


def test_catalogue_numbers_every_class_at_every_load():
    assert len(CATALOGUE) == 16 * 4
    assert [number_of("OR007@12", hp) for hp in range(4)] == [156, 158, 159, 160]
    assert [number_of("normal", hp) for hp in range(4)] == [97, 98, 99, 100]
    b028 = CATALOGUE[3008]
    assert (b028.label, b028.fault, b028.diameter_in, b028.load_hp, b028.nominal_rpm) == (
        "B028", "ball", 0.028, 3, 1730)
    assert CATALOGUE[247].position == "@3" and CATALOGUE[247].fault == "outer_race"
    assert CATALOGUE[99].sample_rate_hz == 48_000 and CATALOGUE[99].fault == "normal"
    assert CATALOGUE[211].sample_rate_hz == 12_000
    # The presets keep today's 0 hp files in today's order (class indices unchanged).
    assert tuple(number_of(c, 0) for c in FILE_SETS["bearingnas10"]) == (
        97, 105, 118, 130, 144, 156, 169, 185, 209, 222)
    assert tuple(number_of(c, 0) for c in FILE_SETS["std10"]) == (97, 105, 118, 130, 169, 185, 197, 209, 222, 234)


def test_generated_1hp_files_get_the_0hp_class_names(small_cwru, small_cwru_1hp):
    zero = load_cwru(small_cwru, (97, 105, 3001), channel="DE")
    one = load_cwru(small_cwru_1hp, (106, 119, 3002), channel="DE")
    assert zero.class_names == ("normal", "IR007", "IR028")
    assert one.class_names == ("IR007", "B007", "IR028")
    assert set(zero.sessions) == {"0hp"} and set(one.sessions) == {"1hp"}
    assert set(one.groups) == {"106", "119", "3002"}
    files = one.provenance["per_file"]
    assert (files["106"]["load_hp"], files["106"]["rpm"], files["106"]["rpm_from"]) == (1, 1774, "file")
    assert (files["119"]["rpm"], files["119"]["rpm_from"]) == (1772, "nominal")
    assert files["3002"]["key"] == "X057_DE_time" and files["3002"]["label"] == "IR028"


def test_generated_1hp_preset_skips_and_records_the_missing_normal(small_cwru_1hp):
    windows = load_cwru(small_cwru_1hp, "bearingnas10", channel="DE")  # load 1 detected: the only one here
    assert windows.class_names == ("IR007", "B007")
    assert windows.provenance["load_hp"] == [1]
    missing = windows.provenance["missing"]
    assert missing[0] == "normal (98.mat)" and "OR007@12 (158.mat)" in missing and len(missing) == 8
    assert windows.provenance["conditions"]["1hp"] == {"load_hp": 1, "rpm": [1772, 1774], "nominal_rpm": 1772}


def test_real_1hp_files_get_the_0hp_class_names(real_cwru, real_cwru_1hp):
    zero = load_cwru(real_cwru, "bearingnas10", channel="DE")
    one = load_cwru(real_cwru_1hp, "bearingnas10", channel="DE")
    assert one.class_names == zero.class_names[1:]  # the same names, without the absent normal
    assert one.provenance["missing"] == ["normal (98.mat)"]
    assert set(one.sessions) == {"1hp"} and set(zero.sessions) == {"0hp"}
    assert one.provenance["per_file"]["106"] == {**one.provenance["per_file"]["106"], "label": "IR007",
                                                 "load_hp": 1, "rpm": 1772.0, "rpm_from": "file"}
    assert load_cwru(real_cwru_1hp, (3002, 3006), channel="DE").class_names == ("IR028", "B028")


def test_real_0hp_splits_are_unchanged_by_the_load_sessions(real_cwru):
    """The load is now the session ("0hp"); with one load, every per-class-and-session split is as before,
    when the session was the file."""
    windows = load_cwru(real_cwru, "std10", hop=256)
    assert windows.class_names[0] == "normal" and set(windows.sessions) == {"0hp"}
    before = Windows(windows.x, windows.y, windows.groups, windows.class_names, windows.sample_rate_hz,
                     windows.channel_names, windows.provenance, sessions=windows.groups,
                     time_index=windows.time_index)
    for protocol in ("segment", "paper", "session", "auto"):
        now, then = make_split(windows, protocol), make_split(before, protocol)
        for side in ("train", "val", "test"):
            assert np.array_equal(getattr(now, side), getattr(then, side)), (protocol, side)


def test_two_loads_in_one_folder_ask_for_load_in_one_line(tmp_path, small_cwru, small_cwru_1hp):
    folder = _both_loads(tmp_path, small_cwru, small_cwru_1hp)
    with pytest.raises(DataError, match="at 0 hp and 1 hp: choose one with load=0 or load=1, or all of them "
                                        "with load=0,1") as info:
        load_cwru(folder, channel="DE")
    assert "\n" not in str(info.value)
    assert set(load_cwru(folder, channel="DE", load=0).sessions) == {"0hp"}


def test_several_loads_keep_one_class_index_per_name(tmp_path, small_cwru, small_cwru_1hp):
    folder = _both_loads(tmp_path, small_cwru, small_cwru_1hp)
    windows = load_windows(f"cwru:{folder}?load=0,1&channel=DE")
    assert windows.class_names == ("normal", "IR007", "B007")  # the preset's order
    assert set(windows.y[windows.groups == "105"]) == set(windows.y[windows.groups == "106"]) == {1}
    assert set(windows.sessions[windows.groups == "106"]) == {"1hp"}
    assert "normal at 1 hp (98.mat)" in windows.provenance["missing"]
    assert windows.provenance["load_hp"] == [0, 1]
    everything = load_windows(f"cwru:{folder}?load=all&channel=DE")
    assert everything.digest() == windows.digest()
    assert "IR007 at 3 hp (108.mat)" in everything.provenance["missing"]
    named = load_windows(f"cwru:{folder}?files=IR007,B007&load=1&channel=DE")
    assert named.class_names == ("IR007", "B007") and set(named.groups) == {"106", "119"}


@pytest.mark.parametrize("options, message", [
    ({}, "holds no file of the CWRU set bearingnas10 at any load: expected 97.mat, 105.mat, 118.mat"),
    ({"load": 2}, "only 0 class\\(es\\) of bearingnas10 at 2 hp found \\(missing normal \\(99.mat\\)"),
    ({"load": (7,)}, "load=7: give distinct loads in hp among 0, 1, 2, 3"),
    ({"load": "some"}, "load='some': give loads in hp"),
    ({"files": (105, 106), "load": 1}, "give files=NUMBERS or load=..., not both"),
    ({"files": "IR007,XX"}, "unknown CWRU file set 'IR007,XX'"),
])
def test_bad_loads_and_sets_are_one_line(tmp_path, options, message):
    with pytest.raises(DataError, match=message) as info:
        load_cwru(tmp_path, **options)
    assert "\n" not in str(info.value)


def test_one_class_left_and_absent_numbered_file(small_cwru, small_cwru_1hp):
    (small_cwru_1hp / "119.mat").unlink()
    with pytest.raises(DataError, match="only 1 class\\(es\\) of bearingnas10 at 1 hp found .*need at least 2"):
        load_cwru(small_cwru_1hp, channel="DE")
    with pytest.raises(DataError, match="98.mat: no such file"):  # an explicit number stays required
        load_cwru(small_cwru, (98, 105), channel="DE")
