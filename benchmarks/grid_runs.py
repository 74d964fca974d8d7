"""The benchmarks' searches as sweeps (`tinynas.sweep`, its Python API): each a `tinynas search` in its own folder
under a work folder, resumed there when the benchmark is run again on the same folder; the data a benchmark builds
(a subset, a data set drawn per seed) written once as .npz for its cells to read, as a user's would be.

A benchmark then reads each cell's folder (card, journal, model) as it read its own `Study` before: the searches
themselves are the product's, run as a user runs them, one process each.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tinynas.cli.sweeping import search_options  # noqa: E402
from tinynas.sweep.grid import grid_from  # noqa: E402
from tinynas.sweep.run import STATE, Cell, Sweep  # noqa: E402

MAX_CELLS = 10_000
"""A benchmark's grid is the benchmark's own choice: no cap but a sanity one."""


def npz_spec(windows, path: Path) -> str:
    """`windows` written to `path` (once: a resumed search checks its data's digest) as a `npz:` data spec."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        windows.save(path)
    return f"npz:{path}"


def searched(out: Path, table: dict, parallel: int = 1, progress: Callable[[str], None] = print) -> list[
        tuple[Cell, Path]]:
    """Run the grid `table` ({"grid": ..., "fixed": ..., "cells": [...]}) as a sweep in `out` (resumed when one was
    begun there); each cell with its folder, every one done, else SystemExit naming the first that failed."""
    grid = grid_from(table, search_options()[1], MAX_CELLS, where=f"the grid of {out.name}")
    sweep = Sweep(out, grid, resume=(out / STATE).exists())
    sweep.run(parallel=parallel, progress=progress)
    for cell in sweep.cells:
        if cell.status != "done":
            raise SystemExit(f"{cell.describe()}: {cell.error or cell.status} (the search's log: "
                             f"{cell.folder(sweep.out)}/search.log)")
    return [(cell, cell.folder(sweep.out)) for cell in sweep.cells]
