"""Issue 16: each bad input is one line naming the file and what to do, never a traceback or a
misleading guess; spec options are checked (type, range, size) before anything is allocated."""

import json
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from scipy.io import savemat, wavfile

from tests.support.data_files import as_other_user
from tinynas.data.inspect import describe_windows
from tinynas.data.spec import load_windows
from tinynas.data.windows import DataError, Windows


@pytest.fixture
def shared_tmp():
    """A folder that user nobody can traverse (pytest's tmp_path is root-only)."""
    folder = Path(tempfile.mkdtemp(prefix="tinynas-h2-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _classes(root: Path, names=("a", "b"), samples=200) -> Path:
    rng = np.random.default_rng(0)
    for name in names:
        folder = Path(os.fsdecode(os.fsencode(root) + b"/" + (name if isinstance(name, bytes) else name.encode())))
        folder.mkdir(parents=True)
        folder.chmod(0o755)
        np.save(folder / "r.npy", rng.normal(size=(samples, 2)).astype(np.float32))
        (folder / "r.npy").chmod(0o644)
    return root


def _one_line(error) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


def test_wav_with_junk_after_its_riff_header(tmp_path):
    _classes(tmp_path)
    wavfile.write(tmp_path / "good.wav", 100, np.zeros(50, np.int16))
    header = (tmp_path / "good.wav").read_bytes()[:12]
    (tmp_path / "good.wav").unlink()
    (tmp_path / "a" / "junk.wav").write_bytes(header + bytes(range(256)) * 2)
    with pytest.raises(DataError) as error:
        load_windows(f"folder:{tmp_path}?window=100&rate=100")
    assert "junk.wav: not a readable WAV file" in _one_line(error) and "export it again" in str(error.value)


def test_a_pipe_named_like_a_csv_is_refused_without_blocking(tmp_path):
    _classes(tmp_path)
    os.mkfifo(tmp_path / "a" / "live.csv")
    with pytest.raises(DataError) as error:
        load_windows(f"folder:{tmp_path}?window=100&rate=100")
    assert "live.csv is not a regular file" in _one_line(error)


def test_a_data_file_beyond_the_size_cap_is_refused_before_it_is_parsed(tmp_path, monkeypatch):
    import tinynas.data.signal_files as signal_files

    np.savez(tmp_path / "big.npz", x=np.zeros((4, 8, 1), np.float32), y=np.arange(4) % 2)
    monkeypatch.setattr(signal_files, "MAX_DATA_FILE_BYTES", 64)  # the real cap is 4 GiB: the rule, not the size
    with pytest.raises(DataError, match="is larger than 64 B, the most a data file may be"):
        load_windows(f"npz:{tmp_path / 'big.npz'}")


def test_a_csv_the_user_cannot_read(shared_tmp):
    _classes(shared_tmp)
    (shared_tmp / "a" / "secret.csv").write_text("1,2\n" * 200)
    (shared_tmp / "a" / "secret.csv").chmod(0o000)
    kind, message = as_other_user(lambda: load_windows(f"folder:{shared_tmp}?window=100&rate=100"))
    assert kind == "DataError", message
    assert message == f"cannot read {shared_tmp / 'a' / 'secret.csv'}: permission denied (check its owner and mode)"


def test_a_class_folder_the_user_cannot_read(shared_tmp):
    _classes(shared_tmp)
    (shared_tmp / "b").chmod(0o700)
    kind, message = as_other_user(lambda: load_windows(f"folder:{shared_tmp}?window=100&rate=100"))
    assert kind == "DataError", message
    assert f"cannot read folder {shared_tmp / 'b'}: permission denied" in message
    assert "holds no signal files" not in message


def test_a_class_folder_whose_name_is_not_utf8(tmp_path):
    _classes(tmp_path, ("a", b"caf\xe9"))
    windows = load_windows(f"folder:{tmp_path}?window=100&rate=100")
    # The raw byte is shown, not lost: inspect, the digest, JSON and the saved set all agree.
    assert windows.class_names == ("a", "caf\\xe9")
    summary = describe_windows(windows)
    assert list(summary["counts"]) == list(windows.class_names)
    json.dumps(summary, ensure_ascii=False).encode("utf-8")
    assert len(windows.digest()) == 16
    windows.save(tmp_path / "w.npz")
    again = Windows.load(tmp_path / "w.npz")
    assert again.class_names == windows.class_names and again.digest() == windows.digest()


def test_missing_and_unreadable_mat_files_say_what_happened(shared_tmp):
    savemat(shared_tmp / "97.mat", {"X097_FE_time": np.zeros((48_000, 1))})
    with pytest.raises(DataError) as error:
        load_windows(f"cwru:{shared_tmp}?files=97,105")
    assert _one_line(error) == f"{shared_tmp / '105.mat'}: no such file"
    (shared_tmp / "105.mat").mkdir()
    with pytest.raises(DataError, match="105.mat is a folder, not a CWRU .mat file"):
        load_windows(f"cwru:{shared_tmp}?files=97,105")
    (shared_tmp / "105.mat").rmdir()
    savemat(shared_tmp / "105.mat", {"X105_FE_time": np.zeros((12_000, 1))})
    (shared_tmp / "105.mat").chmod(0o000)
    kind, message = as_other_user(lambda: load_windows(f"cwru:{shared_tmp}?files=97,105"))
    assert kind == "DataError" and "permission denied" in message and "truncated" not in message, message


def test_random_bytes_in_an_npz_are_not_an_npz(tmp_path):
    (tmp_path / "r.npz").write_bytes(np.random.default_rng(0).bytes(300))
    with pytest.raises(DataError) as error:
        load_windows(f"npz:{tmp_path / 'r.npz'}")
    assert _one_line(error).endswith("r.npz: not a NumPy .npz file (write one with numpy.savez: x, y, ...)")
    assert "allow_pickle" not in str(error.value)


def test_a_truncated_npz_is_damaged(tmp_path):
    np.savez(tmp_path / "w.npz", x=np.ones((4, 8, 1)), y=np.array([0, 1, 0, 1]), sample_rate_hz=10.0)
    data = (tmp_path / "w.npz").read_bytes()
    (tmp_path / "w.npz").write_bytes(data[:len(data) // 2])
    with pytest.raises(DataError, match="w.npz: damaged .npz file"):
        load_windows(f"npz:{tmp_path / 'w.npz'}")


@pytest.mark.parametrize("spec, message", [
    ("cwru:{tmp}?windows_per_file=0", "windows_per_file=0: give at least 1"),
    ("cwru:{tmp}?hop=0", "hop >= 1, got 512 and 0"),
    ("cwru:{tmp}?files=97,97", "give distinct file numbers"),
    ("synthetic:emg?sample_rate_hz=0", "sample_rate_hz=0: synthetic:emg needs 50..100000 Hz"),
    ("synthetic:vibration?sample_rate_hz=-5", "needs 1000..1e+06 Hz"),
    ("synthetic:vibration?length=100000000", "240 windows x 100,000,000 samples x 1 channel(s) would take "
                                             "89.4 GiB (89.4 GiB of float32 and 1024 bytes of "
                                             "bookkeeping per window), above the 2 GiB limit"),
    ("synthetic:emg?windows_per_class=0", "at least one window per class"),
    ("synthetic:emg?seed=-1", "seed=-1"),
    ("synthetic:emg?channels=0", "channels=0"),
    ("synthetic:vibration?noise=inf", "not a finite number"),
    ("synthetic:vibration?shaft_rpm=0", "shaft_rpm=0"),
    ("synthetic:emg?length=1.5", "not a number (a whole number)"),
    ("synthetic:emg?classes=3&classes=4", "given twice"),
    ("synthetic:emg?seed", "not key=value pairs"),
    ("synthetic:emg?imu=1", "unknown option 'imu'; this source takes: classes, windows_per_class, length, "
                            "channels, sample_rate_hz, windows_per_recording, seed"),
    ("isl:{tmp}?imu=maybe", "imu='maybe' in the data spec is not a yes/no value"),
    ("folder:{tmp}?hop=10", "hop=10 needs window=N"),
    ("folder:{tmp}?window=10&rate=0", "rate=0 is not a sample rate"),
    ("npz:{tmp}/w.npz?rate=-1", "rate=-1 is not a sample rate"),
    ("session:{tmp}?window=0", "window and hop must be positive"),
    ("session:{tmp}?hop=8", "hop=8 needs window=N"),
    ("session:{tmp}?length=8", "unknown option 'length'; this source takes: window, hop"),
])
def test_every_spec_option_is_checked_before_allocating(tmp_path, spec, message):
    with pytest.raises(DataError) as error:
        load_windows(spec.format(tmp=tmp_path))
    assert message in _one_line(error)


def test_folder_windows_beyond_the_size_limit_are_refused_before_stacking(tmp_path):
    # One 800 kB file cut every sample into 10,000-sample windows would need 7.2 GB.
    _classes(tmp_path, samples=100_000)
    with pytest.raises(DataError) as error:
        load_windows(f"folder:{tmp_path}?window=10000&hop=1&rate=100")
    assert "90,001 windows x 10,000 samples x 2 channel(s) would take 6.8 GiB (6.7 GiB of float32" in _one_line(error)
    assert "raise hop" in str(error.value)
    assert len(load_windows(f"folder:{tmp_path}?window=10000&rate=100")) == 20


def test_millions_of_tiny_windows_count_their_bookkeeping_not_only_their_samples(tmp_path):
    # 2.2 M one-sample windows are 17 MB of float32 but ~1 GiB of per-window labels, names and views while
    # a loader assembles them (issue 35: 2 M of them peaked at 1.1 GiB): refused before, with the figure.
    _classes(tmp_path, samples=1_100_000)
    with pytest.raises(DataError) as error:
        load_windows(f"folder:{tmp_path}?window=1&rate=100")
    assert "1024 bytes of bookkeeping per window" in _one_line(error) and "above the 2 GiB limit" in _one_line(error)


def test_a_mat_file_that_crashes_scipys_reader_is_one_line(tmp_path):
    # The type code of the array's data element turned into 0x0807: scipy 1.17's loadmat dies of
    # SIGSEGV/SIGBUS on it (found by tests/robustness/test_loader_fuzz.py); the reader runs in a child.
    _classes(tmp_path)
    savemat(tmp_path / "a" / "bad.mat", {"X001_DE_time": np.ones((64, 2), np.float32)})
    data = bytearray((tmp_path / "a" / "bad.mat").read_bytes())
    data[data.index(b"X001_DE_time") + 16 + 1] = 0x08
    (tmp_path / "a" / "bad.mat").write_bytes(bytes(data))
    with pytest.raises(DataError) as error:
        load_windows(f"folder:{tmp_path}?window=16&rate=100")
    assert "bad.mat: not a readable MATLAB file" in _one_line(error)


def test_paths_of_the_wrong_kind_say_so(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(DataError, match=r"notes.txt: not a folder \(folder: takes one subfolder per class\)"):
        load_windows(f"folder:{tmp_path / 'notes.txt'}?rate=10")
    with pytest.raises(DataError, match="no such folder"):
        load_windows(f"folder:{tmp_path / 'missing'}?rate=10")
    with pytest.raises(DataError, match="holds no recorded session"):
        load_windows(f"session:{tmp_path / 'notes.txt'}")


def test_values_beyond_float32_are_one_line_without_warnings(tmp_path):
    import warnings

    _classes(tmp_path)
    np.save(tmp_path / "a" / "huge.npy", np.full((200, 2), 1e300))
    (tmp_path / "b" / "huge.csv").write_text("1e300,1\n" * 200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning on stderr would be a second line
        with pytest.raises(DataError) as error:
            load_windows(f"folder:{tmp_path}?window=100&rate=100")
        assert "huge.npy: NaN/inf at sample 0, channel 0 (or a value beyond float32's range" in _one_line(error)
        (tmp_path / "a" / "huge.npy").unlink()
        with pytest.raises(DataError, match="huge.csv: NaN/inf at sample 0"):
            load_windows(f"folder:{tmp_path}?window=100&rate=100")
        np.savez(tmp_path / "w.npz", x=np.full((4, 8), 1e300), y=np.array([0, 1, 0, 1]), sample_rate_hz=1.0)
        with pytest.raises(DataError,
                           match=r"w.npz: 32 too large for float32 \(beyond 3.4e38\) value\(s\), first in window 0"):
            load_windows(f"npz:{tmp_path / 'w.npz'}")


def test_a_dangling_link_is_named_as_such(tmp_path):
    _classes(tmp_path)
    (tmp_path / "a" / "gone.csv").symlink_to(tmp_path / "elsewhere.csv")
    with pytest.raises(DataError, match=r"gone.csv is a symbolic link to a missing file \(.*elsewhere.csv\)"):
        load_windows(f"folder:{tmp_path}?window=100&rate=100")


def test_an_npy_that_is_not_one_never_advises_unpickling(tmp_path):
    for name in ("fist", "rest"):
        (tmp_path / name).mkdir()
        np.save(tmp_path / name / "ok.npy", np.arange(64, dtype=np.float32))
    (tmp_path / "fist" / "ok.npy").write_bytes(np.random.default_rng(0).bytes(500))
    with pytest.raises(DataError, match=r"ok\.npy: not a NumPy \.npy file") as info:
        load_windows(f"folder:{tmp_path}?rate=200")
    np.save(tmp_path / "fist" / "ok.npy", np.array([object()], dtype=object), allow_pickle=True)
    with pytest.raises(DataError, match=r"ok\.npy: holds Python objects, not numbers") as info2:
        load_windows(f"folder:{tmp_path}?rate=200")
    assert "allow_pickle" not in str(info.value) + str(info2.value)


_PEAK = """
import sys
from tinynas.cli import main

def peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM"):
            return int(line.split()[1]) * 1024

before = peak()
code = main(sys.argv[1:])
print(before, peak(), file=sys.stdout)
sys.exit(code)
"""


def _peak(*args: str) -> tuple[int, int, str]:
    """`tinynas ARGS` in a fresh interpreter: (exit code, bytes its peak memory grew by while it ran, stderr)."""
    import subprocess
    import sys

    ran = subprocess.run([sys.executable, "-c", _PEAK, *args], capture_output=True, text=True, timeout=600)
    before, after = map(int, ran.stdout.split()[-2:])
    return ran.returncode, after - before, ran.stderr


def test_millions_of_windows_with_long_names_are_refused_before_memory_grows(tmp_path):
    """1.56 M one-sample windows of two CSV files named with 200 characters: 6 MB of samples, but every window keeps
    its file's name as numpy text (4 bytes a character, and a copy when the recordings are counted): they peaked at
    4.2 GB while the check counted 1.6 GB. Refused now on the true bytes, in one line, before they are built."""
    name = "r" * 200
    values = np.random.default_rng(0).integers(0, 100, (780_000, 1))
    for label in ("a", "b"):
        (tmp_path / "rec" / label).mkdir(parents=True)
        np.savetxt(tmp_path / "rec" / label / f"{name}.csv", values, fmt="%d")
    code, grew, stderr = _peak("data", "inspect", f"folder:{tmp_path / 'rec'}?window=1&rate=100")
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("tinynas: error: "), stderr
    assert "1,560,000 windows x 1 samples x 1 channel(s) would take 3.8 GiB" in lines[0]
    assert "1,616 for its 202 characters of names), above the 2 GiB limit" in lines[0]
    assert grew < 400 * 2**20, f"grew by {grew / 2**20:.0f} MiB before refusing"
    # The same windows named shortly are 1,048 bytes each by the count (433 measured): loaded.
    (tmp_path / "rec" / "a" / f"{name}.csv").rename(tmp_path / "rec" / "a" / "x.csv")
    (tmp_path / "rec" / "b" / f"{name}.csv").rename(tmp_path / "rec" / "b" / "x.csv")
    code, grew, stderr = _peak("data", "inspect", f"folder:{tmp_path / 'rec'}?window=1&rate=100")
    assert code == 0, stderr


def test_a_small_npz_that_unpacks_into_millions_of_windows_is_refused_from_its_headers(tmp_path):
    """A compressed .npz of 70 kB whose x holds 6 M one-sample windows (and no groups: each window would be named
    its own): refused from its arrays' headers before any is read."""
    np.savez_compressed(tmp_path / "many.npz", x=np.zeros((6_000_000, 1), np.float32),
                        y=np.zeros(6_000_000, np.int8), sample_rate_hz=100.0)
    assert (tmp_path / "many.npz").stat().st_size < 1 << 20
    code, grew, stderr = _peak("data", "inspect", f"npz:{tmp_path / 'many.npz'}")
    lines = stderr.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "6,000,000 windows x 1 samples x 1 channel(s) would take" in lines[0]
    assert "above the 2 GiB limit; split the file, or keep fewer windows" in lines[0]
    assert grew < 100 * 2**20, f"grew by {grew / 2**20:.0f} MiB before refusing"
