"""A sweep's state, `DIR/sweep.json`: the grid and each cell's progress, written by the sweep after every change and
read back by `--resume` as untrusted input.

The file decides which searches run again and in which folder, so a damaged or edited one must never be acted on:
`read_state` reads it as every file a user names is read (a regular file, not a link, of at most the size this
grid's state can reach), then checks every cell's type and range the way `tinynas.card_checks` checks a model card.
A cell's index is its place in the list (its folder `cell-NNN` follows from it: no name from the file reaches a
path, and no two cells share a folder), its options are the grid's own (a cell's options are never taken from the
file), and anything else is one line naming the file.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinynas.errors import UsageError
from tinynas.folders import FolderError
from tinynas.modes import CellStatus
from tinynas.sweep.grid import Grid

STATE = "sweep.json"
STATUSES = tuple(CellStatus)
FINISHED = (CellStatus.DONE, CellStatus.FAILED)
MAX_ERROR = 400
"""The longest error a cell records (the search's last error line, cut at 300; Ray's at 200 after a prefix)."""
MAX_SECONDS = 1e9
"""A cell's wall time over all its attempts: 30 years is more than any search; a larger figure is damage."""
MAX_ATTEMPTS = 1_000_000
CELL_ROOM = 8 << 10
"""Bytes a cell's state may take beyond its options (an error of MAX_ERROR characters, each escaped as JSON writes
it, the node, the numbers): with the grid's own size, the most a sweep.json of that grid can hold."""
_NODE = re.compile(r"[0-9a-f]{0,64}")
"""A Ray node's id (56 hex digits), or "" (this machine)."""
_FIELDS = ("index", "values", "status", "seconds", "error", "attempts", "node")


class DamagedState(FolderError):
    """A sweep.json that cannot be trusted: not JSON, not the sweep's layout, a cell of the wrong type or range."""


@dataclass
class Cell:
    index: int
    values: dict[str, Any]
    status: CellStatus = CellStatus.PENDING
    seconds: float = 0.0
    error: str = ""
    attempts: int = 0  # searches started for it (a resume or a Ray retry after a lost node adds one)
    node: str = ""  # the Ray node its last attempt ran on ("" on this machine)

    def folder(self, out: Path) -> Path:
        return out / f"cell-{self.index:03d}"

    def describe(self) -> str:
        return ", ".join(f"{key}={value}" for key, value in self.values.items())


def one_line(text: str, limit: int = 300) -> str:
    """`text` as a cell's error: its control characters (an escape sequence, a NUL of a log) as '?', at most
    `limit` characters. What the sweep records is what `read_state` accepts back."""
    return "".join("?" if unicodedata.category(char) in ("Cc", "Zl", "Zp") else char for char in text[:limit])


def state_text(grid: Grid, cells: list[Cell]) -> str:
    return json.dumps({"grid": grid.to_dict(), "cells": [cell.__dict__ for cell in cells]}, indent=1)


def state_limit(grid: Grid) -> int:
    """The most bytes a sweep.json of `grid` can hold (its fresh state, and room for each cell's progress)."""
    cells = [Cell(index, values) for index, values in enumerate(grid.cells(), 1)]
    return len(state_text(grid, cells).encode()) + len(cells) * CELL_ROOM + (64 << 10)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a sweep's state holds")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _strict(value: Any) -> str:
    """A JSON value's text, types told apart (true is not 1, 1 is not 1.0), for comparing a cell's options."""
    return json.dumps(value, sort_keys=True)


def read_state(out: Path, grid: Grid) -> list[Cell]:
    """The cells of the sweep in `out`, which must have been started with `grid` (UsageError otherwise), from its
    sweep.json checked as described above (DamagedState in one line naming the file)."""
    from firmware_bridge.safe_read import read_regular

    path = out / STATE
    try:
        raw = read_regular(path, state_limit(grid), "sweep state of this grid", follow_links=False)
    except FileNotFoundError:
        raise UsageError(f"{out} holds no sweep to resume (no {STATE}): start it without --resume") from None
    except NotADirectoryError:
        raise UsageError(f"--out {out} is a file, not a sweep's folder") from None
    except OSError as exc:
        raise DamagedState(f"{path}: cannot read the sweep's state ({exc.strerror or exc})") from None

    def damaged(why: str) -> DamagedState:
        return DamagedState(f"{path}: {why}: not the state this sweep wrote (damaged or edited?): restore the file, "
                            f"or start the sweep again in a new --out")

    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise damaged("JSON nested far too deep") from None
    except UnicodeDecodeError:
        raise damaged("not UTF-8 text") from None
    except ValueError as exc:
        raise damaged(f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(data, dict) or sorted(data) != ["cells", "grid"]:
        raise damaged(f"a sweep's state is an object of 'grid' and 'cells', this is {type(data).__name__} "
                      f"{_short(data)}")
    if _strict(data["grid"]) != _strict(grid.to_dict()):
        raise UsageError(f"{out} holds a sweep of another grid: resume it with the grid it was started with, or give "
                         f"another --out")
    expected = grid.cells()
    saved = data["cells"]
    if not isinstance(saved, list) or len(saved) != len(expected):
        count = f"{len(saved)} cell(s)" if isinstance(saved, list) else f"a {type(saved).__name__}"
        raise damaged(f"its 'cells' are {count}, the grid has {len(expected)}")
    cells = []
    for number, (cell, values) in enumerate(zip(saved, expected), 1):
        where = f"cell {number}"
        if not isinstance(cell, dict):
            raise damaged(f"{where} must be an object, got {type(cell).__name__} {_short(cell)}")
        if sorted(cell) != sorted(_FIELDS):
            wrong = sorted(set(cell) ^ set(_FIELDS))[0]
            raise damaged(f"{where} {'lacks' if wrong in _FIELDS else 'has the unknown key'} {_short(wrong)}")
        index = cell["index"]
        if type(index) is not int or index != number:  # its place in the list: the folder cell-NNN follows from it
            raise damaged(f"{where}'s index must be {number} (its place in the list), got {_short(index)}")
        if _strict(cell["values"]) != _strict(values):
            raise damaged(f"{where}'s options are not the grid's ({_short(cell['values'])})")
        if cell["status"] not in STATUSES:
            raise damaged(f"{where}'s status must be one of {', '.join(STATUSES)}, got {_short(cell['status'])}")
        seconds = cell["seconds"]
        if not (type(seconds) in (int, float) and math.isfinite(seconds) and 0 <= seconds <= MAX_SECONDS):
            raise damaged(f"{where}'s seconds must be a wall time of at least 0, got {_short(seconds)}")
        error = cell["error"]
        if not (isinstance(error, str) and len(error) <= MAX_ERROR and error.splitlines() in ([], [error])):
            raise damaged(f"{where}'s error must be one line of at most {MAX_ERROR} characters, got {_short(error)}")
        # Only shown (progress, table): another control character (an escape code recorded before the sweep wrote
        # errors through one_line) is made harmless, not a reason to refuse a sweep's results.
        error = one_line(error, MAX_ERROR)
        attempts = cell["attempts"]
        if not (type(attempts) is int and 0 <= attempts <= MAX_ATTEMPTS):
            raise damaged(f"{where}'s attempts must be a count, got {_short(attempts)}")
        node = cell["node"]
        if not (isinstance(node, str) and _NODE.fullmatch(node)):
            raise damaged(f"{where}'s node must be a Ray node's id (hex digits) or empty, got {_short(node)}")
        cells.append(Cell(number, values, CellStatus(cell["status"]), float(seconds), error, attempts, node))
    for cell in cells:  # what the file names is right; the folders it leads to must be the sweep's own
        folder = cell.folder(out)
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            raise DamagedState(f"{folder}: not the cell's own folder (a symbolic link or a file): the sweep writes "
                               f"only inside {out}; move it aside to resume")
    return cells
