"""A searched model's firmware on both emulated cores, checked by `tinynas hil --qemu` as a user runs it: every test
window's outputs identical to the host's C runtime, the stack and the image within the cost model's figures, the
instruction counts the same run to run. And the faults of a real link: another model on the board, a board reset
or unplugged in the middle of a run."""

import json
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import serial

from devtools.machine_speed import slowdown
from tinynas.card import read_card
from tinynas.data.npz import load_npz
from tinynas.data.preprocess import Preprocessing
from tinynas.hil.board import get_board
from tinynas.hil.build import build_firmware, write_firmware
from tinynas.hil.check import check_on_board
from tinynas.hil.protocol import HilLink
from tinynas.hil.qemu import emulated

pytestmark = pytest.mark.usefixtures("arm_toolchain")


def _tinynas(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tinynas.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("board", ["mps2-an386", "microbit"])
def test_every_test_window_on_the_emulated_chip_is_the_host_c_runtimes_answer(hil_model, tmp_path, board):
    hil_model = Path(shutil.copytree(hil_model, tmp_path / "model"))  # the card records the check: a copy
    firmware = tmp_path / "fw"
    built = _tinynas("firmware", str(hil_model), "--board", board, "--out", str(firmware), "--json")
    assert built.returncode == 0, built.stderr
    image = json.loads(built.stdout)
    first = _tinynas("hil", str(hil_model), "--qemu", board, "--firmware", str(firmware), "--runs", "2", "--json")
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)
    windows = report["windows"]
    assert windows > 0 and report["checked"] == windows and not report["stopped"]
    assert report["identical_to_host"] == windows  # integer C99: bit for bit, or the chip is wrong
    time = report["time"]  # the time model's estimate for this core against what QEMU counted
    assert time["counts"] == "instructions" and 0.85 <= time["ratio"] <= 1.15, time
    assert time["seconds"] > 0 and time["budget_seconds"] is None and time["keeps_budget"] is None
    if report["identical_to_tflm"] is not None:
        assert report["identical_to_tflm"] == windows
    card = read_card(hil_model)
    cost = card.cost()
    assert 0 < report["stack_bytes"] <= cost.stack_bytes  # the cost model's stack covers the measured one
    assert image["model"]["data"] + image["model"]["bss"] <= cost.c_arena_bytes  # the arena is the model's RAM
    assert image["model"]["text"] + image["model"]["rodata"] <= cost.flash_bytes  # tables and code
    again = json.loads(_tinynas("hil", str(hil_model), "--qemu", board, "--firmware", str(firmware), "--runs", "2",
                                "--json").stdout)
    assert again["per_inference"] == report["per_inference"] and report["counts"] == "instructions"
    recorded = read_card(hil_model).hil  # the last check, as the page shows it beside the served model
    assert recorded["board"] == board and recorded["identical_to_host"] == windows == recorded["checked"]
    assert recorded["median"] == round(again["per_inference"]["median"], 1)


def test_a_board_holding_another_model_is_refused_before_any_window(hil_model, tmp_path):
    firmware = tmp_path / "fw"
    assert _tinynas("firmware", str(hil_model), "--board", "microbit", "--out", str(firmware)).returncode == 0
    other = tmp_path / "other"
    shutil.copytree(hil_model, other)
    source = other / read_card(other).c_runtime["source"]
    source.write_text(source.read_text() + "/* exported again */\n")  # another model as far as the chip can tell
    run = _tinynas("hil", str(other), "--qemu", "microbit", "--firmware", str(firmware))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("tinynas: error: ") and "the board holds model" in line and "flash the firmware" in line


class _Faulty(HilLink):
    """The real link, with a fault made on the emulated board (through QEMU's monitor) before window `at`."""

    def __init__(self, port, name, timeout, fault):
        super().__init__(port, name, timeout)
        self.calls, self.fault = 0, fault

    def infer(self, window, runs=1, warmup=0, timeout=None):
        self.calls += 1
        if self.calls == 3:
            self.fault()
        return super().infer(window, runs, warmup, timeout)


def _monitor(path: Path, command: str) -> None:
    with socket.socket(socket.AF_UNIX) as control:
        control.connect(str(path))
        control.sendall(command.encode() + b"\n")
        time.sleep(0.2)


def _microbit(hil_model, tmp_path):
    """The micro:bit, the model's firmware built for it, and the model folder's windows with their labels."""
    board = get_board("microbit")
    firmware = build_firmware(write_firmware(hil_model, board, tmp_path / "fw"), board)
    windows = load_npz(hil_model / "windows.npz")
    labels = Preprocessing.from_card(read_card(hil_model).to_dict()).labels_for(windows)
    return board, firmware, windows, labels


def _run_with_fault(hil_model, tmp_path, fault, reopen_after=None):
    """The first 6 test windows on an emulated micro:bit, `fault` sent to QEMU's monitor before window 3."""
    board, firmware, windows, labels = _microbit(hil_model, tmp_path)
    socket_path = tmp_path / "monitor.sock"
    with emulated(board, firmware.elf, monitor=socket_path) as pty:
        with serial.Serial(pty, board.baud, timeout=0.5) as port:
            link = _Faulty(port, pty, 10 * slowdown(), lambda: _monitor(socket_path, fault))
            return check_on_board(hil_model, firmware.folder, board, link, windows.x[:6], labels[:6])


def test_a_board_reset_in_the_middle_is_resumed_at_the_same_window(hil_model, tmp_path):
    report = _run_with_fault(hil_model, tmp_path, "system_reset")
    assert report.checked == 6 and not report.stopped and report.identical_to_host == 6
    assert len(report.resumed) == 1 and report.resumed[0].startswith("window 3:") and "started again" in \
        report.resumed[0]


def test_a_board_gone_for_good_stops_the_run_saying_how_many_windows_were_checked(hil_model, tmp_path):
    report = _run_with_fault(hil_model, tmp_path, "quit")  # QEMU gone: the board unplugged, with no replug
    assert report.checked == 2 and "the port went away during" in report.stopped and "\n" not in report.stopped


def test_a_board_unplugged_and_plugged_in_again_is_resumed(hil_model, tmp_path):
    """The port is a stable name (as udev's /dev/serial/by-id/... is) for whichever pty the board is on: the board
    is pulled (QEMU ends) before window 3 and comes back (a new QEMU, booting afresh) a second later."""
    board, firmware, windows, labels = _microbit(hil_model, tmp_path)
    name = tmp_path / "ttyACM0"
    boards = []

    def plug() -> None:
        boards.append(emulated(board, firmware.elf))
        pty = boards[-1].__enter__()
        name.unlink(missing_ok=True)
        name.symlink_to(pty)

    def unplug_then_replug() -> None:
        boards[-1].__exit__(None, None, None)
        name.unlink()
        threading.Timer(1.0, plug).start()

    opened = []

    def reopen() -> HilLink:
        deadline = time.monotonic() + 30 * slowdown()
        while not name.exists():
            assert time.monotonic() < deadline, "the board did not come back"
            time.sleep(0.2)
        opened.append(serial.Serial(str(name), board.baud, timeout=0.5))
        return HilLink(opened[-1], str(name), 10 * slowdown())

    plug()
    try:
        opened.append(serial.Serial(str(name), board.baud, timeout=0.5))
        link = _Faulty(opened[-1], str(name), 10 * slowdown(), unplug_then_replug)
        report = check_on_board(hil_model, firmware.folder, board, link, windows.x[:6], labels[:6], reopen=reopen)
    finally:
        for port in opened:
            port.close()
        boards[-1].__exit__(None, None, None)
    assert report.checked == 6 and not report.stopped and report.identical_to_host == 6
    assert len(report.resumed) == 1 and "the port went away" in report.resumed[0]


def _board_with_stack(tmp_path: Path, reserve: int) -> Path:
    """A user's board file: the micro:bit with a stack of `reserve` bytes (an RTOS task's, say)."""
    shipped = (Path(__file__).resolve().parents[2] / "tinynas" / "hil" / "boards" / "microbit.toml").read_text()
    path = tmp_path / f"stack-{reserve}.toml"
    path.write_text(shipped.replace('name = "microbit"', f'name = "microbit-stack-{reserve}"')
                    .replace("stack_reserve = 0", f"stack_reserve = {reserve}"))
    return path


def test_a_board_that_leaves_the_model_too_little_stack_is_told_in_one_line(hil_model, tmp_path):
    model = Path(shutil.copytree(hil_model, tmp_path / "model"))
    roomy = get_board(str(_board_with_stack(tmp_path, 1024)))
    firmware = build_firmware(write_firmware(model, roomy, tmp_path / "roomy", emulated=True), roomy)
    windows = load_npz(model / "windows.npz")
    labels = Preprocessing.from_card(read_card(model).to_dict()).labels_for(windows)
    with emulated(roomy, firmware.elf) as pty, serial.Serial(pty, baudrate=roomy.baud, timeout=0.5) as port:
        link = HilLink(port, pty, timeout=30 * slowdown())
        link.synchronise()
        own_frames = 1024 - link.profile().stack_available  # main's and the start-up's, above the painted stack
        needs = check_on_board(model, firmware.folder, roomy, link, windows.x[:2], labels[:2]).stack_bytes
    assert needs > 16
    # A board that leaves the model half of what it used: the firmware links, the overflow is caught and said.
    small = _board_with_stack(tmp_path, (own_frames + needs // 2 + 7) // 8 * 8)
    assert _tinynas("firmware", str(model), "--board", str(small), "--out", str(tmp_path / "fw")).returncode == 0
    run = _tinynas("hil", str(model), "--qemu", str(small), "--firmware", str(tmp_path / "fw"))
    assert run.returncode == 2 and "Traceback" not in run.stderr
    line = run.stderr.strip().splitlines()[-1]
    assert line.startswith("tinynas: error: stopped after 0 of ")
    assert "stack overflow: the model needs more than" in line
    assert f"estimates {read_card(model).cost().stack_bytes:,} B" in line


def test_a_firmware_built_from_a_board_file_is_checked_over_its_port_after_the_file_is_gone(hil_model, tmp_path):
    """`hil --port` takes the board from the firmware's manifest: a board file's firmware is not an unknown board."""
    model = Path(shutil.copytree(hil_model, tmp_path / "model"))
    path = _board_with_stack(tmp_path, 2048)
    board = get_board(str(path))
    assert _tinynas("firmware", str(model), "--board", str(path), "--out", str(tmp_path / "fw")).returncode == 0
    path.unlink()
    with emulated(board, tmp_path / "fw" / "firmware.elf") as pty:
        run = _tinynas("hil", str(model), "--port", pty, "--firmware", str(tmp_path / "fw"), "--json")
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["board"] == board.name and report["identical_to_host"] == report["checked"] == report["windows"] > 0
