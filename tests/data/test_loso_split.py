"""Leave-one-session-out: validation on a session the training never saw, or a protocol that says why not."""

import re

import numpy as np
import pytest

from tinynas.data.splits import leave_session_out_split, make_split
from tinynas.data.windows import DataError, Windows
from tinynas.study.report import validation_line


def _recorded(plan, per_recording=6, hop=None, length=32, source="session"):
    """Windows from `plan`: {(class, session): recordings}; each recording `per_recording` windows,
    `hop` samples apart (default: one window, no overlap). Groups name (class, session, recording)."""
    hop = hop or length
    x, y, groups, sessions, times = [], [], [], [], []
    rng = np.random.default_rng(0)
    classes = sorted({label for label, _ in plan})
    for (label, session), recordings in sorted(plan.items()):
        for r in range(recordings):
            for w in range(per_recording):
                x.append(rng.normal(size=(length, 1)))
                y.append(classes.index(label))
                groups.append(f"{label}-{session}-{r}")
                sessions.append(session)
                times.append(w * hop)
    return Windows(np.array(x), np.array(y), np.array(groups), tuple(classes), 100.0, ("ch",), {"source": source},
                   sessions=np.array(sessions), time_index=np.array(times))


def _sides(split):
    return {"train": split.train, "val": split.val, "test": split.test}


def _assert_no_leak(windows, split):
    """No window on two sides; a recording on two sides only in time order, never overlapping."""
    sides = _sides(split)
    for a_name, b_name in (("train", "val"), ("train", "test"), ("val", "test")):
        a, b = sides[a_name], sides[b_name]
        assert not set(a) & set(b)
        for group in set(windows.groups[a]) & set(windows.groups[b]):
            gap = windows.time_index[b[windows.groups[b] == group]].min() - \
                windows.time_index[a[windows.groups[a] == group]].max()
            assert gap >= windows.window_length, (group, a_name, b_name, gap)


def test_three_sessions_train_validate_and_test_on_different_sessions():
    windows = _recorded({(c, s): 2 for c in "ABC" for s in ("d1", "d2", "d3")})
    split = make_split(windows, "auto")
    assert set(windows.sessions[split.train]) == {"d1"}
    assert set(windows.sessions[split.val]) == {"d2"} and split.held_out == "d2"
    assert set(windows.sessions[split.test]) == {"d3"}
    assert len(split.train) + len(split.val) + len(split.test) == len(windows)
    assert split.protocol.startswith("leave-one-session-out: trains on d1, validates on held-out session d2, "
                                     "tests on held-out session d3")
    _assert_no_leak(windows, split)


def test_two_sessions_split_the_held_out_one_by_recording():
    windows = _recorded({(c, s): 4 for c in "ABC" for s in ("day1", "day2")})
    split = make_split(windows, "session")
    assert set(windows.sessions[split.train]) == {"day1"}
    assert set(windows.sessions[split.val]) == set(windows.sessions[split.test]) == {"day2"}
    assert not set(windows.groups[split.val]) & set(windows.groups[split.test])  # whole recordings
    for part in (split.val, split.test):
        assert np.bincount(windows.y[part]).tolist() == [12, 12, 12]  # 2 of the 4 recordings each
    assert split.protocol.startswith("session: leave-one-session-out:")
    assert split.describe()["held_out"] == "day2"


def test_one_recording_per_class_and_condition_is_cut_in_time_without_overlap():
    """CWRU: one file per class and load; overlapping windows (hop = half a window)."""
    windows = _recorded({(c, s): 1 for c in "ABC" for s in ("0hp", "1hp")}, per_recording=40, hop=16,
                        source="cwru")
    split = make_split(windows)
    assert split.held_out == "1hp"
    assert set(windows.sessions[split.val]) == set(windows.sessions[split.test]) == {"1hp"}
    _assert_no_leak(windows, split)
    assert len(split.train) == 3 * 40 and len(split.val) == 3 * 20
    assert len(split.test) == 3 * 19  # the first test window overlaps the last validation one
    assert "overlapping windows dropped" in split.protocol


def test_class_in_one_session_only_is_cut_in_time_and_named():
    """CWRU 0 + 1 hp: the normal baseline exists at 0 hp only."""
    plan = {(c, s): 1 for c in ("IR", "OR") for s in ("0hp", "1hp")}
    plan[("normal", "0hp")] = 1
    windows = _recorded(plan, per_recording=20, source="cwru")
    split = make_split(windows)
    normal = windows.class_names.index("normal")
    for part in (split.train, split.val, split.test):
        assert normal in windows.y[part]
    assert set(windows.sessions[split.val][windows.y[split.val] != normal]) == {"1hp"}
    assert "1 class(es) recorded in one session only, split in time within it (70/10/20): normal" in split.protocol
    assert split.held_out_reason == (
        "validates on held-out session 1hp (except 1 class(es) recorded in one session only)")
    _assert_no_leak(windows, split)


def test_classes_recorded_on_different_days_are_held_out_on_their_later_day():
    """ISL: June letters A-B on day 1 and C on day 2, every letter again after re-wearing (day 3)."""
    plan = {("A", "06-26"): 3, ("B", "06-26"): 3, ("C", "06-27"): 3}
    plan.update({(c, "07-09"): 2 for c in "ABC"})
    windows = _recorded(plan, per_recording=1)
    split = make_split(windows)
    assert set(windows.sessions[split.train]) == {"06-26", "06-27"}
    assert set(windows.sessions[split.val]) == set(windows.sessions[split.test]) == {"07-09"}
    assert split.held_out == "07-09"
    assert sorted(windows.y[split.val].tolist()) == sorted(windows.y[split.test].tolist()) == [0, 1, 2]


@pytest.mark.parametrize("plan, source, reason, starts", [
    ({(c, "d1"): 3 for c in "ABC"}, "session", "one session only (d1)", "by recording group"),
    ({("A", "d1"): 3, ("B", "d1"): 3, ("C", "d2"): 3}, "session", "no class spans two sessions", "by recording group"),
    ({(c, "0hp"): 1 for c in "ABC"}, "cwru", "one session only (0hp)", "segment: temporal"),
])
def test_auto_falls_back_and_says_why(plan, source, reason, starts):
    windows = _recorded(plan, per_recording=10, source=source)
    split = make_split(windows, "auto")
    assert split.held_out is None and split.held_out_reason == reason
    assert split.protocol.startswith(starts) and split.protocol.endswith(f"; not leave-one-session-out: {reason}")
    assert split.describe()["held_out_reason"] == reason
    with pytest.raises(DataError, match=re.escape(f"leave-one-session-out is impossible: {reason}")) as info:
        leave_session_out_split(windows)
    assert "\n" not in str(info.value)


def test_session_protocol_fallback_keeps_its_name_and_reason():
    windows = _recorded({("A", "d1"): 3, ("B", "d2"): 3}, per_recording=10, source="isl")
    split = make_split(windows, "session")
    assert split.protocol.startswith("session (no class spans two sessions, so temporal within")
    assert split.held_out is None and split.held_out_reason == "no class spans two sessions"
    assert make_split(windows, "auto").protocol == split.protocol  # ISL falls back to the same


def test_explicit_protocols_never_hold_out_and_say_so():
    windows = _recorded({(c, s): 3 for c in "AB" for s in ("d1", "d2")}, per_recording=10)
    split = make_split(windows, "group")
    assert split.held_out is None and "--split group" in split.held_out_reason


def test_too_small_held_out_session_falls_back():
    windows = _recorded({**{(c, "d1"): 3 for c in "AB"}, **{(c, "d2"): 1 for c in "AB"}}, per_recording=1)
    split = make_split(windows, "auto")
    assert split.held_out is None and "too few windows per class to both validate and test" in split.held_out_reason


def test_real_cwru_0_and_1_hp_validate_on_1_hp(tmp_path, real_cwru, real_cwru_1hp):
    from tests.support.data_files import linked_mat_folder
    from tinynas.data.cwru import load_cwru

    folder = linked_mat_folder(tmp_path / "both", real_cwru, real_cwru_1hp)
    windows = load_cwru(folder, "bearingnas10", channel="DE", load=(0, 1), hop=256)
    split = make_split(windows)
    assert split.held_out == "1hp" and "validates and tests on held-out session 1hp" in split.protocol
    faults = windows.y != windows.class_names.index("normal")
    assert set(windows.sessions[split.train][faults[split.train]]) == {"0hp"}
    assert set(windows.sessions[split.val][faults[split.val]]) == {"1hp"}
    assert set(windows.sessions[split.test][faults[split.test]]) == {"1hp"}
    _assert_no_leak(windows, split)


def test_report_says_whether_validation_was_held_out():
    held = _recorded({(c, s): 2 for c in "AB" for s in ("d1", "d2")})
    assert validation_line(make_split(held).describe()) == (
        "- validation: leave-one-session-out, validates on held-out session d2: candidates were ranked by what "
        "transfers to it")
    single = _recorded({(c, "d1"): 3 for c in "AB"})
    assert validation_line(make_split(single).describe()) == (
        "- validation: not on a held-out session (one session only (d1)): candidates were ranked on the "
        "training sessions")
    assert "an older card" in validation_line({"protocol": "segment: ...", "train": 1, "val": 1, "test": 1})


def test_a_one_session_class_too_short_to_cut_is_the_reason():
    windows = _recorded({("A", "d1"): 2, ("A", "d2"): 2, ("B", "d1"): 1}, per_recording=2)
    with pytest.raises(DataError, match="impossible: class 'B' has 2 window\\(s\\) in session 'd1'; a temporal "
                                        "split needs at least 3"):
        leave_session_out_split(windows)
    with pytest.raises(DataError, match="class 'B' has 1 recording group"):  # and the fallback cannot either
        make_split(windows, "auto")
