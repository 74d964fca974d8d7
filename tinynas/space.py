"""The A(k, c) search space: one frozen, hashable `Architecture` type shared by every module.

An architecture is a stem convolution with `k` filters followed by `c` cells of
max-pool -> conv -> batch norm -> ReLU, global average pooling and a dense head.
It is expressed as a (1, T, C) 2-D graph with (1, kernel) kernels: that lowers to bare
CONV_2D / MAX_POOL_2D operators in TFLite, with less flash and arena than the Conv1D form (which wraps
every op in EXPAND_DIMS/RESHAPE: 1.2-1.5x the flash and arena in a check of four architectures made
while writing docs/, not yet a committed benchmark); see docs/method.md.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from tinynas.errors import TinynasError

GROWTH_RULES = ("half", "double", "none")
"""How filters grow per cell: n + ceil(n/2) (the method's), n * 2, or constant."""

SCHEMA_VERSION = 1


class SpecError(TinynasError, ValueError):
    """An architecture or budget specification that cannot be built."""


def max_cells(input_length: int) -> int:
    """Largest number of cells for a window of `input_length` samples.

    A cell cannot be added once the temporal length is <= 1; each cell halves it (floor).
    """
    cells, length = 0, input_length
    while length > 1:
        length //= 2
        cells += 1
    return cells


def _grow(filters: int, rule: str) -> int:
    if rule == "half":
        return filters + math.ceil(filters / 2)
    if rule == "double":
        return filters * 2
    return filters


def round_up(value: int, multiple: int) -> int:
    """`value` rounded up to a multiple of `multiple` (channel counts here, arena buffers in the planner)."""
    return -(-value // multiple) * multiple


@dataclass(frozen=True)
class Architecture:
    """One member of the A(k, c) family on a (input_length x input_channels) window."""

    input_length: int
    input_channels: int
    classes: int
    k: int
    c: int
    kernel_size: int = 3
    growth: str = "half"
    channel_multiple: int = 1

    def __post_init__(self) -> None:
        for name in ("input_length", "input_channels", "classes", "k", "c",
                     "kernel_size", "channel_multiple"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool):
                raise SpecError(f"{name} must be an integer, got {value!r}")
        if self.input_length < 1:
            raise SpecError(f"input_length must be >= 1, got {self.input_length}")
        if self.input_channels < 1:
            raise SpecError(f"input_channels must be >= 1, got {self.input_channels}")
        if self.classes < 2:
            raise SpecError(f"classes must be >= 2, got {self.classes}")
        if self.k < 1:
            raise SpecError(f"k (stem filters) must be >= 1, got {self.k}")
        if self.c < 0:
            raise SpecError(f"c (cells) must be >= 0, got {self.c}")
        limit = max_cells(self.input_length)
        if self.c > limit:
            raise SpecError(
                f"c={self.c} cells is too many for {self.input_length} samples: "
                f"each cell halves the length and at most {limit} fit")
        if self.kernel_size < 1 or self.kernel_size % 2 == 0:
            raise SpecError(f"kernel_size must be a positive odd integer, got {self.kernel_size}")
        if self.growth not in GROWTH_RULES:
            raise SpecError(f"growth must be one of {', '.join(GROWTH_RULES)}, got {self.growth!r}")
        if self.channel_multiple < 1:
            raise SpecError(f"channel_multiple must be >= 1, got {self.channel_multiple}")

    @property
    def filters(self) -> tuple[int, ...]:
        """Output channels of the stem and of each cell's conv, in order."""
        out, n = [], self.k
        out.append(round_up(n, self.channel_multiple))
        for _ in range(self.c):
            n = _grow(n, self.growth)
            out.append(round_up(n, self.channel_multiple))
        return tuple(out)

    @property
    def lengths(self) -> tuple[int, ...]:
        """Temporal length seen by the stem and by each cell's conv (after its pool)."""
        out, length = [self.input_length], self.input_length
        for _ in range(self.c):
            length //= 2
            out.append(length)
        return tuple(out)

    @property
    def model_input_shape(self) -> tuple[int, int, int]:
        """Shape of one model input: (1, T, C), the 2-D layout of a window."""
        return (1, self.input_length, self.input_channels)

    def name(self) -> str:
        """Short human label, e.g. A(4,3)."""
        extras = []
        if self.kernel_size != 3:
            extras.append(f"kernel={self.kernel_size}")
        if self.growth != "half":
            extras.append(f"growth={self.growth}")
        if self.channel_multiple != 1:
            extras.append(f"round={self.channel_multiple}")
        tail = (", " + ", ".join(extras)) if extras else ""
        return f"A({self.k},{self.c}{tail})"

    def to_dict(self) -> dict[str, Any]:
        """Plain dict with a schema version, stable across releases."""
        return {"schema": SCHEMA_VERSION, **asdict(self)}

    def to_json(self) -> str:
        """Canonical JSON (sorted keys, no whitespace variance)."""
        return json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: object) -> Architecture:
        """Build from `to_dict()` output (anything read from JSON: checked here); unknown keys are an error."""
        if not isinstance(data, dict):
            raise SpecError(f"architecture must be a JSON object, got {type(data).__name__}")
        data = dict(data)
        schema = data.pop("schema", SCHEMA_VERSION)
        if schema != SCHEMA_VERSION:
            raise SpecError(f"architecture schema {schema} is not supported (expected {SCHEMA_VERSION})")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(f"unknown architecture field(s): {', '.join(unknown)}")
        missing = sorted(f for f in ("input_length", "input_channels", "classes", "k", "c")
                         if f not in data)
        if missing:
            raise SpecError(f"architecture is missing field(s): {', '.join(missing)}")
        return cls(**data)

    @classmethod
    def from_json(cls, text: str) -> Architecture:
        """Parse canonical (or any equivalent) JSON."""
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(f"architecture is not valid JSON: {exc.msg} at line {exc.lineno}") from None
        except RecursionError:  # thousands of nested brackets: not an architecture, and not a bug
            raise SpecError("architecture is not valid JSON: nested too deeply") from None
        return cls.from_dict(data)

    def digest(self) -> str:
        """Stable 12-hex-digit id of this architecture (same on every machine and run)."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:12]


def as_model_input(windows):
    """Reshape windows (n, T, C) to the model's (n, 1, T, C) layout (a view, no copy)."""
    if windows.ndim != 3:
        raise SpecError(f"windows must have shape (n, T, C), got {windows.shape}")
    return windows[:, None, :, :]
