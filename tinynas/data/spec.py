"""The `--data SPEC` strings: `source:argument[?key=value&...]` -> `Windows`."""

from __future__ import annotations

from urllib.parse import parse_qsl

from tinynas.data import synthetic
from tinynas.data.windows import DataError, Windows

_SYNTHETIC = {"vibration": synthetic.vibration, "emg": synthetic.emg}


def _options(query: str) -> dict[str, int | float]:
    options: dict[str, int | float] = {}
    for key, value in parse_qsl(query, keep_blank_values=True, strict_parsing=False):
        try:
            options[key] = int(value)
        except ValueError:
            try:
                options[key] = float(value)
            except ValueError:
                raise DataError(f"option {key}={value!r} in the data spec is not a number") from None
    return options


def load_windows(spec: str) -> Windows:
    """Load the windows a data spec names, e.g. 'synthetic:emg?classes=10&seed=2'."""
    source, _, rest = spec.partition(":")
    argument, _, query = rest.partition("?")
    if source == "synthetic":
        generator = _SYNTHETIC.get(argument)
        if generator is None:
            raise DataError(f"unknown synthetic set {argument!r}; choose one of: "
                            + ", ".join(f"synthetic:{name}" for name in _SYNTHETIC))
        try:
            return generator(**_options(query))
        except TypeError as exc:
            raise DataError(f"bad option for {source}:{argument}: {exc}") from None
    known = ", ".join(f"synthetic:{name}" for name in _SYNTHETIC)
    raise DataError(f"unknown data source {spec!r}; known: {known}")
