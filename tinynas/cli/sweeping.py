"""`tinynas sweep`: a grid of searches, each in its own folder, and one table of them."""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from tinynas.cli import searching
from tinynas.errors import TinynasError, UsageError
from tinynas.folders import check_out_dir
from tinynas.sweep import ray_engine
from tinynas.sweep.grid import MAX_CELLS, Grid, load_grid, search_arguments
from tinynas.sweep.run import Sweep
from tinynas.sweep.table import write_tables
from tinynas.units import echoed


def register(sub) -> None:
    """Add `sweep` to the `tinynas` parser's subcommands."""
    sweep = sub.add_parser("sweep", help="a grid of searches (GRID.toml), each in its own folder under --out, "
                                          "resumable, and one table of them")
    sweep.add_argument("grid", help="the grid: a TOML file with [grid] (the search options varied, each a list), "
                                    "[fixed] (those every cell shares) and [[cells]] (options varied together)")
    sweep.add_argument("--out", required=True, help="the sweep's folder: a cell-NNN search folder per cell, "
                                                    "sweep.json (its state), sweep.md and sweep.csv")
    sweep.add_argument("--resume", action="store_true", help="take up the sweep in --out (same grid)")
    sweep.add_argument("--parallel", type=int, default=1,
                       help="cells searched at once (default 1: each search uses this machine's workers)")
    sweep.add_argument("--engine", default="local", choices=["local", "ray"],
                       help="local: child processes on this machine (default); ray: one Ray task per cell on any "
                            "node of a Ray cluster (the tinynas[ray] extra)")
    sweep.add_argument("--address", help="with --engine ray: the cluster's HOST:PORT (default: a Ray started on "
                                         "this machine for the sweep)")
    sweep.add_argument("--max-cells", type=int, default=MAX_CELLS,
                       help=f"refuse a grid of more cells than this (default {MAX_CELLS})")
    sweep.add_argument("--goal", type=float,
                       help="an int8 accuracy (0-1): the table names the cheapest target reaching it")
    sweep.set_defaults(func=_cmd_sweep)


class _Refusing(argparse.ArgumentParser):
    """The search's own parser, whose complaints about a cell are raised, not printed (and which never exits: no
    cell's value can make it print its help). It keeps each option's action as it is added (`options`): argparse
    has no public list of them."""

    def __init__(self, *args, **kwargs) -> None:
        self.options: dict[str, argparse.Action] = {}  # first: argparse's __init__ adds --help
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.options[action.dest] = action
        return action

    def error(self, message: str) -> NoReturn:
        raise UsageError(message)

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise UsageError((message or "`tinynas search` would have stopped here").strip())


class _Commands:
    """Stands in for argparse's subcommands to `searching.register`: keeps each command's parser, a refusing one."""

    def __init__(self) -> None:
        self.parsers: dict[str, _Refusing] = {}

    def add_parser(self, name: str, **kwargs) -> _Refusing:
        self.parsers[name] = _Refusing(prog=f"tinynas {name}", description=kwargs.get("description"))
        return self.parsers[name]


def search_options() -> tuple[_Refusing, list[str]]:
    """`tinynas search`'s own parser (raising, not printing) and its options' names (its defaults' keys)."""
    commands = _Commands()
    searching.register(commands)
    search = commands.parsers["search"]
    names = [name for name in vars(search.parse_args(["--data", "-", "--out", "-"])) if name != "func"]
    return search, names


def _value_refusal(action: argparse.Action, value: Any) -> str | None:
    """Why `value` (from the grid) cannot be given to the search's option `action`, or None.

    A cell's options become a child's command line (`search_arguments`): a flag takes true or false, not a word that
    would be read as the next argument; a value that starts with '-' would be read as an option (`"--help"` printed
    the search's help and ended the check); a whole-number option takes a TOML integer."""
    flag = action.option_strings[0]
    if action.nargs == 0:  # store_true: given bare or left out
        return None if isinstance(value, bool) else f"{flag} is a flag: give true or false"
    if isinstance(value, bool):
        return f"{flag} takes a value, not true/false"
    if action.type is int and not isinstance(value, int):
        return f"{flag} takes a whole number (a TOML integer, not in quotes)"
    if action.type is float and not isinstance(value, (int, float)):
        return f"{flag} takes a number (not in quotes)"
    if isinstance(value, str) and value.startswith("-"):
        return f"a value that starts with '-' would be read as an option of `tinynas search`, not as {flag}'s"
    return None


def _shown(values: dict[str, Any]) -> str:
    """A cell's options for a one-line message (each value cut short)."""
    return ", ".join(f"{key}={str(value)[:40] + '...' if len(str(value)) > 40 else value}"
                     for key, value in values.items())


def check_cells(grid: Grid, parser: _Refusing, where: str, cores_here: bool = True) -> None:
    """Every cell's options through the search's own checks before any cell runs: each value's type for its option,
    argparse's choices, then the ranges, budget and target `tinynas search` checks before it reads its data
    (`searching.check_search_options`, the one table of `tinynas.options`). One line naming the cell and the key;
    `cores_here=False` (Ray: the cells run on other machines) leaves the cores' ceiling to each node's search."""
    actions = parser.options
    for number, values in enumerate(grid.cells(), 1):
        options = {**grid.fixed, **values}
        cell = f"{where}: cell {number} ({_shown(values)})"
        for key, value in options.items():
            refusal = _value_refusal(actions[key], value)
            if refusal is not None:
                table = "[grid]" if key in grid.axes else "[fixed]" if key in grid.fixed else "[[cells]]"
                shown = str(value).lower() if isinstance(value, bool) else echoed(value)  # as the grid writes it
                raise UsageError(f"{cell}: {table} {key} = {shown}: {refusal}")
        try:
            checked = parser.parse_args([*search_arguments(options), "--out", "-"])
            searching.check_search_options(checked, cores_here=cores_here)
        except TinynasError as exc:  # UsageError, TargetError, a target file's one line
            raise UsageError(f"{cell}: {exc}") from None


def _cmd_sweep(args: argparse.Namespace) -> int:
    if not 1 <= args.parallel <= 64:
        raise UsageError(f"--parallel must be 1 to 64 cells at once, got {args.parallel}")
    if not 1 <= args.max_cells <= 100_000:
        raise UsageError(f"--max-cells must be 1 to 100000, got {args.max_cells}")
    if args.goal is not None and not 0 < args.goal <= 1:
        raise UsageError(f"--goal is an accuracy between 0 and 1, got {args.goal:g}")
    if args.engine == "ray" and args.parallel != 1:
        raise UsageError("--parallel is the local engine's: with --engine ray the cluster's CPUs decide how many "
                         "cells run at once")
    if args.address is not None and args.engine != "ray":
        raise UsageError("--address is a Ray cluster's: give it with --engine ray")
    if args.engine == "ray" and args.address not in (None, "auto", "local"):
        ray_engine.check_address_text(args.address)  # as text first: a typo is one line before Ray is even imported
    if args.engine == "ray":
        ray_engine.import_ray()  # before anything is written: one line when Ray is not installed
        ray_engine.check_address(args.address)  # a head that answers, within seconds
    check_out_dir(args.out)
    parser, names = search_options()
    grid = load_grid(args.grid, names, args.max_cells)
    # Every cell's options through the search's own checks first: a typo fails here, not in cell 14 of 15.
    check_cells(grid, parser, args.grid, cores_here=args.engine == "local")
    sweep = Sweep(args.out, grid, resume=args.resume)
    if args.engine == "ray":
        ray_engine.run_on_ray(sweep, args.address)
    else:
        sweep.run(parallel=args.parallel)
    print(write_tables(sweep, goal=args.goal), end="")
    counts = sweep.counts()
    return 0 if counts["failed"] == 0 else 1
