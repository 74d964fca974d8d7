"""Your own recordings: one subfolder per class, signal files inside, each file one recording group.

    recordings/
      fist/    day1-001.csv  day1-002.csv ...
      open/    a.npy  b.wav  c.mat ...

Files are cut into windows of `window` samples every `hop` samples (default: hop = window); without
`window`, each file is one window and all files must have the same length. The class is the name
of the subfolder directly under the root (deeper folders are fine); files with other extensions
(notes, README) are skipped and listed in the provenance.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from tinynas.data.signal_files import EXTENSIONS, Signal, read_signal
from tinynas.data.windows import DataError, Windows, check_size, readable, shown


def _select(signal: Signal, channels, path: Path) -> tuple[np.ndarray, tuple[str, ...]]:
    """Keep the channels asked for (indices, or names from a CSV header)."""
    names = signal.channel_names or tuple(f"ch{i}" for i in range(signal.samples.shape[1]))
    if channels is None:
        return signal.samples, names
    wanted = channels if isinstance(channels, tuple) else tuple(part.strip() for part in str(channels).split(","))
    indices = []
    for item in wanted:
        if isinstance(item, int) or str(item).isdigit():
            index = int(item)
        elif item in names:
            index = names.index(item)
        else:
            raise DataError(f"{shown(path)}: no channel {item!r} (channels: {', '.join(names)})")
        if not 0 <= index < len(names):
            raise DataError(f"{shown(path)}: channel {index} asked for, but the file has {len(names)} channel(s)")
        indices.append(index)
    return signal.samples[:, indices], tuple(names[i] for i in indices)


def _listing(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError as exc:
        raise _unreadable(folder, exc) from None


def _unreadable(folder, exc: OSError) -> DataError:
    reason = "permission denied (check its owner and mode)" if isinstance(exc, PermissionError) else (
        exc.strerror or str(exc))
    return DataError(f"cannot read folder {shown(folder)}: {reason}")


def _files(folder: Path) -> list[Path]:
    """Every visible file below `folder`; a subfolder that cannot be listed is an error, not "empty"."""
    def fail(exc: OSError) -> None:
        raise _unreadable(exc.filename or folder, exc)

    found = []
    for top, subfolders, names in os.walk(folder, onerror=fail):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        found += [Path(top) / name for name in names if not name.startswith(".")]
    return sorted(found)


def load_folder(root: str | Path, window: int | None = None, hop: int | None = None, rate: float | None = None,
                channels=None, key: str | None = None) -> Windows:
    """Windows from a folder of class subfolders (see the module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{shown(root)}: " + ("not a folder (folder: takes one subfolder per class)"
                                              if root.exists() else "no such folder"))
    if window is not None and window < 1 or hop is not None and hop < 1:
        raise DataError(f"window and hop must be positive sample counts, got window={window}, hop={hop}")
    if window is None and hop is not None:
        raise DataError(f"hop={hop} needs window=N (without window, each file is one window)")
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise DataError(f"rate={rate:g} is not a sample rate: give a positive number of Hz")
    entries = _listing(root)
    stray = sorted(shown(p.name) for p in entries if p.is_file() and p.suffix.lower() in EXTENSIONS)
    if stray:
        raise DataError(f"{shown(root)} holds signal files outside class folders ({', '.join(stray[:3])}): put each "
                        f"class's files in a subfolder named after the class")
    folders = sorted((p for p in entries if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)
    if not folders:
        raise DataError(f"{shown(root)} has no class subfolders (one folder per class, holding its recordings)")
    # A folder name that is not UTF-8 still names a class: its raw bytes are shown as \xNN, the same
    # name `data inspect` prints and the search writes to its card.
    classes = [readable(p.name) for p in folders]
    if len(set(classes)) != len(classes):
        raise DataError(f"{shown(root)}: two class folders have the same readable name; rename them")
    xs: list[np.ndarray] = []
    ys: list[int] = []
    groups: list[str] = []
    starts: list[int] = []
    skipped: list[str] = []
    longest = 0
    file_rate: tuple[float, Path] | None = None
    layout: tuple[int, tuple[str, ...], Path] | None = None
    length: tuple[int, Path] | None = None
    unrated: Path | None = None
    header: tuple[tuple[str, ...], Path] | None = None
    for label, folder in enumerate(folders):
        files = _files(folder)
        signal_files = [p for p in files if p.suffix.lower() in EXTENSIONS]
        skipped += [shown(p.relative_to(root)) for p in files if p.suffix.lower() not in EXTENSIONS]
        if not signal_files:
            raise DataError(f"class folder {shown(folder)} holds no signal files ({', '.join(EXTENSIONS)})")
        for path in signal_files:
            signal = read_signal(path, key)
            if signal.sample_rate_hz is not None:
                if rate is not None and not math.isclose(signal.sample_rate_hz, rate, rel_tol=1e-6):
                    raise DataError(f"{shown(path)} is sampled at {signal.sample_rate_hz:g} Hz, not rate={rate:g}")
                if file_rate is not None and not math.isclose(signal.sample_rate_hz, file_rate[0], rel_tol=1e-6):
                    raise DataError(f"{shown(path)} is sampled at {signal.sample_rate_hz:g} Hz but "
                                    f"{shown(file_rate[1])} at "
                                    f"{file_rate[0]:g} Hz: resample them to one rate")
                file_rate = (signal.sample_rate_hz, path)
            elif unrated is None:
                unrated = path
            samples, names = _select(signal, channels, path)
            if signal.channel_names:
                if header is not None and names != header[0]:
                    raise DataError(f"{shown(path)} has channels {', '.join(names)} but {shown(header[1])} has "
                                    f"{', '.join(header[0])}")
                header = (names, path)
            if layout is None:
                layout = (samples.shape[1], names, path)
            elif samples.shape[1] != layout[0]:
                raise DataError(f"{shown(path)} has {samples.shape[1]} channel(s) but {shown(layout[2])} "
                                f"has {layout[0]}")
            count = samples.shape[0]
            if window is None:
                if length is not None and count != length[0]:
                    raise DataError(f"{shown(path)} has {count} samples but {shown(length[1])} has {length[0]}: "
                                    f"without "
                                    f"window=N every file is one window, so all must have the same length")
                length = (count, path)
                offsets = [0]
                size = count
            else:
                if count < window:
                    raise DataError(f"{shown(path)} has {count} samples, fewer than one window ({window})")
                offsets = list(range(0, count - window + 1, hop or window))
                size = window
            group = readable(str(path.relative_to(root).with_suffix("")))
            longest = max(longest, len(group))  # every window's group is stored this wide (numpy text)
            check_size(len(xs) + len(offsets), size, samples.shape[1], f"folder:{shown(root)}",
                       "raise hop, or shorten window", names=longest)
            for offset in offsets:
                xs.append(samples[offset:offset + size])
                ys.append(label)
                groups.append(group)
                starts.append(offset)
    sample_rate = rate if rate is not None else (file_rate[0] if file_rate else None)
    if sample_rate is None:
        raise DataError(f"{shown(root)}: these files do not carry a sample rate; give it, "
                        f"e.g. folder:{shown(root)}?rate=200")
    if file_rate is not None and rate is None and unrated is not None:
        raise DataError(f"{shown(unrated)} carries no sample rate but {shown(file_rate[1])} does "
                        f"({file_rate[0]:g} Hz): "
                        f"give rate= for all files")
    assert layout is not None  # every class folder holds a signal file, and each one sets it
    provenance = {"source": "folder", "path": shown(root), "window": window, "hop": hop or window,
                  "files": len(set(groups)), **({"skipped": skipped} if skipped else {})}
    return Windows(np.stack(xs), np.asarray(ys), np.asarray(groups), tuple(classes), float(sample_rate),
                   header[0] if header else layout[1], provenance, time_index=np.asarray(starts))
