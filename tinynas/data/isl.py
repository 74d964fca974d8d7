"""The Italian Sign Language alphabet sEMG + IMU set in its published layout.

`Dataset/<letter A..Z>/<GUID>.json`, one 2 s recording per file: `emg` 400 x 8 integers in
-128..127 at 200 Hz (Myo armband), `imu` 400 samples of gyroscope[3], acceleration[3],
orientation[4]. Pacifici et al., Data in Brief 33 (2020) 106455.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np

from tinynas.data.signal_files import check_readable
from tinynas.data.windows import DataError, Windows, shown

EMG_CHANNELS = tuple(f"emg{i}" for i in range(8))
IMU_CHANNELS = ("gyro_x", "gyro_y", "gyro_z", "acc_x", "acc_y", "acc_z",
                "orient_w", "orient_x", "orient_y", "orient_z")
SAMPLES = 400
RATE_HZ = 200.0


def _listing(folder: Path) -> list[Path]:
    """The entries of a folder; one that cannot be listed is said so (not "holds no recordings")."""
    try:
        return list(folder.iterdir())
    except OSError as exc:
        raise DataError(f"cannot read folder {shown(folder)}: {exc.strerror or exc}") from None


def _dataset_folder(path: Path) -> Path:
    if (path / "Dataset").is_dir():
        return path / "Dataset"
    if path.is_dir() and any((path / letter).is_dir() for letter in "ABC"):
        return path
    raise DataError(f"{shown(path)} is not the ISL layout: expected Dataset/<letter>/<guid>.json")


def _read_recording(file: Path, with_imu: bool) -> tuple[np.ndarray, datetime.datetime]:
    check_readable(file, "an ISL recording")
    try:
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float32: inf, refused by Windows
            return _parse_recording(file, with_imu)
    except DataError:
        raise
    except OSError as exc:
        raise DataError(f"cannot read {shown(file)}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DataError(f"{shown(file)}: not a text JSON file (UTF-8 expected; damaged?)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{shown(file)}: not valid JSON ({exc.msg} at line {exc.lineno}; truncated?)") from None
    except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise DataError(f"{shown(file)}: not an ISL recording ({type(exc).__name__}: {exc})") from None


def _parse_recording(file: Path, with_imu: bool) -> tuple[np.ndarray, datetime.datetime]:
    record = json.loads(file.read_text(encoding="utf-8"))
    emg = np.asarray(record["emg"]["data"], dtype=np.float32)
    stamp = datetime.datetime.strptime(record["timestamp"], "%d/%m/%y/%H:%M:%S")
    if float(record["emg"]["frequency"]) != RATE_HZ:
        raise DataError(f"{shown(file)}: EMG at {record['emg']['frequency']} Hz, expected {RATE_HZ:g}")
    if emg.shape != (SAMPLES, len(EMG_CHANNELS)):
        raise DataError(f"{shown(file)}: EMG has shape {emg.shape}, expected ({SAMPLES}, {len(EMG_CHANNELS)})")
    if with_imu:
        imu = np.asarray([s["gyroscope"] + s["acceleration"] + s["orientation"]
                          for s in record["imu"]["data"]], dtype=np.float32)
        if imu.shape != (SAMPLES, len(IMU_CHANNELS)):
            raise DataError(f"{shown(file)}: IMU has shape {imu.shape}, expected ({SAMPLES}, {len(IMU_CHANNELS)})")
        emg = np.concatenate([emg, imu], axis=1)
    return emg, stamp


def load_isl(path: str | Path, imu: bool = False) -> Windows:
    """Load every recording (EMG by default, EMG + IMU with `imu`), one window per file.

    groups = the recording (file GUID); sessions = the recording day; time_index = the recording
    time (Unix seconds), so later repetitions of a letter sort after earlier ones.
    """
    folder = _dataset_folder(Path(path))
    letters = sorted(p.name for p in _listing(folder) if p.is_dir() and len(p.name) == 1 and p.name.isalpha())
    if not letters:
        raise DataError(f"{shown(folder)} holds no letter folders (A..Z)")
    x, y, groups, days, stamps = [], [], [], [], []
    for label, letter in enumerate(letters):
        files = sorted(p for p in _listing(folder / letter) if p.suffix == ".json")
        if not files:
            raise DataError(f"{folder / letter} holds no recordings")
        for file in files:
            window, stamp = _read_recording(file, imu)
            x.append(window)
            y.append(label)
            groups.append(file.stem)
            days.append(stamp.strftime("%Y-%m-%d"))
            stamps.append(stamp)
    seconds = np.array([int(stamp.replace(tzinfo=datetime.UTC).timestamp()) for stamp in stamps])
    return Windows(np.stack(x), np.array(y), np.array(groups), tuple(letters), RATE_HZ,
                   EMG_CHANNELS + (IMU_CHANNELS if imu else ()),
                   {"source": "isl", "path": str(folder), "channels": "emg+imu" if imu else "emg",
                    "files": len(y),
                    # A re-worn armband is a new session: which days (and how much of each) this set holds.
                    "sessions": {day: days.count(day) for day in sorted(set(days))}},
                   sessions=np.array(days), time_index=seconds)
