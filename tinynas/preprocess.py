"""What happens to raw windows before the network, recorded once and applied everywhere.

Training, int8 export (calibration), `tinynas evaluate` and live serving all call `apply`, with
the parameters stored in `card.json` under "preprocessing", so that there is no train/serve skew.
The input's int8 scale and zero point are read from the model itself by LiteRT (and copied into
the card under "quantization").

`normalize="none"` (the default) passes windows through: the first convolution has no bias and
batch normalisation follows it, so the networks are invariant to a global input scale.
`normalize="channel"` standardises each channel with the training split's mean and standard
deviation: for recordings whose channels come in very different units.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace

import numpy as np

from tinynas.data.windows import DataError, Windows

NORMALIZATIONS = ("none", "channel")


@dataclass(frozen=True)
class Preprocessing:
    """Window shape, rate, classes and per-channel offset/scale: raw window -> model input."""

    window_length: int
    channels: int
    sample_rate_hz: float
    class_names: tuple[str, ...]
    channel_names: tuple[str, ...] = ()
    normalize: str = "none"
    offset: tuple[float, ...] = ()
    scale: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.normalize not in NORMALIZATIONS:
            raise ValueError(f"unknown normalization {self.normalize!r}; choose one of: {', '.join(NORMALIZATIONS)}")
        for name in ("offset", "scale"):
            values = getattr(self, name)
            if values and len(values) != self.channels:
                raise ValueError(f"{len(values)} {name} values for {self.channels} channels")
        if any(not s > 0 for s in self.scale):
            raise ValueError("preprocessing scales must be positive")

    @classmethod
    def fit(cls, windows: Windows, train: np.ndarray, normalize: str = "none") -> "Preprocessing":
        """The preprocessing a search applies, with statistics from the training windows only."""
        offset: tuple[float, ...] = ()
        scale: tuple[float, ...] = ()
        if normalize == "channel":
            x = windows.x[np.asarray(train, dtype=int)]
            mean = x.mean(axis=(0, 1), dtype=np.float64)
            std = x.std(axis=(0, 1), dtype=np.float64)
            offset = tuple(float(m) for m in mean)
            # A flat channel keeps scale 1 (dividing by ~0 would blow its noise up).
            scale = tuple(float(s) if s > 1e-12 else 1.0 for s in std)
        return cls(windows.window_length, windows.channels, float(windows.sample_rate_hz),
                   tuple(windows.class_names), tuple(windows.channel_names), normalize, offset, scale)

    def apply(self, x: np.ndarray) -> np.ndarray:
        """Model input (n, T, C) float32 from raw windows (n, T, C)."""
        x = np.asarray(x, dtype=np.float32)
        if x.ndim != 3 or x.shape[1:] != (self.window_length, self.channels):
            raise DataError(f"windows have shape {tuple(x.shape[1:])} but the model takes "
                            f"({self.window_length}, {self.channels})")
        if self.offset:
            x = (x - np.asarray(self.offset, np.float32)) / np.asarray(self.scale, np.float32)
        return x

    def prepare(self, windows: Windows) -> Windows:
        """`windows` with `apply` done to their samples (labels, groups and provenance kept)."""
        if not self.offset:
            return windows
        return replace(windows, x=self.apply(windows.x))

    def check(self, windows: Windows, what: str = "data") -> None:
        """Refuse windows this model was not made for, naming the first mismatch in one line."""
        if windows.window_length != self.window_length:
            raise DataError(f"{what} windows are {windows.window_length} samples long but the model takes "
                            f"{self.window_length} (set the window length of the data spec)")
        if windows.channels != self.channels:
            raise DataError(f"{what} has {windows.channels} channel(s) but the model takes {self.channels}")
        if not math.isclose(windows.sample_rate_hz, self.sample_rate_hz, rel_tol=1e-6):
            raise DataError(f"{what} is sampled at {windows.sample_rate_hz:g} Hz but the model was trained "
                            f"at {self.sample_rate_hz:g} Hz")
        if self.channel_names and windows.channel_names and windows.channel_names != self.channel_names:
            raise DataError(f"{what} has channels {', '.join(windows.channel_names)} but the model takes "
                            f"{', '.join(self.channel_names)} (same order; pick them with channels=)")
        unknown = [name for name in windows.class_names if name not in self.class_names]
        if unknown:
            raise DataError(f"{what} has class(es) the model does not know: {', '.join(unknown)} "
                            f"(it knows {', '.join(self.class_names)})")

    def labels_for(self, windows: Windows) -> np.ndarray:
        """The windows' labels as indices into this model's classes (the data may hold fewer)."""
        index = {name: i for i, name in enumerate(self.class_names)}
        lookup = np.array([index[name] for name in windows.class_names], dtype=np.int64)
        return lookup[windows.y]

    def to_dict(self) -> dict:
        """JSON-ready dict (the card's "preprocessing")."""
        data = asdict(self)
        return {key: list(value) if isinstance(value, tuple) else value for key, value in data.items()}

    @classmethod
    def from_dict(cls, stored: dict) -> "Preprocessing":
        """The inverse of `to_dict`."""
        return cls(int(stored["window_length"]), int(stored["channels"]), float(stored["sample_rate_hz"]),
                   tuple(stored["class_names"]), tuple(stored.get("channel_names", ())),
                   stored.get("normalize", "none"), tuple(stored.get("offset", ())), tuple(stored.get("scale", ())))

    @classmethod
    def from_card(cls, card: dict) -> "Preprocessing":
        """The preprocessing a card records (cards written before it was recorded: pass-through)."""
        if card.get("preprocessing"):
            return cls.from_dict(card["preprocessing"])
        shape = card["input"]["shape"]
        return cls(int(shape[0]), int(shape[1]), float(card["input"]["sample_rate_hz"]), tuple(card["classes"]),
                   tuple(card["input"].get("channel_names", ())))
