"""Windows already cut, in one .npz: `x` (n, T, C) or (n, T), `y`, optional `groups`, `classes`,
`sample_rate_hz` (or the rate= option). Files written by `Windows.save` load as they were saved.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from tinynas.data.signal_files import check_readable
from tinynas.data.windows import DataError, Windows, is_zip_archive, shown


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
