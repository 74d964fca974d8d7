"""`Windows`: the one type for a labelled set of windows, validated once at the boundary."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from firmware_bridge.safe_read import NotRegularFile, check_regular
from tinynas.arguments import require
from tinynas.atomic import atomic_write_bytes
from tinynas.errors import TinynasError


class DataError(TinynasError, ValueError):
    """Windows that cannot be used: wrong shapes, NaN/inf, empty classes, bad files."""


# The most a data spec may allocate for its windows: beyond it a typo (length=100000000, window=1)
# would swap the machine to death before failing, so it is refused with the figure instead.
MAX_WINDOW_BYTES = 2 * 1024 ** 3
WINDOW_OVERHEAD_BYTES = 1024
"""What a loader holds per window besides its samples and names while it assembles them: the window's array view,
its label, the references to its names, its start index (measured: 1,560,000 one-sample windows of a folder spec
peaked at 433 B each, a session's 800,000 at 575 B each), with headroom for the stacking copy."""
NAME_BYTES_PER_CHARACTER = 8
"""What each character of a window's names (its group's, its session's) costs: numpy text is 4 bytes a character
for every window, as wide as the longest name, and counting the recordings (`np.unique`: `data inspect`, the
splits) sorts a copy of it. Measured: 1,560,000 one-sample windows of a folder spec whose file is named with 202
characters peaked at 4.2 GB (2.6 GB once the copies Windows made are gone), refused by a count without names."""


def check_size(count: int, length: int, channels: int, what: str, hint: str = "", names: int = 0) -> None:
    """Refuse windows whose samples (float32), per-window bookkeeping and names would exceed MAX_WINDOW_BYTES,
    before allocating them. `names`: characters of the text each window keeps (its group's name and its
    session's, the longest of each: numpy stores every one that wide)."""
    samples = int(count) * int(length) * int(channels) * 4
    per_window = WINDOW_OVERHEAD_BYTES + NAME_BYTES_PER_CHARACTER * int(names)
    size = samples + int(count) * per_window
    if size > MAX_WINDOW_BYTES:
        if max(abs(int(count)), abs(int(length)), abs(int(channels))) > 10**15:  # no float of the figures
            raise DataError(f"{what}: a window count, length or channel count of more than 15 digits is far beyond "
                            f"any data set; {hint or 'ask for fewer or shorter windows'}")
        named = (f" and {NAME_BYTES_PER_CHARACTER * int(names):,} for its {int(names)} characters of names"
                 if names else "")
        raise DataError(f"{what}: {count:,} windows x {length:,} samples x {channels:,} channel(s) would take "
                        f"{size / 1024 ** 3:,.1f} GiB ({samples / 1024 ** 3:,.1f} GiB of float32 and "
                        f"{WINDOW_OVERHEAD_BYTES} bytes of bookkeeping per window{named}), above the "
                        f"{MAX_WINDOW_BYTES // 1024 ** 3} GiB limit; {hint or 'ask for fewer or shorter windows'}")


def _readable_names(names: np.ndarray) -> np.ndarray:
    """`names` (numpy text), every one made printable UTF-8 (`readable`) when one is not UTF-8 (file-name bytes kept
    as surrogate escapes). Looked for a block at a time in the code points, not in a sorted copy of them all."""
    width = names.dtype.itemsize // 4
    flat = names.reshape(-1)
    for start in range(0, len(flat) if width else 0, 1 << 16):
        codes = np.ascontiguousarray(flat[start:start + (1 << 16)]).view(np.uint32)
        if ((codes >= 0xD800) & (codes <= 0xDFFF)).any():
            return np.array([readable(name) for name in names.tolist()])
    return names


ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
"""How an .npz (a zip archive) starts; anything else would get NumPy's misleading hint about allow_pickle."""


def is_zip_archive(path: str | os.PathLike) -> bool:
    """Whether `path` starts like an .npz (False when unreadable or not a regular file: the caller's open names the
    reason)."""
    try:
        check_regular(path, "windows file")  # a FIFO is never opened: open() would block on it
        with open(path, "rb") as handle:
            return handle.read(4) in ZIP_MAGIC
    except OSError:
        return False


def readable(text: str) -> str:
    """`text` as printable UTF-8: undecodable file-name bytes (surrogate escapes) become \\xNN.

    A class folder named with bytes that are not UTF-8 must still give a class name that can be
    printed, hashed and written to JSON; backslash escapes keep two such names distinct. Control
    characters (a terminal escape sequence in a folder name) are written as \\xNN too, so printing a
    class name never drives the user's terminal.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    if any(ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 for ch in text):
        text = "".join(f"\\x{ord(ch):02x}" if ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 else ch for ch in text)
    return text


def shown(path) -> str:
    """A path for a one-line message (readable even when its bytes are not UTF-8)."""
    return readable(str(path))


@dataclass(frozen=True, eq=False)
class Windows:
    """Windows `x` (n, T, C) float32 with labels `y`, recording groups and their provenance.

    `groups` names the recording (or file) each window was cut from: splits keep a group on one
    side so that correlated windows never leak between train and test. Optional `sessions`
    (a coarser unit: recording day, source file) and `time_index` (when the window starts,
    comparable within a session) serve the cross-session and temporal protocols.
    """

    x: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    class_names: tuple[str, ...]
    sample_rate_hz: float
    channel_names: tuple[str, ...] = ()
    provenance: dict = field(default_factory=dict)
    sessions: np.ndarray | None = None
    time_index: np.ndarray | None = None
    context: np.ndarray | None = None
    """A gesture session's stream around each window (n, T + 2M, C): M samples before and after it (the window is
    `context[:, M:M + T]`), for training on the windows serving will see at other offsets (`tinynas.augment`'s
    offset) and for the out-of-fold answers the serving rules are set on. None: the windows alone."""
    spans: np.ndarray | None = None
    """With `context`: each window's sign as [first, end) samples of its context (a still class: its window)."""

    def __post_init__(self) -> None:
        x = np.asarray(self.x)
        if x.ndim != 3:
            raise DataError(f"windows must have shape (n, T, C), got {x.shape}")
        n, length, channels = x.shape
        if n == 0:
            raise DataError("no windows")
        if length < 1 or channels < 1:
            raise DataError(f"windows have an empty axis: shape {x.shape}")
        y = np.asarray(self.y)
        groups = np.asarray(self.groups)
        if y.shape != (n,):
            raise DataError(f"{n} windows but labels have shape {y.shape}")
        if groups.shape != (n,):
            raise DataError(f"{n} windows but groups have shape {groups.shape}")
        if not np.issubdtype(y.dtype, np.integer):
            raise DataError(f"labels must be integers, got {y.dtype}")
        classes = len(self.class_names)
        if classes < 1:  # one class is normal running (`--task anomaly`); a classifier needs 2 (the study says so)
            raise DataError("no class names")
        if y.min() < 0 or y.max() >= classes:
            raise DataError(f"labels must lie in 0..{classes - 1}, found {y.min()}..{y.max()}")
        counts = np.bincount(y, minlength=classes)
        empty = [self.class_names[i] for i in np.flatnonzero(counts == 0)]
        if empty:
            raise DataError(f"class(es) with no windows: {', '.join(empty)}")
        with np.errstate(over="ignore", invalid="ignore"):  # beyond float32 becomes inf, refused just below
            converted = np.ascontiguousarray(x, dtype=np.float32)
        bad = ~np.isfinite(converted)
        if bad.any():
            where = tuple(np.argwhere(bad)[0])
            what = "NaN/inf" if not np.isfinite(x[where]) else "too large for float32 (beyond 3.4e38)"
            raise DataError(f"{int(bad.sum())} {what} value(s), first in window "
                            f"{where[0]} at sample {where[1]}, channel {where[2]}")
        x = converted
        for name in ("sessions", "time_index"):
            value = getattr(self, name)
            if value is not None and np.asarray(value).shape != (n,):
                raise DataError(f"{n} windows but {name} has shape {np.asarray(value).shape}")
        if (self.context is None) != (self.spans is None):
            raise DataError("a stream context needs its spans, and spans their context")
        if self.context is not None:
            context = np.ascontiguousarray(self.context, dtype=np.float32)
            spans = np.asarray(self.spans)
            margin2 = context.shape[1] - length if context.ndim == 3 else -1
            if (context.ndim != 3 or context.shape[0] != n or context.shape[2] != channels or margin2 < 0
                    or margin2 % 2):
                raise DataError(f"the stream context must have shape ({n}, {length} + 2 x margin, {channels}), got "
                                f"{context.shape}")
            if not np.isfinite(context).all():
                raise DataError("the stream context holds NaN/inf values")
            if spans.shape != (n, 2) or not np.issubdtype(spans.dtype, np.integer) or (spans[:, 0] < 0).any() \
                    or (spans[:, 1] <= spans[:, 0]).any() or (spans[:, 1] > context.shape[1]).any():
                raise DataError(f"spans must be ({n}, 2) ranges within the context")
            object.__setattr__(self, "context", context)
            object.__setattr__(self, "spans", spans.astype(np.int64))
        if self.channel_names and len(self.channel_names) != channels:
            raise DataError(f"{len(self.channel_names)} channel names for {channels} channels")
        if not self.sample_rate_hz > 0:
            raise DataError(f"sample rate must be positive, got {self.sample_rate_hz}")
        object.__setattr__(self, "x", x)
        # No copy of what is already of its type: millions of windows' names as numpy text are 4 bytes a character
        # each, and a copy here is a copy the memory check (check_size) would have to count.
        object.__setattr__(self, "y", y.astype(np.int64, copy=False))
        groups = _readable_names(groups.astype(str, copy=False))
        names = tuple(readable(str(name)) for name in self.class_names)
        if len(set(names)) != classes:
            raise DataError(f"class names are not distinct: {', '.join(names)}")
        object.__setattr__(self, "groups", groups)
        object.__setattr__(self, "class_names", names)
        object.__setattr__(self, "channel_names", tuple(readable(str(name)) for name in self.channel_names))
        if self.sessions is not None:
            object.__setattr__(self, "sessions", np.asarray(self.sessions).astype(str, copy=False))
        if self.time_index is not None:
            object.__setattr__(self, "time_index", np.asarray(self.time_index).astype(np.int64, copy=False))

    def __len__(self) -> int:
        return len(self.y)

    @property
    def window_length(self) -> int:
        """Samples per window (T)."""
        return self.x.shape[1]

    @property
    def channels(self) -> int:
        """Channels per sample (C)."""
        return self.x.shape[2]

    @property
    def classes(self) -> int:
        """Number of classes."""
        return len(self.class_names)

    def subset(self, indices: np.ndarray) -> Windows:
        """The windows at `indices` (same classes, rate and provenance)."""
        indices = np.asarray(indices, dtype=int)
        return Windows(self.x[indices], self.y[indices], self.groups[indices], self.class_names,
                       self.sample_rate_hz, self.channel_names, self.provenance,
                       None if self.sessions is None else self.sessions[indices],
                       None if self.time_index is None else self.time_index[indices],
                       None if self.context is None else self.context[indices],
                       None if self.spans is None else self.spans[indices])

    @property
    def margin(self) -> int:
        """Samples of stream context on each side of a window (0: none)."""
        return 0 if self.context is None else (self.context.shape[1] - self.window_length) // 2

    def digest(self) -> str:
        """Content hash (windows, labels, groups): identifies the data a study ran on."""
        sha = hashlib.sha256()
        for array in (self.x, self.y, self.groups.astype("U", copy=False)):
            sha.update(np.ascontiguousarray(array).data)  # the bytes in place: no copy of millions of names
        sha.update("\x1f".join(self.class_names).encode())
        return sha.hexdigest()[:16]

    def save(self, path: str | Path) -> None:
        """Write an .npz (atomically) that `Windows.load` reads back exactly."""
        import io
        import json


        buffer = io.BytesIO()
        optional = {name: getattr(self, name) for name in ("sessions", "time_index", "context", "spans")
                    if getattr(self, name) is not None}
        np.savez(buffer, x=self.x, y=self.y, groups=self.groups, **optional,
                 meta=np.array(json.dumps({"class_names": self.class_names,
                                           "sample_rate_hz": self.sample_rate_hz,
                                           "channel_names": self.channel_names,
                                           "provenance": self.provenance})))
        atomic_write_bytes(path, buffer.getvalue())

    @classmethod
    def load(cls, path: str | Path) -> Windows:
        """Read windows written by `save`."""
        import json

        try:
            check_regular(path, "windows file")  # a pipe or device refused before NumPy opens it (it would block)
        except NotRegularFile as exc:
            raise DataError(f"cannot read windows from {shown(path)}: {exc.strerror}") from None
        except OSError:
            pass  # missing or unreadable: NumPy's open below names it as before
        if Path(path).is_file() and not is_zip_archive(path):
            raise DataError(f"cannot read windows from {shown(path)}: not a NumPy .npz archive (damaged? write it "
                            f"again)")
        try:
            with np.load(path, allow_pickle=False) as archive:
                meta = json.loads(str(archive["meta"]))
                optional = {name: archive[name] for name in ("sessions", "time_index", "context", "spans")
                            if name in archive}
                return cls(archive["x"], archive["y"], archive["groups"], tuple(meta["class_names"]),
                           float(meta["sample_rate_hz"]), tuple(meta["channel_names"]), dict(meta["provenance"]),
                           **optional)
        except DataError:
            raise
        # A damaged archive fails in many ways (zip, deflate, NumPy header, JSON, a meta of the wrong
        # shape): BadZipFile, zlib.error, TokenError, KeyError, TypeError, MemoryError... all "damaged".
        except Exception as exc:  # noqa: BLE001
            raise DataError(f"cannot read windows from {shown(path)}: {type(exc).__name__}: {exc} "
                            f"(damaged? write it again)") from None


def windows_argument(value, argument: str = "windows") -> None:
    """Windows, not a spec naming them (the public API's check; `tinynas.arguments` holds the others)."""
    hint = " (load a data spec first: tinynas.load_windows(spec))" if isinstance(value, (str, os.PathLike)) else ""
    require(value, Windows, argument, f"Windows{hint}")
