"""Read one signal file (.csv, .npy, .wav, .mat) as samples x channels, with a one-line error per bad file."""

from __future__ import annotations

import os
import stat
import warnings
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from firmware_bridge.safe_read import size_words
from tinynas.data.windows import DataError, shown

EXTENSIONS = (".csv", ".npy", ".wav", ".mat")
MAX_DATA_FILE_BYTES = 4 << 30
"""The largest data file read (a recording, an .npz): twice the windows' own memory cap (`MAX_WINDOW_BYTES`)."""


@dataclass(frozen=True)
class Signal:
    """Samples (T, C) float32 of one file, its rate if the file carries one, and channel names if any."""

    samples: np.ndarray
    sample_rate_hz: float | None = None
    channel_names: tuple[str, ...] = ()


def check_readable(path: Path, kind: str) -> None:
    """Refuse a path that is missing, a folder, a pipe, unreadable or beyond MAX_DATA_FILE_BYTES, saying which.

    Checked before any parser runs: parsers report all of these as "damaged file", and reading a
    FIFO would block forever.
    """
    try:
        info = path.stat()
        mode = info.st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise DataError(f"{shown(path)} is a symbolic link to a missing file ({shown(os.readlink(path))}): "
                            f"restore its target or remove the link") from None
        raise DataError(f"{shown(path)}: no such file") from None
    except PermissionError:
        raise DataError(f"cannot read {shown(path)}: permission denied on its folder "
                        f"(check the folder's mode)") from None
    except OSError as exc:
        raise DataError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise DataError(f"{shown(path)} is a folder, not {kind}: rename or move it")
    if not stat.S_ISREG(mode):
        raise DataError(f"{shown(path)} is not a regular file (a pipe or device?), not {kind}: remove or move it")
    if not os.access(path, os.R_OK):
        raise DataError(f"cannot read {shown(path)}: permission denied (check its owner and mode)")
    if info.st_size > MAX_DATA_FILE_BYTES:
        raise DataError(f"{shown(path)} is larger than {size_words(MAX_DATA_FILE_BYTES)}, the most a data file may be "
                        f"(its windows could not be held in memory anyway): split it, or give a part of it")


def _cannot_read(path: Path, exc: OSError) -> DataError:
    reason = "permission denied (check its owner and mode)" if isinstance(exc, PermissionError) else (
        exc.strerror or str(exc))
    return DataError(f"cannot read {shown(path)}: {reason}")


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _read_csv(path: Path) -> Signal:
    """A CSV (or tab / semicolon / space separated) file of numbers, one row per sample, an optional header.

    Read a line at a time into float32 (4 bytes a value): a list of Python floats cost ~100 bytes a value, so a
    few hundred megabytes of text took gigabytes while the windows' own size check saw only the samples."""
    values = array("f")
    header: tuple[str, ...] = ()
    delimiter: str | None = None
    width = number = 0
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for line in handle:
                if not line.strip():
                    continue
                number += 1
                if number == 1:
                    delimiter = next((d for d in (",", ";", "\t") if d in line), None)
                row = [cell.strip() for cell in (line.split(delimiter) if delimiter else line.split())]
                if number == 1:
                    width = len(row)
                    if not all(_is_number(cell) for cell in row):
                        header = tuple(row)
                        continue
                if len(row) != width:
                    raise DataError(f"{shown(path)} line {number}: {len(row)} values, expected {width} (one per "
                                    f"channel)")
                try:
                    values.extend(float(cell) for cell in row)
                except ValueError:
                    bad = next(cell for cell in row if not _is_number(cell))
                    raise DataError(f"{shown(path)} line {number}: {bad[:40]!r} is not a number") from None
    except UnicodeDecodeError:
        raise DataError(f"{shown(path)}: not a text CSV file (UTF-8 expected)") from None
    except OSError as exc:
        raise _cannot_read(path, exc) from None
    if number == 0:
        raise DataError(f"{shown(path)}: empty file")
    if not values:
        raise DataError(f"{shown(path)}: a header but no samples")
    return Signal(np.frombuffer(values, dtype=np.float32).reshape(-1, width).copy(), None, header)


_NPY_MAGIC = b"\x93NUMPY"


def _read_npy(path: Path) -> Signal:
    try:
        with open(path, "rb") as handle:
            magic = handle.read(len(_NPY_MAGIC))
        # Without its magic NumPy takes a file for a pickle and advises loading it unsafely: say what it is.
        if magic != _NPY_MAGIC:
            raise DataError(f"{shown(path)}: not a NumPy .npy file (no .npy header: damaged, or another format "
                            f"named .npy)")
        array = np.load(path, allow_pickle=False)
    except PermissionError as exc:
        raise _cannot_read(path, exc) from None
    except DataError:
        raise
    # A damaged .npy fails as ValueError, EOFError, OSError, TypeError, MemoryError, even tokenize's
    # TokenError or SyntaxError (NumPy parses the header as a Python literal): all mean "damaged".
    except Exception as exc:
        if "allow_pickle" in str(exc):  # an object array: never unpickled (that would run its code)
            raise DataError(f"{shown(path)}: holds Python objects, not numbers") from None
        raise DataError(f"{shown(path)}: not a readable .npy file ({type(exc).__name__}: {exc})") from None
    if array.dtype.kind not in "iuf":
        raise DataError(f"{shown(path)}: holds {array.dtype} values, not numbers")
    if array.ndim == 1:
        array = array[:, None]
    if array.ndim != 2:
        raise DataError(f"{shown(path)}: array of shape {array.shape}; expected T or T x C")
    return Signal(array.astype(np.float32))


def _read_wav(path: Path) -> Signal:
    from scipy.io import wavfile

    try:
        # scipy warns (two lines on stderr) about chunks it skips; what matters is whether samples came out.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", wavfile.WavFileWarning)
            rate, data = wavfile.read(path)
    except PermissionError as exc:
        raise _cannot_read(path, exc) from None
    except Exception as exc:  # junk after the RIFF header: scipy raises ValueError, struct.error, IndexError...
        raise DataError(f"{shown(path)}: not a readable WAV file ({type(exc).__name__}: {exc}); "
                        f"export it again as PCM or float WAV") from None
    if not rate > 0:
        raise DataError(f"{shown(path)}: the WAV header gives a sample rate of {rate} Hz")
    if data.dtype.kind not in "iuf" or data.ndim not in (1, 2):
        raise DataError(f"{shown(path)}: WAV samples of type {data.dtype} and shape {data.shape}; "
                        f"export it again as PCM or float WAV")
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


def _loadmat(path: Path):
    """("ok", variables) or ("error", exception) from scipy's loadmat, in this process."""
    from scipy.io import loadmat

    try:
        with warnings.catch_warnings():  # "duplicate variable name"... on stderr would break the one line
            warnings.simplefilter("ignore")
            return "ok", {name: value for name, value in loadmat(path).items() if not name.startswith("__")}
    except Exception as exc:  # scipy raises ValueError, TypeError, OSError, struct.error... on damaged files
        return "error", exc


def _loadmat_isolated(path: Path):
    """`_loadmat` in a forked child: scipy's MATLAB reader can crash the interpreter (SIGSEGV) on a
    damaged file (found by tests/robustness/test_loader_fuzz.py with scipy 1.17), and a crash must
    be a one-line error naming the file, not the end of the search or the service."""
    import pickle

    import scipy.io  # noqa: F401 - imported before the fork, so the child never imports

    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            import faulthandler

            faulthandler.disable()  # a crash here is reported by the parent in one line, not as a dump
            os.close(reader)
            outcome = _loadmat(path)
            try:
                data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:  # an exception or variable that cannot be pickled
                data = pickle.dumps(("error", ValueError(f"{type(exc).__name__}: {exc}")))
            with os.fdopen(writer, "wb") as pipe:
                pipe.write(data)
        finally:
            os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not data:
        return "crash", os.WTERMSIG(status) if os.WIFSIGNALED(status) else status
    try:
        return pickle.loads(data)
    except Exception as exc:  # an exception class that cannot be rebuilt from its pickle
        return "error", ValueError(f"{type(exc).__name__}: {exc}")


def read_mat(path: Path) -> dict:
    """Every variable of a MATLAB file; a damaged one is one DataError (call check_readable first)."""
    kind, value = _loadmat_isolated(path) if hasattr(os, "fork") else _loadmat(path)
    if kind == "ok":
        return value
    if kind == "crash":
        raise DataError(f"{shown(path)}: not a readable MATLAB file (the reader crashed on it: damaged?)")
    if isinstance(value, PermissionError):
        raise _cannot_read(path, value)
    raise DataError(f"{shown(path)}: not a readable MATLAB file ({type(value).__name__}: {value})")


def _read_mat(path: Path, key: str | None) -> Signal:
    contents = read_mat(path)
    numeric = {name: value for name, value in contents.items() if not name.startswith("__")
               and isinstance(value, np.ndarray) and value.dtype.kind in "iuf" and value.size > 1}
    if key:
        matches = [name for name in numeric if name == key] or [name for name in numeric if name.endswith(key)]
    else:
        matches = list(numeric)
    if len(matches) != 1:
        found = ", ".join(sorted(numeric)) or "none"
        wanted = f"no array named or ending in {key!r}" if key and not matches else (
            f"several arrays match {key!r}" if key else "several arrays")
        raise DataError(f"{shown(path)}: {wanted} (numeric arrays: {found}); choose one with key=NAME")
    array = np.squeeze(numeric[matches[0]])
    if array.ndim == 1:
        array = array[:, None]
    elif array.ndim == 2 and array.shape[0] < array.shape[1]:
        array = array.T  # MATLAB users store channels x samples as often as the reverse: time is the longer axis
    elif array.ndim != 2:
        raise DataError(f"{shown(path)}: array {matches[0]!r} has shape {array.shape}; expected a vector or a matrix")
    return Signal(array.astype(np.float32))


def read_signal(path: str | Path, key: str | None = None) -> Signal:
    """The samples of one signal file; NaN/inf and empty files are refused naming the file."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in EXTENSIONS:
        check_readable(path, f"a {suffix} signal file")
    readers = {".csv": _read_csv, ".npy": _read_npy, ".wav": _read_wav, ".mat": lambda p: _read_mat(p, key)}
    if suffix in readers:
        # A value beyond float32's range becomes inf (refused below), not a RuntimeWarning on stderr.
        with np.errstate(over="ignore", invalid="ignore"):
            signal = readers[suffix](path)
    else:
        raise DataError(f"{shown(path)}: unsupported file type {suffix or '(none)'}; "
                        f"use one of {', '.join(EXTENSIONS)}")
    if signal.samples.shape[0] == 0:
        raise DataError(f"{shown(path)}: no samples")
    bad = ~np.isfinite(signal.samples)
    if bad.any():
        sample, channel = np.argwhere(bad)[0]
        raise DataError(f"{shown(path)}: NaN/inf at sample {sample}, channel {channel} (or a value beyond "
                        f"float32's range, 3.4e38: scale the file down)")
    return signal
