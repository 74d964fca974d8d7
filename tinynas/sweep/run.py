"""Run a sweep's cells, each a normal `tinynas search` in its own folder, and keep their state on disk.

`DIR/sweep.json` holds the grid and each cell's state (pending, running, done, failed) and is rewritten
atomically after every change, so a driver killed at any moment is `--resume`d: done and failed cells are kept, a
cell that was running is searched again with the search's own `--resume` (its journal keeps the candidates that
finished). A cell whose search fails is recorded with its one-line error and the sweep goes on. The local engine
runs the cells here, `parallel` at a time, each a child process (`python -m tinynas.cli search`): a cell can no more
take the sweep down than a user's search can take their shell.

The program a cell runs is `Sweep.command` (None: the real search, unless given): the one seam between the
sweep's bookkeeping and the search. A test of that bookkeeping (resume, kills, failing cells, the table) gives a
cheap stand-in that takes the search's arguments and leaves a search's folder, and keeps one real cell.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tinynas.atomic import atomic_write_text
from tinynas.errors import UsageError
from tinynas.folders import JOURNAL, SEARCH_LOG
from tinynas.interrupts import die_with_parent
from tinynas.modes import CellStatus
from tinynas.sweep.grid import Grid, search_arguments
from tinynas.sweep.state import FINISHED, STATE, Cell, one_line, read_state, state_text

log = logging.getLogger(__name__)
__all__ = ["Cell", "FINISHED", "STATE", "Sweep", "cell_argv", "last_error"]  # Cell and the state's names: .state


def cell_argv(command: Sequence[str] | None, options: dict[str, Any], folder: Path | str, resume: bool) -> list[str]:
    """The command line of one cell's search (either engine): `command` (None: `tinynas search` by this
    interpreter, resolved where the cell runs: a Ray node's Python need not live where the driver's does), the
    cell's options as `tinynas search`'s, its folder and `--resume` when it takes up a journal."""
    program = [sys.executable, "-m", "tinynas.cli", "search"] if command is None else list(command)
    return [*program, *search_arguments(options), "--out", str(folder), *(["--resume"] if resume else [])]


class Sweep:
    """The cells of `grid` under `out`; `resume` takes up a sweep begun there (with the same grid).

    `command` is the program each cell runs, given `tinynas search`'s arguments (the cell's options, `--out FOLDER`,
    `--resume`); it must leave a search's folder (journal, card) and exit 0, or exit non-zero with its one-line
    `tinynas: error:` in its output. None: the class's `command`, itself None (the real `tinynas search`) unless a
    program sets it for every sweep it makes (a test's driver of the real `tinynas sweep`). Both engines run it."""

    command: tuple[str, ...] | None = None

    def __init__(self, out: str | Path, grid: Grid, resume: bool = False,
                 command: Sequence[str] | None = None) -> None:
        self.out, self.grid = Path(out), grid
        chosen = type(self).command if command is None else command
        self.command = None if chosen is None else tuple(chosen)
        if resume:
            self.cells = read_state(self.out, grid)  # checked whole before anything is written or run
        else:
            if self.out.exists() and any(self.out.iterdir()):
                raise UsageError(f"{self.out} is not empty: give a new folder, or --resume the sweep in it")
            self.cells = [Cell(index, values) for index, values in enumerate(grid.cells(), 1)]
        self.out.mkdir(parents=True, exist_ok=True)
        self.save()

    def save(self) -> None:
        atomic_write_text(self.out / STATE, state_text(self.grid, self.cells))

    def counts(self) -> dict[str, int]:
        return {status: sum(cell.status == status for cell in self.cells)
                for status in (CellStatus.DONE, CellStatus.FAILED, CellStatus.RUNNING, CellStatus.PENDING)}

    def unfinished(self) -> list[Cell]:
        return [cell for cell in self.cells if cell.status not in FINISHED]

    def finish(self, cell: Cell, status: CellStatus, error: str, left: int, at_once: int) -> str:
        """Record a cell's end (saved at once) and say it, with the counts and the time left at the mean so far."""
        cell.status, cell.error = status, error
        self.save()
        counts = self.counts()
        done = [other.seconds for other in self.cells if other.status == CellStatus.DONE]
        mean = sum(done) / len(done) if done else 0.0
        eta = f", about {_minutes(mean * left / max(1, at_once))} left" if mean and left else ""
        what = "done" if status == CellStatus.DONE else f"failed: {error}"
        return (f"cell {cell.index}/{len(self.cells)} {what} ({cell.describe()}, {cell.seconds:.0f} s) | "
                f"{counts['done']} done, {counts['failed']} failed, {left} left{eta}")

    def run(self, parallel: int = 1, progress: Callable[[str], None] = log.info) -> None:
        """Search every cell not finished yet, `parallel` at a time; Ctrl-C stops the running ones (journals whole:
        the search stops as on its own Ctrl-C) and leaves them to `--resume`."""
        waiting = self.unfinished()
        running: dict[int, tuple[Cell, subprocess.Popen, float, Any]] = {}
        try:
            while waiting or running:
                while waiting and len(running) < parallel:
                    cell = waiting.pop(0)
                    running[cell.index] = self._start(cell)
                    progress(f"cell {cell.index}/{len(self.cells)} started ({cell.describe()})")
                time.sleep(0.2)
                for index, (cell, process, started, log_file) in list(running.items()):
                    if process.poll() is None:
                        continue
                    del running[index]
                    log_file.close()
                    cell.seconds = round(cell.seconds + time.monotonic() - started, 1)
                    status, error = ((CellStatus.DONE, "") if process.returncode == 0 else
                                     (CellStatus.FAILED, last_error(cell.folder(self.out) / SEARCH_LOG)))
                    progress(self.finish(cell, status, error, left=len(waiting) + len(running), at_once=parallel))
        except KeyboardInterrupt:
            for _cell, process, _started, _log in running.values():
                process.send_signal(signal.SIGINT)
            for cell, process, started, log_file in running.values():
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                log_file.close()
                cell.seconds = round(cell.seconds + time.monotonic() - started, 1)
                cell.status = CellStatus.RUNNING  # searched again on --resume, from its journal
            self.save()
            raise

    def _start(self, cell: Cell) -> tuple[Cell, subprocess.Popen, float, Any]:
        folder = cell.folder(self.out)
        resume = (folder / JOURNAL).exists()
        argv = cell_argv(self.command, {**self.grid.fixed, **cell.values}, folder, resume)
        folder.mkdir(parents=True, exist_ok=True)
        log_file = open(folder / SEARCH_LOG, "a", encoding="utf-8")
        # Its own session: a Ctrl-C at the terminal reaches the sweep, which stops its cells itself. And it dies with
        # the sweep (a driver killed outright): a resumed sweep must never race an orphan on the cell's journal,
        # which a kill leaves whole (the search's journal is made for power cuts).
        process = subprocess.Popen(argv, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True, preexec_fn=die_with_parent,
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
        cell.status, cell.attempts = CellStatus.RUNNING, cell.attempts + 1
        self.save()
        return cell, process, time.monotonic(), log_file


def last_error(log_path: Path) -> str:
    """The search's one-line error, from its log (the last `tinynas: error:` line, else its last line)."""
    try:
        lines = [line.strip() for line in log_path.read_text(encoding="utf-8", errors="replace").splitlines()
                 if line.strip()]
    except OSError:
        return "the search left no log"
    errors = [line for line in lines if line.startswith("tinynas: error:")]
    return one_line((errors or lines or ["the search ended without a word"])[-1])


def _minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
