"""folder: and npz: specs: your own recordings in common file formats, bad files named in one line."""

import numpy as np
import pytest
from scipy.io import savemat, wavfile

from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError, Windows

RATE = 100


def _signal(seed, length, channels=2):
    return np.random.default_rng(seed).normal(size=(length, channels)).astype(np.float32)


def _write_csv(path, samples, header=True):
    lines = ["emg_a,emg_b"] if header else []
    lines += [",".join(f"{v:.6f}" for v in row) for row in samples]
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture
def recordings(tmp_path):
    """Three classes; every file type; 2 channels; lengths 230..310 samples."""
    root = tmp_path / "recordings"
    for name in ("fist", "open", "rest"):
        (root / name).mkdir(parents=True)
    _write_csv(root / "fist" / "a.csv", _signal(1, 250))
    np.save(root / "fist" / "b.npy", _signal(2, 300))
    wavfile.write(root / "open" / "c.wav", RATE, (_signal(3, 230) * 3000).astype(np.int16))
    savemat(root / "open" / "d.mat", {"X097_DE_time": _signal(4, 310)[:, :1].repeat(2, axis=1),
                                      "X097RPM": np.array([[1797]])})
    (root / "rest" / "day2").mkdir()
    np.save(root / "rest" / "day2" / "e.npy", _signal(5, 260))
    _write_csv(root / "rest" / "f.csv", _signal(6, 240), header=False)
    (root / "rest" / "notes.txt").write_text("recorded after lunch\n")
    return root


def test_a_folder_of_csv_npy_wav_and_mat_files_loads_classes_groups_and_windows(recordings):
    windows = load_windows(f"folder:{recordings}?window=100&hop=50&rate={RATE}&key=_DE_time")
    assert windows.class_names == ("fist", "open", "rest")
    assert windows.x.shape[1:] == (100, 2) and windows.sample_rate_hz == RATE
    expected = {"fist/a": 250, "fist/b": 300, "open/c": 230, "open/d": 310, "rest/day2/e": 260, "rest/f": 240}
    for group, length in expected.items():
        members = windows.groups == group
        assert members.sum() == (length - 100) // 50 + 1, group
        assert len(set(windows.y[members])) == 1
    assert windows.channel_names == ("emg_a", "emg_b")  # the first file's CSV header
    assert windows.provenance["skipped"] == ["rest/notes.txt"]
    # Samples arrive as written: the second window of a.npy starts at sample 50.
    first = np.flatnonzero(windows.groups == "fist/b")
    assert np.allclose(windows.x[first[1]], _signal(2, 300)[50:150])
    # WAV integers are scaled to [-1, 1).
    wav = windows.x[windows.groups == "open/c"]
    assert np.abs(wav).max() < 1.0


def test_channels_are_chosen_by_index_or_by_csv_header_name(recordings, tmp_path):
    by_index = load_windows(f"folder:{recordings}?window=100&rate={RATE}&key=_DE_time&channels=1")
    assert by_index.channels == 1
    csv_only = tmp_path / "csv"
    for name, seed in (("a", 1), ("b", 2)):
        (csv_only / name).mkdir(parents=True)
        _write_csv(csv_only / name / "x.csv", _signal(seed, 120))
    by_name = load_windows(f"folder:{csv_only}?window=60&rate=50&channels=emg_b")
    assert by_name.channel_names == ("emg_b",)
    assert np.allclose(by_name.x[0, :, 0], _signal(1, 120)[:60, 1], atol=1e-5)


def test_without_a_window_length_each_file_is_one_window(tmp_path):
    for name, seed in (("a", 1), ("b", 2)):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "r1.npy", _signal(seed, 80))
        np.save(tmp_path / name / "r2.npy", _signal(seed + 10, 80))
    windows = load_windows(f"folder:{tmp_path}?rate=10")
    assert windows.x.shape == (4, 80, 2) and len(set(windows.groups)) == 4
    np.save(tmp_path / "b" / "r3.npy", _signal(9, 81))
    with pytest.raises(DataError, match=r"r3.npy has 81 samples but .* has 80"):
        load_windows(f"folder:{tmp_path}?rate=10")


def _two_classes(tmp_path, make_bad):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "good.npy", _signal(1, 200))
    _write_csv(tmp_path / "a" / "named.csv", _signal(2, 200))  # header a-then-b: emg_a, emg_b
    make_bad(tmp_path / "b")
    return tmp_path


BAD_FILES = {
    "three channels": (lambda d: np.save(d / "bad.npy", _signal(2, 200, channels=3)),
                       "bad.npy has 3 channel(s) but"),
    "NaN": (lambda d: np.save(d / "bad.npy", np.full((200, 2), np.nan)), "bad.npy: NaN/inf at sample 0"),
    "not a number": (lambda d: (d / "bad.csv").write_text("1,2\n3,oops\n"), "bad.csv line 2: 'oops' is not a number"),
    "ragged CSV": (lambda d: (d / "bad.csv").write_text("1,2\n3\n"), "bad.csv line 2: 1 values, expected 2"),
    "too short": (lambda d: np.save(d / "bad.npy", _signal(2, 50)), "bad.npy has 50 samples, fewer than one window"),
    "two MAT arrays": (lambda d: savemat(d / "bad.mat", {"p": _signal(2, 200), "q": _signal(3, 200)}),
                       "bad.mat: several arrays"),
    "not a MAT file": (lambda d: (d / "bad.mat").write_bytes(b"MATLAB 5.0 garbage"), "bad.mat: not a readable MATLAB"),
    "3-D npy": (lambda d: np.save(d / "bad.npy", np.zeros((2, 200, 2))), "bad.npy: array of shape"),
    "CSV columns in another order": (lambda d: (d / "bad.csv").write_text("emg_b,emg_a\n" + "1,2\n" * 200),
                                     "bad.csv has channels emg_b, emg_a but"),
    "WAV at another rate": (lambda d: wavfile.write(d / "bad.wav", 8000, np.zeros((200, 2), np.int16)),
                            "bad.wav is sampled at 8000 Hz, not rate=100"),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_a_bad_file_gives_one_line_naming_it(tmp_path, case):
    make_bad, message = BAD_FILES[case]
    root = _two_classes(tmp_path, make_bad)
    with pytest.raises(DataError) as error:
        load_windows(f"folder:{root}?window=100&rate=100")
    text = str(error.value)
    assert message in text and "\n" not in text


def test_wav_files_at_two_rates_are_refused_naming_one(tmp_path):
    for name, rate in (("a", 100), ("b", 200)):
        (tmp_path / name).mkdir()
        wavfile.write(tmp_path / name / f"{name}.wav", rate, np.zeros((300, 1), np.int16))
    with pytest.raises(DataError, match=r"b.wav is sampled at 200 Hz but .*a.wav at 100 Hz"):
        load_windows(f"folder:{tmp_path}?window=100")
    # WAV files carry their rate: no rate= needed when they agree.
    wavfile.write(tmp_path / "b" / "b.wav", 100, np.zeros((300, 1), np.int16))
    assert load_windows(f"folder:{tmp_path}?window=100").sample_rate_hz == 100


@pytest.mark.parametrize("layout, message", [
    ("no rate", "do not carry a sample rate"),
    ("empty class", "holds no signal files"),
    ("stray file", "outside class folders"),
    ("no classes", "no class subfolders"),
])
def test_folder_layout_errors(tmp_path, layout, message):
    if layout != "no classes":
        for name in ("a", "b"):
            (tmp_path / name).mkdir()
            if not (layout == "empty class" and name == "b"):
                np.save(tmp_path / name / "r.npy", _signal(1, 200))
    if layout == "stray file":
        np.save(tmp_path / "loose.npy", _signal(1, 200))
    spec = f"folder:{tmp_path}?window=100" + ("" if layout == "no rate" else "&rate=10")
    with pytest.raises(DataError, match=message):
        load_windows(spec)


def test_npz_arrays_with_names_groups_and_rate(tmp_path):
    x = np.random.default_rng(0).normal(size=(12, 50, 3)).astype(np.float32)
    y = np.array(["up", "down", "left"] * 4)
    np.savez(tmp_path / "w.npz", x=x, y=y, groups=np.repeat(np.arange(6), 2), sample_rate_hz=25.0)
    windows = load_windows(f"npz:{tmp_path / 'w.npz'}")
    assert windows.class_names == ("down", "left", "up") and windows.x.shape == (12, 50, 3)
    assert [windows.class_names[i] for i in windows.y[:3]] == ["up", "down", "left"]
    assert len(set(windows.groups)) == 6 and windows.sample_rate_hz == 25
    # Integer labels index `classes`; a class with no windows here is dropped.
    np.savez(tmp_path / "i.npz", x=x[:, :, 0], y=np.array([0, 2] * 6), classes=np.array(["a", "b", "c"]))
    windows = load_windows(f"npz:{tmp_path / 'i.npz'}?rate=10")
    assert windows.class_names == ("a", "c") and windows.channels == 1
    assert "each window is its own group" in windows.provenance["groups"]
    with pytest.raises(DataError, match="records no sample rate"):
        load_windows(f"npz:{tmp_path / 'i.npz'}")
    np.savez(tmp_path / "bad.npz", x=x)
    with pytest.raises(DataError, match="no array y"):
        load_windows(f"npz:{tmp_path / 'bad.npz'}?rate=1")


def test_npz_written_by_windows_save_loads_back_exactly(tmp_path):
    original = load_windows("synthetic:vibration?windows_per_class=4&length=64&seed=3")
    original.save(tmp_path / "saved.npz")
    again = load_windows(f"npz:{tmp_path / 'saved.npz'}")
    assert isinstance(again, Windows) and again.digest() == original.digest()
