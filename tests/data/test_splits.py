import numpy as np
import pytest

from tinynas.data.splits import group_split, make_split
from tinynas.data.synthetic import emg, vibration
from tinynas.data.windows import DataError


@pytest.mark.parametrize("windows", [vibration(windows_per_class=30, length=64, seed=2),
                                     emg(classes=5, windows_per_class=20, length=100, seed=2)])
def test_no_recording_lands_on_two_sides(windows):
    split = group_split(windows, seed=4)
    sides = [set(windows.groups[part]) for part in (split.train, split.val, split.test)]
    assert not sides[0] & sides[1] and not sides[0] & sides[2] and not sides[1] & sides[2]
    assert len(split.train) + len(split.val) + len(split.test) == len(windows)
    for part in (split.train, split.val, split.test):
        assert set(windows.y[part]) == set(range(windows.classes))
    assert "by recording group" in split.protocol


def test_split_is_seeded():
    windows = vibration(windows_per_class=30, length=64, seed=2)
    assert np.array_equal(group_split(windows, seed=1).test, group_split(windows, seed=1).test)
    assert not np.array_equal(group_split(windows, seed=1).test, group_split(windows, seed=2).test)


def test_too_few_recordings_is_a_clear_error():
    windows = vibration(windows_per_class=4, length=64, windows_per_recording=2, seed=0)
    with pytest.raises(DataError, match="has 2 recording group\\(s\\)"):
        group_split(windows)


def test_bad_fractions():
    with pytest.raises(DataError, match="three positive numbers summing to 1"):
        group_split(vibration(windows_per_class=30, length=64), (0.5, 0.5, 0.5))


def _cwru_like(hop=256):
    """One recording per class, as in CWRU, with windows every `hop` samples."""
    from tinynas.data.windows import Windows

    windows_per_file, length = 40, 64
    starts = np.arange(windows_per_file) * hop
    x = np.random.default_rng(0).normal(size=(3 * windows_per_file, length, 1))
    y = np.repeat(np.arange(3), windows_per_file)
    groups = np.repeat(np.array(["97", "105", "118"]), windows_per_file)
    return Windows(x, y, groups, ("normal", "IR007", "B007"), 12_000.0, ("FE",), {"source": "cwru"},
                   sessions=groups, time_index=np.tile(starts, 3))


def _assert_no_segment_on_two_sides(windows, split):
    """No recording on two sides unless in time order with no overlapping window across the cut."""
    sides = {"train": split.train, "val": split.val, "test": split.test}
    assert not set(split.train) & set(split.test) and not set(split.train) & set(split.val)
    for a_name, b_name in (("train", "val"), ("train", "test"), ("val", "test")):
        a, b = sides[a_name], sides[b_name]
        for group in set(windows.groups[a]) & set(windows.groups[b]):
            in_a = a[windows.groups[a] == group]
            in_b = b[windows.groups[b] == group]
            assert windows.time_index is not None, "a recording on two sides without time order"
            # every later-side window starts at least one window length after every earlier-side window
            gap = windows.time_index[in_b].min() - windows.time_index[in_a].max()
            assert gap >= windows.window_length, (group, a_name, b_name, gap)


@pytest.mark.parametrize("protocol", ["auto", "paper", "segment", "session"])
def test_cwru_like_protocols_never_leak_a_segment(protocol):
    windows = _cwru_like(hop=32)  # 50 % overlap: boundary windows must be dropped
    split = make_split(windows, protocol)
    _assert_no_segment_on_two_sides(windows, split)
    assert protocol == "auto" or split.protocol.startswith(protocol)


@pytest.mark.parametrize("protocol", ["auto", "paper", "session", "group"])
def test_isl_like_protocols_never_leak_a_recording(protocol):
    windows = emg(classes=4, windows_per_class=20, length=100, windows_per_recording=1, seed=1)
    windows = type(windows)(windows.x, windows.y, windows.groups, windows.class_names, windows.sample_rate_hz,
                            windows.channel_names, {"source": "isl"},
                            sessions=np.where(windows.y < 2, "day1", "day2"),
                            time_index=np.arange(len(windows)) * 10)
    split = make_split(windows, protocol)
    _assert_no_segment_on_two_sides(windows, split)


def test_session_protocol_holds_out_a_whole_session_when_classes_span_sessions():
    windows = emg(classes=3, windows_per_class=20, length=100, windows_per_recording=1, seed=1)
    sessions = np.array(["s1", "s2"] * (len(windows) // 2))
    windows = type(windows)(windows.x, windows.y, windows.groups, windows.class_names, windows.sample_rate_hz,
                            windows.channel_names, {"source": "session"}, sessions=sessions,
                            time_index=np.arange(len(windows)))
    split = make_split(windows, "session")
    assert set(windows.sessions[split.test]) == {"s2"}
    assert set(windows.sessions[split.train]) == {"s1"}
    assert set(windows.sessions[split.val]) == {"s2"} and split.held_out == "s2"
    assert "validates and tests on held-out session s2" in split.protocol


def test_real_protocols_never_leak(real_isl, real_cwru):
    from tinynas.data.cwru import load_cwru
    from tinynas.data.isl import load_isl

    isl = load_isl(real_isl)
    for protocol in ("paper", "session"):
        _assert_no_segment_on_two_sides(isl, make_split(isl, protocol))
    cwru = load_cwru(real_cwru, "bearingnas10", windows_per_file=200, resample_normal=False)
    paper = make_split(cwru, "paper")
    _assert_no_segment_on_two_sides(cwru, paper)
    assert (len(paper.train) + len(paper.val), len(paper.test)) == (1600, 400)
    overlapping = load_cwru(real_cwru, "std10", hop=256)
    _assert_no_segment_on_two_sides(overlapping, make_split(overlapping, "segment"))


def test_unknown_protocol():
    with pytest.raises(DataError, match="unknown split protocol"):
        make_split(vibration(windows_per_class=30, length=64), "kfold")
