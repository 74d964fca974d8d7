"""Windows already cut, in one .npz: `x` (n, T, C) or (n, T), `y`, optional `groups`, `classes`,
`sample_rate_hz` (or the rate= option). Files written by `Windows.save` load as they were saved.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tinynas.data.signal_files import check_readable
from tinynas.data.windows import DataError, Windows, check_size, is_zip_archive, shown

TEXTS = ("y", "groups", "sessions")
"""The arrays that may hold text, one item per window (labels may be names)."""


def _headers(path: Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of each array of the archive, from the .npy headers alone (nothing allocated); {} when the
    archive cannot be read so (np.load then says how it is damaged)."""
    import zipfile

    found: dict[str, tuple[tuple[int, ...], np.dtype]] = {}
    try:
        with zipfile.ZipFile(path) as archive:
            for info in archive.infolist():
                if not info.filename.endswith(".npy"):
                    continue
                with archive.open(info) as handle:
                    version = np.lib.format.read_magic(handle)
                    read = (np.lib.format.read_array_header_1_0 if version == (1, 0) else
                            np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read(handle)
                found[info.filename[:-4]] = (tuple(int(v) for v in shape), np.dtype(dtype))
    except Exception:  # noqa: BLE001 - zipfile/zlib/NumPy errors of every kind: left to np.load to name
        return {}
    return found


def _check_planned(path: Path) -> None:
    """`check_size` of the windows the archive holds, from its headers: a compressed .npz of a few kilobytes can
    unpack into millions of windows (their samples, labels and names), refused before anything is read."""
    headers = _headers(path)
    if "x" not in headers or len(headers["x"][0]) not in (2, 3):
        return
    shape = headers["x"][0]
    count, length, channels = shape[0], shape[1], shape[2] if len(shape) == 3 else 1
    context = headers.get("context", ((0, 0, 0), np.dtype(np.float32)))[0]
    # Characters per window of its text arrays (numpy's "U": 4 bytes each; bytes "S" become such text).
    texts = sum(dtype.itemsize // 4 if dtype.kind == "U" else dtype.itemsize if dtype.kind == "S" else 0
                for name, (_, dtype) in headers.items() if name in TEXTS)
    texts += 0 if "groups" in headers else len(f"window{count}")  # each window its own group, named so
    check_size(count, length + (context[1] if len(context) == 3 else 0), channels, f"npz:{shown(path)}",
               "split the file, or keep fewer windows", names=texts)


def load_npz(path: str | Path, rate: float | None = None) -> Windows:
    """Windows from an .npz of arrays (see the module docstring)."""
    path = Path(path)
    if rate is not None and not (math.isfinite(rate) and rate > 0):
        raise DataError(f"rate={rate:g} is not a sample rate: give a positive number of Hz")
    check_readable(path, "a NumPy .npz file")
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise DataError(f"cannot read {shown(path)}: {exc.strerror or exc}") from None
    if not is_zip_archive(path):
        raise DataError(f"{shown(path)}: not a NumPy .npz file (write one with numpy.savez: x, y, ...)")
    _check_planned(path)
    try:
        with np.load(path, allow_pickle=False) as archive:
            if "meta" in archive:
                meta = True
            else:
                meta = False
                missing = [name for name in ("x", "y") if name not in archive]
                if missing:
                    raise DataError(f"{shown(path)}: no array {' or '.join(missing)} (needs x (n, T, C) and y (n,); "
                                    f"has {', '.join(archive.files) or 'nothing'})")
                x, y = archive["x"], archive["y"]
                groups = archive["groups"] if "groups" in archive else None
                classes = tuple(str(c) for c in np.ravel(archive["classes"])) if "classes" in archive else None
                stored_rate = float(archive["sample_rate_hz"]) if "sample_rate_hz" in archive else None
    except DataError:
        raise
    # A damaged archive fails in many ways: zip directory (BadZipFile), deflate stream (zlib.error),
    # array header (ValueError, tokenize.TokenError, SyntaxError), a flipped bit in a shape asking for
    # more memory than there is before the zip CRC is checked (MemoryError)...
    except Exception as exc:  # noqa: BLE001 - zipfile/zlib/NumPy errors of every kind, all "damaged"
        raise DataError(f"{shown(path)}: damaged .npz file ({type(exc).__name__}: {exc})") from None
    if meta:
        windows = Windows.load(path)
        if rate is not None and not math.isclose(rate, windows.sample_rate_hz, rel_tol=1e-6):
            raise DataError(f"{shown(path)} records {windows.sample_rate_hz:g} Hz, not rate={rate:g}")
        return windows
    if stored_rate is not None and not (math.isfinite(stored_rate) and stored_rate > 0):
        raise DataError(f"{shown(path)}: sample_rate_hz is {stored_rate:g}, not a positive number of Hz")
    if x.dtype.kind not in "iuf":
        raise DataError(f"{shown(path)}: x holds {x.dtype} values, not numbers")
    if x.ndim == 2:
        x = x[:, :, None]
    if x.ndim != 3:
        raise DataError(f"{shown(path)}: x has shape {x.shape}; expected (windows, samples, channels)")
    if y.shape != (len(x),):
        raise DataError(f"{shown(path)}: {len(x)} windows in x but y has shape {y.shape}")
    if stored_rate is not None and rate is not None and not math.isclose(stored_rate, rate, rel_tol=1e-6):
        raise DataError(f"{shown(path)} records {stored_rate:g} Hz, not rate={rate:g}")
    sample_rate = rate if rate is not None else stored_rate
    if sample_rate is None:
        raise DataError(f"{shown(path)} records no sample rate: add sample_rate_hz to the file or rate= to the spec")
    if np.issubdtype(y.dtype, np.integer) and classes is not None:
        if len(y) and (y.min() < 0 or y.max() >= len(classes)):
            raise DataError(f"{shown(path)}: labels must index classes (0..{len(classes) - 1}), "
                            f"found {y.min()}..{y.max()}")
        # Classes with no window here are dropped (a new recording may hold only some of them).
        present = np.unique(y)
        classes = tuple(classes[i] for i in present)
        labels = np.searchsorted(present, y)
    else:
        # String labels, or integers without names: classes are the sorted distinct values.
        values = sorted(set(y.tolist()))
        if classes is not None:
            raise DataError(f"{shown(path)}: classes given but y holds {y.dtype} values, not indices into them")
        classes = tuple(str(v) for v in values)
        index = {v: i for i, v in enumerate(values)}
        labels = np.array([index[v] for v in y.tolist()], dtype=np.int64)
    provenance = {"source": "npz", "path": str(path)}
    if groups is None:
        # Each window its own group: correct for independent windows, optimistic for overlapping ones.
        groups = np.array([f"window{i}" for i in range(len(x))])
        provenance["groups"] = "none in the file: each window is its own group"
    elif groups.shape != (len(x),):
        raise DataError(f"{shown(path)}: {len(x)} windows but groups has shape {groups.shape}")
    try:
        return Windows(x, labels, groups, classes, sample_rate, (), provenance)
    except DataError as exc:  # the arrays are the file's: say which file
        raise DataError(f"{shown(path)}: {exc}") from None
