"""A sweep's grid: which searches to run, read from a TOML file.

    [grid]                      # every combination of these is one search (a cell)
    data = ["synthetic:emg?classes=4", "synthetic:vibration"]
    target = ["STM32F030F4P6", "nRF52840"]
    seed = [0, 1, 2]

    [fixed]                     # the same for every cell
    strategy = "fast"
    budget = "2m"

    [[cells]]                   # options that vary together: one entry each, crossed with [grid]
    data = "npz:anna.npz"
    test_data = "npz:anna-day2.npz"

    [[cells]]
    data = "npz:ben.npz"
    test_data = "npz:ben-day2.npz"

Keys are `tinynas search` options, written as in a config (`final_epochs`, `test_data`); `out`, `resume` and
`json` belong to the sweep. Cells are numbered with the [[cells]] entries slowest, then the grid's keys in order,
the last varying fastest.
"""

from __future__ import annotations

import itertools
import math
import tomllib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinynas.errors import UsageError
from tinynas.units import echoed

MAX_CELLS = 200
"""The most cells a grid may have unless `--max-cells` says more: 200 searches are days on one Pi."""
RESERVED = ("out", "resume", "json")
GRID_FILE_BYTES = 1 << 20
"""The most a grid file may hold (a few hundred bytes make a grid of hundreds of cells); a bigger file is the wrong
file, and is not read."""


@dataclass(frozen=True)
class Grid:
    axes: dict[str, list[Any]]
    """Each varied option and its values, in the file's order."""
    fixed: dict[str, Any]
    together: list[dict[str, Any]] = field(default_factory=list)
    """The [[cells]] entries: options varied together (a user's data with that user's test data; a data set drawn
    per seed with that seed), each entry crossed with every combination of the axes."""

    def cells(self) -> list[dict[str, Any]]:
        """Every combination of the axes' values with every [[cells]] entry (the fixed options not included)."""
        names = list(self.axes)
        combinations = [dict(zip(names, values)) for values in itertools.product(*self.axes.values())]
        return [{**entry, **combination} for entry in self.together or [{}] for combination in combinations]

    def varied(self) -> list[str]:
        """The options that differ between cells: the [[cells]] entries' keys, then the axes'."""
        return [*(self.together[0] if self.together else {}), *self.axes]

    def values(self, key: str) -> list[Any]:
        """The distinct values `key` takes over the cells, in cell order."""
        seen: dict[str, Any] = {}
        for cell in self.cells():
            if key in cell:
                seen.setdefault(repr(cell[key]), cell[key])
        return list(seen.values())

    def to_dict(self) -> dict:
        return {"grid": self.axes, "fixed": self.fixed, **({"cells": self.together} if self.together else {})}


def load_grid(path: str | Path, options: Iterable[str], max_cells: int = MAX_CELLS) -> Grid:
    """The grid in the TOML file `path`; `options` are the search's option names (dashes or underscores).

    Read as every file a user names is (`firmware_bridge.safe_read`): a regular file of at most GRID_FILE_BYTES, so
    a named pipe never blocks the sweep and /dev/zero is refused before a byte is read."""
    from firmware_bridge.safe_read import read_regular_text

    path = Path(path)
    try:
        text = read_regular_text(path, GRID_FILE_BYTES, "grid file")
    except FileNotFoundError:
        raise UsageError(f"{path}: no such grid file") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot read the grid ({exc.strerror or exc.__class__.__name__})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{path}: cannot read the grid (not UTF-8 text: a TOML grid is text)") from None
    try:
        table = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not a TOML grid ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: not a TOML grid (lists or tables nested far too deep; a grid's values are "
                         f"plain strings, numbers and true/false)") from None
    except ValueError:  # an integer of more digits than Python converts (tomllib's own errors are TOMLDecodeError)
        raise UsageError(f"{path}: not a TOML grid (a number of thousands of digits: no option takes one)") from None
    return grid_from(table, options, max_cells, str(path))


def grid_from(table: dict, options: Iterable[str], max_cells: int = MAX_CELLS, where: str = "the grid") -> Grid:
    """The grid of a parsed TOML table (see the module docstring)."""
    allowed = {option.replace("-", "_") for option in options} - set(RESERVED)
    unknown = sorted(set(table) - {"grid", "fixed", "cells"})
    if unknown:
        raise UsageError(f"{where}: unknown table {unknown[0]!r}: a grid has [grid] (the options varied), [fixed] "
                         f"(the options every cell shares) and [[cells]] (options varied together)")
    axes, fixed, together = table.get("grid", {}), table.get("fixed", {}), table.get("cells", [])
    if not isinstance(axes, dict) or not isinstance(fixed, dict):
        raise UsageError(f"{where}: [grid] and [fixed] must be tables of options")
    together = _together(together, where)
    for key in [*axes, *fixed, *(together[0] if together else {})]:
        if key in RESERVED:
            raise UsageError(f"{where}: {key!r} is the sweep's own (each cell's folder is under --out)")
        if key not in allowed:
            raise UsageError(f"{where}: {key!r} is not an option of `tinynas search` (it has "
                             f"{', '.join(sorted(allowed))})")
    tables = {"[grid]": set(axes), "[fixed]": set(fixed), "[[cells]]": set(together[0] if together else {})}
    for (first, one), (second, other) in itertools.combinations(tables.items(), 2):
        if one & other:
            raise UsageError(f"{where}: {sorted(one & other)[0]!r} is in both {first} and {second}: give it in one")
    if not axes and not together:
        raise UsageError(f"{where}: the grid is empty: give [grid] at least one option with a list of values, or "
                         f"[[cells]] entries")
    for key, values in axes.items():
        if not isinstance(values, list) or not values:
            raise UsageError(f"{where}: grid.{key} must be a non-empty list of values, e.g. {key} = [0, 1, 2]")
        for value in values:
            _check_scalar(f"grid.{key}", value, where)
        if len({repr(value) for value in values}) != len(values):
            raise UsageError(f"{where}: grid.{key} names a value twice")
    for key, value in [*(("fixed." + k, v) for k, v in fixed.items()),
                       *(("cells." + k, v) for entry in together for k, v in entry.items())]:
        _check_scalar(key, value, where)
    size = math.prod(len(values) for values in axes.values()) * max(1, len(together))
    if size > max_cells:
        raise UsageError(f"{where}: {size:,} cells, more than {max_cells:,}: narrow the grid or raise --max-cells")
    return Grid({key: list(values) for key, values in axes.items()}, dict(fixed), together)


def _together(entries: Any, where: str) -> list[dict[str, Any]]:
    """The [[cells]] entries, checked: tables of the same options, none twice (their names and values are checked
    with the grid's)."""
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise UsageError(f"{where}: cells must be [[cells]] tables, one per group of options varied together")
    for number, entry in enumerate(entries, 1):
        if not entry:
            raise UsageError(f"{where}: [[cells]] entry {number} is empty")
        if set(entry) != set(entries[0]):
            raise UsageError(f"{where}: [[cells]] entry {number} gives {', '.join(sorted(entry))}, the first "
                             f"{', '.join(sorted(entries[0]))}: every entry gives the same options")
    if len({repr(sorted(entry.items())) for entry in entries}) != len(entries):
        raise UsageError(f"{where}: two [[cells]] entries are the same")
    return [dict(entry) for entry in entries]


def _check_scalar(name: str, value: Any, where: str) -> None:
    if isinstance(value, str):
        bad = next((char for char in value if unicodedata.category(char) in ("Cc", "Zl", "Zp")), None)
        if bad is not None:  # a NUL cannot reach a child's argv; a line break would split the one error line
            raise UsageError(f"{where}: {name} holds the control character {bad!r}: a search option's value is "
                             f"one line of printable text")
        return
    if isinstance(value, bool) or isinstance(value, int):
        return
    if isinstance(value, float) and math.isfinite(value):
        return
    raise UsageError(f"{where}: {name} must be a string, number or true/false, got {echoed(value)}")


def search_arguments(values: dict[str, Any]) -> list[str]:
    """`tinynas search` arguments for a cell's options (true flags given bare, false ones left out)."""
    argv = []
    for key, value in values.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            argv += [flag] if value else []
        else:
            argv += [flag, str(value)]
    return argv
