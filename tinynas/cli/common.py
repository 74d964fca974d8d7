"""What several command groups share."""

from __future__ import annotations

import argparse


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """--target and the budget flags that override its figures."""
    parser.add_argument("--target", help="built-in target name or a .toml file")
    parser.add_argument("--ram", help="RAM budget, e.g. 6KiB (overrides the target's)")
    parser.add_argument("--flash", help="flash budget, e.g. 32KiB")
    parser.add_argument("--macs", help="MAC budget, e.g. 1.14M")


RUNTIME_HELP = ("budget RAM and flash for TFLite Micro (default) or for tinynas's generated C runtime "
                "(c: its static arena, input/output buffers and stack; its tables and code)")


def add_runtime_flag(parser: argparse.ArgumentParser) -> None:
    """--runtime: which runtime's RAM and flash the budget counts."""
    from tinynas.cost.estimate import RUNTIMES

    parser.add_argument("--runtime", default="tflm", choices=list(RUNTIMES), help=RUNTIME_HELP)
