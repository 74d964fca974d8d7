"""A stand-in for `tinynas search` as a sweep's cell command (`Sweep.command`), for the tests whose subject is the
sweep's bookkeeping (resume, kills, failing cells, the table): it takes the search's own arguments and, for the
cells it stands in for, leaves the folder a real search left (a copy of one real finished search: its journal, card,
model, weights), the journal's data spec set to the cell's `--data` as a search records it. Every other cell runs the
real `tinynas search` (exec'd in this process: the sweep's kill and its `die with parent` reach it unchanged).

    python stand_in_search.py --source DIR [--fake KEY=VALUE ...] [--claim FILE] [--hold FILE] -- SEARCH ARGS

- `--fake KEY=VALUE`: stand in for the cells whose `--KEY` is VALUE (every one given);
- `--claim FILE`: stand in for the first cell started (its seed written to FILE) and every later cell of that seed:
  the cell Ray happened to start first, whichever it is;
- `--hold FILE`: a stand-in waits while FILE exists before it finishes (the test lets it go by removing the file,
  once it has seen what it waits for: no clock decides when a cell ends).

Run as a script (by its path: a Ray worker needs no test package on its path)."""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from pathlib import Path

from tinynas.folders import JOURNAL, SEARCH_LOG
from tinynas.study.journal import Journal, snapshot


def _options(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    own = argparse.ArgumentParser(prog="stand_in_search")
    own.add_argument("--source", required=True)
    own.add_argument("--fake", action="append", default=[])
    own.add_argument("--claim")
    own.add_argument("--hold")
    split = argv.index("--")
    return own.parse_args(argv[:split]), argv[split + 1:]


def _search_option(search: list[str], key: str) -> str | None:
    flag = f"--{key.replace('_', '-')}"
    return search[search.index(flag) + 1] if flag in search else None


def _stands_in(args: argparse.Namespace, search: list[str]) -> bool:
    if args.claim:
        seed = _search_option(search, "seed") or ""
        mine = Path(f"{args.claim}.{os.getpid()}")
        mine.write_text(seed, encoding="utf-8")
        with contextlib.suppress(FileExistsError):  # the first cell started claims the stand-in for its seed, whole
            os.link(mine, args.claim)
        mine.unlink()
        return Path(args.claim).read_text(encoding="utf-8") == seed
    return bool(args.fake) and all(_search_option(search, key) == value
                                   for key, _, value in (fake.partition("=") for fake in args.fake))


def _begin(source: Path, out: Path, data: str) -> None:
    """The source's journal as this cell's, its data spec the cell's: what a search writes first (a sweep then takes
    the cell up with `--resume`). Copied and changed through the journal's owner, then put in place whole."""
    out.mkdir(parents=True, exist_ok=True)
    staging = out / f".{JOURNAL}.stand-in"
    staging.write_bytes(snapshot(source / JOURNAL))
    with Journal(staging) as journal:
        journal.set_meta("data_spec", data)
    for stale in out.glob(f"{JOURNAL}-*"):  # a killed attempt's companions: the journal is replaced whole
        stale.unlink()
    os.replace(staging, out / JOURNAL)


def _finish(source: Path, out: Path) -> None:
    """The source's other files (card, model, weights, report) copied into `out`: what a search leaves at its end."""
    for path in sorted(source.rglob("*")):
        name = path.relative_to(source)
        if path.is_file() and not name.parts[0].startswith(JOURNAL) and name.name != SEARCH_LOG:
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, out / name)


def main(argv: list[str]) -> int:
    args, search = _options(argv)
    if not _stands_in(args, search):
        os.execv(sys.executable, [sys.executable, "-m", "tinynas.cli", "search", *search])
    out = Path(_search_option(search, "out") or ".")
    print(f"stand-in search of {out.name}: {' '.join(search)}", flush=True)
    _begin(Path(args.source), out, _search_option(search, "data") or "")
    while args.hold and os.path.exists(args.hold):
        time.sleep(0.1)
    _finish(Path(args.source), out)
    print(f"stand-in search of {out.name}: finished, a copy of {args.source}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
