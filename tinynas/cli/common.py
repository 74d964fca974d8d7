"""What several command groups share."""

from __future__ import annotations

import argparse


def add_target_flags(parser: argparse.ArgumentParser) -> None:
    """--target and the budget flags that override its figures."""
    parser.add_argument("--target", help="built-in target name or a .toml file")
    parser.add_argument("--ram", help="RAM budget, e.g. 6KiB (overrides the target's)")
    parser.add_argument("--flash", help="flash budget, e.g. 32KiB")
    parser.add_argument("--macs", help="MAC budget, e.g. 1.14M")


RUNTIME_HELP = ("what runs the model on the chip, and so what the budget counts: c (tinynas's generated C: its "
                "static arena, input/output buffers and stack; its tables and code), tflm (TFLite Micro: its arena, "
                "interpreter and stack; the .tflite and its code) or auto (default: c where the target can run "
                "it, which every built-in target can)")
ACCOUNTING_HELP = ("how RAM and flash are counted: chip (default: the whole footprint on the chip), arena "
                   "(TFLite Micro's 32-bit arena and .tflite alone, tinynas's earlier rule) or method (the "
                   "method's tool: the 64-bit host arena rounded up to 512 B; to compare with its figures)")


def add_runtime_flag(parser: argparse.ArgumentParser) -> None:
    """--runtime and --accounting: what runs the model, and how its RAM and flash are counted."""
    from tinynas.cost.runtime import ACCOUNTINGS, DEFAULT_ACCOUNTING, DEFAULT_RUNTIME, RUNTIME_CHOICES

    parser.add_argument("--runtime", default=DEFAULT_RUNTIME, choices=list(RUNTIME_CHOICES), help=RUNTIME_HELP)
    parser.add_argument("--accounting", default=DEFAULT_ACCOUNTING, choices=[str(a) for a in ACCOUNTINGS],
                        help=ACCOUNTING_HELP)
