"""Commands for the model on a chip: `firmware` (write and build the test firmware) and `hil` (check it there)."""

from __future__ import annotations

import argparse
import json
import logging
import tempfile
import time
from pathlib import Path

import numpy as np
import serial

from tinynas.card import read_card, record_section
from tinynas.data.preprocess import Preprocessing
from tinynas.errors import UsageError
from tinynas.hil.board import get_board
from tinynas.hil.build import ToolchainMissing, build_firmware, manifest_board, write_firmware
from tinynas.hil.check import check_on_board, folder_test_groups, folder_test_windows
from tinynas.hil.protocol import DeviceError, HilLink
from tinynas.hil.qemu import emulated
from tinynas.options import check_positive, check_range

log = logging.getLogger("tinynas")

MAX_RUNS = 1000
"""Counted (and warm-up) calls per window: the firmware's own limit, said here first."""


def register(sub) -> None:
    """Add these commands to the `tinynas` parser's subcommands."""
    firmware = sub.add_parser("firmware", help="write (and build) a test firmware of a model for a board")
    firmware.add_argument("model", help="a model folder (a search's --out)")
    firmware.add_argument("--board", required=True,
                          help="mps2-an386 or microbit (emulated by QEMU), nrf52840-dk, or a board .toml file")
    firmware.add_argument("--out", required=True, help="folder for the firmware's sources and image")
    firmware.add_argument("--no-build", action="store_true", help="write the sources only")
    firmware.add_argument("--json", action="store_true")
    firmware.set_defaults(func=_cmd_firmware)

    hil = sub.add_parser("hil", help="run a model's test windows on a board and compare with the host")
    hil.add_argument("model", help="a model folder (a search's --out)")
    where = hil.add_mutually_exclusive_group(required=True)
    where.add_argument("--qemu", metavar="BOARD", help="build the firmware and run it on QEMU's emulation of BOARD")
    where.add_argument("--port", help="the serial port of a board that runs the model's firmware (or socket://)")
    hil.add_argument("--firmware", help="the firmware folder `tinynas firmware` wrote (needed with --port; with "
                                        "--qemu it is built when not given)")
    hil.add_argument("--data", help="windows to check on (default: the model folder's test windows)")
    hil.add_argument("--runs", type=int, default=1, help="counted calls per window (default 1)")
    hil.add_argument("--warmup", type=int, default=0, help="calls before the counted ones (default 0)")
    hil.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for each answer (default 30)")
    hil.add_argument("--json", action="store_true")
    hil.set_defaults(func=_cmd_hil)


def _cmd_firmware(args: argparse.Namespace) -> int:

    board = get_board(args.board)
    firmware = write_firmware(args.model, board, args.out)
    note = ""
    if not args.no_build:
        try:
            firmware = build_firmware(firmware, board)
        except ToolchainMissing as exc:
            note = str(exc)
    if args.json:
        print(json.dumps({**firmware.to_dict(), "note": note}, indent=2))
        return 0
    print(f"test firmware of model {firmware.model_hash} for {board.name} ({board.core}) in {firmware.folder}/")
    if firmware.image is not None and firmware.model is not None:
        print(f"  firmware.elf, firmware.hex: flash {firmware.image.flash:,} B, static RAM {firmware.image.ram:,} B "
              f"(the model: {firmware.model.flash:,} B and {firmware.model.ram:,} B)")
    elif note:
        print(f"  not built: {note}")
    if board.emulated:
        print(f"  check it: tinynas hil {args.model} --qemu {board.name} --firmware {firmware.folder}")
    else:
        print(f"  flash firmware.hex to the board, then: tinynas hil {args.model} --port /dev/ttyACM0 "
              f"--firmware {firmware.folder}")
    return 0


def _windows(args: argparse.Namespace, card) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """The float windows, their labels (indices into the model's classes) and recordings to check on, and what they
    are."""
    preprocessing = Preprocessing.from_card(card.to_dict())
    if args.data:
        from tinynas.data.spec import load_windows

        windows = load_windows(args.data)
        preprocessing.check(windows)
        return windows.x, preprocessing.labels_for(windows), windows.groups, f"{len(windows)} windows of {args.data}"

    x, labels = folder_test_windows(args.model, card)
    return x, labels, folder_test_groups(args.model), f"the {len(x)} test windows of {args.model}"


def _cmd_hil(args: argparse.Namespace) -> int:
    check_range("--runs", args.runs, 1, MAX_RUNS)
    check_range("--warmup", args.warmup, 0, MAX_RUNS)
    check_positive("--timeout", args.timeout, " (seconds to wait for each answer)")
    given = Path(args.firmware) if args.firmware else None
    # The board the firmware was built for, from its manifest (a board file's too): one line if not a firmware folder.
    built_for = manifest_board(given) if given is not None else None
    if args.port and given is None:
        raise UsageError("--port needs --firmware FOLDER: the folder `tinynas firmware` wrote for the board (its "
                         "board, model and build are checked against the device)")
    board = get_board(args.qemu) if args.qemu else built_for
    assert board is not None  # --qemu or --port (which needs --firmware): argparse and the line above
    if built_for is not None and built_for.name != board.name:
        raise UsageError(f"--firmware {given} was built for {built_for.name}, not {board.name}")
    if args.qemu and not board.emulated:
        raise UsageError(f"board {board.name} has no emulator (no qemu_machine in its file): flash the firmware of "
                         f"`tinynas firmware` to it and use --port")
    card = read_card(args.model)  # before any port is opened or anything built: one line if it is not a model
    windows, labels, groups, what = _windows(args, card)
    with tempfile.TemporaryDirectory(prefix="tinynas-firmware-") as scratch:
        folder = given or Path(scratch)
        if args.qemu:
            if not (folder / "firmware.elf").is_file():
                log.info("building the test firmware for %s", board.name)
                build_firmware(write_firmware(args.model, board, folder, emulated=True), board)
            with emulated(board, folder / "firmware.elf") as pty:  # QEMU gone is the board gone: no replug
                report = _check(args, board, folder, pty, windows, labels, groups, what, replug=False)
        else:
            report = _check(args, board, folder, args.port, windows, labels, groups, what)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.text())
    if report.checked:  # the card keeps the last check: the page shows it beside the model
        record_section(args.model, "hil", report.card_section(time.time()))
    if report.stopped:
        raise UsageError(f"stopped after {report.checked} of {report.windows} windows: {report.stopped}")
    return 0


def _check(args: argparse.Namespace, board, folder: Path, port_name: str, windows: np.ndarray, labels: np.ndarray,
           groups: np.ndarray | None, what: str, replug: bool = True):
    """The check over `port_name`; with `replug`, a port that goes away is waited for (--timeout) and opened again."""
    ports: list = []

    def open_link() -> HilLink:
        try:
            port = serial.serial_for_url(port_name, baudrate=board.baud, timeout=0.5)
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot open {port_name}: {str(exc)[:120]}") from None
        ports.append(port)
        return HilLink(port, port_name, timeout=args.timeout)

    def reopen() -> HilLink:
        for port in ports:
            port.close()
        deadline = time.monotonic() + args.timeout
        log.info("waiting up to %g s for %s to come back", args.timeout, port_name)
        while True:
            try:
                return open_link()
            except UsageError:
                if time.monotonic() > deadline:
                    raise DeviceError(f"{port_name} did not come back within {args.timeout:g} s") from None
                time.sleep(0.5)

    try:
        return check_on_board(args.model, folder, board, open_link(), windows, labels, runs=args.runs,
                              warmup=args.warmup, progress=log.info, reopen=reopen if replug else None, what=what,
                              groups=groups)
    finally:
        for port in ports:
            port.close()
