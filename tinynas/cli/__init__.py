"""`tinynas ...`: a thin command-line face over the library."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import NoReturn

from tinynas import __version__
from tinynas.cli import device, hil, models, searching, simulate, sweeping
from tinynas.errors import crash_log, user_message
from tinynas.interrupts import sigterm_as_interrupt

log = logging.getLogger("tinynas")


class _Parser(argparse.ArgumentParser):
    """argparse with its own errors (unknown option, missing value, not a number) as one line too."""

    def error(self, message: str) -> NoReturn:  # argparse's default prints the whole usage block
        # A word of argv that is thousands of characters long (a number pasted 4,000 digits deep) is said by its
        # length: the line stays one line a person can read.
        text = " ".join(word if len(word) <= 80 else f"{word[:40]}... ({len(word)} characters)"
                        for word in message.split())
        self.exit(2, f"tinynas: error: {text} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `tinynas` command."""
    parser = _Parser(prog="tinynas", description=__doc__)
    parser.add_argument("--version", action="version", version=f"tinynas {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (models, searching, device, simulate, hil, sweeping):
        group.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `tinynas` console script."""
    args = build_parser().parse_args(argv)
    # The service's log is read after the fact (a file, or journald without its own stamps when run by hand): each
    # line carries its local time. Interactive commands print bare lines.
    service = args.command == "service" and getattr(args, "service_command", "") == "run"
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(message)s" if service else "%(message)s",
                        datefmt="%Y-%m-%dT%H:%M:%S%z", stream=sys.stderr)
    journaled = args.command in ("search", "demo", "sweep")  # only these keep a journal to resume from
    try:
        with sigterm_as_interrupt():  # systemd and kill stop like Ctrl-C, journal intact
            code = args.func(args)
            sys.stdout.flush()  # inside the try: a reader gone before the last block is a closed pipe, said below
            return code
    except BrokenPipeError:
        # The reader went away (`tinynas service status | head -3`): it had what it wanted. Quiet, and stdout pointed
        # at /dev/null so that Python's own flush at exit does not complain either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("tinynas: interrupted" + ("; the journal is intact (continue with --resume)" if journaled else ""),
              file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the one place that turns any failure into one line
        message = user_message(exc, resumable=journaled)
        if message is not None:
            print(f"tinynas: error: {message}", file=sys.stderr)
            return 2
        log_path = crash_log(exc)
        where = f"; traceback in {log_path}" if log_path else ""
        print(f"tinynas: internal error: {type(exc).__name__}: {exc} (a bug: please report it{where})",
              file=sys.stderr)
        return 1
