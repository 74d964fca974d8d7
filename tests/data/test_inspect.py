"""`tinynas data inspect`'s summary: sessions/conditions with their windows and classes, what was missing."""

from tinynas.data.checks import check_windows
from tinynas.data.cwru import load_cwru
from tinynas.data.inspect import compact_names, describe_windows, format_summary
from tinynas.data.isl import load_isl
from tinynas.data.splits import make_split
from tinynas.data.synthetic import vibration


def _text(spec, windows):
    summary = describe_windows(windows)
    summary["findings"] = [{"kind": f.kind, "severity": f.severity, "message": f.message}
                           for f in check_windows(windows)]
    summary["split"] = make_split(windows).describe()
    return summary, format_summary(spec, summary)


def test_compact_class_runs():
    order = ("A", "B", "C", "D", "E", "F")
    assert compact_names(["C", "A", "B", "E"], order) == "A..C, E"
    assert compact_names(["A", "B", "D", "E", "F"], order) == "A, B, D..F"


def test_isl_sessions_with_windows_and_classes(small_isl):
    summary, text = _text("isl:x", load_isl(small_isl))
    assert summary["per_session"] == [{"session": "2020-06-26", "windows": 10, "classes": ["A", "B"]},
                                      {"session": "2020-06-27", "windows": 5, "classes": ["C"]}]
    assert "    2020-06-26: 10 windows, 2 classes (A, B)" in text
    assert "    2020-06-27: 5 windows, 1 classes (C)" in text
    assert "  held out  none: no class spans two sessions" in text


def test_real_isl_sessions_compactly(real_isl):
    _, text = _text("isl:x", load_isl(real_isl))
    assert "    2020-06-26: 486 windows, 18 classes (A..R)" in text
    assert "    2020-06-27: 216 windows, 8 classes (S..Z)" in text


def test_cwru_condition_load_rpm_and_missing(small_cwru_1hp):
    _, text = _text("cwru:x", load_cwru(small_cwru_1hp, channel="DE"))
    assert "    1hp: 46 windows, 2 classes (all); load 1 hp, 1772-1774 rpm (nominal 1772)" in text
    assert "  missing   8 file(s) of the set, skipped: normal (98.mat), " in text
    keys = [line.split()[0] for line in text.splitlines()[1:]]
    assert "per_file" not in keys and "conditions" not in keys  # shown above, not dumped raw


def test_no_sessions_said_so():
    _, text = _text("synthetic:vibration", vibration(windows_per_class=30, length=64))
    assert "  sessions  none" in text
    assert "held out  none: no session labels" in text
