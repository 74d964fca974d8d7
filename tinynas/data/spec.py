"""The `--data SPEC` strings: `source:argument[?key=value&...]` -> `Windows`.

    synthetic:vibration | synthetic:emg      generated sets, e.g. synthetic:emg?classes=26&seed=1
    isl:PATH[?imu=1]                         the ISL alphabet in its published layout
    cwru:PATH[?files=bearingnas10&load=1&channel=FE&window=512&hop=512&windows_per_file=200&resample=1]
                                             load=0,1 or load=all for several loads (default: the one
                                             load of the set in the folder); files= also takes numbers
    session:PATH[?window=512&hop=256]        a recording made by firmware_bridge (or a folder of them),
                                             optionally re-cut into windows of another length
    folder:PATH[?window=400&hop=200&rate=200&channels=0,1&key=_DE_time]
                                             one subfolder per class of .csv/.npy/.wav/.mat files
    npz:PATH[?rate=200]                      arrays x (n, T, C), y, optional groups, classes
"""

from __future__ import annotations

import inspect
import math
from urllib.parse import parse_qsl

from tinynas.arguments import text_or_path
from tinynas.data import synthetic
from tinynas.data.cwru import load_cwru
from tinynas.data.folder import load_folder
from tinynas.data.isl import load_isl
from tinynas.data.npz import load_npz
from tinynas.data.session import load_session
from tinynas.data.windows import DataError, Windows

_SYNTHETIC = {"vibration": synthetic.vibration, "emg": synthetic.emg}
SOURCES = ("synthetic:vibration", "synthetic:emg", "isl:PATH", "cwru:PATH", "session:PATH", "folder:PATH",
           "npz:PATH")


_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


MAX_DIGITS = 15
"""Digits of the largest whole number a data spec option takes (a seed, a window count, a file number)."""


def _parse(key: str, text: str, kind: type):
    """One option value of the type its loader takes; a one-line DataError otherwise."""
    if kind is int:
        digits = text.strip().lstrip("+-")
        if len(digits) > MAX_DIGITS and digits.isdigit():  # no window count, length or seed has 16 digits
            raise DataError(f"option {key}= in the data spec is a {len(digits)}-digit number, far beyond any data set "
                            f"(at most {MAX_DIGITS} digits)")
        try:
            return int(text)
        except ValueError:
            raise DataError(f"option {key}={text[:40]!r} in the data spec is not a number (a whole number)") from None
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise DataError(f"option {key}={text!r} in the data spec is not a number") from None
        if not math.isfinite(value):
            raise DataError(f"option {key}={text!r} in the data spec is not a finite number")
        return value
    if kind is bool:
        if text.lower() not in _TRUE + _FALSE:
            raise DataError(f"option {key}={text!r} in the data spec is not a yes/no value: give 1 or 0")
        return text.lower() in _TRUE
    if kind is tuple:  # a list of numbers, or a name (e.g. files=97,105 or files=std10)
        parts = [part.strip() for part in text.split(",")]
        if any(len(part) > MAX_DIGITS for part in parts if part.isascii() and part.isdigit()):
            raise DataError(f"option {key}= in the data spec holds a number of more than {MAX_DIGITS} digits")
        return tuple(int(part) for part in parts) if all(p.isascii() and p.isdigit() for p in parts) else text
    if not text:
        raise DataError(f"option {key}= in the data spec is empty")
    return text


def _options(query: str, allowed: dict[str, type]) -> dict:
    options = {}
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise DataError(f"options {query!r} are not key=value pairs joined by &") from None
    for key, text in pairs:
        if key not in allowed:
            raise DataError(f"unknown option {key!r}; this source takes: {', '.join(allowed) or 'none'}")
        if key in options:
            raise DataError(f"option {key} given twice in the data spec")
        options[key] = _parse(key, text, allowed[key])
    return options


def load_windows(spec: str) -> Windows:
    """Load the windows a data spec names (see the module docstring); a path object reads as its text."""

    spec = text_or_path(spec, "the data spec", "a string, e.g. 'folder:recordings?window=400'")
    source, _, rest = spec.partition(":")
    argument, _, query = rest.partition("?")
    if source == "synthetic":
        generator = _SYNTHETIC.get(argument)
        if generator is None:
            raise DataError(f"unknown synthetic set {argument!r}; choose one of: "
                            + ", ".join(f"synthetic:{name}" for name in _SYNTHETIC))
        defaults = {name: parameter.default for name, parameter in inspect.signature(generator).parameters.items()
                    if parameter.default is not inspect.Parameter.empty}
        return generator(**_options(query, {name: type(value) for name, value in defaults.items()}))
    if source in ("isl", "cwru", "session", "folder", "npz") and not argument:
        raise DataError(f"{source}: needs a path, e.g. {source}:/data/{source}")
    if source == "isl":
        return load_isl(argument, **_options(query, {"imu": bool}))
    if source == "cwru":
        options = _options(query, {"files": tuple, "channel": str, "window": int, "hop": int,
                                   "windows_per_file": int, "resample": bool, "load": tuple})
        if "resample" in options:
            options["resample_normal"] = options.pop("resample")
        return load_cwru(argument, **options)
    if source == "session":
        return load_session(argument, **_options(query, {"window": int, "hop": int}))
    if source == "folder":
        return load_folder(argument, **_options(query, {"window": int, "hop": int, "rate": float,
                                                        "channels": tuple, "key": str}))
    if source == "npz":
        return load_npz(argument, **_options(query, {"rate": float}))
    raise DataError(f"unknown data source {spec!r}; known: {', '.join(SOURCES)}")
