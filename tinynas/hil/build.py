"""Write (and, where the Arm toolchain is installed, build) the test firmware of a model folder for a board.

The firmware is the model's generated C runtime (`model_compiled.c/.h`, as exported) with `hil_main.c`, which
speaks the test protocol on the board's UART (`tinynas.hil.protocol`), `startup.c` and a linker script made from
the board file. Everything is written into one folder with a README saying how it was built and how to flash it, so
that a firmware developer can rebuild it by hand. The model is named by a hash of its C source, which the firmware
reports and the host checks before it trusts a single answer.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from firmware_bridge.safe_read import read_regular
from tinynas.atomic import atomic_write_bytes, atomic_write_text
from tinynas.c_names import c_comment, c_string, is_plain_name
from tinynas.card import read_card
from tinynas.errors import MissingDependencyError, TinynasError
from tinynas.folders import check_out_dir, read_model_file
from tinynas.hil.board import Board, BoardError, board_from_mapping, board_mapping, builtin_boards, get_board

FIRMWARE = Path(str(resources.files("tinynas.hil").joinpath("firmware")))
"""The firmware's own sources, shipped with the package (tinynas installs unzipped)."""
SOURCES = ("hil_main.c", "startup.c", "stack_paint.h", "memory_init.h", "sections.ld")
C_FLAGS = ("-std=c99", "-Wall", "-Wextra", "-Werror", "-Os", "-ffunction-sections", "-fdata-sections")
MANIFEST = "firmware.json"
"""What the folder holds (board, model hash, build, the files written): read and checked, it is what makes a folder
one tinynas may write into again; a file of that name alone does not."""
WRITTEN_BY = "tinynas firmware"
GENERATED = ("hil_config.h", "memory.ld")
COMPILE_TIMEOUT_S = 300.0
APT_PACKAGES = "gcc-arm-none-eabi picolibc-arm-none-eabi"


class FirmwareError(TinynasError, ValueError):
    """A model folder or an output folder a firmware cannot be written from or into, or a build that failed."""


class ToolchainMissing(MissingDependencyError):
    """arm-none-eabi-gcc or picolibc is not installed."""


@dataclass(frozen=True)
class Sections:
    """Bytes per kind of section of an object or a linked image (`arm-none-eabi-size -A`)."""

    text: int
    rodata: int
    data: int
    bss: int

    @property
    def flash(self) -> int:
        """What the flash holds: code, constants, and the initial values of .data."""
        return self.text + self.rodata + self.data

    @property
    def ram(self) -> int:
        """Static RAM: .data and .bss (the stack comes on top)."""
        return self.data + self.bss


@dataclass(frozen=True)
class Firmware:
    """A firmware folder: its board, the model it holds, and (once built) its image and how it was built."""

    folder: Path
    board: str
    model_hash: str
    input_size: int
    output_size: int
    elf: Path | None = None
    hex: Path | None = None
    image: Sections | None = None
    model: Sections | None = None
    build_line: str = ""
    compiler: str = ""

    def to_dict(self) -> dict:
        data = asdict(self)
        data.update(folder=str(self.folder), elf=self.elf and self.elf.name, hex=self.hex and self.hex.name)
        return data


MAX_MANIFEST_BYTES = 64 << 10
_MANIFEST_KEYS = {"written_by": str, "board": str, "model_hash": str, "input_size": int, "output_size": int,
                  "model_source": str, "files": list}


def read_manifest(folder: str | Path) -> dict:
    """A firmware folder's firmware.json, read as untrusted input: FirmwareError in one line when it is missing,
    not a regular file, not JSON or without what tinynas wrote there."""
    path = Path(folder) / MANIFEST
    try:
        data = json.loads(read_regular(path, MAX_MANIFEST_BYTES, "firmware manifest", follow_links=False))
    except FileNotFoundError:
        raise FirmwareError(f"{folder} is not a firmware folder of `tinynas firmware` (no {MANIFEST})") from None
    except OSError as exc:
        raise FirmwareError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (ValueError, RecursionError):
        raise FirmwareError(f"{path} is not a firmware manifest tinynas wrote (not JSON; damaged?)") from None
    if not isinstance(data, dict) or any(not isinstance(data.get(key), kind) or isinstance(data.get(key), bool)
                                         for key, kind in _MANIFEST_KEYS.items()) \
            or data["written_by"] != WRITTEN_BY or not all(is_plain_name(name) for name in
                                                           (data["board"], data["model_source"], *data["files"])):
        raise FirmwareError(f"{path} is not a firmware manifest tinynas wrote (it lacks {', '.join(_MANIFEST_KEYS)}; "
                            f"a folder of an older tinynas: write it again into a new folder)")
    return data


def manifest_board(folder: str | Path, manifest: dict | None = None) -> Board:
    """The board a firmware folder was built for: its manifest's copy of the board (a board file's board too, when
    that file is gone), else the built-in board it names."""
    manifest = read_manifest(folder) if manifest is None else manifest
    if "board_file" in manifest:
        try:
            return board_from_mapping(manifest["board_file"], f"{Path(folder) / MANIFEST} board")
        except BoardError as exc:
            raise FirmwareError(f"{exc} (the manifest was changed by hand?)") from None
    return get_board(manifest["board"])


def model_hash(c_source: bytes) -> str:
    """The name of a model on the chip: the first 16 hex digits of the SHA-256 of its generated C source."""
    return hashlib.sha256(c_source).hexdigest()[:16]


def _config(board: Board, header: str, prefix: str, digest: str, emulated: bool) -> str:
    upper = prefix.upper()
    lines = [
        "/* Generated by tinynas: the board and the model the test firmware is built for. */",
        "#ifndef HIL_CONFIG_H", "#define HIL_CONFIG_H", "",
        f"#define HIL_BOARD {c_string(board.name)}", f"#define HIL_MODEL_HASH {c_string(digest)}",
        f"#define HIL_MODEL_HEADER {c_string(header)}", f"#define HIL_INFER {prefix}_infer",
        f"#define HIL_INPUT_SIZE {upper}_INPUT_SIZE", f"#define HIL_OUTPUT_SIZE {upper}_OUTPUT_SIZE",
        f"#define HIL_CLOCK_HZ {board.clock_hz}u", f"#define HIL_BAUD {board.baud}u",
        f"#define HIL_UART_{board.uart.upper()} 1", f"#define HIL_UART_BASE 0x{board.uart_base:08X}u",
        f"#define HIL_UART_TX_PIN {board.uart_tx_pin}u", f"#define HIL_UART_RX_PIN {board.uart_rx_pin}u",
        f"#define HIL_COUNTER_{board.counter.upper().replace('-', '_')} 1",
        f"#define HIL_COUNTER_HZ {board.counter_hz}u",
        f'#define HIL_COUNTER_KIND "{board.counts(emulated).replace(" ", "-")}"', "", "#endif", ""]
    return "\n".join(lines)


STACK_MINIMUM = 64
"""The least stack (bytes) the test firmware links with: its own frames; a model that needs more than a board leaves
is reported by the firmware (e-[stack overflow ...]), not refused at the build."""


def _memory(board: Board) -> str:
    return (f"/* Generated by tinynas from the board file of {c_comment(board.name)}. */\n"
            f"MEMORY\n{{\n    FLASH (rx) : ORIGIN = 0x{board.flash_origin:08X}, LENGTH = {board.flash_bytes}\n"
            f"    RAM (rwx) : ORIGIN = 0x{board.ram_origin:08X}, LENGTH = {board.ram_bytes}\n}}\n"
            f"__stack_reserve = {board.stack_reserve};\n__stack_minimum = {STACK_MINIMUM};\nINCLUDE sections.ld\n")


def _check_out(out: Path) -> None:
    """`out` is new, empty, or a firmware folder tinynas wrote before (its manifest read and checked, not merely
    seen): nothing else is written into."""
    if out.is_file():
        raise FirmwareError(f"--out {out} is a file, not a folder")
    check_out_dir(out)
    if out.is_dir() and any(out.iterdir()):
        try:
            read_manifest(out)
        except FirmwareError as exc:
            raise FirmwareError(f"--out {out} holds files that are not a tinynas firmware ({exc}): give a new or "
                                f"empty folder (nothing in it was touched)") from None


def _manifest(firmware: Firmware, board: Board, source: str, files: list[str]) -> str:
    return json.dumps({"written_by": WRITTEN_BY, **firmware.to_dict(), "model_source": source, "files": files,
                       **({} if builtin_boards().get(board.name) == board else {"board_file": board_mapping(board)})},
                      indent=1)


def write_firmware(model_dir: str | Path, board: Board, out: str | Path, *, emulated: bool | None = None) -> Firmware:
    """The firmware's sources for `board` in `out` (built later by `build_firmware`)."""
    model_dir, out = Path(model_dir), Path(out)
    _check_out(out)  # the cheap refusal first: a user's folder is never written into, whatever the model
    card = read_card(model_dir)  # untrusted: checked whole, c_runtime's names plain file names
    runtime = card.c_runtime or {}
    if not runtime.get("source"):
        why = runtime.get("error") or "the card names no generated C runtime"
        raise FirmwareError(f"{model_dir}: no C runtime to build a firmware from ({why})")
    if runtime.get("family") == "classical":
        raise FirmwareError(f"{model_dir} serves the classical anomaly scorer: the test firmware runs int8 networks "
                            f"only; its model_compiled.c builds on its own (tinynas service's firmware.zip, main.c)")
    source = read_model_file(model_dir, runtime["source"])
    header = read_model_file(model_dir, runtime["header"])
    prefix = runtime.get("prefix", "tinynas")
    digest = model_hash(source)
    firmware = Firmware(out, board.name, digest, int(runtime["input_bytes"]), int(runtime["output_bytes"]))
    files = [runtime["source"], runtime["header"], *SOURCES, *GENERATED]
    out.mkdir(parents=True, exist_ok=True)
    # The manifest first: a folder cut short by a power cut is still ours, and the next run writes it again.
    atomic_write_text(out / MANIFEST, _manifest(firmware, board, runtime["source"], files))
    atomic_write_bytes(out / runtime["source"], source)
    atomic_write_bytes(out / runtime["header"], header)
    for name in SOURCES:
        atomic_write_bytes(out / name, (FIRMWARE / name).read_bytes())
    emulated = board.emulated if emulated is None else emulated
    atomic_write_text(out / "hil_config.h", _config(board, runtime["header"], prefix, digest, emulated))
    atomic_write_text(out / "memory.ld", _memory(board))
    return firmware


def bundle_files(model_dir: str | Path) -> tuple[dict[str, bytes], str]:
    """The test firmware's files for a firmware bundle (plain names beside the model's C), for the board of the
    model's target where one is built in, else the micro:bit; and the README's lines on building and checking it."""
    card = read_card(model_dir)
    runtime = card.c_runtime or {}
    if not runtime.get("source") or runtime.get("family") == "classical":
        return {}, ""  # no C runtime (the bundle says so itself), or a classical scorer the test firmware cannot run
    target = card.target_name
    board = next((b for b in builtin_boards().values() if b.target and b.target == target),
                 builtin_boards()["microbit"])
    source = read_model_file(model_dir, runtime["source"])
    files = {name: (FIRMWARE / name).read_bytes() for name in SOURCES}
    files["hil_config.h"] = _config(board, runtime["header"], runtime.get("prefix", "tinynas"), model_hash(source),
                                    board.emulated).encode()
    files["memory.ld"] = _memory(board).encode()
    line = " ".join(["arm-none-eabi-gcc", *C_FLAGS, *board.cpu_flags, "--specs=picolibc.specs", "-nostartfiles",
                     "-Wl,--gc-sections", "-L.", "-Tmemory.ld", "hil_main.c", "startup.c", runtime["source"],
                     "-o", "firmware.elf"])
    readme = "\n".join([
        f"hil_main.c, startup.c, sections.ld, memory.ld, hil_config.h: the model's test firmware for {board.name} "
        f"({board.description or board.core}): the MLPerf Tiny runner's commands on its UART at {board.baud} baud.",
        f"Build: {line}",
        "Check it from the Pi: tinynas hil MODEL_DIR --port PORT --firmware DIR (or tinynas firmware MODEL_DIR "
        "--board BOARD --out DIR for another board; docs/hil.md)."])
    return files, readme


def toolchain_missing() -> list[str]:
    """What of the Arm cross-compiler and picolibc is not installed."""
    if shutil.which("arm-none-eabi-gcc") is None:
        return ["arm-none-eabi-gcc", "picolibc"]
    found = subprocess.run(["arm-none-eabi-gcc", "-print-file-name=picolibc.specs"], capture_output=True, text=True,
                           timeout=60).stdout.strip()
    return [] if Path(found).is_absolute() and Path(found).is_file() else ["picolibc"]


def _run(command: list[str], what: str, log: Path, cwd: Path | None = None) -> str:
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise FirmwareError(f"{what}: the compiler ran for more than {COMPILE_TIMEOUT_S:.0f} s") from None
    output = done.stdout + done.stderr
    if done.returncode != 0:
        atomic_write_text(log, " ".join(command) + "\n" + output)
        raise FirmwareError(f"{what} failed: {first_error(output)} (full output in {log})")
    return output


def first_error(output: str) -> str:
    """The line of a compiler's or linker's output that says what went wrong."""
    overflow = re.search(r"region `(\w+)' overflowed by (\d+) bytes", output)
    if overflow:
        return f"the image does not fit: {overflow.group(1)} overflowed by {overflow.group(2)} bytes"
    harness = re.search(r"tinynas-harness: (.*)", output)  # the linker script's own ASSERT messages
    if harness:
        return harness.group(1).strip()
    errors = [line.strip() for line in output.splitlines() if "error" in line.lower()]
    if errors:  # the first real one, not collect2's "ld returned 1 exit status" when there is another
        return next((line for line in errors if not line.startswith("collect2")), errors[0])
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def section_sizes(path: Path) -> Sections:
    """Sum an object's or an image's sections by kind, from `arm-none-eabi-size -A`."""
    listing = _run(["arm-none-eabi-size", "-A", str(path)], f"reading the sections of {path.name}",
                   path.with_suffix(".size.log"))
    sums = {"text": 0, "rodata": 0, "data": 0, "bss": 0}
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) < 2 or not fields[1].isdigit():
            continue
        name, size = fields[0], int(fields[1])
        # -ffunction-sections/-fdata-sections name sections .text.f, .rodata.w, ...; .ARM.exidx is unwinding data
        # in flash (none unless the code needs it).
        kind = next((k for k in ("text", "rodata", "data", "bss") if name == f".{k}" or name.startswith(f".{k}.")),
                    "rodata" if name.startswith(".ARM.exidx") else None)
        if kind is not None:
            sums[kind] += size
    return Sections(**sums)


def build_firmware(firmware: Firmware, board: Board) -> Firmware:
    """Cross-compile the firmware folder into firmware.elf and firmware.hex (ToolchainMissing in one line)."""
    missing = toolchain_missing()
    if missing:
        raise ToolchainMissing(f"building the firmware needs {', '.join(missing)}, not installed here: sudo apt-get "
                               f"install {APT_PACKAGES} (the sources are in {firmware.folder}; build them elsewhere "
                               f"with the line in its README.txt)")
    out = firmware.folder
    manifest = read_manifest(out)
    gcc = ["arm-none-eabi-gcc", *C_FLAGS, *board.cpu_flags, "--specs=picolibc.specs"]
    model_o = out / "model.o"
    _run([*gcc, "-c", str(out / manifest["model_source"]), "-o", str(model_o)],
         f"compiling the model for {board.name} ({board.core})", out / "build.log")
    command = [*gcc, "-nostartfiles", "-Wl,--gc-sections", "-L.", "-Tmemory.ld", "hil_main.c", "startup.c",
               "model.o", "-o", "firmware.elf"]
    _run(command, f"linking the {board.name} firmware", out / "build.log", cwd=out)
    elf, hexfile = out / "firmware.elf", out / "firmware.hex"
    _run(["arm-none-eabi-objcopy", "-O", "ihex", str(elf), str(hexfile)], "writing firmware.hex", out / "build.log")
    version = _run(["arm-none-eabi-gcc", "--version"], "asking the compiler's version", out / "build.log")
    built = Firmware(out, firmware.board, firmware.model_hash, firmware.input_size, firmware.output_size, elf,
                     hexfile, section_sizes(elf), section_sizes(model_o),
                     " ".join(command), version.splitlines()[0])
    atomic_write_text(out / MANIFEST, _manifest(built, board, manifest["model_source"],
                                                [*manifest["files"], "model.o", "firmware.elf", "firmware.hex",
                                                 "build.log"]))
    return built

