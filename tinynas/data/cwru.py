"""The Case Western Reserve University bearing set from its original MATLAB files.

Keys are found by suffix (`_DE_time`, `_FE_time`, `_BA_time`, `RPM`): the prefix is not always the
file number (the 0.028 in files use X048..X059). The 0 hp normal baseline (97.mat) is sampled at
48 kHz while the fault files are 12 kHz; by default it is resampled to 12 kHz (polyphase, 1:4) and
the choice is recorded in the provenance.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.data.signal_files import check_readable, read_mat
from tinynas.data.windows import DataError, Windows, check_size, shown


@dataclass(frozen=True)
class CwruFile:
    """What the Data Center publishes about one file (0 hp, 12 kHz drive-end fault set)."""

    number: int
    label: str
    sample_rate_hz: float


CATALOGUE = {f.number: f for f in (
    CwruFile(97, "normal", 48_000.0),
    CwruFile(105, "IR007", 12_000.0), CwruFile(118, "B007", 12_000.0), CwruFile(130, "OR007@6", 12_000.0),
    CwruFile(144, "OR007@3", 12_000.0), CwruFile(156, "OR007@12", 12_000.0),
    CwruFile(169, "IR014", 12_000.0), CwruFile(185, "B014", 12_000.0), CwruFile(197, "OR014@6", 12_000.0),
    CwruFile(209, "IR021", 12_000.0), CwruFile(222, "B021", 12_000.0), CwruFile(234, "OR021@6", 12_000.0),
    CwruFile(246, "OR021@3", 12_000.0), CwruFile(258, "OR021@12", 12_000.0),
    CwruFile(3001, "IR028", 12_000.0), CwruFile(3005, "B028", 12_000.0),
)}

FILE_SETS = {
    # The method's public BearingNAS code: 10 classes at 0 hp.
    "bearingnas10": (97, 105, 118, 130, 144, 156, 169, 185, 209, 222),
    # The widely used "12k DE 10-class" set.
    "std10": (97, 105, 118, 130, 169, 185, 197, 209, 222, 234),
}
CHANNELS = {"DE": "_DE_time", "FE": "_FE_time", "BA": "_BA_time"}
TARGET_RATE_HZ = 12_000.0


def _read_signal(file: Path, channel: str) -> tuple[np.ndarray, str]:
    suffix = CHANNELS[channel]
    check_readable(file, "a CWRU .mat file")
    contents = read_mat(file)
    keys = sorted(key for key in contents if key.endswith(suffix))
    if not keys:
        found = ", ".join(sorted(k for k in contents if not k.startswith("__"))) or "none"
        raise DataError(f"{shown(file)}: no channel {channel} (no key ending in {suffix}; keys: {found})")
    own = [key for key in keys if key.startswith(f"X{int(file.stem):03d}")] if file.stem.isdigit() else []
    key = (own or keys)[0]
    value = contents[key]
    if not isinstance(value, np.ndarray) or value.dtype.kind not in "iuf":
        raise DataError(f"{shown(file)}: {key} holds {type(value).__name__} {getattr(value, 'dtype', '')}, "
                        f"not numbers (damaged file?)")
    signal = value.astype(np.float64).ravel()
    if signal.size == 0 or not np.isfinite(signal).all():
        raise DataError(f"{shown(file)}: {key} is empty or holds NaN/inf")
    return signal, key


def load_cwru(path: str | Path, files: str | tuple[int, ...] = "bearingnas10", channel: str = "FE",
              window: int = 512, hop: int | None = None, windows_per_file: int | None = None,
              resample_normal: bool = True) -> Windows:
    """Cut windows from each file of a set; one class per file, labelled from the catalogue.

    groups and sessions = the file; time_index = each window's first sample in its recording.
    """
    from scipy.signal import resample_poly

    folder = Path(path)
    if not folder.is_dir():
        raise DataError(f"{shown(folder)} is not a folder of CWRU .mat files")
    numbers = FILE_SETS.get(files) if isinstance(files, str) else tuple(files)
    if numbers is None:
        raise DataError(f"unknown CWRU file set {files!r}; presets: {', '.join(FILE_SETS)} (or a list of numbers)")
    channel = channel.upper()
    if channel not in CHANNELS:
        raise DataError(f"unknown CWRU channel {channel!r}; choose DE, FE or BA")
    if len(set(numbers)) != len(numbers) or not all(isinstance(n, int) and n >= 0 for n in numbers):
        raise DataError(f"files={','.join(map(str, numbers))}: give distinct file numbers (one class per file)")
    hop = window if hop is None else hop
    if window < 8 or hop < 1:
        raise DataError(f"window must be >= 8 samples and hop >= 1, got {window} and {hop}")
    if windows_per_file is not None:
        if windows_per_file < 1:
            raise DataError(f"windows_per_file={windows_per_file}: give at least 1 (or leave it out for every window)")
        check_size(windows_per_file * len(numbers), window, 1, f"cwru:{shown(folder)}",
                   "lower windows_per_file or window")
    planned = 0
    x, y, groups, starts, notes = [], [], [], [], {}
    for label, number in enumerate(numbers):
        file = folder / f"{number}.mat"
        signal, key = _read_signal(file, channel)
        rate = CATALOGUE[number].sample_rate_hz if number in CATALOGUE else TARGET_RATE_HZ
        note = {"key": key, "sample_rate_hz": rate}
        if rate != TARGET_RATE_HZ and resample_normal:
            factor = int(round(rate / TARGET_RATE_HZ))
            signal = resample_poly(signal, 1, factor)
            note["resampled_to_hz"] = TARGET_RATE_HZ
        count = (len(signal) - window) // hop + 1
        if count < 1:
            raise DataError(f"{shown(file)}: {len(signal)} samples, shorter than one {window}-sample window")
        planned += count if windows_per_file is None else min(count, windows_per_file)
        check_size(planned, window, 1, f"cwru:{shown(folder)}", "raise hop or set windows_per_file")
        if windows_per_file is not None:
            if count < windows_per_file:
                hint = ("; it was resampled 48 -> 12 kHz: pass resample=0 to keep the method's 48 kHz samples"
                        if "resampled_to_hz" in note else "")
                raise DataError(f"{shown(file)}: only {count} windows of {window}, {windows_per_file} requested{hint}")
            count = windows_per_file
        begin = np.arange(count) * hop
        with np.errstate(over="ignore"):  # beyond float32: inf, refused by Windows in one line
            x.append(np.stack([signal[s:s + window] for s in begin]).astype(np.float32)[:, :, None])
        y += [label] * count
        groups += [str(number)] * count
        starts.append(begin)
        notes[str(number)] = note
    names = tuple(CATALOGUE[n].label if n in CATALOGUE else str(n) for n in numbers)
    provenance = {"source": "cwru", "path": str(folder), "files": list(numbers), "channel": channel,
                  "window": window, "hop": hop, "windows_per_file": windows_per_file,
                  "normal_baseline": ("resampled 48 kHz -> 12 kHz" if resample_normal
                                      else "kept at 48 kHz and treated as 12 kHz (as many papers do)"),
                  "per_file": notes}
    return Windows(np.concatenate(x), np.array(y), np.array(groups), names, TARGET_RATE_HZ, (channel,),
                   provenance, sessions=np.array(groups), time_index=np.concatenate(starts))
