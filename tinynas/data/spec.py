"""The `--data SPEC` strings: `source:argument[?key=value&...]` -> `Windows`.

    synthetic:vibration | synthetic:emg      generated sets, e.g. synthetic:emg?classes=26&seed=1
    isl:PATH[?imu=1]                         the ISL alphabet in its published layout
    cwru:PATH[?files=bearingnas10&channel=FE&window=512&hop=512&windows_per_file=200&resample=1]
    session:PATH                             a recording made by firmware_bridge (or a folder of them)
    folder:PATH[?window=400&hop=200&rate=200&channels=0,1&key=_DE_time]
                                             one subfolder per class of .csv/.npy/.wav/.mat files
    npz:PATH[?rate=200]                      arrays x (n, T, C), y, optional groups, classes
"""

from __future__ import annotations

from urllib.parse import parse_qsl

from tinynas.data import synthetic
from tinynas.data.windows import DataError, Windows

_SYNTHETIC = {"vibration": synthetic.vibration, "emg": synthetic.emg}
SOURCES = ("synthetic:vibration", "synthetic:emg", "isl:PATH", "cwru:PATH", "session:PATH", "folder:PATH",
           "npz:PATH")


def _value(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _options(query: str, allowed: dict[str, type]) -> dict:
    options = {}
    for key, text in parse_qsl(query, keep_blank_values=True):
        if key not in allowed:
            raise DataError(f"unknown option {key!r}; this source takes: {', '.join(allowed) or 'none'}")
        kind = allowed[key]
        value = _value(text)
        if kind is bool:
            value = text.lower() in ("1", "true", "yes")
        elif kind in (int, float) and not isinstance(value, (int, float)):
            raise DataError(f"option {key}={text!r} in the data spec is not a number")
        elif kind is tuple:
            value = text if not all(part.strip().isdigit() for part in text.split(",")) else tuple(
                int(part) for part in text.split(","))
        options[key] = kind(value) if kind in (int, float) else value
    return options


def load_windows(spec: str) -> Windows:
    """Load the windows a data spec names (see the module docstring)."""
    source, _, rest = spec.partition(":")
    argument, _, query = rest.partition("?")
    if source == "synthetic":
        generator = _SYNTHETIC.get(argument)
        if generator is None:
            raise DataError(f"unknown synthetic set {argument!r}; choose one of: "
                            + ", ".join(f"synthetic:{name}" for name in _SYNTHETIC))
        names = generator.__code__.co_varnames[:generator.__code__.co_argcount]
        defaults = dict(zip(names[-len(generator.__defaults__):], generator.__defaults__))
        return generator(**_options(query, {name: type(value) for name, value in defaults.items()}))
    if source in ("isl", "cwru", "session", "folder", "npz") and not argument:
        raise DataError(f"{source}: needs a path, e.g. {source}:/data/{source}")
    if source == "isl":
        from tinynas.data.isl import load_isl

        return load_isl(argument, **_options(query, {"imu": bool}))
    if source == "cwru":
        from tinynas.data.cwru import load_cwru

        options = _options(query, {"files": tuple, "channel": str, "window": int, "hop": int,
                                   "windows_per_file": int, "resample": bool})
        if "resample" in options:
            options["resample_normal"] = options.pop("resample")
        return load_cwru(argument, **options)
    if source == "session":
        from tinynas.data.session import load_session

        _options(query, {})
        return load_session(argument)
    if source == "folder":
        from tinynas.data.folder import load_folder

        return load_folder(argument, **_options(query, {"window": int, "hop": int, "rate": float,
                                                        "channels": tuple, "key": str}))
    if source == "npz":
        from tinynas.data.npz import load_npz

        return load_npz(argument, **_options(query, {"rate": float}))
    raise DataError(f"unknown data source {spec!r}; known: {', '.join(SOURCES)}")
