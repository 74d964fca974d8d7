"""Random changes to training windows that mimic what differs between onboarding and use.

The armband is put on again a little rotated, with other skin contact (per-electrode gain) and
another effort (overall gain); the motor turns at another load (a few percent of speed, another
amplitude). Training on windows changed this way teaches the network to ignore those changes.
Each kind is switchable; which ones a sensor's preset keeps is decided by `benchmarks/shift.py`
(kept only where it helped on windows of another session/condition, see its results files).

Augmentation is applied per epoch to the training windows only (never to validation or test),
drawn from a generator seeded by the run's seed, so a candidate trains the same way on every run.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

import numpy as np

from tinynas.errors import UsageError


@dataclass(frozen=True)
class Augmentation:
    """How strongly each change is drawn (0 = off).

    channel_shift: rotate the channels by up to +-n positions (ring armbands: electrode i -> i+n mod C).
    channel_gain:  multiply each channel by exp(u), u uniform in +-x (electrode contact).
    gain:          multiply the whole window by exp(u), u uniform in +-x (effort, load, sensor mounting).
    noise:         add Gaussian noise of x times each window-channel's standard deviation.
    time_shift:    roll the window circularly by up to +-x of its length.
    speed:         resample the window by a factor 1 +- x (machine speed), wrapping at the end.
    offset:        replace a share x of the windows, every epoch, by one cut elsewhere in the stream around it
                   (windows with a stream context: a gesture session), labelled as the stream's judge counts it
                   (`offset_windows`): serving sees a sign at every offset and the idle arm before it.
    """

    channel_shift: int = 0
    channel_gain: float = 0.0
    gain: float = 0.0
    noise: float = 0.0
    time_shift: float = 0.0
    speed: float = 0.0
    offset: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.channel_shift, bool) or not isinstance(self.channel_shift, int) \
                or not 0 <= self.channel_shift <= 8:
            raise UsageError(f"augmentation channel_shift must be a whole number 0..8, got {self.channel_shift!r}")
        limits = {"channel_gain": 1.0, "gain": 1.0, "noise": 1.0, "time_shift": 0.5, "speed": 0.2, "offset": 1.0}
        for name, limit in limits.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= limit:
                raise UsageError(f"augmentation {name} must be a number in 0..{limit:g}, got {value!r}")
            object.__setattr__(self, name, float(value))

    @property
    def active(self) -> bool:
        """Whether any change is drawn at all."""
        return any(getattr(self, f.name) for f in fields(self))

    def to_dict(self) -> dict:
        """JSON-ready dict (cards, journals, jobs): only the kinds that are on."""
        return {key: value for key, value in asdict(self).items() if value}

    @classmethod
    def from_dict(cls, stored: dict | None) -> Augmentation:
        """The inverse of `to_dict` (None or {} is no augmentation)."""
        if not stored:
            return cls()
        if not isinstance(stored, dict):
            raise UsageError(f"augmentation must be a JSON object, got {type(stored).__name__}")
        unknown = sorted(set(stored) - {f.name for f in fields(cls)})
        if unknown:
            raise UsageError(f"unknown augmentation kind(s): {', '.join(unknown)}; known: {', '.join(KINDS)}")
        return cls(**stored)

    def describe(self) -> str:
        """One line for people, e.g. "gain +-0.3, noise 0.1"."""
        if not self.active:
            return "none"
        parts = []
        for key, value in self.to_dict().items():
            parts.append(f"{key} +-{value:g}" if key != "noise" else f"noise {value:g}")
        return ", ".join(parts)

    def apply(self, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A changed copy of windows `x` (n, T, C), float32; `x` itself is not modified (the offset is drawn
        before, where the stream is: `offset_windows`)."""
        x = np.array(x, dtype=np.float32, copy=True)
        n, length, channels = map(int, x.shape)  # ints (not Any) pick numpy's array-sized overloads
        if n == 0 or not self.active:
            return x
        if self.speed:
            x = _resample(x, 1.0 + rng.uniform(-self.speed, self.speed, n))
        if self.time_shift:
            reach = max(1, int(round(self.time_shift * length)))
            shift = rng.integers(-reach, reach + 1, n)
            index = (np.arange(length)[None, :] - shift[:, None]) % length
            x = np.take_along_axis(x, index[:, :, None], axis=1)
        if self.channel_shift and channels > 1:
            shift = rng.integers(-self.channel_shift, self.channel_shift + 1, n)
            index = (np.arange(channels)[None, :] + shift[:, None]) % channels
            x = np.take_along_axis(x, index[:, None, :], axis=2)
        if self.channel_gain:
            x *= np.exp(rng.uniform(-self.channel_gain, self.channel_gain, (n, 1, channels))).astype(np.float32)
        if self.gain:
            x *= np.exp(rng.uniform(-self.gain, self.gain, (n, 1, 1))).astype(np.float32)
        if self.noise:
            spread = x.std(axis=1, keepdims=True)
            x += (rng.standard_normal(x.shape) * spread * self.noise).astype(np.float32)
        return x


KINDS = tuple(f.name for f in fields(Augmentation))

OFFSET_REACH = 0.5
"""How far from the guide's cut an offset window is drawn, in windows."""

SIGN_SHARE = 0.5
"""A window is a sign's when this share of it (or of the sign, if shorter) is the sign: the stream's judge's rule
(`tinynas.deploy.stream`), so training labels what the verdict counts."""


def offset_windows(x: np.ndarray, y: np.ndarray, context: np.ndarray, spans: np.ndarray, share: float,
                   still: int | None, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Windows `x` (n, T, C) and labels `y` with a `share` of them replaced by a window cut at a random offset of
    their stream `context` (n, T + 2M, C), labelled as the stream's judge would: the sign's label when at least
    SIGN_SHARE of the window (or of the sign) is the sign; the still class `still` (the plan's rest) when less is;
    with no still class, such a draw keeps the original window."""
    x = np.array(x, dtype=np.float32, copy=True)
    y = np.array(y, copy=True)
    n, length = x.shape[0], x.shape[1]
    margin = (context.shape[1] - length) // 2
    if n == 0 or not share or margin <= 0:
        return x, y
    chosen = np.flatnonzero(rng.random(n) < share)
    # Within OFFSET_REACH of a window of the cut: mostly the sign at other moments (what serving answers while it
    # lasts), its edges, seldom the rest far before it (the still rule answers that); relabelled draws stay few, so
    # an epoch's classes stay as the collection's (a training whose labels swing looked diverging to the monitor).
    reach = min(margin, int(round(OFFSET_REACH * length)))
    starts = margin + rng.integers(-reach, reach + 1, len(chosen))
    for index, start in zip(chosen, starts):
        first, end = spans[index]
        overlap = max(0, min(start + length, end) - max(start, first))
        if overlap >= SIGN_SHARE * min(length, end - first):
            x[index] = context[index, start:start + length]
        elif still is not None:
            x[index] = context[index, start:start + length]
            y[index] = still
    return x, y


def _resample(x: np.ndarray, factor: np.ndarray) -> np.ndarray:
    """Each window read at `factor` times its speed (linear interpolation, wrapping at the end)."""
    n, length, _ = x.shape
    position = np.arange(length)[None, :] * factor[:, None]
    below = np.floor(position).astype(np.int64)
    weight = (position - below).astype(np.float32)[:, :, None]
    rows = np.arange(n)[:, None]
    early = x[rows, below % length]
    late = x[rows, (below + 1) % length]
    return early * (1 - weight) + late * weight


STREAM_OFFSET = 0.5
"""The share of a gesture session's windows drawn at another offset of their stream every epoch (`auto`): half stay
the onset cut the guide made, half are what serving sees at other moments of a sign and of the rest around it."""

PRESETS: dict[str, Augmentation] = {
    "none": Augmentation(),
    # From benchmarks/results/shift-*.md: only kinds that helped on another session/condition there.
    "armband": Augmentation(channel_gain=0.3, noise=0.1),
    "vibration": Augmentation(gain=0.3, noise=0.1, time_shift=0.5),
}

SEARCHED_KERNELS: dict[str, tuple[int, ...]] = {
    # The kernel sizes of a sensor's search space (the first is used by every strategy; `fast` races
    # all of them). Vibration: a wide kernel transferred to another load far better after `adapt`
    # (benchmarks/results/shift-cwru.md); racing 3 against 9 on one load's validation cannot see that.
    "none": (3,), "armband": (3,), "vibration": (9,),
}

SENSORS = {"isl": "armband", "cwru": "vibration"}
"""Which preset `auto` takes for a data source. Others (synthetic sets, recorded sessions, folders) get
none unless their provenance names a "sensor": the presets were measured on these two only."""


def sensor_of(provenance: dict) -> str | None:
    """The sensor kind ("armband" or "vibration") a data set's provenance names, if any."""
    kind = provenance.get("sensor") or SENSORS.get(provenance.get("source", ""))
    return kind if kind in PRESETS else None


def parse_kernels(text: str, provenance: dict | None = None) -> tuple[tuple[int, ...], str]:
    """`--kernels` value -> (the search space's kernel sizes, how chosen): "auto" (the sensor's), or "3,9"."""
    text = (text or "auto").strip()
    if text == "auto":
        sensor = sensor_of(provenance or {})
        kernels = SEARCHED_KERNELS[sensor or "none"]
        return kernels, (f"auto: the {sensor} preset" if sensor else "auto: kernel 3 (the data does not say "
                                                                      "what sensor it is)")
    try:
        kernels = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"--kernels {text!r}: give auto or odd kernel sizes joined by commas, e.g. 3,9") from None
    if not kernels or any(k < 1 or k % 2 == 0 or k > 63 for k in kernels):
        raise UsageError(f"--kernels {text!r}: kernel sizes must be odd numbers 1..63, e.g. 3,9")
    return kernels, "explicit"


def parse_augmentation(text: str, provenance: dict | None = None) -> tuple[Augmentation, str]:
    """`--augment` value -> (augmentation, how it was chosen).

    "auto" takes the preset of the data's sensor; "none", "armband" or "vibration" a preset;
    "gain=0.3,noise=0.1" sets kinds explicitly (others off).
    """
    text = (text or "auto").strip()
    if text == "auto":
        sensor = sensor_of(provenance or {})
        if (provenance or {}).get("stream_context"):  # a gesture session with its stream: its offsets too
            base = PRESETS[sensor] if sensor else PRESETS["none"]
            return (replace(base, offset=STREAM_OFFSET),
                    f"auto: {'the ' + sensor + ' preset and ' if sensor else ''}windows cut at other offsets of the "
                    f"session's stream ({STREAM_OFFSET:.0%} of them each epoch)")
        if sensor is None:
            return PRESETS["none"], "auto: no augmentation (the data does not say what sensor it is)"
        return PRESETS[sensor], f"auto: the {sensor} preset"
    if text in PRESETS:
        return PRESETS[text], f"the {text} preset"
    values: dict[str, Any] = {}  # Augmentation's keyword arguments: channel_shift an int, the others floats
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in KINDS:
            raise UsageError(f"--augment {text!r}: give auto, none, {', '.join(p for p in PRESETS if p != 'none')} "
                             f"or kind=value pairs joined by commas (kinds: {', '.join(KINDS)})")
        try:
            values[key] = int(value) if key == "channel_shift" else float(value)
        except ValueError:
            raise UsageError(f"--augment: {key}={value!r} is not a number") from None
    return Augmentation(**values), "explicit"
