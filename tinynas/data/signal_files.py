"""Read one signal file (.csv, .npy, .wav, .mat) as samples x channels, with a one-line error per bad file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.data.windows import DataError

EXTENSIONS = (".csv", ".npy", ".wav", ".mat")


@dataclass(frozen=True)
class Signal:
    """Samples (T, C) float32 of one file, its rate if the file carries one, and channel names if any."""

    samples: np.ndarray
    sample_rate_hz: float | None = None
    channel_names: tuple[str, ...] = ()


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _read_csv(path: Path) -> Signal:
    try:
        lines = [line for line in path.read_text(encoding="utf-8-sig").splitlines() if line.strip()]
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text CSV file") from None
    if not lines:
        raise DataError(f"{path}: empty file")
    delimiter = next((d for d in (",", ";", "\t") if d in lines[0]), None)

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in (line.split(delimiter) if delimiter else line.split())]

    header: tuple[str, ...] = ()
    first = cells(lines[0])
    if not all(_is_number(cell) for cell in first):
        header, lines = tuple(first), lines[1:]
    if not lines:
        raise DataError(f"{path}: a header but no samples")
    rows = []
    width = len(header) or len(first)
    for number, line in enumerate(lines, start=2 if header else 1):
        row = cells(line)
        if len(row) != width:
            raise DataError(f"{path} line {number}: {len(row)} values, expected {width} (one per channel)")
        try:
            rows.append([float(cell) for cell in row])
        except ValueError:
            bad = next(cell for cell in row if not _is_number(cell))
            raise DataError(f"{path} line {number}: {bad!r} is not a number") from None
    return Signal(np.asarray(rows, dtype=np.float32), None, header)


def _read_npy(path: Path) -> Signal:
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable .npy file ({exc})") from None
    if not np.issubdtype(array.dtype, np.number):
        raise DataError(f"{path}: holds {array.dtype} values, not numbers")
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise DataError(f"{path}: array of shape {array.shape}; expected T or T x C")
    return Signal(array.astype(np.float32))


def _read_wav(path: Path) -> Signal:
    from scipy.io import wavfile

    try:
        rate, data = wavfile.read(path)
    except (OSError, ValueError, EOFError) as exc:
        raise DataError(f"{path}: not a readable WAV file ({exc})") from None
    if data.ndim == 1:
        data = data[:, None]
    # PCM integers to [-1, 1): the usual convention, and the network is scale-invariant anyway.
    if data.dtype == np.uint8:
        samples = (data.astype(np.float32) - 128.0) / 128.0
    elif np.issubdtype(data.dtype, np.integer):
        samples = data.astype(np.float32) / float(-np.iinfo(data.dtype).min)
    else:
        samples = data.astype(np.float32)
    return Signal(samples, float(rate))


def _read_mat(path: Path, key: str | None) -> Signal:
    from scipy.io import loadmat

    try:
        contents = loadmat(path)
    except Exception as exc:  # scipy raises ValueError, TypeError, OSError... on damaged files
        raise DataError(f"{path}: not a readable MATLAB file ({type(exc).__name__}: {exc})") from None
    numeric = {name: value for name, value in contents.items() if not name.startswith("__")
               and isinstance(value, np.ndarray) and np.issubdtype(value.dtype, np.number) and value.size > 1}
    if key:
        matches = [name for name in numeric if name == key] or [name for name in numeric if name.endswith(key)]
    else:
        matches = list(numeric)
    if len(matches) != 1:
        found = ", ".join(sorted(numeric)) or "none"
        wanted = f"no array named or ending in {key!r}" if key and not matches else (
            f"several arrays match {key!r}" if key else "several arrays")
        raise DataError(f"{path}: {wanted} (numeric arrays: {found}); choose one with key=NAME")
    array = np.squeeze(numeric[matches[0]])
    if array.ndim == 1:
        array = array[:, None]
    elif array.ndim == 2 and array.shape[0] < array.shape[1]:
        array = array.T  # MATLAB users store channels x samples as often as the reverse: time is the longer axis
    elif array.ndim != 2:
        raise DataError(f"{path}: array {matches[0]!r} has shape {array.shape}; expected a vector or a matrix")
    return Signal(array.astype(np.float32))


def read_signal(path: str | Path, key: str | None = None) -> Signal:
    """The samples of one signal file; NaN/inf and empty files are refused naming the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    readers = {".csv": _read_csv, ".npy": _read_npy, ".wav": _read_wav}
    if suffix == ".mat":
        signal = _read_mat(path, key)
    elif suffix in readers:
        signal = readers[suffix](path)
    else:
        raise DataError(f"{path}: unsupported file type {suffix or '(none)'}; use one of {', '.join(EXTENSIONS)}")
    if signal.samples.shape[0] == 0:
        raise DataError(f"{path}: no samples")
    bad = ~np.isfinite(signal.samples)
    if bad.any():
        sample, channel = np.argwhere(bad)[0]
        raise DataError(f"{path}: NaN/inf at sample {sample}, channel {channel}")
    return signal
