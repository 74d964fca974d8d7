"""Run the generated C model on emulated microcontrollers: cross-compile it, run it under QEMU, measure it.

Two boards stand for the two ends of the targets: the BBC micro:bit (nRF51822, Cortex-M0, Armv6-M,
256 KB flash, 16 KB RAM) and Arm's MPS2 with the AN386 image (Cortex-M4F). The C in `devtools/mcu/` is
the rest of the firmware: a startup file, a linker script per board, and a harness that reads windows
from a host file over Arm semihosting, calls `tinynas_infer` on each and writes a record per window
back (outputs, timer ticks, peak stack). QEMU ends by itself through semihosting's SYS_EXIT.

How instructions are counted: QEMU runs with `-icount shift=0`, under which each guest instruction
advances the virtual clock by exactly 1 ns, and the board's timer (nRF51 TIMER0 at 16 MHz, the MPS2's
CMSDK timer at 25 MHz) runs on that clock. The harness reads the timer just before and just after
`tinynas_infer`, so ticks * 1e9 / timer_hz is the number of instructions the call executed, to within
one tick (62.5 instructions on the micro:bit, 40 on the AN386) plus the ~10 instructions of the call
and the timer reads themselves. These are instructions, not cycles: QEMU models no pipeline, wait
states or multi-cycle instructions (a Cortex-M0 load takes 2 cycles, a taken branch 3). Debian's QEMU
ships no TCG plugins, which is why the count comes from a timer rather than from libinsn.so.

How the stack is measured: before each call the harness fills the free stack (from the stack's limit
up to main's frame) with a pattern; after the call it finds the lowest word that changed. The peak is
the distance from main's stack pointer to that word: everything `tinynas_infer` and its callees
pushed (saved registers with the return address, locals, spills). No interrupt runs meanwhile.

Nothing here imports TensorFlow.
"""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tinynas.errors import MissingDependencyError, TinynasError, UsageError
from tinynas.hil.build import FIRMWARE, Sections, first_error, section_sizes

C_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-ffunction-sections", "-fdata-sections")
"""Warnings are errors: the generated C must compile cleanly for both cores."""

OPTIMIZATIONS = ("-Os", "-O2", "-O3", "-O1", "-O0")
COMPILE_TIMEOUT_S = 300.0
"""A generated model is a few hundred KB of C at most; a compiler stuck longer than this is broken."""

_APT_PACKAGES = {"arm-none-eabi-gcc": "gcc-arm-none-eabi", "picolibc": "picolibc-arm-none-eabi",
                 "qemu-system-arm": "qemu-system-arm"}
_HEADER = struct.Struct("<4sIIII")  # magic, input size, output size, timer Hz, stack available
_RECORD = np.dtype([("ticks", "<u4"), ("stack", "<u4"), ("status", "<i4")])  # then the int8 outputs


class EmulatorMissingError(MissingDependencyError):
    """The cross-compiler, picolibc or QEMU is not installed."""


class EmulationError(TinynasError, RuntimeError):
    """The model did not cross-compile, link or run to the end on the emulated board."""


class EmulationTimeout(EmulationError):
    """QEMU ran past the caller's timeout and was killed.

    Not a TimeoutError: that is an OSError, which the CLI would read as a storage failure."""


@dataclass(frozen=True)
class Board:
    """One emulated board: the QEMU machine, the core's compiler flags and the harness's settings."""

    name: str
    machine: str  # qemu-system-arm -M
    core: str
    arch: str
    cpu_flags: tuple[str, ...]
    define: str  # selects the harness's timer
    linker_script: str  # in devtools/mcu
    timer_hz: int
    flash_bytes: int
    ram_bytes: int

    @property
    def instructions_per_tick(self) -> float:
        """The resolution of the instruction count (each instruction is 1 ns of virtual time)."""
        return 1e9 / self.timer_hz


BOARDS: dict[str, Board] = {
    "microbit": Board("microbit", "microbit", "Cortex-M0", "thumbv6m",
                      ("-mcpu=cortex-m0", "-mthumb", "-mfloat-abi=soft"), "TINYNAS_BOARD_NRF51",
                      "microbit.ld", 16_000_000, 256 * 1024, 16 * 1024),
    # Cortex-M4F with its FPU in use, as firmware for one would be built (startup.c enables it).
    "mps2-an386": Board("mps2-an386", "mps2-an386", "Cortex-M4F", "thumbv7em",
                        ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"),
                        "TINYNAS_BOARD_MPS2", "mps2-an386.ld", 25_000_000, 4 << 20, 4 << 20),
}


@dataclass(frozen=True)
class EmulatedRun:
    """What one QEMU run measured, for every window it was given."""

    board: str
    outputs: np.ndarray  # (n, TINYNAS_OUTPUT_SIZE) int8
    model: Sections  # the model's object file alone
    image: Sections  # the whole linked firmware: harness, startup, libc's memcpy/memset, model
    stack_bytes: np.ndarray  # (n,) peak stack of each tinynas_infer call
    stack_available: int  # bytes of stack below main's frame
    instructions: np.ndarray  # (n,) float, instructions each call executed (see the module docstring)
    instruction_resolution: float  # instructions per timer tick
    command: tuple[str, ...]
    log: str

    @property
    def image_static_ram(self) -> int:
        """The whole image's .data + .bss."""
        return self.image.ram

    @property
    def stack_peak(self) -> int:
        return int(self.stack_bytes.max())

    @property
    def instructions_mean(self) -> float:
        return float(self.instructions.mean())

    @property
    def instructions_min(self) -> float:
        return float(self.instructions.min())

    @property
    def instructions_max(self) -> float:
        return float(self.instructions.max())


def missing_tools() -> list[str]:
    """Which of arm-none-eabi-gcc, picolibc (its specs file) and qemu-system-arm are not installed."""
    missing = [tool for tool in ("arm-none-eabi-gcc", "qemu-system-arm") if shutil.which(tool) is None]
    if "arm-none-eabi-gcc" not in missing and _picolibc_specs() is None:
        missing.insert(1, "picolibc")
    return missing


def _picolibc_specs() -> Path | None:
    """Where gcc finds picolibc.specs; gcc echoes a bare name back when it finds nothing."""
    try:
        found = subprocess.run(["arm-none-eabi-gcc", "-print-file-name=picolibc.specs"], capture_output=True,
                               text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    path = Path(found)
    return path if path.is_absolute() and path.is_file() else None


def _require_tools() -> None:
    missing = missing_tools()
    if missing:
        # Without gcc, picolibc cannot be looked for; it is named anyway, as gcc is no use without it.
        tools = missing + ["picolibc"] if "arm-none-eabi-gcc" in missing else missing
        packages = " ".join(package for tool, package in _APT_PACKAGES.items() if tool in tools)
        raise EmulatorMissingError(f"emulating the model on a microcontroller needs {', '.join(missing)}, "
                                   f"which {'is' if len(missing) == 1 else 'are'} not installed: "
                                   f"sudo apt-get install {packages}")


def _board(board: str) -> Board:
    try:
        return BOARDS[board]
    except KeyError:
        raise UsageError(f"unknown board {board!r}: choose one of {', '.join(BOARDS)}") from None


def _mcu_dir() -> Path:
    """The harness sources, shipped as package data (a real folder: tinynas installs unzipped)."""
    return Path(__file__).resolve().parent / "mcu"


def _gcc(board: Board, optimize: str) -> list[str]:
    if optimize not in OPTIMIZATIONS:
        raise UsageError(f"optimize must be one of {', '.join(OPTIMIZATIONS)}, not {optimize!r}")
    return ["arm-none-eabi-gcc", *C_FLAGS, optimize, *board.cpu_flags, "--specs=picolibc.specs"]


def _run_tool(command: list[str], what: str, log: Path) -> str:
    """Run a compiler or linker; on failure raise one line naming its first error, the rest in `log`."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise EmulationError(f"{what}: the compiler ran for more than {COMPILE_TIMEOUT_S:.0f} s") from None
    output = done.stdout + done.stderr
    if done.returncode != 0:
        log.write_text(" ".join(command) + "\n" + output, encoding="utf-8")
        raise EmulationError(f"{what} failed: {first_error(output)} (full output in {log})")
    return output


def cross_compile(source: Path, board: str, out: Path, *, optimize: str = "-Os",
                  include_dirs: tuple[Path, ...] = ()) -> Sections:
    """Compile one C file for `board`'s core into the object `out` (warnings are errors); its sizes.

    `source`'s own folder is searched for its quoted includes first, as always; `include_dirs` adds more.
    """
    _require_tools()
    spec = _board(board)
    out.parent.mkdir(parents=True, exist_ok=True)
    command = [*_gcc(spec, optimize), *(f"-I{folder}" for folder in include_dirs), "-c", str(source), "-o", str(out)]
    _run_tool(command, f"cross-compiling {source.name} for {board} ({spec.core})", out.with_suffix(".log"))
    return section_sizes(out)


def model_header_sizes(model_h: Path) -> tuple[int, int]:
    """TINYNAS_INPUT_SIZE and TINYNAS_OUTPUT_SIZE as the generated header defines them."""
    text = model_h.read_text(encoding="utf-8")
    sizes = []
    for name in ("TINYNAS_INPUT_SIZE", "TINYNAS_OUTPUT_SIZE"):
        found = re.search(rf"^\s*#\s*define\s+{name}\s+\(?(\d+)[uU]?\)?\s*(?:/[*/].*)?$", text, re.MULTILINE)
        if found is None:
            raise EmulationError(f"{model_h} does not define {name} as a number")
        sizes.append(int(found.group(1)))
    return sizes[0], sizes[1]


def build_image(model_c: Path, model_h: Path, board: str, workdir: Path, *,
                optimize: str = "-Os") -> tuple[Path, Sections, Sections]:
    """Link the harness and the model into `workdir`/firmware-<board>.elf: (elf, model sizes, image sizes)."""
    _require_tools()
    spec = _board(board)
    workdir.mkdir(parents=True, exist_ok=True)
    mcu = _mcu_dir()
    model_o = workdir / f"model-{board}.o"
    model = cross_compile(model_c, board, model_o, optimize=optimize, include_dirs=(model_h.parent,))
    elf = workdir / f"firmware-{board}.elf"
    command = [*_gcc(spec, optimize), f"-D{spec.define}", f'-DTINYNAS_MODEL_HEADER="{model_h.name}"',
               f"-I{model_h.parent}", f"-I{mcu}", f"-I{FIRMWARE}", "-nostartfiles", f"-L{mcu}",
               f"-L{FIRMWARE}", f"-T{spec.linker_script}",
               "-Wl,--gc-sections", *(str(mcu / name) for name in ("harness.c", "startup.c", "semihost.c")),
               str(model_o), "-o", str(elf)]
    _run_tool(command, f"building the {board} firmware", workdir / f"firmware-{board}.log")
    return elf, model, section_sizes(elf)


def qemu_command(board: str, elf: Path) -> list[str]:
    """The QEMU command line: no display, no serial, semihosting on, 1 ns of virtual time per instruction."""
    spec = _board(board)
    return ["qemu-system-arm", "-M", spec.machine, "-nographic", "-monitor", "none", "-serial", "none",
            "-semihosting-config", "enable=on,target=native", "-icount", "shift=0", "-kernel", str(elf)]


def run_on_qemu(model_c: Path, model_h: Path, windows: np.ndarray, board: str, workdir: Path,
                timeout: float, *, optimize: str = "-Os") -> EmulatedRun:
    """Build the firmware for `board`, run every window through `tinynas_infer` in QEMU, and measure.

    `windows` is an int8 array (n, TINYNAS_INPUT_SIZE); `workdir` receives the build, windows.bin,
    results.bin and qemu.log (one run at a time per workdir: the harness's file names are fixed).
    QEMU is killed after `timeout` seconds (EmulationTimeout). A window costs the time of its
    instructions at roughly 1e9 a second on a desktop core, plus a few ms of semihosting.
    """
    _require_tools()
    spec = _board(board)
    input_size, output_size = model_header_sizes(model_h)
    windows = np.asarray(windows)
    if windows.dtype != np.int8 or windows.ndim != 2 or windows.shape[1] != input_size or len(windows) == 0:
        raise UsageError(f"windows must be int8 of shape (n >= 1, {input_size}), not {windows.dtype} "
                         f"{windows.shape}")
    if not timeout > 0:
        raise UsageError(f"timeout must be positive, not {timeout}")
    elf, model, image = build_image(model_c, model_h, board, workdir, optimize=optimize)

    windows_file, results_file = workdir / "windows.bin", workdir / "results.bin"
    np.ascontiguousarray(windows).tofile(windows_file)
    results_file.unlink(missing_ok=True)
    command = qemu_command(board, elf.resolve())
    log_file = workdir / "qemu.log"
    try:
        done = subprocess.run(command, cwd=workdir, stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, env={**os.environ, "LC_ALL": "C"})
    except subprocess.TimeoutExpired as exc:  # run() has killed QEMU and reaped it
        log_file.write_bytes((exc.stdout or b"") + (exc.stderr or b""))
        raise EmulationTimeout(f"QEMU ({board}) ran past the {timeout:g} s timeout with {len(windows)} windows "
                               f"and was stopped (log in {log_file})") from None
    log = (done.stdout + done.stderr).decode("utf-8", "replace")
    log_file.write_text(log, encoding="utf-8")
    if done.returncode != 0:
        last = next((line for line in reversed(log.splitlines()) if line.strip()), "no output")
        raise EmulationError(f"the {board} firmware stopped with status {done.returncode}: {last.strip()} "
                             f"(log in {log_file})")

    data = results_file.read_bytes() if results_file.exists() else b""
    record = _RECORD.itemsize + output_size
    if len(data) < _HEADER.size:
        raise EmulationError(f"the {board} firmware wrote no results (log in {log_file})")
    magic, got_in, got_out, timer_hz, stack_available = _HEADER.unpack_from(data)
    if magic != b"TNH1" or (got_in, got_out) != (input_size, output_size) or timer_hz != spec.timer_hz:
        raise EmulationError(f"results.bin from the {board} firmware does not match {model_h.name} "
                             f"(sizes {got_in}/{got_out}, timer {timer_hz} Hz)")
    if len(data) != _HEADER.size + record * len(windows):
        raise EmulationError(f"the {board} firmware returned {(len(data) - _HEADER.size) // record} of "
                             f"{len(windows)} results (log in {log_file})")
    rows = np.frombuffer(data, np.uint8, offset=_HEADER.size).reshape(len(windows), record)
    heads = rows[:, :_RECORD.itemsize].copy().view(_RECORD).ravel()
    failed = np.flatnonzero(heads["status"])
    if failed.size:
        raise EmulationError(f"tinynas_infer returned {int(heads['status'][failed[0]])} on window {failed[0]} "
                             f"({failed.size} of {len(windows)} windows failed)")
    return EmulatedRun(board=board, outputs=rows[:, _RECORD.itemsize:].copy().view(np.int8), model=model,
                       image=image, stack_bytes=heads["stack"].astype(np.int64), stack_available=int(stack_available),
                       instructions=heads["ticks"].astype(np.float64) * spec.instructions_per_tick,
                       instruction_resolution=spec.instructions_per_tick, command=tuple(command), log=log)
