"""Property tests (issue 16): every data loader, fed random bytes, truncations, bit flips and
spliced junk of a real file of its format, returns windows or raises the project's own error
(TinynasError / BridgeError), never any other exception.

Each format starts from a small valid file written the way the real producer writes it (scipy
savemat / wavfile, numpy save / savez / Windows.save, the ISL JSON layout, firmware_bridge's
Recorder). Runs are derandomized so CI sees the same inputs every time.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from firmware_bridge.errors import BridgeError
from tests.support.damage import damaged
from tinynas.data.spec import load_windows
from tinynas.data.windows import Windows
from tinynas.errors import TinynasError

FUZZ = settings(max_examples=int(os.environ.get("TINYNAS_FUZZ_EXAMPLES", 100)), deadline=None,
                derandomize=not os.environ.get("TINYNAS_FUZZ_EXAMPLES"), database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


def _signal(seed: int, samples: int = 64, channels: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(samples, channels)).astype(np.float32)


OUTCOMES: dict[str, int] = {}


def _outcome(spec: str) -> None:
    """Load `spec`: windows or the project's own one-line error, nothing else."""
    try:
        windows = load_windows(spec)
    except (TinynasError, BridgeError) as exc:
        assert str(exc) and "\n" not in str(exc), repr(exc)
        OUTCOMES["refused"] = OUTCOMES.get("refused", 0) + 1
        return
    assert isinstance(windows, Windows)
    OUTCOMES["loaded"] = OUTCOMES.get("loaded", 0) + 1


def _fuzz_file(target: Path, original: bytes, spec: str) -> None:
    """Damage `target` every way `damaged` knows, load `spec` each time, then put the original back."""

    @FUZZ
    @given(data=damaged(original))
    def check(data):
        target.write_bytes(data)
        _outcome(spec)

    try:
        check()
    finally:
        target.write_bytes(original)


@pytest.fixture(autouse=True)
def _both_outcomes_seen():
    """Every format's damage must be refused at least once (else the mutations never reached the parser)."""
    OUTCOMES.clear()
    yield
    assert OUTCOMES.get("refused", 0) > 0, OUTCOMES


# ---- folder: CSV, WAV, NPY, MAT -------------------------------------------------------------------------------------

def _write_csv(path: Path, signal: np.ndarray) -> None:
    path.write_text("emg0,emg1\n" + "\n".join(",".join(f"{v:.4f}" for v in row) for row in signal) + "\n")


def _write_wav(path: Path, signal: np.ndarray) -> None:
    from scipy.io import wavfile

    wavfile.write(path, 100, (signal * 1000).astype(np.int16))


def _write_npy(path: Path, signal: np.ndarray) -> None:
    np.save(path, signal)


def _write_mat(path: Path, signal: np.ndarray) -> None:
    from scipy.io import savemat

    savemat(path, {"X001_DE_time": signal})


WRITERS = {".csv": _write_csv, ".wav": _write_wav, ".npy": _write_npy, ".mat": _write_mat}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """One folder:PATH set per extension: class a holds a good file, class b the file to damage."""
    made = {}
    for suffix, write in WRITERS.items():
        root = tmp_path_factory.mktemp(f"folder{suffix[1:]}")
        for index, name in enumerate("ab"):
            (root / name).mkdir()
            write(root / name / f"r{suffix}", _signal(index))
        target = root / "b" / f"r{suffix}"
        spec = f"folder:{root}?window=16" + ("" if suffix == ".wav" else "&rate=100")
        _outcome(spec)
        assert len(load_windows(spec)) == 8  # the undamaged set loads
        made[suffix] = (spec, target, target.read_bytes())
    return made


@pytest.mark.parametrize("suffix", sorted(WRITERS))
def test_folder_signal_files(folders, suffix):
    spec, target, original = folders[suffix]
    _fuzz_file(target, original, spec)


# ---- npz: plain arrays and Windows.save ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def npz_files(tmp_path_factory):
    root = tmp_path_factory.mktemp("npz")
    np.savez(root / "plain.npz", x=np.stack([_signal(i, 16) for i in range(6)]), y=np.array([0, 1] * 3),
             groups=np.arange(6), classes=np.array(["rest", "fist"]), sample_rate_hz=100.0)
    windows = load_windows(f"npz:{root / 'plain.npz'}")
    windows.save(root / "saved.npz")
    assert load_windows(f"npz:{root / 'saved.npz'}").digest() == windows.digest()
    return {name: (root / name, (root / name).read_bytes()) for name in ("plain.npz", "saved.npz")}


@pytest.mark.parametrize("name", ["plain.npz", "saved.npz"])
def test_npz(npz_files, name):
    target, original = npz_files[name]
    _fuzz_file(target, original, f"npz:{target}")


# ---- cwru: the Data Center's .mat layout ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def cwru_folder(tmp_path_factory):
    from scipy.io import savemat

    root = tmp_path_factory.mktemp("cwru")
    rng = np.random.default_rng(2)
    savemat(root / "97.mat", {"X097_DE_time": rng.normal(size=(4_800, 1)), "X097_FE_time": rng.normal(size=(4_800, 1)),
                              "X097RPM": np.array([[1796]])})
    savemat(root / "105.mat", {"X105_DE_time": rng.normal(size=(1_200, 1)), "X105_FE_time": rng.normal(size=(1_200, 1)),
                               "X105RPM": np.array([[1797]])})
    spec = f"cwru:{root}?files=97,105&window=64&windows_per_file=4"
    assert len(load_windows(spec)) == 8
    return spec, root / "105.mat", (root / "105.mat").read_bytes()


def test_cwru_mat(cwru_folder):
    spec, target, original = cwru_folder
    _fuzz_file(target, original, spec)


# ---- isl: the published JSON layout --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def isl_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("isl")
    rng = np.random.default_rng(3)
    for letter in "AB":
        record = {"timestamp": "26/06/20/12:00:00", "duration": 2000,
                  "emg": {"frequency": 200, "data": rng.integers(-128, 128, size=(400, 8)).tolist()},
                  "imu": {"frequency": 200, "data": [{"gyroscope": [0.1, 0.2, 0.3], "acceleration": [0, 0, 1],
                                                      "orientation": [1, 0, 0, 0]}] * 400}}
        (root / "Dataset" / letter).mkdir(parents=True)
        # Compact like the published files, so that a flipped bit lands in data as often as in syntax.
        (root / "Dataset" / letter / f"{letter}-guid.json").write_text(json.dumps(record, separators=(",", ":")))
    target = root / "Dataset" / "B" / "B-guid.json"
    assert len(load_windows(f"isl:{root}?imu=1")) == 2
    return root, target, target.read_bytes()


REAL_ISL = Path(__file__).resolve().parents[3] / "shared" / "data" / "isl" / "Dataset"


@pytest.fixture(scope="module")
def real_isl_folder(tmp_path_factory):
    """One published recording each of A and B, copied (never modified in place)."""
    if not REAL_ISL.is_dir():
        pytest.skip("../shared/data/isl is not here")
    root = tmp_path_factory.mktemp("real_isl")
    for letter in "AB":
        source = sorted((REAL_ISL / letter).glob("*.json"))[0]
        (root / "Dataset" / letter).mkdir(parents=True)
        (root / "Dataset" / letter / source.name).write_bytes(source.read_bytes())
    target = next((root / "Dataset" / "B").glob("*.json"))
    assert len(load_windows(f"isl:{root}?imu=1")) == 2
    return root, target, target.read_bytes()


@pytest.mark.parametrize("imu", [0, 1])
def test_isl_json(isl_folder, imu):
    root, target, original = isl_folder
    _fuzz_file(target, original, f"isl:{root}?imu={imu}")


def test_real_isl_json(real_isl_folder):
    root, target, original = real_isl_folder
    _fuzz_file(target, original, f"isl:{root}?imu=1")


# ---- session: a folder written by firmware_bridge's Recorder -------------------------------------------------------

@pytest.fixture(scope="module")
def session_folder(tmp_path_factory):
    from firmware_bridge.protocol import Hello, Samples
    from firmware_bridge.recorder import Recorder

    folder = tmp_path_factory.mktemp("session") / "s1"
    rng = np.random.default_rng(4)
    with Recorder(folder, Hello("sim", "1", 2, 200.0, "int16"), labels=["rest", "fist"], fsync_interval=60) as rec:
        for index in range(6):
            rec.add_samples(Samples(index * 64, rng.integers(-500, 500, size=(64, 2)).astype(np.int16)))
            rec.add_window(["rest", "fist"][index % 2], index * 64, 64)
    assert len(load_windows(f"session:{folder}")) == 6
    return folder, {name: (folder / name).read_bytes() for name in ("manifest.json", "samples.bin", "windows.jsonl")}


@pytest.mark.parametrize("name", ["manifest.json", "samples.bin", "windows.jsonl"])
@pytest.mark.parametrize("recut", ["", "?window=16&hop=8"])
def test_session_folder(session_folder, name, recut):
    folder, originals = session_folder
    target = folder / name
    _fuzz_file(target, originals[name], f"session:{folder}{recut}")
