"""Argument checks at the public API (`tinynas.load_windows`, `estimate`, `Study`, `evaluate`, ...).

A notebook passes a data spec where windows are expected, a target's name where a `Target` is, a
dict for a recipe: each is one `UsageError` naming the argument, what it must be and what was given,
instead of an AttributeError from deep inside. The CLI never reaches these (it builds the right types).
"""

from __future__ import annotations

import os
from typing import Any

from tinynas.errors import UsageError
from tinynas.options import RANGES


def _given(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def require(value: Any, kind: type | tuple[type, ...], argument: str, what: str) -> None:
    """Refuse `value` unless it is a `kind` (`what` says it in words, with an example or the fix)."""
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _tuple(kind)):
        raise UsageError(f"{argument} must be {what}, got {_given(value)}")


def _tuple(kind) -> tuple:
    return kind if isinstance(kind, tuple) else (kind,)


def text_or_path(value: Any, argument: str, what: str) -> str:
    """A string, or a path object given for one (`pathlib.Path`), as text."""
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
        if isinstance(value, bytes):
            value = os.fsdecode(value)
    require(value, str, argument, what)
    return value


def seed_argument(seed: Any) -> int:
    """A seed NumPy and TensorFlow accept (0 .. 2**32 - 1)."""
    require(seed, int, "seed", "a whole number")
    RANGES["seed"].check("seed", seed)
    return seed
