"""The boards a test firmware is built for: one TOML file each, shipped in `tinynas/hil/boards/` or given by path.

A board says how to compile for its core, where its flash and RAM are, which UART the firmware speaks on and which
counter times an inference (DWT's cycle counter where the core has one; a timer otherwise, which under QEMU's
`-icount shift=0` counts instructions). `qemu_machine` names the QEMU machine that emulates it, if any.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from firmware_bridge.safe_read import read_regular
from tinynas.c_names import CNameError, check_plain_name
from tinynas.errors import UsageError

UARTS = ("cmsdk", "nrf")
COUNTERS = {"dwt": "cycles", "nrf-timer": "timer", "cmsdk-timer": "timer"}
"""Each counter and what it counts on a real chip (a timer under QEMU counts instructions: `Board.counts`)."""
MAX_BOARD_BYTES = 64 << 10


class BoardError(UsageError):
    """A board file that cannot be read, or a board name nobody knows."""


@dataclass(frozen=True)
class Board:
    name: str
    description: str
    core: str
    cpu_flags: tuple[str, ...]
    clock_hz: int
    flash_origin: int
    flash_bytes: int
    ram_origin: int
    ram_bytes: int
    stack_reserve: int
    uart: str
    uart_base: int
    baud: int
    counter: str
    counter_hz: int
    uart_tx_pin: int = 0
    uart_rx_pin: int = 0
    qemu_machine: str = ""
    target: str = ""
    """The built-in target of the same chip, whose budget this board's RAM and flash are (may be empty)."""

    @property
    def emulated(self) -> bool:
        return bool(self.qemu_machine)

    def counts(self, under_qemu: bool) -> str:
        """What one count of the counter is: 'cycles', 'timer ticks', or under QEMU 'instructions'."""
        if under_qemu:
            return "instructions"
        return "cycles" if COUNTERS[self.counter] == "cycles" else "timer ticks"


def _number(data: dict, key: str, origin: str, low: int = 0) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < low or value >= 1 << 32:
        raise BoardError(f"{origin}: {key} must be a whole number from {low} to 2^32, got {str(value)[:40]!r}")
    return value


def _from_mapping(data: dict, origin: str) -> Board:
    def text(key: str, default: str | None = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str) or (default is None and not value):
            raise BoardError(f"{origin}: {key} must be text, got {str(value)[:40]!r}")
        return value

    def region(key: str) -> tuple[int, int]:
        part = data.get(key)
        if not isinstance(part, dict):
            raise BoardError(f"{origin}: {key} must be a table {{ origin = ..., length = ... }}")
        return _number(part, "origin", f"{origin} {key}"), _number(part, "length", f"{origin} {key}", 1024)

    try:  # the name is written into hil_config.h, memory.ld and the manifest: plain, or not at all
        check_plain_name(text("name"), f"{origin}: name")
    except CNameError as exc:
        raise BoardError(str(exc)) from None
    flags = data.get("cpu_flags")
    if not isinstance(flags, list) or not flags or not all(
            isinstance(f, str) and re.fullmatch(r"-m[A-Za-z0-9][A-Za-z0-9=.+_-]{0,39}", f) for f in flags):
        raise BoardError(f"{origin}: cpu_flags must be a list of compiler flags starting with -m (e.g. -mcpu=...)")
    uart, counter = text("uart"), text("counter")
    if uart not in UARTS:
        raise BoardError(f"{origin}: uart must be one of {', '.join(UARTS)}, got {uart[:40]!r}")
    if counter not in COUNTERS:
        raise BoardError(f"{origin}: counter must be one of {', '.join(COUNTERS)}, got {counter[:40]!r}")
    (flash_origin, flash_bytes), (ram_origin, ram_bytes) = region("flash"), region("ram")
    board = Board(name=text("name"), description=text("description", ""), core=text("core"), cpu_flags=tuple(flags),
                  clock_hz=_number(data, "clock_hz", origin, 1), flash_origin=flash_origin, flash_bytes=flash_bytes,
                  ram_origin=ram_origin, ram_bytes=ram_bytes, stack_reserve=_number(data, "stack_reserve", origin)
                  if "stack_reserve" in data else 0, uart=uart, uart_base=_number(data, "uart_base", origin),
                  baud=_number(data, "baud", origin, 300) if "baud" in data else 115200, counter=counter,
                  counter_hz=_number(data, "counter_hz", origin, 1),
                  uart_tx_pin=_number(data, "uart_tx_pin", origin) if "uart_tx_pin" in data else 0,
                  uart_rx_pin=_number(data, "uart_rx_pin", origin) if "uart_rx_pin" in data else 0,
                  qemu_machine=text("qemu_machine", ""), target=text("target", ""))
    if board.stack_reserve and board.stack_reserve >= board.ram_bytes:
        raise BoardError(f"{origin}: stack_reserve ({board.stack_reserve}) must be less than the RAM")
    return board


def board_mapping(board: Board) -> dict:
    """The board as its file says it (what `board_from_mapping` reads back): a firmware's manifest keeps it, so a
    firmware built from a board file is checked later without that file."""
    data = {key: value for key, value in asdict(board).items()
            if key not in ("flash_origin", "flash_bytes", "ram_origin", "ram_bytes")}
    data.update(cpu_flags=list(board.cpu_flags), flash={"origin": board.flash_origin, "length": board.flash_bytes},
                ram={"origin": board.ram_origin, "length": board.ram_bytes})
    return data


def board_from_mapping(data: object, origin: str) -> Board:
    """A board from its mapping (a manifest's copy), checked as a board file is: BoardError in one line."""
    if not isinstance(data, dict):
        raise BoardError(f"{origin}: the board must be a table, got {type(data).__name__}")
    return _from_mapping(data, origin)


@functools.cache
def builtin_boards() -> dict[str, Board]:
    """The boards shipped with tinynas, by name."""
    found = {}
    for entry in sorted(resources.files("tinynas.hil").joinpath("boards").iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".toml"):
            board = _from_mapping(tomllib.loads(entry.read_text(encoding="utf-8")), f"built-in board {entry.name}")
            found[board.name] = board
    return found


def get_board(name: str) -> Board:
    """A built-in board by name, or a board file (a path ending in .toml): one line if neither."""
    if name.endswith(".toml"):
        try:
            raw = read_regular(Path(name), MAX_BOARD_BYTES, "board file")
            return _from_mapping(tomllib.loads(raw.decode("utf-8")), f"board file {name}")
        except OSError as exc:
            raise BoardError(f"cannot read board file {name}: {exc.strerror or exc}") from None
        except (UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError) as exc:
            raise BoardError(f"board file {name} is not a TOML text file ({str(exc)[:80]})") from None
    boards = builtin_boards()
    if name not in boards:
        raise BoardError(f"unknown board {name[:60]!r}; built-in boards: {', '.join(boards)} (or give a .toml file)")
    return boards[name]
