"""What happens to raw windows before the network, recorded once and applied everywhere.

Training, int8 export (calibration), `tinynas evaluate` and live serving all call `apply`, with
the parameters stored in `card.json` under "preprocessing", so that there is no train/serve skew.
The input's int8 scale and zero point are read from the model itself by LiteRT (and copied into
the card under "quantization").

`normalize="none"` (the default) passes windows through: the first convolution has no bias and
batch normalisation follows it, so the networks are invariant to a global input scale.
`normalize="channel"` standardises each channel with the training split's mean and standard
deviation: for recordings whose channels come in very different units.
`normalize="window"` divides each window by its own RMS over all samples and channels (the channels'
relative levels kept): a re-worn armband's overall gain change is gone before the network sees it. On the
re-worn ISL session it raised zero-shot accuracy by 3-5 points at the same same-block accuracy (within a
point; benchmarks/results/shift-isl-rewear.md). The RMS is summed in float64 in sample order so that the
generated C (`PREFIX_prepare`, tinynas.deploy.c_prepare) gets the same bits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from tinynas.data.windows import DataError, Windows
from tinynas.errors import TinynasError

NORMALIZATIONS = ("none", "channel", "window")
WINDOW_FLOOR = 1e-6
"""Added to a window's RMS before dividing by it (an all-zero window stays zero instead of NaN)."""


class CardError(TinynasError, ValueError):
    """A model card (or its stored preprocessing) with a key missing or of the wrong type."""


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
            raise CardError(f"unknown normalization {self.normalize!r}; choose one of: {', '.join(NORMALIZATIONS)}")
        for name in ("offset", "scale"):
            values = getattr(self, name)
            if values and len(values) != self.channels:
                raise CardError(f"{len(values)} {name} values for {self.channels} channels")
        if any(not (s > 0 and math.isfinite(s)) for s in self.scale):
            raise CardError("preprocessing scales must be positive")
        if any(not math.isfinite(o) for o in self.offset):
            raise CardError("preprocessing offsets must be finite")

    @classmethod
    def fit(cls, windows: Windows, train: Sequence[int] | np.ndarray, normalize: str = "none") -> Preprocessing:
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
        if self.normalize == "window":
            x = x / window_rms_divisor(x)[:, None, None]
        return x

    def prepare(self, windows: Windows) -> Windows:
        """`windows` with `apply` done to their samples (labels, groups and provenance kept)."""
        if not self.offset and self.normalize != "window":
            return windows
        return replace(windows, x=self.apply(windows.x))

    def check(self, windows: Windows, what: str = "data") -> None:
        """Refuse windows this model was not made for, naming the first mismatch in one line."""
        self.check_input(windows, what)
        unknown = [name for name in windows.class_names if name not in self.class_names]
        if unknown:
            raise DataError(f"{what} has class(es) the model does not know: {', '.join(unknown)} "
                            f"(it knows {', '.join(self.class_names)})")

    def check_input(self, windows: Windows, what: str = "data") -> None:
        """`check` without the labels: length, channels, rate and channel order (unlabelled use)."""
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
    def from_dict(cls, stored: dict, where: str = "preprocessing") -> Preprocessing:
        """The inverse of `to_dict`; a missing key or a wrong type is a one-line CardError naming it."""
        _expect(stored, dict, where, "a JSON object")
        return cls(_count(stored, "window_length", where), _count(stored, "channels", where),
                   _rate(stored, "sample_rate_hz", where), _names(stored, "class_names", where, 2),
                   _names(stored, "channel_names", where, 0, ()), _text(stored, "normalize", where, "none"),
                   _numbers(stored, "offset", where), _numbers(stored, "scale", where))

    @classmethod
    def from_card(cls, card: dict) -> Preprocessing:
        """The preprocessing a card records (cards written before it was recorded: pass-through).

        The card comes from a file a user can edit, so every key read is checked: the first one
        missing or of the wrong type is named in one line, instead of a KeyError deep in serving.
        """
        _expect(card, dict, "the card", "a JSON object")
        if card.get("preprocessing") is not None:
            preprocessing = cls.from_dict(card["preprocessing"], "the card's 'preprocessing'")
            classes = _names(card, "classes", "the card", 2, preprocessing.class_names)
            if preprocessing.class_names != classes:
                raise CardError("the card's 'classes' differ from its 'preprocessing' class_names: "
                                "the card was edited or belongs to another model")
            return preprocessing
        classes = _names(card, "classes", "the card", 2)
        if "input" not in card:
            raise CardError("the card has no 'input' (nor 'preprocessing'): it does not say what the model takes")
        _expect(card["input"], dict, "the card's 'input'", "a JSON object")
        shape = card["input"].get("shape")
        if not (isinstance(shape, list) and len(shape) == 2 and all(_is_count(v) for v in shape)):
            raise CardError(f"the card's 'input' 'shape' must be [samples, channels], got {shape!r}")
        return cls(shape[0], shape[1], _rate(card["input"], "sample_rate_hz", "the card's 'input'"), classes,
                   _names(card["input"], "channel_names", "the card's 'input'", 0, ()))


_MISSING = object()


def window_rms_divisor(x: np.ndarray) -> np.ndarray:
    """Per window (n, T, C): float32(sqrt(mean of squares) + WINDOW_FLOOR), the squares summed in float64 one
    sample after another (cumsum, not numpy's pairwise sum): what the generated C's loop adds, bit for bit."""
    flat = np.asarray(x, np.float32).reshape(len(x), -1).astype(np.float64)  # apply checked the shape: T, C >= 1
    power = np.cumsum(flat * flat, axis=1)[:, -1] / flat.shape[1]
    return (np.sqrt(power) + WINDOW_FLOOR).astype(np.float32)


def _expect(value, kind: type, where: str, what: str) -> None:
    if not isinstance(value, kind):
        raise CardError(f"{where} must be {what}, got {type(value).__name__} {_short(value)}")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _get(stored: dict, key: str, where: str, default):
    value = stored.get(key, default)
    if value is _MISSING:
        raise CardError(f"{where} has no {key!r}")
    return value


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def _count(stored: dict, key: str, where: str) -> int:
    value = _get(stored, key, where, _MISSING)
    if not _is_count(value):
        raise CardError(f"{where} {key!r} must be a positive integer, got {_short(value)}")
    return value


def _rate(stored: dict, key: str, where: str) -> float:
    value = _get(stored, key, where, _MISSING)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 < value < math.inf):
        raise CardError(f"{where} {key!r} must be a positive number, got {_short(value)}")
    return float(value)


def _names(stored: dict, key: str, where: str, minimum: int, default=_MISSING) -> tuple[str, ...]:
    value = _get(stored, key, where, default)
    if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)) or len(value) < minimum:
        need = f"a list of at least {minimum} names" if minimum else "a list of names"
        raise CardError(f"{where} {key!r} must be {need}, got {_short(value)}")
    if len(set(value)) != len(value):
        raise CardError(f"{where} {key!r} names a class or channel twice: the card was edited or is damaged")
    if any(ord(ch) < 0x20 or 0x7f <= ord(ch) < 0xa0 for name in value for ch in name):
        raise CardError(f"{where} {key!r} holds control characters (tinynas writes none): the card was edited "
                        f"or is damaged")
    return tuple(value)


def _text(stored: dict, key: str, where: str, default: str) -> str:
    value = _get(stored, key, where, default)
    if not isinstance(value, str):
        raise CardError(f"{where} {key!r} must be a string, got {_short(value)}")
    return value


def _numbers(stored: dict, key: str, where: str) -> tuple[float, ...]:
    value = _get(stored, key, where, ())
    if not (isinstance(value, (list, tuple))
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise CardError(f"{where} {key!r} must be a list of numbers, got {_short(value)}")
    return tuple(float(v) for v in value)
