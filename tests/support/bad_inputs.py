"""The bad-input table: one row per bad input to the `tinynas` command, with what its one error line must say.

Read by `tests/robustness/test_cli_table.py` (each row through the real console entry: exit 2, one line
`tinynas: error: ...`, no traceback, no file changed) and by `benchmarks/robustness.py` (its "table" category, the
same rows classified beside the benchmark's generated corruptions and faults). A row's command uses `{w}` for its
workspace folder; its setup writes what the row needs there (`Assets` holds what is costly to make once).
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
TIMEOUT = 600  # seconds; generous for a loaded Pi, and bounds a row whose fix has not landed yet
SEARCH = ("search", "--data", "synthetic:vibration?windows_per_class=8", "--target", "STM32F030F4P6",
          "--out", "{w}/run")
# Splittable data and a tiny recipe, for rows that must get past the data to the journal.
TINY_SEARCH = ("search", "--data", "synthetic:vibration?windows_per_class=24", "--target", "STM32F030F4P6",
               "--out", "{w}/run", "--budget", "2s", "--epochs", "1", "--final-epochs", "1")
CARD = {"classes": ["a", "b"],
        "preprocessing": {"window_length": 16, "channels": 1, "sample_rate_hz": 100.0, "class_names": ["a", "b"],
                          "channel_names": [], "normalize": "none", "offset": [], "scale": []}}


@dataclass(frozen=True)
class Row:
    """One bad input: the command (`{w}` is the workspace), what the line must say, and its setup."""

    id: str
    args: tuple[str, ...]
    message: str
    setup: Callable[[Path, Assets], None] | None = None
    hide: tuple[str, ...] = ()  # modules made unimportable (sys.modules[name] = None) in the child
    owner: str = ""  # another slice of issue 16 fixes this row: xfail(strict=False) until it lands
    fresh: bool = False  # run in a fresh interpreter (the worker processes a search starts need a real entry)

    def in_fresh_interpreter(self) -> bool:
        return self.fresh or bool(self.hide)


class Unavailable(Exception):
    """A setup this machine cannot make (a read-only mount without root): the row is skipped, saying why."""


@dataclass
class Assets:
    """Things some setups need: a real (float) .tflite built with TensorFlow, and mounts to undo."""

    scratch: Callable[[str], Path]
    """Makes a new empty folder (named after its argument) for a setup's own files."""
    mounts: list[Path] = field(default_factory=list)
    devices: list = field(default_factory=list)
    """Boards a setup started on pseudo-terminals (`tests.support.hil_board.PtyBoard`): `close_devices` ends them."""
    _float_model: bytes | None = None
    _int8_model: Path | None = None

    def float_model(self) -> bytes:
        if self._float_model is None:
            self._float_model = _build_float_model(self.scratch("float-model") / "model.tflite")
        return self._float_model

    def int8_model(self) -> Path:
        """A tiny int8 model folder with its generated C runtime (`tests.support.hil_board.make_model`), made once."""
        if self._int8_model is None:
            from tests.support.hil_board import make_model

            self._int8_model = make_model(self.scratch("int8-model") / "model")
        return self._int8_model

    def close_devices(self) -> None:
        while self.devices:
            self.devices.pop().close()

    def mount_read_only(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(folder)],
                              capture_output=True, text=True)
        if done.returncode != 0:
            raise Unavailable(f"cannot mount a read-only tmpfs here (needs root): {done.stderr.strip()}")
        self.mounts.append(folder)


def _build_float_model(path: Path) -> bytes:
    # A real TFLite file (float, one dense layer) from the real converter, in a child so this
    # process does not import TensorFlow.
    script = ("import sys, tensorflow as tf\n"
              "m = tf.keras.Sequential([tf.keras.Input((1, 16, 1)), tf.keras.layers.Flatten(), "
              "tf.keras.layers.Dense(2)])\n"
              "open(sys.argv[1], 'wb').write(tf.lite.TFLiteConverter.from_keras_model(m).convert())\n")
    subprocess.run([sys.executable, "-c", script, str(path)], check=True, capture_output=True, timeout=TIMEOUT)
    return path.read_bytes()


# ---- setups ------------------------------------------------------------------------------------

def _model_dir(tflite: bytes | Callable[[Assets], bytes], card: object = CARD, raw_card: bytes | None = None):
    def setup(w: Path, assets: Assets) -> None:
        folder = w / "model"
        folder.mkdir()
        (folder / "model.tflite").write_bytes(tflite(assets) if callable(tflite) else tflite)
        (folder / "card.json").write_bytes(raw_card if raw_card is not None else json.dumps(card).encode())
    return setup


def _card_with(**changes) -> dict:
    card = json.loads(json.dumps(CARD))
    for dotted, value in changes.items():
        *path, key = dotted.split("__")
        target = card
        for part in path:
            target = target[part]
        if value is _DELETE:
            del target[key]
        else:
            target[key] = value
    return card


_DELETE = object()
RANDOM = bytes((i * 7919 + 13) % 251 for i in range(3000))  # arbitrary bytes, the same on every run
WITH_HEADER = RANDOM[:4] + b"TFL3" + RANDOM[8:]  # passes the identifier check, fails LiteRT's verifier


def _file(name: str, data: bytes = b"keep me\n") -> Callable[[Path, Assets], None]:
    def setup(w: Path, assets: Assets) -> None:
        (w / name).parent.mkdir(parents=True, exist_ok=True)
        (w / name).write_bytes(data)
    return setup


_FIRMWARE_MANIFEST = (b'{"written_by": "tinynas firmware", "board": "%s", "model_hash": "0123456789abcdef", '
                      b'"input_size": 128, "output_size": 4, "model_source": "model_compiled.c", '
                      b'"files": ["model_compiled.c"]}')
"""A firmware folder's manifest as `tinynas firmware` writes it (the board left to fill in)."""


def _files(contents: dict[str, bytes]) -> Callable[[Path, Assets], None]:
    def setup(w: Path, assets: Assets) -> None:
        for name, data in contents.items():
            _file(name, data)(w, assets)
    return setup


def _sparse(name: str, size: int) -> Callable[[Path, Assets], None]:
    def setup(w: Path, assets: Assets) -> None:
        with open(w / name, "wb") as handle:  # a hole: no disk used, but stat() says `size`
            handle.truncate(size)
    return setup


def _fifo_card(w: Path, assets: Assets) -> None:
    (w / "model").mkdir()
    (w / "model" / "model.tflite").write_bytes(WITH_HEADER)
    os.mkfifo(w / "model" / "card.json")


def _big_model(w: Path, assets: Assets) -> None:
    _model_dir(b"")(w, assets)
    _sparse("model/model.tflite", 100 << 20)(w, assets)


def _read_only_mount(w: Path, assets: Assets) -> None:
    assets.mount_read_only(w / "ro")


def _finished_run_with_empty_journal(w: Path, assets: Assets) -> None:
    run = w / "run"
    run.mkdir()
    (run / "journal.sqlite").write_bytes(b"")
    for name in ("best.json", "card.json"):
        (run / name).write_text('{"winner": "A(2,1)"}\n')
    (run / "report.md").write_text("# the finished run's report\n")


def _foreign_journal(w: Path, assets: Assets) -> None:
    (w / "run").mkdir()
    with sqlite3.connect(w / "run" / "journal.sqlite") as db:
        db.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
        db.execute("INSERT INTO invoices (amount) VALUES (12.5)")
    db.close()


def _junk_wav(w: Path, assets: Assets) -> None:
    for name in ("a", "b"):
        (w / "rec" / name).mkdir(parents=True)
        (w / "rec" / name / "x.wav").write_bytes(b"RIFF\x24\x00\x00\x00WAVE" + RANDOM[:200])


def _random_npz(w: Path, assets: Assets) -> None:
    (w / "windows.npz").write_bytes(RANDOM)


def _service_config(text: str) -> Callable[[Path, Assets], None]:
    def setup(w: Path, assets: Assets) -> None:
        (w / "svc").mkdir()
        (w / "service.toml").write_text(f'data_dir = "{w / "svc"}"\n{text}')
    return setup


def _service_busy(state: dict, text: str = "") -> Callable[[Path, Assets], None]:
    """A service config whose data_dir holds `state` (what a service in the middle of a flow saved)."""
    def setup(w: Path, assets: Assets) -> None:
        _service_config(text)(w, assets)
        (w / "svc" / "state.json").write_text(json.dumps({"state": "IDLE", "user": "", **state}))
    return setup


def _cwru_windows_per_file_zero() -> tuple[str, ...]:
    return ("data", "inspect", f"cwru:{SHARED_DATA / 'cwru'}?windows_per_file=0")


def _fifo(name: str) -> Callable[[Path, Assets], None]:
    """A named pipe where a file is expected: opened plainly, it would wait for a writer for ever."""
    def setup(w: Path, assets: Assets) -> None:
        (w / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(w / name)
    return setup


def _bad_board(**odd) -> Callable[[Path, Assets], None]:
    """A copy of the tiny int8 model in {w}/model, its test firmware's folder in {w}/fw, and a board on a
    pseudo-terminal ({w}/tty, a link to it) that answers its profile with the `odd` numbers (hil_board.Answers)."""
    def setup(w: Path, assets: Assets) -> None:
        import shutil

        from tests.support.hil_board import PtyBoard, answers_for, firmware_folder

        model = Path(shutil.copytree(assets.int8_model(), w / "model"))
        firmware_folder(model, w / "fw")
        board = PtyBoard(answers_for(model, **odd))
        assets.devices.append(board)
        (w / "tty").symlink_to(board.port)
    return setup


HIL_BOARD = ("hil", "{w}/model", "--port", "{w}/tty", "--firmware", "{w}/fw", "--data",
             "synthetic:vibration?length=64&windows_per_class=2&windows_per_recording=2", "--timeout", "60")
"""`tinynas hil` of the tiny model against the board `_bad_board` starts (tests.support.hil_board.SPEC's windows)."""


def _csv_classes(name: str, lines: int) -> Callable[[Path, Assets], None]:
    """A folder spec's two classes, each one CSV file of `lines` one-value lines named `name`."""
    def setup(w: Path, assets: Assets) -> None:
        text = "".join(f"{i % 100}\n" for i in range(lines)).encode()
        for label in ("a", "b"):
            _file(f"rec/{label}/{name}.csv", text)(w, assets)
    return setup


def _compressed_npz(w: Path, assets: Assets) -> None:
    import numpy as np

    np.savez_compressed(w / "many.npz", x=np.zeros((6_000_000, 1), np.float32), y=np.zeros(6_000_000, np.int8),
                        sample_rate_hz=100.0)


def _long_named_session(w: Path, assets: Assets) -> None:
    import numpy as np

    from tests.support.sessions import write_session

    rng = np.random.default_rng(0)
    write_session(w / "s" / ("s" * 100), [(label, rng.normal(size=(400_000, 1))) for label in ("a", "b")],
                  rate=100.0, rest=rng.normal(size=(200, 1)), classes=("a", "b"))


def _with_config(setup: Callable[[Path, Assets], None]) -> Callable[[Path, Assets], None]:
    def both(w: Path, assets: Assets) -> None:
        _service_config("")(w, assets)
        setup(w, assets)
    return both


def _collect(port: str) -> tuple[str, ...]:
    """`tinynas collect` on `port` (a URL of a newer input): refused before a session folder is made."""
    return ("collect", "--port", port, "--plan", "gestures4", "--user", "a", "--out", "{w}/s")


HUGE = "9" * 4001
"""A 4,001-digit number: Python reads it as an int, float() of it overflows."""

SWEEP_GRID = b'[grid]\nseed = [0, 1]\n[fixed]\ndata = "synthetic:emg"\ntarget = "STM32F030F4P6"\n'
"""A grid every cell of which the search accepts (two cells), for rows about what comes after the grid."""
SWEEP = ("sweep", "{w}/grid.toml", "--out", "{w}/s")
RESUME = (*SWEEP, "--resume")


def _sweep_grid(extra: str) -> Callable[[Path, Assets], None]:
    """SWEEP_GRID with more lines (in [fixed], or whole tables) as grid.toml."""
    return _file("grid.toml", SWEEP_GRID + extra.encode())


def _sweep_state() -> dict:
    """The sweep.json a sweep of SWEEP_GRID writes when its first cell is done and its second interrupted."""
    cell = {"index": 1, "values": {"seed": 0}, "status": "done", "seconds": 61.5, "error": "", "attempts": 1,
            "node": ""}
    return {"grid": {"grid": {"seed": [0, 1]}, "fixed": {"data": "synthetic:emg", "target": "STM32F030F4P6"}},
            "cells": [cell, {**cell, "index": 2, "values": {"seed": 1}, "status": "running", "seconds": 12.0}]}


def _resumable(change: Callable[[dict], object] | None = None, raw: bytes | None = None,
               also: Callable[[Path, Assets], None] | None = None) -> Callable[[Path, Assets], None]:
    """A sweep of SWEEP_GRID to --resume in {w}/s, its sweep.json changed by `change` (which edits the state in
    place), or replaced by `raw`; `also` adds to the workspace."""
    def setup(w: Path, assets: Assets) -> None:
        _file("grid.toml", SWEEP_GRID)(w, assets)
        (w / "s" / "cell-001").mkdir(parents=True)
        (w / "s" / "cell-001" / "card.json").write_text("{}")  # a cell's own file, which must stay as it is
        state = _sweep_state()
        if change is not None:
            change(state)
        (w / "s" / "sweep.json").write_bytes(raw if raw is not None else json.dumps(state, indent=1).encode())
        if also is not None:
            also(w, assets)
    return setup


def _cell(number: int, **fields) -> Callable[[dict], None]:
    return lambda state: state["cells"][number - 1].update(fields)


def _linked_cell_folder(w: Path, assets: Assets) -> None:
    (w / "elsewhere").mkdir()
    (w / "s" / "cell-002").symlink_to(w / "elsewhere")


# ---- the table -----------------------------------------------------------------------------------

ROWS = [
    # search options (item 3: after journal.sqlite and windows.npz were written; item 4: misleading)
    Row("workers-0", (*SEARCH, "--workers", "0"), "--workers must be at least 1"),
    Row("workers-negative", (*SEARCH, "--workers", "-2"), "--workers must be at least 1"),
    Row("threads-0", (*SEARCH, "--threads", "0"), "--threads must be at least 1"),
    Row("workers-above-cores", (*SEARCH, "--workers", str((os.cpu_count() or 1) + 1)), "more than this machine's"),
    Row("workers-1000", (*SEARCH, "--workers", "1000"), "more than this machine's"),
    Row("threads-1000", (*SEARCH, "--threads", "1000"), "more than this machine's"),
    Row("workers-not-a-number", (*SEARCH, "--workers", "two"), "--workers must be auto or a whole number"),
    Row("epochs-0", (*SEARCH, "--epochs", "0"), "--epochs must be between 1 and"),
    Row("epochs-absurd", (*SEARCH, "--epochs", "10000000"), "--epochs must be between 1 and"),
    Row("batch-size-0", (*SEARCH, "--batch-size", "0"), "--batch-size must be between 1 and"),
    Row("learning-rate-0", (*SEARCH, "--learning-rate", "0"), "--learning-rate must be above 0"),
    Row("learning-rate-negative", (*SEARCH, "--learning-rate", "-0.01"), "--learning-rate must be above 0"),
    Row("learning-rate-nan", (*SEARCH, "--learning-rate", "nan"), "--learning-rate must be above 0"),
    Row("learning-rate-inf", (*SEARCH, "--learning-rate", "inf"), "--learning-rate must be above 0"),
    Row("final-epochs-0", (*SEARCH, "--final-epochs", "0"), "--final-epochs must be between 1 and"),
    Row("budget-garbage", (*SEARCH, "--budget", "soon"), "cannot read duration 'soon'"),
    Row("budget-zero", (*SEARCH, "--budget", "0s"), "--budget"),
    Row("budget-absurd", (*SEARCH, "--budget", "99999999h"), "more than 30 days"),
    Row("budget-below-a-second", (*SEARCH, "--budget", "0.01s"), "less than a second"),
    Row("seed-negative", (*SEARCH, "--seed", "-1"), "--seed must be between 0 and"),
    Row("seed-above-32-bit", (*SEARCH, "--seed", str(2**32)), "--seed must be between 0 and"),
    Row("ram-garbage", (*SEARCH, "--ram", "lots"), "cannot read RAM 'lots'"),
    Row("ram-zero", (*SEARCH, "--ram", "0"), "RAM '0' is out of range"),
    Row("ram-absurd", (*SEARCH, "--ram", "99999999999G"), "is out of range"),
    Row("flash-negative", (*SEARCH, "--flash=-1k"), "cannot read flash"),
    Row("macs-garbage", (*SEARCH, "--macs", "1e9"), "cannot read MAC budget"),
    Row("macs-absurd", (*SEARCH, "--macs", "99999999999G"), "is out of range"),
    Row("target-file-binary", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--target",
                               "{w}/board.toml"), "is not a TOML text file",
        setup=_file("board.toml", b"\xd3" + RANDOM)),
    Row("target-file-nested-deeply", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                      "--target", "{w}/board.toml"), "is not valid TOML",
        setup=_file("board.toml", b"a = " + b"[" * 100_000)),
    Row("target-unknown", ("search", "--data", "synthetic:vibration", "--target", "nope", "--out", "{w}/run"),
        "unknown target 'nope'"),
    Row("no-target", ("search", "--data", "synthetic:vibration", "--out", "{w}/run"), "give --target NAME"),
    Row("strategy-unknown", (*SEARCH, "--strategy", "annealing"), "argument --strategy: invalid choice"),
    Row("tpe-without-optuna", (*SEARCH, "--strategy", "tpe"), "needs optuna, which is not installed: pip install",
        hide=("optuna",)),
    Row("unknown-option", (*SEARCH, "--epohcs", "3"), "unrecognized arguments: --epohcs"),
    Row("missing-data", ("search", "--target", "STM32F030F4P6", "--out", "{w}/run"),
        "the following arguments are required: --data"),
    Row("no-command", (), "the following arguments are required: command"),
    # --out
    Row("out-is-a-file", ("search", "--data", "synthetic:vibration", "--target", "STM32F030F4P6", "--out",
                          "{w}/notes.txt"), "is a file, not a folder", setup=_file("notes.txt")),
    Row("out-under-a-file", ("search", "--data", "synthetic:vibration", "--target", "STM32F030F4P6", "--out",
                             "{w}/notes.txt/run"), "is a file, so the folder cannot be made", setup=_file("notes.txt")),
    Row("out-on-read-only-mount", ("search", "--data", "synthetic:vibration", "--target", "STM32F030F4P6", "--out",
                                   "{w}/ro/run"), "read-only file system", setup=_read_only_mount),
    Row("demo-out-is-a-file", ("demo", "--out", "{w}/notes.txt"), "is a file, not a folder", setup=_file("notes.txt")),
    Row("demo-out-on-read-only-mount", ("demo", "--out", "{w}/ro/demo"), "read-only file system",
        setup=_read_only_mount),
    Row("demo-budget-garbage", ("demo", "--out", "{w}/demo", "--budget", "later"), "cannot read duration"),
    Row("demo-seed-negative", ("demo", "--out", "{w}/demo", "--seed", "-3"), "--seed must be between 0"),
    # cost
    Row("cost-input-0x8", ("cost", "--input", "0x8", "--classes", "4", "--k", "2", "--c", "1"),
        "input_length must be >= 1"),
    Row("cost-input-garbage", ("cost", "--input", "400by8", "--classes", "4", "--k", "2", "--c", "1"),
        "--input must look like 400x8"),
    Row("cost-input-three-parts", ("cost", "--input", "400x8x2", "--classes", "4", "--k", "2", "--c", "1"),
        "--input must look like 400x8"),
    Row("cost-k-0", ("cost", "--input", "400x8", "--classes", "4", "--k", "0", "--c", "1"), "k (stem filters)"),
    Row("cost-c-negative", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "-1"), "c (cells)"),
    Row("cost-classes-1", ("cost", "--input", "400x8", "--classes", "1", "--k", "2", "--c", "1"), "classes must"),
    Row("cost-kernel-even", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--kernel", "2"),
        "kernel_size must be a positive odd"),
    Row("cost-growth-unknown", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                "--growth", "triple"), "growth must be one of"),
    Row("cost-missing-flags", ("cost", "--input", "400x8"), "give --arch FILE.json or all of"),
    # A time per inference (issue 66): 0, negative, NaN, 10^400, words; a latency with no target; a target whose file
    # gives no clock; TFLite Micro, whose kernels are not timed.
    *(Row(f"cost-latency-{name}", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--target",
                                    "STM32C011F6P6", f"--latency={value}"), "--latency: ")
      for name, value in (("zero", "0"), ("negative", "-250ms"), ("nan", "nan"), ("huge", "1" + "0" * 400),
                          ("words", "fast"), ("hours", "2h"))),
    # A search bounded by candidates: none, negative, 10^400, words; the service config's key and the demo's.
    *(Row(f"search-candidates-{name}", (*SEARCH, f"--candidates={value}"), message)
      for name, value, message in (("zero", "0", "--candidates must be between 1 and 100000, got 0"),
                                   ("negative", "-3", "--candidates must be between 1 and 100000, got -3"),
                                   ("huge", "1" + "0" * 400, "--candidates must be between 1 and 100000"),
                                   ("words", "many", "--candidates: invalid int value"))),
    Row("demo-candidates-zero", ("demo", "--out", "{w}/demo", "--candidates", "0"), "--candidates must be between"),
    *(Row(f"service-config-candidates-{name}", ("service", "config", "--config", "{w}/c.toml"), "candidates",
          setup=_file("c.toml", text))
      for name, text in (("negative", b"candidates = -1\n"), ("text", b'candidates = "3"\n'),
                         ("float", b"candidates = 2.5\n"), ("huge", b"candidates = 100001\n"))),
    Row("cost-latency-no-target", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                   "--latency", "250ms"), "--latency is time at a target's clock: give --target"),
    Row("cost-latency-no-clock", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--target",
                                  "{w}/t.toml", "--latency", "250ms"), "has no clock, so time per inference",
        setup=_file("t.toml", b'name = "t"\nram_bytes = 8192\nflash_bytes = 32768\nmac_budget = 1000000\n')),
    Row("cost-latency-tflm", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--target",
                              "nRF52840", "--runtime", "tflm", "--latency", "250ms"),
        "TFLite Micro's reference kernels are not timed"),
    Row("search-latency-zero", ("search", "--data", "synthetic:vibration", "--target", "STM32C011F6P6", "--out",
                                "{w}/run", "--latency", "0"), "--latency: time per inference '0' must be above 0"),
    Row("search-latency-no-clock", ("search", "--data", "synthetic:vibration", "--target", "{w}/t.toml", "--out",
                                    "{w}/run", "--latency", "250ms"), "add clock_mhz = <MHz> to its target file",
        setup=_file("t.toml", b'name = "t"\nram_bytes = 8192\nflash_bytes = 32768\nmac_budget = 1000000\n')),
    Row("target-file-latency-nan", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                    "--target", "{w}/t.toml"), "'latency': cannot read time per inference",
        setup=_file("t.toml", b'name = "t"\nram_bytes = 8192\nflash_bytes = 32768\nmac_budget = 1000000\n'
                              b'clock_mhz = 48\nlatency = "nan"\n')),
    Row("target-file-clock-absurd", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                     "--target", "{w}/t.toml"), "'clock_mhz' must be a number of MHz above 0",
        setup=_file("t.toml", b'name = "t"\nram_bytes = 8192\nflash_bytes = 32768\nmac_budget = 1000000\n'
                              b'clock_mhz = 48000000\n')),
    Row("cost-arch-missing", ("cost", "--arch", "{w}/nope.json"), "cannot read architecture file"),
    Row("cost-arch-binary", ("cost", "--arch", "{w}/arch.json"), "is not text", setup=_file("arch.json", RANDOM)),
    Row("cost-arch-not-json", ("cost", "--arch", "{w}/arch.json"), "architecture is not valid JSON",
        setup=_file("arch.json", b"k=2, c=1\n")),
    Row("cost-arch-nested-deeply", ("cost", "--arch", "{w}/arch.json"), "nested too deeply",
        setup=_file("arch.json", b"[" * 100_000)),
    Row("cost-arch-a-list", ("cost", "--arch", "{w}/arch.json"), "architecture must be a JSON object",
        setup=_file("arch.json", b"[2, 1]\n")),
    Row("cost-ram-garbage", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                             "--ram", "6 kilobytes", "--flash", "32k", "--macs", "1M"), "cannot read RAM"),
    # evaluate: damaged models and cards (item 3)
    Row("evaluate-random-tflite", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a TFLite model", setup=_model_dir(RANDOM)),
    Row("evaluate-random-tflite-with-identifier", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a TFLite model LiteRT can load", setup=_model_dir(WITH_HEADER)),
    Row("evaluate-empty-tflite", ("evaluate", "{w}/model/model.tflite", "--data", "synthetic:vibration"),
        "not a TFLite model", setup=_model_dir(b"")),
    Row("evaluate-truncated-tflite", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a TFLite model LiteRT can load", setup=_model_dir(lambda a: a.float_model()[:len(a.float_model()) // 2])),
    Row("evaluate-float-model", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a full-integer int8 model", setup=_model_dir(lambda a: a.float_model())),
    Row("evaluate-no-model", ("evaluate", "{w}/nothing", "--data", "synthetic:vibration"), "no such model"),
    Row("evaluate-no-card", ("evaluate", "{w}/model/model.tflite", "--data", "synthetic:vibration"),
        "no card next to the model", setup=_file("model/model.tflite", WITH_HEADER)),
    Row("evaluate-card-not-json", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a model card (not JSON", setup=_model_dir(WITH_HEADER, raw_card=b"{\"classes\": [\"a\", ")),
    Row("evaluate-card-binary", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a model card", setup=_model_dir(WITH_HEADER, raw_card=b"\xff\xfe\x00" + RANDOM)),
    Row("evaluate-card-nested-deeply", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "not a model card (JSON nested far too deep",
        setup=_model_dir(WITH_HEADER, raw_card=b"[" * 100_000 + b"]" * 100_000)),
    Row("evaluate-card-a-pipe", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "cannot read it (a named pipe (FIFO), not a regular file)", setup=_fifo_card),
    Row("evaluate-model-too-big", ("evaluate", "{w}/model/model.tflite", "--data", "synthetic:vibration"),
        "larger than 64 MiB, the most a microcontroller model", setup=_big_model),
    Row("evaluate-card-a-list", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "the card must be a JSON object, got list", setup=_model_dir(WITH_HEADER, card=[1, 2])),
    Row("evaluate-card-without-classes", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "the card has no 'classes'", setup=_model_dir(WITH_HEADER, card={"input": {"shape": [16, 1],
                                                                                  "sample_rate_hz": 100.0}})),
    Row("evaluate-card-classes-a-string", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "'classes' must be a list of at least 2 names", setup=_model_dir(WITH_HEADER, card=_card_with(classes="ab"))),
    Row("evaluate-card-shape-wrong", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "'shape' must be [samples, channels]", setup=_model_dir(WITH_HEADER, card={
            "classes": ["a", "b"], "input": {"shape": [16], "sample_rate_hz": 100.0}})),
    Row("evaluate-preprocessing-a-string", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "the card's 'preprocessing' must be a JSON object, got str",
        setup=_model_dir(WITH_HEADER, card=_card_with(preprocessing="channel"))),
    Row("evaluate-offset-not-a-list", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "'offset' must be a list of numbers",
        setup=_model_dir(WITH_HEADER, card=_card_with(preprocessing__offset=0.5))),
    Row("evaluate-window-length-a-string", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "'window_length' must be a positive integer",
        setup=_model_dir(WITH_HEADER, card=_card_with(preprocessing__window_length="16"))),
    Row("evaluate-class-names-missing", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "has no 'class_names'", setup=_model_dir(WITH_HEADER, card=_card_with(preprocessing__class_names=_DELETE))),
    Row("evaluate-scale-zero", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "scales must be positive", setup=_model_dir(WITH_HEADER, card=_card_with(
            preprocessing__normalize="channel", preprocessing__offset=[0.0], preprocessing__scale=[0.0]))),
    Row("evaluate-normalize-unknown", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "unknown normalization", setup=_model_dir(WITH_HEADER, card=_card_with(preprocessing__normalize="zscore"))),
    Row("evaluate-classes-disagree", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "differ from its 'preprocessing' class_names",
        setup=_model_dir(WITH_HEADER, card=_card_with(classes=["x", "y"]))),
    Row("evaluate-old-card-without-input", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "the card has no 'input'", setup=_model_dir(WITH_HEADER, card={"classes": ["a", "b"]})),
    # measure
    Row("measure-random", ("measure", "{w}/r.tflite"), "not a TFLite flatbuffer", setup=_file("r.tflite", RANDOM)),
    Row("measure-random-with-identifier", ("measure", "{w}/r.tflite"), "not a TFLite model LiteRT can load",
        setup=_file("r.tflite", WITH_HEADER)),
    Row("measure-empty", ("measure", "{w}/e.tflite"), "not a TFLite flatbuffer", setup=_file("e.tflite", b"")),
    Row("measure-a-pipe", ("measure", "{w}/pipe.tflite"), "is a named pipe (FIFO), not a regular file",
        setup=lambda w, a: os.mkfifo(w / "pipe.tflite")),
    Row("measure-too-big", ("measure", "{w}/big.tflite"), "larger than 64 MiB, the most a microcontroller model",
        setup=_sparse("big.tflite", 100 << 20)),
    Row("measure-missing", ("measure", "{w}/nope.tflite"), "cannot read"),
    Row("measure-a-folder", ("measure", "{w}"), "is a folder, not a file"),
    # replay
    Row("replay-negative-trial", ("replay", "{w}", "--trial", "-1"), "--trial must be at least 0"),
    Row("replay-no-journal", ("replay", "{w}", "--trial", "0"), "holds no search"),
    # simulate and collect (refused before a pty or a port is opened)
    Row("simulate-speed-0", ("simulate", "--speed", "0"), "--speed must be a number above 0"),
    Row("simulate-speed-nan", ("simulate", "--speed", "nan"), "--speed must be a number above 0"),
    Row("simulate-drop-above-1", ("simulate", "--drop", "1.5"), "--drop must be a probability"),
    Row("simulate-flip-negative", ("simulate", "--flip=-0.1"), "--flip must be a probability"),
    Row("simulate-unplug-negative", ("simulate", "--unplug-every=-1"), "--unplug-every must be a number above 0"),
    Row("simulate-port-on-a-users-file", ("simulate", "--port", "{w}/notes.txt"),
        "already exists and is not a simulator port", setup=_file("notes.txt", b"my notes\n")),
    Row("simulate-port-in-a-missing-folder", ("simulate", "--port", "{w}/missing/tty"), "is not a folder"),
    Row("simulate-person-late-above-1", ("simulate", "--person", "--late", "2"), "--late must be a probability"),
    Row("simulate-person-reaction-0", ("simulate", "--person", "--reaction", "0"),
        "--reaction must be a number above 0"),
    Row("simulate-person-fast", ("simulate", "--person", "--speed", "3"), "act in real time: drop --speed"),
    Row("simulate-person-and-machine", ("simulate", "--person", "--machine"), "not allowed with argument"),
    Row("simulate-person-unknown-sign", ("simulate", "--person", "--signs", "fist=nope"),
        "give PROMPTED=CLASS with a class of the data set"),
    Row("onboard-plan-too-few-repetitions", ("onboard", "--user", "u", "--plan", "{w}/p.json", "--config",
                                             "{w}/c.toml"),
        "a class needs at least 3 to search on",
        setup=lambda w, assets: (_file("p.json", b'{"classes": ["a", "b"], "repetitions": 2}')(w, assets),
                                 _file("c.toml", f'data_dir = "{w}/data"\n'.encode())(w, assets))),
    Row("collect-plan-a-billion-repetitions", ("collect", "--port", "{w}/nope", "--plan", "{w}/p.json", "--out",
                                               "{w}/s"), "would take",
        setup=_file("p.json", b'{"classes": ["a", "b"], "repetitions": 1000000000}')),
    Row("collect-plan-rest-1e300", ("collect", "--port", "{w}/nope", "--plan", "{w}/p.json", "--out", "{w}/s"),
        "rest_seconds at most 600", setup=_file("p.json", b'{"classes": ["a", "b"], "rest_seconds": 1e300}')),
    Row("collect-rest-class-absent", ("collect", "--port", "{w}/nope", "--plan", "{w}/p.json", "--out", "{w}/s"),
        "rest_class 'idle' is not one of its classes",
        setup=_file("p.json", b'{"classes": ["fist", "open"], "rest_class": "idle"}')),
    Row("collect-machine-plan-impossible-hold", ("collect", "--port", "{w}/nope", "--plan", "{w}/p.toml", "--out",
                                                 "{w}/s"), "a block holds a state from one segment",
        setup=_file("p.toml", b'classes = ["a", "b"]\nkind = "continuous"\nwindow_seconds = 2\nhold_seconds = 1\n')),
    Row("service-config-http-host-beyond-loopback", ("service", "config", "--config", "{w}/c.toml"),
        "http_host '0.0.0.0' is beyond loopback: set http_token", setup=_file("c.toml", b'http_host = "0.0.0.0"\n')),
    Row("service-config-budget-beyond-30-days", ("service", "config", "--config", "{w}/c.toml"),
        "budget '9999999h' is more than 30 days", setup=_file("c.toml", b'budget = "9999999h"\n')),
    Row("service-config-data-dir-a-file", ("service", "config", "--config", "{w}/c.toml"),
        "is a file, not a folder",
        setup=lambda w, assets: (_file("notes.txt")(w, assets),
                                 _file("c.toml", f'data_dir = "{w}/notes.txt"\n'.encode())(w, assets))),
    Row("service-config-http-host-not-an-address", ("service", "config", "--config", "{w}/c.toml"),
        "http_host must be an IP address or a host name", setup=_file("c.toml", b'http_host = "999.1.1.1"\n')),
    Row("service-config-epochs-beyond-the-cli", ("service", "config", "--config", "{w}/c.toml"),
        "epochs must be an integer from 1 to 10000", setup=_file("c.toml", b'epochs = 100000\n')),
    Row("search-c-prefix-not-a-c-name", ("search", "--data", "synthetic:emg", "--target", "STM32F030F4P6", "--out",
                                         "{w}/run", "--c-prefix", "my-model"), "--c-prefix: C prefix 'my-model'"),
    # A condition's name reaches generated C (issue 68): the ones no condition can have are refused before the
    # model is opened; the printable ones with /*, */ or quotes build (tests/anomaly/test_classical_c.py).
    *(Row(f"adapt-condition-{name}", ("adapt", "{w}/nothing", "--data", "synthetic:vibration", "--out", "{w}/new",
                                      "--condition", value), "give a name of 1 to 40 printable characters")
      for name, value in (("line-break", "heavy\nload"), ("tab", "heavy\tload"), ("live", "live"),
                          ("41-characters", "x" * 41), ("blank", "   "), ("escape-sequence", "\x1b[31mred"))),
    Row("collect-baud-0", ("collect", "--port", "{w}/nope", "--plan", "gestures4", "--out", "{w}/session",
                           "--baud", "0"), "--baud must be at least 1"),
    # rows fixed by other slices of issue 16 (data loaders, journal safety, service config)
    Row("data-emg-rate-0", ("search", "--data", "synthetic:emg?sample_rate_hz=0", "--target", "STM32F030F4P6",
                            "--out", "{w}/run"), "sample_rate_hz"),
    Row("data-vibration-89-GiB", ("search", "--data", "synthetic:vibration?length=100000000", "--target",
                                  "STM32F030F4P6", "--out", "{w}/run"), "GiB"),
    Row("data-cwru-windows-per-file-0", _cwru_windows_per_file_zero(), "windows_per_file"),
    Row("data-wav-junk-after-riff", ("search", "--data", "folder:{w}/rec?window=16", "--target", "STM32F030F4P6",
                                     "--out", "{w}/run"), "x.wav", setup=_junk_wav),
    Row("data-npz-random-bytes", ("search", "--data", "npz:{w}/windows.npz", "--target", "STM32F030F4P6",
                                  "--out", "{w}/run"), "windows.npz", setup=_random_npz),
    Row("data-cwru-junk-mat", ("data", "inspect", "cwru:{w}/cwru?files=97"), "97.mat",
        setup=_file("cwru/97.mat", RANDOM)),
    Row("data-cwru-missing-mat", ("data", "inspect", "cwru:{w}/cwru?files=105"), "105",
        setup=_file("cwru/97.mat", RANDOM)),
    Row("data-csv-not-a-number", ("search", "--data", "folder:{w}/rec?rate=100", "--target", "STM32F030F4P6",
                                  "--out", "{w}/run"), "y.csv line 2",
        setup=lambda w, a: (_file("rec/a/x.csv", b"1,2\n3,4\n")(w, a), _file("rec/b/y.csv", b"1,2\n3,x\n")(w, a))),
    # Millions of tiny windows whose names are long (issue 68): the memory check counts every window's names (numpy
    # text, 4 bytes a character, and a copy), refused before they are built; an .npz from its arrays' headers.
    Row("data-folder-millions-of-windows-long-names", ("data", "inspect", "folder:{w}/rec?window=1&rate=100"),
        "1,560,000 windows x 1 samples x 1 channel(s) would take 3.8 GiB", setup=_csv_classes("r" * 200, 780_000)),
    Row("data-npz-unpacks-into-millions-of-windows", ("data", "inspect", "npz:{w}/many.npz"),
        "6,000,000 windows x 1 samples x 1 channel(s) would take", setup=_compressed_npz),
    Row("data-session-millions-of-windows-long-names", ("data", "inspect", "session:{w}/s?window=1"),
        "characters of names), above the 2 GiB limit; raise hop", setup=_long_named_session),
    Row("journal-empty-on-resume", (*TINY_SEARCH, "--resume"), "journal", fresh=True,
        setup=_finished_run_with_empty_journal),
    Row("journal-foreign-sqlite", TINY_SEARCH, "journal", setup=_foreign_journal, fresh=True),
    Row("service-config-binary", ("service", "status", "--config", "{w}/service.toml"), "service.toml",
        setup=_file("service.toml", b"\x00\xff" + RANDOM)),
    Row("service-config-a-folder", ("service", "status", "--config", "{w}/conf"), "conf",
        setup=lambda w, a: (w / "conf").mkdir()),
    Row("service-config-workers-two", ("service", "status", "--config", "{w}/service.toml"), "workers",
        setup=_service_config('workers = "two"\n')),
    Row("service-config-port-99999", ("service", "status", "--config", "{w}/service.toml"), "http_port",
        setup=_service_config("http_port = 99999\n")),
    Row("service-config-command-checks-its-file", ("service", "config", "--config", "{w}/service.toml"), "workers",
        setup=_service_config('workers = "two"\n')),
    Row("service-config-budget-garbage", ("service", "status", "--config", "{w}/service.toml"), "budget",
        setup=_service_config('budget = "abc"\n')),
    Row("service-config-min-accuracy-a-word", ("service", "status", "--config", "{w}/service.toml"), "min_accuracy",
        setup=_service_config('min_accuracy = "high"\n')),
    Row("service-config-unknown-target", ("service", "status", "--config", "{w}/service.toml"), "target",
        setup=_service_config('target = "Z80"\n')),
    Row("onboard-user-dot-dot", ("onboard", "--user", "..", "--config", "{w}/service.toml"), "user",
        setup=_service_config("")),
    # A second onboarding while another flow runs (issue 68): refused, saying what runs and how to cancel it; never
    # queued to start by itself later.
    Row("onboard-while-a-collection-runs", ("onboard", "--user", "bob", "--config", "{w}/service.toml"),
        "onboarding of bob refused: alice's collection is under way (the service is stopped: it goes on when "
        "started); cancel it with `tinynas onboard --user alice --cancel --config",
        setup=_service_busy({"state": "COLLECTING", "user": "alice", "session": "/s"})),
    Row("onboard-more-while-a-search-runs", ("onboard", "--user", "alice", "--more", "5", "--config",
                                             "{w}/service.toml"),
        "more recordings for alice refused: the search for alice's model is under way",
        setup=lambda w, a: (_service_busy({"state": "SEARCHING", "user": "alice", "study": "/s"})(w, a),
                            _file("svc/profiles/alice/sessions/20260101-000000/manifest.json", b"{}")(w, a))),
    Row("onboard-cancel-while-a-search-runs", ("onboard", "--user", "alice", "--cancel", "--config",
                                               "{w}/service.toml"),
        "nothing to cancel: the search for alice's model is under way",
        setup=_service_busy({"state": "SEARCHING", "user": "alice", "study": "/s"})),
    # Special files where a file is named (issue 53): never opened to block, never read until memory runs out.
    # Fresh interpreters: a regression hangs the child, which the table's timeout ends, not the test process.
    Row("plan-fifo", ("onboard", "--user", "a", "--plan", "{w}/plan.json", "--config", "{w}/service.toml"),
        "plan file {w}/plan.json: cannot read it (a named pipe (FIFO), not a regular file)", fresh=True,
        setup=_with_config(_fifo("plan.json"))),
    Row("plan-dev-zero", ("onboard", "--user", "a", "--plan", "/dev/zero", "--config", "{w}/service.toml"),
        "a device file, not a regular file", fresh=True, setup=_service_config("")),
    Row("collect-plan-fifo", ("collect", "--port", "{w}/tty", "--plan", "{w}/plan.toml", "--out", "{w}/s"),
        "a named pipe (FIFO)", fresh=True, setup=_fifo("plan.toml")),
    Row("plan-too-big", ("onboard", "--user", "a", "--plan", "{w}/plan.json", "--config", "{w}/service.toml"),
        "larger than 1 MiB, the most a plan file may be", setup=_with_config(_sparse("plan.json", 2 << 20))),
    Row("service-config-fifo", ("service", "config", "--config", "{w}/service.toml"), "a named pipe (FIFO)",
        fresh=True, setup=_fifo("service.toml")),
    Row("service-config-dev-zero", ("service", "status", "--config", "/dev/zero"), "a device file", fresh=True),
    Row("cost-arch-fifo", ("cost", "--arch", "{w}/arch.json", "--target", "STM32F030F4P6"), "a named pipe (FIFO)",
        fresh=True, setup=_fifo("arch.json")),
    Row("target-file-fifo", ("search", "--data", "synthetic:vibration", "--target", "{w}/board.toml", "--out",
                             "{w}/run"), "a named pipe (FIFO)", fresh=True, setup=_fifo("board.toml")),
    Row("data-session-manifest-fifo", ("data", "inspect", "session:{w}/s"), "not a regular file", fresh=True,
        setup=_fifo("s/manifest.json")),
    # Numbers of any size (issue 53): refused in one line, never converted to float to be printed.
    *[Row(f"huge-{option.strip('-')}", (*SEARCH, option, HUGE), f"{option} must be between", )
      for option in ("--epochs", "--seed", "--batch-size", "--final-epochs")],
    Row("huge-workers", (*SEARCH, "--workers", HUGE), "--workers a 4001-digit number is more than"),
    Row("huge-threads", (*SEARCH, "--threads", HUGE), "--threads a 4001-digit number is more than"),
    Row("huge-budget", (*SEARCH, "--budget", HUGE + "s"), "(4002 characters) is beyond any time budget"),
    Row("huge-learning-rate", (*SEARCH, "--learning-rate", HUGE), "--learning-rate must be above 0"),
    Row("huge-ram", (*SEARCH, "--ram", HUGE), "RAM '999"),
    Row("huge-flash", (*SEARCH, "--flash", HUGE + "KiB"), "is out of range"),
    Row("huge-macs", (*SEARCH, "--macs", HUGE), "is out of range"),
    Row("huge-windows-per-class", ("data", "inspect", f"synthetic:vibration?windows_per_class={HUGE}"),
        "a 4001-digit number, far beyond any data set"),
    Row("huge-spec-files", ("data", "inspect", f"cwru:{{w}}?files={HUGE}"), "more than 15 digits"),
    Row("huge-more", ("onboard", "--user", "a", "--more", HUGE, "--config", "{w}/service.toml"),
        "--more must be between 1 and 100, got a 4001-digit number", setup=_service_config("")),
    Row("huge-signs", ("onboard", "--user", "a", "--test", "--signs", HUGE, "--config", "{w}/service.toml"),
        "--signs must be between 1 and 1000, got a 4001-digit number", setup=_service_config("")),
    Row("huge-config-epochs", ("service", "status", "--config", "{w}/service.toml"),
        "epochs must be an integer from 1 to 10000, not a 4001-digit number",
        setup=_service_config(f"epochs = {HUGE}\n")),
    Row("huge-unknown-option", (*SEARCH, "--max-trials", HUGE), "(4001 characters)"),
    Row("false-alarm-rate-for-a-classifier", (*SEARCH, "--false-alarm-rate", "0.05"),
        "--false-alarm-rate sets an anomaly scorer's threshold: add --task anomaly"),
    Row("scorer-for-a-classifier", (*SEARCH, "--scorer", "classical"),
        "--scorer classical chooses an anomaly scorer's family: add --task anomaly"),
    Row("scorer-unknown", (*SEARCH, "--task", "anomaly", "--scorer", "tree"), "--scorer"),
    Row("config-scorer-unknown", ("service", "status", "--config", "{w}/service.toml"),
        "scorer must be one of auto, network, classical", setup=_service_config('scorer = "tree"\n')),
    # Options the robustness benchmark tried on its own before the two tables became this one (issue 55).
    Row("threads-negative", (*SEARCH, "--threads", "-1"), "--threads must be at least 1"),
    Row("epochs-negative", (*SEARCH, "--epochs", "-1"), "--epochs must be between 1 and"),
    Row("batch-size-negative", (*SEARCH, "--batch-size", "-1"), "--batch-size must be between 1 and"),
    Row("final-epochs-negative", (*SEARCH, "--final-epochs", "-1"), "--final-epochs must be between 1 and"),
    Row("budget-empty", (*SEARCH, "--budget="), "--budget: cannot read duration ''"),
    Row("budget-negative", (*SEARCH, "--budget", "-5m"), "argument --budget"),
    Row("ram-negative", (*SEARCH, "--ram", "-1KiB"), "argument --ram"),
    Row("flash-garbage", (*SEARCH, "--flash", "abc"), "cannot read flash 'abc'"),
    Row("macs-negative", (*SEARCH, "--macs", "-1"), "cannot read MAC budget '-1'"),
    Row("split-unknown", (*SEARCH, "--split", "bogus"), "argument --split: invalid choice"),
    Row("normalize-unknown", (*SEARCH, "--normalize", "bogus"), "argument --normalize: invalid choice"),
    Row("test-data-unknown-set", (*SEARCH, "--test-data", "synthetic:nope"), "unknown synthetic set 'nope'"),
    Row("target-file-missing", ("search", "--data", "synthetic:vibration", "--target", "{w}/missing.toml", "--out",
                                "{w}/run"), "cannot read target file {w}/missing.toml"),
    Row("cost-input-no-channels", ("cost", "--input", "400x0", "--classes", "4", "--k", "2", "--c", "1"),
        "input_channels must be >= 1"),
    Row("cost-input-negative", ("cost", "--input", "-1x8", "--classes", "4", "--k", "2", "--c", "1"),
        "argument --input"),
    Row("cost-input-one-part", ("cost", "--input", "400", "--classes", "4", "--k", "2", "--c", "1"),
        "--input must look like 400x8"),
    Row("cost-c-too-many-cells", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1000"),
        "c=1000 cells is too many for 400 samples"),
    Row("cost-kernel-0", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--kernel", "0"),
        "kernel_size must be a positive odd integer"),
    Row("cost-channel-multiple-0", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                    "--channel-multiple", "0"), "channel_multiple must be >= 1"),
    Row("cost-target-unknown", ("cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1", "--target",
                                "NOPE"), "unknown target 'NOPE'"),
    Row("simulate-speed-negative", ("simulate", "--speed", "-1", "--port", "{w}/tty"), "--speed must be a number"),
    Row("simulate-source-unknown-set", ("simulate", "--source", "synthetic:nope", "--port", "{w}/tty"),
        "unknown synthetic set 'nope'"),
    Row("collect-plan-unknown", ("collect", "--port", "{w}/tty", "--plan", "nope", "--out", "{w}/s"),
        "unknown plan 'nope'"),
    Row("collect-port-missing", ("collect", "--port", "{w}/tty", "--plan", "gestures4", "--out", "{w}/s"),
        "cannot open {w}/tty"),
    Row("demo-budget-0", ("demo", "--budget", "0", "--out", "{w}/demo"), "the time budget must be positive"),
    # The model on a board (issue 56): options and folders refused before any port is opened or anything built.
    Row("hil-runs-0", ("hil", "{w}/nothing", "--qemu", "microbit", "--runs", "0"), "--runs must be between 1 and 1000"),
    Row("hil-timeout-0", ("hil", "{w}/nothing", "--qemu", "microbit", "--timeout", "0"), "--timeout must be"),
    Row("hil-no-model", ("hil", "{w}/nothing", "--qemu", "microbit"), "the folder holds no model card"),
    Row("hil-port-without-firmware", ("hil", "{w}/nothing", "--port", "/dev/null"), "--port needs --firmware FOLDER"),
    Row("hil-firmware-not-ours", ("hil", "{w}/nothing", "--qemu", "microbit", "--firmware", "{w}/mine"),
        "is not a firmware folder of `tinynas firmware`", setup=_file("mine/notes.txt")),
    Row("hil-firmware-manifest-damaged", ("hil", "{w}/nothing", "--qemu", "microbit", "--firmware", "{w}/fw"),
        "is not a firmware manifest tinynas wrote (not JSON", setup=_file("fw/firmware.json", RANDOM)),
    Row("hil-firmware-manifest-foreign", ("hil", "{w}/nothing", "--qemu", "microbit", "--firmware", "{w}/fw"),
        "is not a firmware manifest tinynas wrote (it lacks written_by, board",
        setup=_file("fw/firmware.json", b'{"name": 1}')),
    Row("hil-qemu-unknown-board", ("hil", "{w}/nothing", "--qemu", "esp32"), "unknown board 'esp32'"),
    Row("hil-qemu-board-without-emulator", ("hil", "{w}/nothing", "--qemu", "nrf52840-dk"), "has no emulator"),
    Row("hil-both-qemu-and-port", ("hil", "{w}/nothing", "--qemu", "microbit", "--port", "/dev/null"),
        "not allowed with argument"),
    # A board whose profile holds numbers its firmware cannot send (issue 68): refused at the protocol in one line,
    # before any window, nothing written into the card (tests/hil/test_hil_numbers.py: the same at any window).
    Row("hil-board-output-count-400-digits", HIL_BOARD, "the board answered an output count of a 400-digit number "
        "which is not a count of outputs (1 to 4,294,967,295); not recorded",
        setup=_bad_board(sizes="64," + "9" * 400)),
    Row("hil-board-output-count-negative", HIL_BOARD, "the board answered an output count of -4 which is not",
        setup=_bad_board(sizes="64,-4")),
    Row("hil-board-input-size-a-word", HIL_BOARD, "the board answered an input size of 'sixty-four' which is not a "
        "size in bytes", setup=_bad_board(sizes="sixty-four,4")),
    Row("hil-board-counter-rate-zero", HIL_BOARD, "the board answered a counter rate of 0 which is not a rate in Hz",
        setup=_bad_board(counter="cycles,0")),
    Row("hil-board-counter-rate-beyond-32-bit", HIL_BOARD, "a counter rate of 4294967296 which is not a rate in Hz",
        setup=_bad_board(counter="cycles,4294967296")),
    Row("hil-board-stack-available-negative", HIL_BOARD, "an available stack of -1 which is not a size in bytes",
        setup=_bad_board(stack_available="-1")),
    Row("hil-board-stack-available-400-digits", HIL_BOARD, "an available stack of a 400-digit number which is not",
        setup=_bad_board(stack_available="9" * 400)),
    Row("firmware-unknown-board", ("firmware", "{w}/nothing", "--board", "esp32", "--out", "{w}/fw"),
        "unknown board 'esp32'"),
    Row("firmware-board-file-binary", ("firmware", "{w}/nothing", "--board", "{w}/b.toml", "--out", "{w}/fw"),
        "is not a TOML text file", setup=_file("b.toml", RANDOM)),
    Row("firmware-board-file-a-pipe", ("firmware", "{w}/nothing", "--board", "{w}/b.toml", "--out", "{w}/fw"),
        "a named pipe (FIFO), not a regular file", setup=_fifo("b.toml"), fresh=True),
    Row("firmware-no-model", ("firmware", "{w}/nothing", "--board", "microbit", "--out", "{w}/fw"),
        "the folder holds no model card"),
    Row("firmware-out-holds-a-users-files", ("firmware", "{w}/nothing", "--board", "microbit", "--out", "{w}/fw"),
        "holds files that are not a tinynas firmware", setup=_file("fw/notes.txt")),
    Row("collect-text-port-without-rate", ("collect", "--port", "csv:{w}/nope", "--plan", "gestures4", "--user", "a",
                                           "--out", "{w}/s"), "say the rate the device prints at"),
    Row("collect-text-port-unknown-option", ("collect", "--port", "csv:{w}/nope?rate=200&sep=x", "--plan",
                                             "gestures4", "--user", "a", "--out", "{w}/s"), "unknown option 'sep'"),
    Row("collect-brainflow-unknown-board", ("collect", "--port", "brainflow:no_such_board", "--plan", "gestures4",
                                            "--user", "a", "--out", "{w}/s"), "BrainFlow knows no board"),
    Row("simulate-chip-with-plain-text", ("simulate", "--wire", "text", "--chip", "{w}/fw"),
        "--chip needs --wire frames"),
    Row("simulate-cyton-of-a-4-channel-source", ("simulate", "--wire", "cyton", "--source",
                                                 "synthetic:emg?channels=4"), "a Cyton streams 8 channels at 250 Hz"),
    Row("simulate-lsl-with-a-port", ("simulate", "--wire", "lsl", "--port", "{w}/tty"), "--wire lsl makes a stream"),
    Row("simulate-cyton-faster", ("simulate", "--wire", "cyton", "--speed", "2"), "streams at the true rate"),
    Row("sweep-unknown-option", ("sweep", "{w}/grid.toml", "--out", "{w}/s"),
        "'colour' is not an option of `tinynas search`", setup=_file("grid.toml", b'[grid]\ncolour = ["red"]\n')),
    Row("sweep-empty-grid", ("sweep", "{w}/grid.toml", "--out", "{w}/s"), "the grid is empty",
        setup=_file("grid.toml", b'[fixed]\nseed = 1\n')),
    Row("sweep-a-cell-the-search-refuses", ("sweep", "{w}/grid.toml", "--out", "{w}/s"),
        "cell 1 (seed=0): argument --strategy: invalid choice", setup=_file(
            "grid.toml", b'[grid]\nseed = [0, 1]\n[fixed]\nstrategy = "nope"\ndata = "synthetic:emg"\n')),
    Row("sweep-too-many-cells", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--max-cells", "3"),
        "4 cells, more than 3", setup=_file("grid.toml", b'[grid]\nseed = [0, 1, 2, 3]\n')),
    Row("sweep-parallel-0", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--parallel", "0"), "--parallel must be"),
    Row("sweep-resume-nothing", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--resume"), "holds no sweep to resume",
        setup=_file("grid.toml", SWEEP_GRID)),
    Row("sweep-out-holds-files", ("sweep", "{w}/grid.toml", "--out", "{w}"), "is not empty",
        setup=_file("grid.toml", SWEEP_GRID)),
    Row("sweep-ray-nobody-there", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--engine", "ray", "--address",
                                   "127.0.0.1:9"), "--address 127.0.0.1:9: no Ray cluster answers there",
        setup=_file("grid.toml", b'[grid]\nseed = [0]\n[fixed]\ndata = "synthetic:emg"\n')),
    Row("sweep-ray-not-an-address", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--engine", "ray", "--address",
                                     "head"), "--address must be HOST:PORT"),
    Row("sweep-address-without-ray", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--address", "10.0.0.2:6379"),
        "--address is a Ray cluster's: give it with --engine ray"),
    Row("sweep-ray-with-parallel", ("sweep", "{w}/grid.toml", "--out", "{w}/s", "--engine", "ray", "--parallel", "2"),
        "--parallel is the local engine's"),
    # The sweep as hardened as the core (issue 68). Its grid file, read through the checked reader:
    Row("sweep-grid-fifo", SWEEP, "grid.toml: cannot read the grid (a named pipe (FIFO), not a regular file)",
        fresh=True, setup=_fifo("grid.toml")),
    Row("sweep-grid-dev-zero", ("sweep", "/dev/zero", "--out", "{w}/s"),
        "/dev/zero: cannot read the grid (a device file, not a regular file)", fresh=True),
    Row("sweep-grid-too-big", SWEEP, "larger than 1 MiB, the most a grid file may be",
        setup=_sparse("grid.toml", 2 << 20)),
    Row("sweep-grid-a-folder", SWEEP, "cannot read the grid (a folder, not a file)",
        setup=lambda w, a: (w / "grid.toml").mkdir()),
    Row("sweep-grid-random-bytes", SWEEP, "cannot read the grid (not UTF-8 text", setup=_file("grid.toml", RANDOM)),
    Row("sweep-grid-nested-deep", SWEEP, "not a TOML grid (lists or tables nested far too deep",
        setup=_file("grid.toml", b"[grid]\nseed = " + b"[" * 100_000 + b"]" * 100_000 + b"\n")),
    Row("sweep-grid-inline-tables-nested-deep", SWEEP, "nested far too deep",
        setup=_file("grid.toml", b"[fixed]\ndata = " + b"{a=" * 5000 + b"1" + b"}" * 5000 + b"\n")),
    Row("sweep-grid-integer-of-5000-digits", SWEEP, "not a TOML grid (a number of thousands of digits",
        setup=_file("grid.toml", b"[grid]\nseed = [" + b"9" * 5000 + b"]\n")),
    Row("sweep-grid-nul-in-a-value", SWEEP, "fixed.data holds the control character '\\x00'",
        setup=_file("grid.toml", b'[grid]\nseed = [0]\n[fixed]\ndata = "synthetic:emg\\u0000x"\n')),
    Row("sweep-grid-line-break-in-a-value", SWEEP, "grid.data holds the control character '\\n'",
        setup=_file("grid.toml", b'[grid]\ndata = ["synthetic:emg\\nx"]\n')),
    # Each cell's options checked before any cell runs (the search's own checks, the one range table):
    Row("sweep-cell-epochs-0", SWEEP, "cell 1 (seed=0): --epochs must be between 1 and 10000, got 0",
        setup=_sweep_grid("epochs = 0\n")),
    Row("sweep-cell-2-final-epochs-0", SWEEP, "cell 2 (final_epochs=0): --final-epochs must be between 1 and",
        setup=_file("grid.toml", b'[grid]\nfinal_epochs = [2, 0]\n[fixed]\ndata = "synthetic:emg"\n'
                                 b'target = "STM32F030F4P6"\n')),
    Row("sweep-cell-budget-forever", SWEEP, "cell 1 (seed=0): --budget: cannot read duration 'forever'",
        setup=_sweep_grid('budget = "forever"\n')),
    Row("sweep-cell-budget-a-year", SWEEP, "--budget '9000h' is more than 30 days",
        setup=_sweep_grid('budget = "9000h"\n')),
    Row("sweep-cell-unknown-target", SWEEP, "cell 2 (target=Z80): unknown target 'Z80'",
        setup=_file("grid.toml", b'[grid]\ntarget = ["STM32F030F4P6", "Z80"]\n[fixed]\ndata = "synthetic:emg"\n')),
    Row("sweep-cell-no-target", SWEEP, "cell 1 (seed=0): give --target NAME",
        setup=_file("grid.toml", b'[grid]\nseed = [0]\n[fixed]\ndata = "synthetic:emg"\n')),
    Row("sweep-cell-workers-0", SWEEP, "--workers must be at least 1, got 0", setup=_sweep_grid('workers = "0"\n')),
    Row("sweep-cell-c-prefix-not-a-c-name", SWEEP, "--c-prefix: C prefix '1bad' is not a C name",
        setup=_sweep_grid('c_prefix = "1bad"\n')),
    Row("sweep-cell-latency-a-word", SWEEP, "--latency: cannot read time per inference 'soon'",
        setup=_sweep_grid('latency = "soon"\n')),
    Row("sweep-cell-seed-negative", SWEEP, "cell 1 (seed=-1): --seed must be between 0 and",
        setup=_file("grid.toml", b'[grid]\nseed = [-1]\n[fixed]\ndata = "synthetic:emg"\ntarget = "nRF52840"\n')),
    # A value that is not of its option's type, or would be read as an option (`"--help"` printed the search's help):
    Row("sweep-cell-help-as-a-value", SWEEP, "[fixed] data = '--help': a value that starts with '-' would be read as "
        "an option of `tinynas search`", setup=_file("grid.toml", b'[grid]\nseed = [0]\n[fixed]\ndata = "--help"\n'
                                                                  b'target = "nRF52840"\n')),
    Row("sweep-cell-help-given-to-a-flag", SWEEP, "[fixed] ignore_data_checks = '--help': --ignore-data-checks is a "
        "flag: give true or false", setup=_sweep_grid('ignore_data_checks = "--help"\n')),
    Row("sweep-cell-a-word-given-to-a-flag", SWEEP, "--track-test is a flag: give true or false",
        setup=_sweep_grid('track_test = "yes"\n')),
    Row("sweep-cell-a-number-given-to-a-flag", SWEEP, "--ignore-data-checks is a flag",
        setup=_sweep_grid("ignore_data_checks = 1\n")),
    Row("sweep-cell-seed-a-word", SWEEP, "[grid] seed = 'one': --seed takes a whole number",
        setup=_file("grid.toml", b'[grid]\nseed = ["one"]\n[fixed]\ndata = "synthetic:emg"\ntarget = "nRF52840"\n')),
    Row("sweep-cell-seed-true", SWEEP, "[grid] seed = true: --seed takes a value, not true/false",
        setup=_file("grid.toml", b'[grid]\nseed = [true]\n[fixed]\ndata = "synthetic:emg"\ntarget = "nRF52840"\n')),
    Row("sweep-cell-epochs-in-quotes", SWEEP, "[fixed] epochs = '2': --epochs takes a whole number",
        setup=_sweep_grid('epochs = "2"\n')),
    Row("sweep-cell-learning-rate-a-word", SWEEP, "--learning-rate takes a number",
        setup=_sweep_grid('learning_rate = "fast"\n')),
    Row("sweep-cells-entry-a-negative-budget", SWEEP, "[[cells]] budget = '-5m': a value that starts with '-'",
        setup=_file("grid.toml", b'[[cells]]\nbudget = "-5m"\n[fixed]\ndata = "synthetic:emg"\n'
                                 b'target = "nRF52840"\n')),
    # --resume reads sweep.json as untrusted (damaged, edited, of another program): one line naming it, nothing run
    # or written, a cell's folder only ever cell-NNN of its place in the list.
    Row("sweep-resume-state-random-bytes", RESUME, "s/sweep.json: not UTF-8 text", setup=_resumable(raw=RANDOM)),
    Row("sweep-resume-state-not-json", RESUME, "s/sweep.json: not JSON", setup=_resumable(raw=b"{'grid': 1}")),
    Row("sweep-resume-state-a-list", RESUME, "a sweep's state is an object of 'grid' and 'cells', this is list",
        setup=_resumable(raw=b"[1, 2, 3]")),
    Row("sweep-resume-state-nested-deep", RESUME, "s/sweep.json: JSON nested far too deep",
        setup=_resumable(raw=b"[" * 20_000 + b"]" * 20_000)),
    Row("sweep-resume-state-cells-strings", RESUME, "cell 1 must be an object, got str 'cell-001'",
        setup=_resumable(lambda s: s.update(cells=["cell-001", "cell-002"]))),
    Row("sweep-resume-state-cells-an-object", RESUME, "its 'cells' are a dict, the grid has 2",
        setup=_resumable(lambda s: s.update(cells={"1": s["cells"][0]}))),
    Row("sweep-resume-state-a-cell-missing", RESUME, "its 'cells' are 1 cell(s), the grid has 2",
        setup=_resumable(lambda s: s["cells"].pop())),
    Row("sweep-resume-state-index-dot-dot", RESUME, "cell 2's index must be 2 (its place in the list), got '../..'",
        setup=_resumable(_cell(2, index="../.."))),
    Row("sweep-resume-state-two-cells-one-index", RESUME, "cell 2's index must be 2 (its place in the list), got 1",
        setup=_resumable(_cell(2, index=1))),
    Row("sweep-resume-state-index-true", RESUME, "cell 1's index must be 1 (its place in the list), got True",
        setup=_resumable(_cell(1, index=True))),
    Row("sweep-resume-state-tampered-values", RESUME, "cell 2's options are not the grid's",
        setup=_resumable(_cell(2, values={"seed": 1, "epochs": 0}))),
    Row("sweep-resume-state-value-retyped", RESUME, "cell 1's options are not the grid's",
        setup=_resumable(_cell(1, values={"seed": False}))),
    Row("sweep-resume-state-tampered-grid", RESUME, "holds a sweep of another grid",
        setup=_resumable(lambda s: s["grid"]["fixed"].update(epochs=0))),
    Row("sweep-resume-state-status-unknown", RESUME, "cell 2's status must be one of pending, running, done, failed",
        setup=_resumable(_cell(2, status="rm -rf"))),
    Row("sweep-resume-state-seconds-negative", RESUME, "cell 1's seconds must be a wall time of at least 0, got -5",
        setup=_resumable(_cell(1, seconds=-5))),
    Row("sweep-resume-state-seconds-nan", RESUME, "not JSON (NaN is not a number a sweep's state holds)",
        setup=_resumable(raw=json.dumps(_sweep_state()).replace("61.5", "NaN").encode())),
    Row("sweep-resume-state-attempts-a-word", RESUME, "cell 2's attempts must be a count, got 'many'",
        setup=_resumable(_cell(2, attempts="many"))),
    Row("sweep-resume-state-error-two-lines", RESUME, "cell 1's error must be one line of at most 400 characters",
        setup=_resumable(_cell(1, error="one\ntinynas: error: forged"))),
    Row("sweep-resume-state-node-a-path", RESUME, "cell 1's node must be a Ray node's id",
        setup=_resumable(_cell(1, node="../../etc"))),
    Row("sweep-resume-state-unknown-key", RESUME, "cell 1 has the unknown key 'argv'",
        setup=_resumable(_cell(1, argv=["--help"]))),
    Row("sweep-resume-state-a-key-missing", RESUME, "cell 2 lacks 'status'",
        setup=_resumable(lambda s: s["cells"][1].pop("status"))),
    Row("sweep-resume-state-fifo", RESUME, "s/sweep.json: cannot read the sweep's state (a named pipe (FIFO)",
        fresh=True, setup=lambda w, a: (_file("grid.toml", SWEEP_GRID)(w, a), _fifo("s/sweep.json")(w, a))),
    Row("sweep-resume-state-a-link-to-dev-zero", RESUME, "a symbolic link, which is not followed here",
        setup=lambda w, a: (_file("grid.toml", SWEEP_GRID)(w, a), (w / "s").mkdir(),
                            (w / "s" / "sweep.json").symlink_to("/dev/zero"))),
    Row("sweep-resume-state-too-big", RESUME, "the most a sweep state of this grid may be",
        setup=lambda w, a: (_file("grid.toml", SWEEP_GRID)(w, a), (w / "s").mkdir(),
                            _sparse("s/sweep.json", 100 << 20)(w, a))),
    Row("sweep-resume-cell-folder-a-link", RESUME, "s/cell-002: not the cell's own folder (a symbolic link or a file)",
        setup=_resumable(also=_linked_cell_folder)),
    # --address checked as text before Ray is imported (names no resolver takes were the codec's traceback), then
    # asked for its cluster id within seconds (a server that is not Ray's: tests/sweep/test_ray_address.py).
    Row("sweep-address-label-too-long", (*SWEEP, "--engine", "ray", "--address", "a" * 70 + ".example:6379"),
        "(70 characters) is not a DNS label of a host name (70 characters, more than 63"),
    Row("sweep-address-empty-label", (*SWEEP, "--engine", "ray", "--address", "head..example:6379"),
        "the host name has an empty label"),
    Row("sweep-address-leading-dot", (*SWEEP, "--engine", "ray", "--address", ".head:6379"),
        "the host name has an empty label"),
    Row("sweep-address-label-hyphen-first", (*SWEEP, "--engine", "ray", "--address=-head:6379"),
        "'-head' is not a DNS label of a host name"),
    Row("sweep-address-space", (*SWEEP, "--engine", "ray", "--address", "my head:6379"),
        "'my head' is not a DNS label"),
    Row("sweep-address-nul", (*SWEEP, "--engine", "ray", "--address", "he\0ad:6379"), "is not a DNS label"),
    Row("sweep-address-name-too-long", (*SWEEP, "--engine", "ray", "--address", "a." * 130 + "b:6379"),
        "a host name of 261 characters, more than DNS allows (253)"),
    Row("sweep-address-port-0", (*SWEEP, "--engine", "ray", "--address", "head:0"), "--address must be HOST:PORT"),
    Row("sweep-address-port-huge", (*SWEEP, "--engine", "ray", "--address", "head:" + HUGE),
        "--address must be HOST:PORT"),
    Row("sweep-address-ipv6-not-one", (*SWEEP, "--engine", "ray", "--address", "[::g]:6379"),
        "'[::g]' is not an IPv6 address"),
    Row("simulate-chip-not-a-firmware", ("simulate", "--chip", "{w}/mine"),
        "is not a firmware folder of `tinynas firmware`", setup=_file("mine/notes.txt")),
    Row("simulate-chip-not-built", ("simulate", "--chip", "{w}/fw"), "holds no firmware.elf: build it",
        setup=_file("fw/firmware.json", _FIRMWARE_MANIFEST % b"microbit")),
    Row("simulate-chip-of-a-real-board", ("simulate", "--chip", "{w}/fw"), "has no emulator",
        setup=_files({"fw/firmware.json": _FIRMWARE_MANIFEST % b"nrf52840-dk", "fw/firmware.elf": b"\x7fELF"})),
    # A model folder's card is untrusted input (issue 53): every section checked for type and range.
    Row("evaluate-card-threshold-1e30", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "beyond any figure of a model", setup=_model_dir(WITH_HEADER, card=_card_with(anomaly={
            "threshold": 1e30, "threshold_steps": 3, "score_scale": 0.1, "false_alarm_rate": 0.01}))),
    Row("evaluate-card-threshold-nan", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "NaN is not a number a card holds", setup=_model_dir(WITH_HEADER, raw_card=json.dumps(_card_with(anomaly={
            "threshold": 1.0, "threshold_steps": 3, "score_scale": 0.1, "false_alarm_rate": 0.01})).replace(
            '"threshold": 1.0', '"threshold": NaN').encode())),
    Row("evaluate-card-rate-negative", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "'false_alarm_rate' must be a rate above 0 and below 1", setup=_model_dir(WITH_HEADER, card=_card_with(
            anomaly={"threshold": 0.3, "threshold_steps": 3, "score_scale": 0.1, "false_alarm_rate": -1}))),
    Row("adapt-card-anomaly-a-list", ("adapt", "{w}/model", "--data", "synthetic:vibration", "--out", "{w}/new"),
        "the card's 'anomaly' must be a JSON object, got list", setup=_model_dir(WITH_HEADER,
                                                                                card=_card_with(anomaly=[1, 2]))),
    Row("evaluate-card-c-source-outside", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "'source' must be a plain file name", setup=_model_dir(WITH_HEADER, card=_card_with(c_runtime={
            "source": "../../etc/passwd", "header": "model_compiled.h", "entry_point": "tinynas_infer",
            "arena_bytes": 1, "input_bytes": 16, "output_bytes": 2}))),
    Row("evaluate-card-cost-a-string", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "the card's 'cost_estimate' must be a JSON object, got str", setup=_model_dir(
            WITH_HEADER, card=_card_with(cost_estimate="lots"))),
    Row("evaluate-card-a-link", ("evaluate", "{w}/model", "--data", "synthetic:vibration"),
        "a symbolic link, which is not followed here",
        setup=lambda w, a: (_model_dir(WITH_HEADER)(w, a), (w / "model" / "card.json").rename(w / "real.json"),
                            (w / "model" / "card.json").symlink_to(w / "real.json"))),
    # The newer inputs' port URLs (issue 68: text lines, BrainFlow, LSL): every option range-checked in one line
    # naming it and its range before anything waits (lsl timeout=-1 was liblsl's wait for ever), BrainFlow's unknown
    # boards and missing ports said in words, and the service's config refusing a port that can never open.
    *(Row(f"collect-lsl-timeout-{name}", _collect(f"lsl:armband?timeout={value}"),
          f"timeout must be a number of seconds above 0 and at most 600, got '{value}'")
      for name, value in (("negative", "-1"), ("nan", "nan"), ("1e308", "1e308"), ("inf", "inf"), ("0", "0"),
                          ("a-word", "soon"))),
    Row("collect-lsl-two-properties", _collect("lsl:name=armband&type=EMG"), "give one of name, type, source_id"),
    Row("collect-lsl-nothing-named", _collect("lsl:"), "give one of name, type, source_id"),
    Row("collect-brainflow-unknown-board-names-some", _collect("brainflow:armband_board"),
        "BrainFlow knows no board 'armband_board' (its names, any case, with or without _board: synthetic, cyton"),
    Row("collect-brainflow-missing-serial-port", _collect("brainflow:cyton?serial_port={w}/ttyUSB9"),
        "/ttyUSB9 (is the board's dongle or cable plugged in?"),
    Row("collect-brainflow-serial-port-a-users-file", _collect("brainflow:cyton?serial_port={w}/notes.txt"),
        "/notes.txt is not a serial port (not a character device)", setup=_file("notes.txt")),
    Row("collect-brainflow-timeout-negative", _collect("brainflow:synthetic?timeout=-1"),
        "timeout must be an integer from 0 to 600 (seconds), got '-1'"),
    Row("collect-brainflow-ip-port-beyond", _collect("brainflow:synthetic?ip_port=70000"),
        "ip_port must be an integer from 0 to 65535, got '70000'"),
    Row("collect-brainflow-playback-without-master", _collect("brainflow:playback_file?file={w}/rec.csv"),
        "say which, e.g. &master_board=synthetic", setup=_file("rec.csv", b"0\t1\n")),
    Row("collect-brainflow-master-board-unknown",
        _collect("brainflow:playback_file?file={w}/rec.csv&master_board=armband"),
        "BrainFlow knows no master_board 'armband'", setup=_file("rec.csv", b"0\t1\n")),
    Row("collect-brainflow-playback-a-pipe", _collect("brainflow:playback_file?file={w}/rec.csv&master_board=-1"),
        "a named pipe (FIFO), not a regular file", setup=_fifo("rec.csv"), fresh=True),
    Row("collect-csv-rate-nan", _collect("csv:{w}/tty?rate=nan"),
        "rate must be a number of samples a second above 0 and at most 100000, got 'nan'"),
    Row("collect-csv-rate-1e308", _collect("csv:{w}/tty?rate=1e308"),
        "rate must be a number of samples a second above 0 and at most 100000, got '1e308'"),
    Row("collect-csv-channels-a-fraction", _collect("csv:{w}/tty?rate=200&channels=2.5"),
        "channels must be an integer from 1 to 255, got '2.5'"),
    Row("collect-csv-baud-0", _collect("csv:{w}/tty?rate=200&baud=0"),
        "baud must be an integer from 1 to 100000000, got '0'"),
    Row("collect-csv-missing-port", _collect("csv:{w}/ttyACM9?rate=200"), "could not open port"),
    Row("service-config-port-lsl-timeout-negative", ("service", "config", "--config", "{w}/service.toml"),
        "port: lsl:armband?timeout=-1: timeout must be a number of seconds above 0",
        setup=_service_config('port = "lsl:armband?timeout=-1"\n')),
    Row("service-config-port-unknown-board", ("service", "config", "--config", "{w}/service.toml"),
        "port: brainflow:armband: BrainFlow knows no board 'armband'",
        setup=_service_config('port = "brainflow:armband"\n')),
    Row("service-config-port-csv-without-rate", ("service", "config", "--config", "{w}/service.toml"),
        "port: csv:/dev/ttyACM0: say the rate the device prints at",
        setup=_service_config('port = "csv:/dev/ttyACM0"\n')),
    Row("service-config-port-brainflow-option-out-of-range", ("service", "config", "--config", "{w}/service.toml"),
        "ip_protocol must be an integer from 0 to 2",
        setup=_service_config('port = "brainflow:cyton?ip_protocol=7"\n')),
]


# Every file the new wings read (issue 68), each made hostile in the ways files are (a pipe, a device, a folder,
# nothing, noise, zeros, a link to nowhere or to itself, too big): one line naming the file, never a wait or a read
# until memory runs out. `{f}` is the file's place; the line must name it (its base name).
WING_FILES = {
    "firmware-board-file": (("firmware", "{w}/nothing", "--board", "{f}", "--out", "{w}/fw"), "b.toml"),
    "search-target-file": (("search", "--data", "synthetic:vibration", "--target", "{f}", "--out", "{w}/run"),
                           "board.toml"),
    "sweep-grid": (("sweep", "{f}", "--out", "{w}/s"), "grid.toml"),
    "collect-plan": (("collect", "--port", "{w}/tty", "--plan", "{f}", "--out", "{w}/s"), "plan.toml"),
    "onboard-plan": (("onboard", "--user", "a", "--plan", "{f}", "--config", "{w}/service.toml"), "plan.json"),
    "cost-arch": (("cost", "--arch", "{f}", "--target", "STM32F030F4P6"), "arch.json"),
    "service-config": (("service", "config", "--config", "{f}"), "service.toml"),
    "data-npz": (("data", "inspect", "npz:{f}"), "windows.npz"),
    "simulate-chip-manifest": (("simulate", "--chip", "{w}/fw"), "fw/firmware.json"),
    "search-journal": ((*TINY_SEARCH[:6], "{w}/run", *TINY_SEARCH[7:]), "run/journal.sqlite"),
}
SETTINGS_LIMIT = 1 << 20


def _hostile(kind: str, name: str, slot: str) -> Callable[[Path, Assets], None]:
    """`name` under {w} made into `kind` (a config for the onboard slot beside it)."""
    def setup(w: Path, assets: Assets) -> None:
        path = w / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "pipe":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        elif kind == "empty":
            path.write_bytes(b"")
        elif kind == "noise":
            path.write_bytes(RANDOM)
        elif kind == "zeros":
            path.write_bytes(bytes(4096))
        elif kind == "link-to-nowhere":
            path.symlink_to(w / "gone")
        elif kind == "link-to-itself":
            path.symlink_to(path)
        elif kind == "too-big":
            with open(path, "wb") as handle:
                handle.truncate(2 * SETTINGS_LIMIT)
        if slot == "onboard-plan":
            (w / "service.toml").write_text(f'data_dir = "{w}/data"\n')
    return setup


HOSTILE_KINDS = ("pipe", "folder", "empty", "noise", "zeros", "link-to-nowhere", "link-to-itself", "too-big")
WING_FILE_ROWS = [
    Row(f"file-{slot}-{kind}", tuple(arg.replace("{f}", "{w}/" + name) for arg in args), Path(name).name,
        setup=_hostile(kind, name, slot), fresh=kind == "pipe")
    for slot, (args, name) in WING_FILES.items() for kind in HOSTILE_KINDS
    # A data file may be gigabytes (its limit is the memory check's, not 1 MiB); an empty config is every default.
    if not (slot == "data-npz" and kind == "too-big") and not (slot == "service-config" and kind == "empty")
]
ROWS += WING_FILE_ROWS


# Bad values generated from the one ranges table (tinynas.options.RANGES, issue 69): for each search option and
# each service-config key that reads a range, the values just outside it, a fraction where a whole number is asked,
# words, NaN and infinity. A range widened or narrowed changes these rows with it.
SEARCH_RANGED = {"epochs": "--epochs", "final_epochs": "--final-epochs", "batch_size": "--batch-size",
                 "learning_rate": "--learning-rate", "seed": "--seed", "candidates": "--candidates"}
CONFIG_RANGED = {"epochs": "epochs", "final_epochs": "final_epochs", "batch_size": "batch_size",
                 "learning_rate": "learning_rate", "rewear_repetitions": "rewear_repetitions",
                 "recalibrate_epochs": "rewear_epochs", "recalibrate_learning_rate": "rewear_learning_rate",
                 "rewear_unlabelled_seconds": "rewear_unlabelled_seconds"}


def _outside(key: str) -> dict[str, str]:
    """Text values outside RANGES[key], by what they are."""
    from tinynas.options import RANGES

    allowed = RANGES[key]
    step = 1 if allowed.whole else max(allowed.low * 0.5, 1e-9)
    values = {"below": repr(allowed.low if allowed.low_open else allowed.low - step), "words": "many"}
    if allowed.high is not None:
        values["above"] = repr(allowed.high + 1 if allowed.whole else allowed.high * 2)
    if allowed.whole:
        values["fraction"] = repr(allowed.low + 1.5)
    else:
        values.update(nan="nan", inf="inf")
    return values


RANGE_ROWS = [
    *[Row(f"range-{key}-{kind}", (*SEARCH, option, value), option)
      for key, option in SEARCH_RANGED.items() for kind, value in _outside(key).items()],
    *[Row(f"range-config-{name}-{kind}", ("service", "config", "--config", "{w}/service.toml"), name,
          setup=_service_config(f"{name} = {repr(value) if kind == 'words' else value}\n"))
      for key, name in CONFIG_RANGED.items() for kind, value in _outside(key).items()],
]
ROWS += RANGE_ROWS
