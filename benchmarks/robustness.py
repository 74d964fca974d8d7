"""Robustness benchmark (issue 16): bad inputs and faults through the real CLI, plus frame-decoder fuzzing.

    python benchmarks/robustness.py            # every case (< 20 min on 2 cores)
    python benchmarks/robustness.py --quick    # a subset (< 3 min)

Every case runs the installed `tinynas` console script as a subprocess in a fresh temporary
folder holding real files (truncated, random, foreign, unreadable ones; read-only and full
tmpfs mounts; a finished tiny search), then is classified:

    behaved        exit 2, the last stderr line is the only `tinynas: error: ...`, no traceback,
                   no file that existed before the run lost or changed (cases that should succeed:
                   exit 0 instead)
    traceback      a Python traceback, an "internal error" (exit 1) or a crash by a signal
    lost/changed   a file that was not the run's own disappeared or changed
    hang           still running at the case's timeout (for a bad value: it was accepted)
    wrong exit     another exit code (e.g. 0 for a value that should be refused)
    multi-line     the error is not one `tinynas: error:` line at the end of stderr
    wrote first    refused, but only after writing files (the output folder exists)
    misleading     refused without naming the bad option or key, or in Python's own words only

`--only TEXT` runs the cases of one category or whose name holds TEXT (no results file written).

The decoder fuzz feeds 1,000,000 random inputs (random bytes and mutated valid frames) to one
`StreamDecoder`, with an intact frame after every tenth so resynchronisation is checked, under
tracemalloc. Results: benchmarks/results/robustness.md; failing cases also go one per line to
/tmp/robustness-failures.txt (command and symptom) so they can be dispatched.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import wave
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"
_SCRIPT = Path(sys.executable).with_name("tinynas")
TINYNAS = [str(_SCRIPT)] if _SCRIPT.exists() else [sys.executable, "-m", "tinynas.cli"]
# Root ignores file modes; without these capabilities a chmod 000 file is really unreadable.
UNPRIVILEGED = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]
TINY_DATA = "synthetic:vibration?windows_per_class=24&length=256"
# Bounded by candidates, the budget only a cap: a wall-clock budget raced the machine (under load 8-10 a valid search
# of a non-UTF-8 class folder was still in its final stage at the case's timeout and was counted a hang).
TINY_SEARCH = ["search", "--data", TINY_DATA, "--target", "STM32C011F6P6", "--budget", "2m",
               "--strategy", "fast", "--epochs", "1", "--final-epochs", "1", "--candidates", "2"]
# Python's own words passed through as a message: they say neither what is wrong nor what to do (and a
# pickle hint on random bytes invites loading untrusted data).
INTERNALS = ("list indices", "object is not iterable", "not subscriptable", "NoneType", "invalid literal for",
             "allow_pickle")
# Default places a run must not touch when it was told to use the case's folder (a config ignored).
OUTSIDE = [Path("/var/lib/tinynas"), Path("/etc/systemd/system/tinynas.service"), Path.cwd() / "tinynas-demo"]
VERDICTS = ["behaved", "traceback", "leaked", "lost/changed", "hang", "wrong exit", "multi-line", "wrote first",
            "misleading", "skipped"]


# ---- cases ------------------------------------------------------------------------------------------
@dataclass
class Case:
    """One bad input or fault. `argv` may use {w} (the case folder) and {fx} (the shared fixtures)."""

    name: str
    category: str
    argv: list[str]
    setup: Callable[[Path], None] | None = None
    expect: str = "error"          # error: exit 2 one line; ok: exit 0; any: 0 or 2, no traceback
    owned: tuple[str, ...] = ()    # globs (under the case folder) the run may change, content kept somewhere
    fresh: tuple[str, ...] = ()    # must not exist after a refusal (nothing written before refusing)
    timeout: float = 90
    unprivileged: bool = False
    needs_run: bool = False        # copies the finished tiny search into {w}/run first
    quick: bool = False
    runner: Callable | None = None  # a multi-step case (interrupt + resume, full disk + resume)
    forbid: tuple[str, ...] = ()   # words the error line must not hold (a misleading hint)
    mention: tuple[str, ...] = ()  # the error line must hold one of these (refused for the right reason)
    env: dict = field(default_factory=dict)  # extra environment, {w} replaced
    device: bool = False           # a simulated front-end (`tinynas simulate`) streams on {w}/tty meanwhile
    teardown: Callable[[], None] | None = None  # ends what the setup started (a table row's fake board and thread)


@dataclass
class Result:
    case: Case
    verdict: str
    symptom: str
    seconds: float
    command: str
    code: int | None = None


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)


def _noise(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


# ---- valid files of each format, then their corruptions ------------------------------------------
def _csv(path: Path, rng) -> None:
    rows = rng.normal(size=(100, 3))
    _write(path, "a,b,c\n" + "".join(",".join(f"{v:.4f}" for v in row) + "\n" for row in rows))


def _wav(path: Path, rng) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with wave.open(str(path), "wb") as handle:
        handle.setnchannels(2)
        handle.setsampwidth(2)
        handle.setframerate(8000)
        handle.writeframes((rng.normal(size=(400, 2)) * 3000).astype("<i2").tobytes())


def _npy(path: Path, rng) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, rng.normal(size=(100, 3)).astype(np.float32))


def _mat(path: Path, rng) -> None:
    from scipy.io import savemat

    path.parent.mkdir(parents=True, exist_ok=True)
    savemat(path, {"signal": rng.normal(size=(100, 3))})


def _class_folder(writer, suffix: str):
    def make(folder: Path) -> Path:
        rng = np.random.default_rng(0)
        for label in ("open", "fist"):
            for index in range(3):
                writer(folder / label / f"r{index}{suffix}", rng)
        return folder / "fist" / f"r1{suffix}"
    return make


def _npz(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True, exist_ok=True)
    np.savez(folder / "set.npz", x=rng.normal(size=(12, 64, 2)).astype(np.float32), y=np.arange(12) % 3,
             classes=np.array(["a", "b", "c"]), sample_rate_hz=200.0)
    return folder / "set.npz"


def _isl(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    for letter in "AB":
        for rep in range(3):
            record = {"timestamp": f"26/06/20/12:0{rep}:00", "duration": 2000,
                      "emg": {"frequency": 200, "data": rng.integers(-128, 128, size=(400, 8)).tolist()}}
            _write(folder / "Dataset" / letter / f"{letter}{rep}-guid.json", json.dumps(record))
    return folder / "Dataset" / "B" / "B1-guid.json"


def _cwru(folder: Path) -> Path:
    from scipy.io import savemat

    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    savemat(folder / "105.mat", {"X105_DE_time": rng.normal(size=(24_000, 1)),
                                 "X105_FE_time": rng.normal(size=(24_000, 1)), "X105RPM": np.array([[1797]])})
    savemat(folder / "118.mat", {"X118_DE_time": rng.normal(size=(24_000, 1)),
                                 "X118_FE_time": rng.normal(size=(24_000, 1))})
    return folder / "118.mat"


def _session(folder: Path, part: str = "samples.bin") -> Path:
    from firmware_bridge.protocol import Hello, Samples
    from firmware_bridge.recorder import Recorder

    rng = np.random.default_rng(0)
    hello = Hello("bench", "1.0", 2, 200.0, "int16")
    with Recorder(folder, hello, user="bench", labels=["open", "fist"]) as recorder:
        for block in range(12):
            recorder.handle(Samples(block * 100, rng.integers(-2000, 2000, size=(100, 2)).astype(np.int16)))
        for index in range(12):
            recorder.add_window(("open", "fist")[index % 2], index * 100, 100)
    return folder / part


FORMATS = {
    # name: (writer returning the file to damage, spec with {d} the data folder, folders hold class subfolders)
    "csv": (_class_folder(_csv, ".csv"), "folder:{d}?rate=200", True),
    "wav": (_class_folder(_wav, ".wav"), "folder:{d}", True),
    "npy": (_class_folder(_npy, ".npy"), "folder:{d}?rate=200", True),
    "mat": (_class_folder(_mat, ".mat"), "folder:{d}?rate=200", True),
    "npz": (_npz, "npz:{d}/set.npz", False),
    "isl": (_isl, "isl:{d}", True),
    "cwru": (_cwru, "cwru:{d}?files=105,118&channel=DE&windows_per_file=20", False),
    "session-samples": (_session, "session:{d}", False),
    "session-manifest": (lambda d: _session(d, "manifest.json"), "session:{d}", False),
    "session-windows": (lambda d: _session(d, "windows.jsonl"), "session:{d}", False),
}


def _corrupt(kind: str, target: Path) -> None:
    data = target.read_bytes()
    if kind == "empty":
        target.write_bytes(b"")
    elif kind == "truncated":
        target.write_bytes(data[:len(data) // 2])
    elif kind == "header-only":
        target.write_bytes(data[:16])
    elif kind == "random":
        target.write_bytes(_noise(max(len(data), 64), 1))
    elif kind == "junk-appended":
        target.write_bytes(data + _noise(300, 2))
    elif kind == "junk-after-header":  # e.g. a WAV with junk between its RIFF header and its chunks
        target.write_bytes(data[:12] + _noise(300, 2) + data[12:])
    elif kind == "zeros":
        target.write_bytes(bytes(len(data)))
    elif kind == "unreadable":
        target.chmod(0)
    elif kind == "a-folder":
        target.unlink()
        target.mkdir()
    elif kind == "dangling-link":
        target.unlink()
        target.symlink_to(target.with_name("nowhere"))
    else:
        raise ValueError(kind)


# Corruptions that may leave a valid file (a truncated CSV at a line end, JSON lines cut at a line):
# the loader may accept them; it must still not crash.
MAY_BE_VALID = {("csv", "truncated"), ("csv", "junk-appended"), ("csv", "junk-after-header"),
                # A folder where a file was is a deeper folder (allowed), empty: the class keeps its other files.
                ("csv", "a-folder"), ("wav", "a-folder"), ("npy", "a-folder"), ("mat", "a-folder"),
                # Bytes after a WAV's data chunk or a zip's end record are outside the format: readers skip them.
                ("wav", "junk-appended"), ("npz", "junk-appended"), ("session-samples", "truncated"),
                ("session-samples", "junk-appended"), ("session-samples", "random"), ("session-samples", "zeros"),
                ("session-samples", "header-only"), ("session-windows", "truncated"), ("session-windows", "empty"),
                ("session-windows", "header-only"), ("npy", "junk-appended"), ("mat", "junk-appended"),
                ("wav", "truncated"), ("cwru", "junk-appended"), ("session-manifest", "junk-appended")}
CORRUPTIONS = ["empty", "truncated", "header-only", "random", "junk-appended", "junk-after-header", "zeros",
               "unreadable", "a-folder", "dangling-link"]


def data_file_cases() -> list[Case]:
    cases = []
    for fmt, (writer, spec, _) in FORMATS.items():
        for kind in CORRUPTIONS:
            def setup(w: Path, writer=writer, kind=kind) -> None:
                _corrupt(kind, writer(w / "d"))
            expect = "any" if (fmt, kind) in MAY_BE_VALID else "error"
            # Hints that were wrong before (issue 16): a missing .mat is not "truncated", random bytes in an
            # .npz have nothing to do with pickles.
            forbid = ("allow_pickle",) if fmt == "npz" else ("truncated",) if kind in ("unreadable", "a-folder",
                                                                                   "dangling-link") else ()
            cases.append(Case(f"{fmt} {kind}", "data files", ["data", "inspect", spec.format(d="{w}/d")], setup,
                              expect=expect, unprivileged=kind == "unreadable", forbid=forbid,
                              quick=kind in ("random", "truncated", "unreadable")))
    # The search path reads the same files through its own code (windows.py): one damage per format.
    for fmt, (writer, spec, _) in FORMATS.items():
        if fmt.startswith("session-") and fmt != "session-manifest":
            continue
        def setup(w: Path, writer=writer) -> None:
            _corrupt("random", writer(w / "d"))
        cases.append(Case(f"search on {fmt} random", "data files",
                          [*TINY_SEARCH[:1], "--data", spec.format(d="{w}/d"), *TINY_SEARCH[3:], "--out", "{w}/out"],
                          setup, fresh=("out",), timeout=60, quick=fmt == "wav"))
    # Class folders: a name that is not UTF-8, an unreadable one, an empty one.
    def bad_name(w: Path) -> None:
        _class_folder(_csv, ".csv")(w / "d")
        os.rename(w / "d" / "fist", os.fsencode(w / "d") + b"/f\xffst")
    def unreadable_folder(w: Path) -> None:
        _class_folder(_csv, ".csv")(w / "d")
        (w / "d" / "fist").chmod(0)
    def empty_folder(w: Path) -> None:
        _class_folder(_csv, ".csv")(w / "d")
        (w / "d" / "rest").mkdir()
    for name, setup in [("non-UTF-8 class folder", bad_name), ("unreadable class folder", unreadable_folder),
                        ("empty class folder", empty_folder)]:
        expect = "any" if name.startswith("non") else "error"
        forbid = ("holds no signal files",) if "unreadable" in name else ()
        cases.append(Case(f"inspect {name}", "data files", ["data", "inspect", "folder:{w}/d?rate=200"], setup,
                          expect=expect, unprivileged="unreadable" in name, quick=True, forbid=forbid))
        cases.append(Case(f"search {name}", "data files",
                          ["search", "--data", "folder:{w}/d?rate=200&window=50&hop=50", *TINY_SEARCH[3:],
                           "--out", "{w}/out"], setup, expect=expect, unprivileged="unreadable" in name,
                          timeout=150, fresh=("out",) if expect == "error" else ()))
    return cases


# ---- data specs -----------------------------------------------------------------------------------
def spec_cases() -> list[Case]:
    specs = [
        "synthetic:emg?sample_rate_hz=0", "synthetic:emg?sample_rate_hz=-5", "synthetic:emg?sample_rate_hz=nan",
        "synthetic:emg?classes=0", "synthetic:emg?classes=1", "synthetic:emg?classes=-1", "synthetic:emg?classes=abc",
        "synthetic:emg?classes=1000000000", "synthetic:emg?channels=0", "synthetic:vibration?length=100000000",
        "synthetic:vibration?length=0", "synthetic:vibration?windows_per_class=0",
        "synthetic:vibration?windows_per_class=100000000", "synthetic:vibration?seed=-1",
        "synthetic:vibration?noise=-1", "synthetic:vibration?shaft_rpm=0", "synthetic:vibration?foo=1",
        "synthetic:vibration?length", "synthetic:vibration?seed=1&seed=2", "synthetic:nope", "nope:x", "",
        "synthetic", "cwru:{w}/missing", "isl:{w}/missing", "folder:{w}/missing", "npz:{w}/missing.npz",
        "session:{w}/missing", "folder:{w}/afile.txt", "isl:{w}/afile.txt",
        "cwru:{cwru}?windows_per_file=0", "cwru:{cwru}?window=0", "cwru:{cwru}?hop=0", "cwru:{cwru}?window=-1",
        "cwru:{cwru}?channel=XX", "cwru:{cwru}?files=abc", "cwru:{cwru}?files=99999", "cwru:{cwru}?window=100000000",
        "folder:{csv}?rate=200&window=0", "folder:{csv}?rate=200&window=50&hop=0", "folder:{csv}?rate=0",
        "folder:{csv}?rate=-1", "folder:{csv}?rate=nan", "folder:{csv}?rate=inf", "folder:{csv}",
        "folder:{csv}?rate=200&channels=99",
        "folder:{csv}?rate=200&channels=zz", "folder:{csv}?rate=200&window=100000000",
        "isl:{isl}?imu=maybe", "npz:{npz}?rate=0", "npz:{npz}?rate=-3", "session:{session}?window=0",
    ]
    real_cwru = SHARED / "cwru"

    def setup(w: Path) -> None:
        _write(w / "afile.txt", "not data\n")
        _class_folder(_csv, ".csv")(w / "csv")
        _isl(w / "isl")
        _npz(w / "npz")
        _session(w / "session")
        if not (real_cwru / "105.mat").exists():
            _cwru(w / "cwru")

    cases = []
    for index, spec in enumerate(specs):
        text = spec.format(w="{w}", csv="{w}/csv", isl="{w}/isl", npz="{w}/npz/set.npz", session="{w}/session",
                           cwru=str(real_cwru) if (real_cwru / "105.mat").exists() else "{w}/cwru")
        expect = "any" if spec in ("synthetic:emg?classes=1",) else "error"
        cases.append(Case(f"spec {spec.replace('{', '').replace('}', '') or '(empty)'}", "data specs",
                          ["data", "inspect", text], setup, expect=expect, quick=index % 3 == 0))
    # The same refusals must come from search before anything is written.
    for spec in ["synthetic:emg?sample_rate_hz=0", "synthetic:vibration?length=100000000",
                 "synthetic:vibration?windows_per_class=0", "cwru:{cwru}?windows_per_file=0", "folder:{w}/missing"]:
        text = spec.format(w="{w}", cwru=str(real_cwru) if (real_cwru / "105.mat").exists() else "{w}/cwru")
        cases.append(Case(f"search spec {spec.replace('{', '').replace('}', '')}", "data specs",
                          ["search", "--data", text, *TINY_SEARCH[3:], "--out", "{w}/out"], setup,
                          fresh=("out",), timeout=60, quick=True))
    return cases


# ---- options ---------------------------------------------------------------------------------------
def _names(option: str) -> tuple[str, ...]:
    """How an error may name an option or key: --batch-size, batch-size, batch size, batch_size."""
    bare = option.lstrip("-")
    also = {"--macs": ("MAC",), "--test-data": ("",)}.get(option, ())  # (a bad test spec says what is wrong)
    return (option, bare, bare.replace("-", " "), bare.replace("-", "_"), bare.replace("_", " "), *also)


class _RowAssets:
    """One table row's view of the shared assets: the models are the run's, the boards its setup starts are its own,
    so that a row's teardown never ends the board of a row running beside it (a pty number freed and taken again
    would hand one row's symlink to another's board)."""

    def __init__(self, shared) -> None:
        self.shared, self.devices = shared, []

    def __getattr__(self, name: str):
        return getattr(self.shared, name)

    def close_devices(self) -> None:
        while self.devices:
            self.devices.pop().close()


WING_CATEGORIES = (("file-", "hostile files in the wings (issue 68)"), ("sweep-", "sweep (issue 68)"),
                   ("hil-", "firmware and hil (issue 68)"), ("firmware-", "firmware and hil (issue 68)"),
                   ("simulate-chip", "firmware and hil (issue 68)"), ("collect-", "inputs (issue 68)"),
                   ("service-config-port", "inputs (issue 68)"))
"""The table's rows for the wings issue 68 hardened, by the start of their id; the rest are options."""


def _table_category(row_id: str) -> str:
    return next((name for start, name in WING_CATEGORIES if row_id.startswith(start)), "options (the table)")


def option_cases() -> list[Case]:
    """The bad-input table the test suite runs too (`tests/support/bad_inputs.py`: options, files named by an
    option, model folders, plans and configs), each row classified here like every other case."""
    from tests.support.bad_inputs import ROWS, Assets

    assets = Assets(lambda name: Path(tempfile.mkdtemp(prefix=f"table-{name}-", dir=WORK)))
    cases = []
    for index, row in enumerate(ROWS):
        if row.owner:  # a fix in progress elsewhere: the test marks it xfail, the benchmark leaves it out
            continue
        mine = _RowAssets(assets)  # the shared models; this row's own boards (cases run side by side)

        def setup(w: Path, row=row, mine=mine) -> None:
            if row.setup is not None:
                row.setup(w, mine)
            for module in row.hide:  # made unimportable, in the command and in the workers it starts
                _write(w / "shadow" / module / "__init__.py", f"raise ImportError('no {module}')\n")

        cases.append(Case(f"table {row.id}", _table_category(row.id), list(row.args), setup,
                          env={"PYTHONPATH": "{w}/shadow"} if row.hide else {}, timeout=90 if row.fresh else 45,
                          mention=(row.message,), quick=index % 4 == 0, teardown=mine.close_devices))
    return cases


# ---- plans, targets, architectures ---------------------------------------------------------------
def config_file_cases() -> list[Case]:
    contents = {
        "random": _noise(300, 3), "empty": b"", "a JSON list": b"[1, 2]", "missing keys": b"{}",
        "wrong types": b'{"classes": 5, "window_seconds": "long"}', "a folder": None,
    }
    cases = []
    for name, data in contents.items():
        for kind, suffix, argv in [
            ("plan", ".json", ["collect", "--port", "{w}/tty", "--plan", "{w}/f.json", "--out", "{w}/s"]),
            ("arch", ".json", ["cost", "--arch", "{w}/f.json"]),
            ("target", ".toml", ["cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                 "--target", "{w}/f.toml"]),
        ]:
            def setup(w: Path, data=data, suffix=suffix) -> None:
                if data is None:
                    (w / f"f{suffix}").mkdir()
                else:
                    _write(w / f"f{suffix}", data)
            cases.append(Case(f"{kind} file {name}", "plans, targets, architectures", argv, setup,
                              fresh=("s",) if kind == "plan" else (), quick=name == "random",
                              mention=("missing", "need", "no ", "must") if name == "missing keys" and kind != "target"
                              else ()))
    extra = {
        "target ram negative": ("f.toml", b'name = "x"\nram_bytes = -1\nflash_bytes = 1000\nmac_budget = 1000000\n',
                                ["cost", "--input", "400x8", "--classes", "4", "--k", "2", "--c", "1",
                                 "--target", "{w}/f.toml"]),
        "plan with no classes": ("f.json", b'{"classes": []}',
                                 ["collect", "--port", "{w}/tty", "--plan", "{w}/f.json", "--out", "{w}/s"]),
        "arch k negative": ("f.json", b'{"input_length": 400, "input_channels": 8, "classes": 4, "k": -2, "c": 1}',
                            ["cost", "--arch", "{w}/f.json"]),
    }
    for name, (file, data, argv) in extra.items():
        cases.append(Case(name, "plans, targets, architectures", argv,
                          lambda w, file=file, data=data: _write(w / file, data), fresh=("s",)))
    return cases


# ---- models: measure and evaluate ------------------------------------------------------------------
def model_cases() -> list[Case]:
    cases = []
    for name, damage in [("random", lambda b: _noise(len(b), 4)), ("truncated", lambda b: b[:len(b) // 2]),
                         ("empty", lambda b: b""), ("header only", lambda b: b[:32]),
                         ("zeros", lambda b: bytes(len(b)))]:
        def setup(w: Path, damage=damage) -> None:
            model = w / "run" / "model.tflite"
            model.write_bytes(damage(model.read_bytes()))
        cases.append(Case(f"measure {name} tflite", "models", ["measure", "{w}/run/model.tflite"], setup,
                          needs_run=True, quick=name == "random"))
        cases.append(Case(f"evaluate {name} tflite", "models", ["evaluate", "{w}/run", "--data", TINY_DATA], setup,
                          needs_run=True, timeout=60, quick=name == "truncated"))
    cards = {
        "without classes": lambda card: {k: v for k, v in card.items() if k != "classes"} | {
            "preprocessing": {k: v for k, v in card["preprocessing"].items() if k != "class_names"}},
        "without preprocessing": lambda card: {k: v for k, v in card.items() if k != "preprocessing"},
        "preprocessing a list": lambda card: card | {"preprocessing": [1, 2]},
        "preprocessing a string": lambda card: card | {"preprocessing": "standard"},
        "a JSON list": lambda card: [card],
        "window length a string": lambda card: card | {"preprocessing": card["preprocessing"] | {
            "window_length": "long"}},
        "channels negative": lambda card: card | {"preprocessing": card["preprocessing"] | {"channels": -1}},
    }
    for name, change in cards.items():
        def setup(w: Path, change=change) -> None:
            path = w / "run" / "card.json"
            path.write_text(json.dumps(change(json.loads(path.read_text()))))
        # A card from before preprocessing was recorded is still read (defaults from the top-level fields).
        cases.append(Case(f"evaluate card {name}", "models", ["evaluate", "{w}/run", "--data", TINY_DATA], setup,
                          expect="any" if name == "without preprocessing" else "error", needs_run=True, timeout=60,
                          quick=name == "without classes"))
    for name, data in [("random", _noise(500, 5)), ("empty", b""), ("truncated", None)]:
        def setup(w: Path, data=data) -> None:
            path = w / "run" / "card.json"
            path.write_bytes(path.read_bytes()[:40] if data is None else data)
        cases.append(Case(f"evaluate card {name}", "models", ["evaluate", "{w}/run", "--data", TINY_DATA], setup,
                          needs_run=True, timeout=60))
    cases += [
        Case("evaluate without card", "models", ["evaluate", "{w}/run", "--data", TINY_DATA],
             lambda w: (w / "run" / "card.json").unlink(), needs_run=True, timeout=60),
        Case("evaluate on data of another shape", "models", ["evaluate", "{w}/run", "--data", "synthetic:emg"],
             needs_run=True, timeout=60, quick=True),
        Case("evaluate a missing folder", "models", ["evaluate", "{w}/missing", "--data", TINY_DATA]),
        Case("evaluate with a bad spec", "models", ["evaluate", "{w}/run", "--data", "synthetic:nope"],
             needs_run=True),
        Case("measure a folder", "models", ["measure", "{w}"]),
        Case("measure a missing file", "models", ["measure", "{w}/missing.tflite"]),
        Case("measure an unreadable file", "models", ["measure", "{w}/run/model.tflite"],
             lambda w: (w / "run" / "model.tflite").chmod(0), needs_run=True, unprivileged=True),
        Case("replay --trial 999", "models", ["replay", "{w}/run", "--trial", "999"], needs_run=True),
        Case("replay --trial -1", "models", ["replay", "{w}/run", "--trial", "-1"], needs_run=True),
        Case("replay on a random journal", "models", ["replay", "{w}/run", "--trial", "0"],
             lambda w: (w / "run" / "journal.sqlite").write_bytes(_noise(4096, 6)), needs_run=True),
    ]
    return cases


# ---- journal and output folder --------------------------------------------------------------------
def _foreign_db(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(path) as db:
        db.execute("create table people (name text, age int)")
        db.execute("insert into people values ('ada', 36)")
    db.close()


def journal_cases() -> list[Case]:
    resume = [*TINY_SEARCH, "--out", "{w}/run", "--resume"]
    again = [*TINY_SEARCH, "--out", "{w}/run"]
    journal = lambda w: w / "run" / "journal.sqlite"  # noqa: E731
    cases = [
        Case("empty journal + --resume on a finished run", "journal and output", resume,
             lambda w: journal(w).write_bytes(b""), needs_run=True, quick=True),
        Case("random journal + --resume", "journal and output", resume,
             lambda w: journal(w).write_bytes(_noise(8192, 7)), needs_run=True),
        Case("truncated journal + --resume", "journal and output", resume,
             lambda w: journal(w).write_bytes(journal(w).read_bytes()[:2048]), needs_run=True),
        Case("journal is a folder + --resume", "journal and output", resume,
             lambda w: (journal(w).unlink(), journal(w).mkdir()), needs_run=True),
        Case("search again into a finished run (no --resume)", "journal and output", again, needs_run=True,
             quick=True),
        Case("--resume with another data spec", "journal and output",
             ["search", "--data", "synthetic:vibration?windows_per_class=30&length=256", *TINY_SEARCH[3:],
              "--out", "{w}/run", "--resume"], needs_run=True),
        Case("--resume with other --final-epochs", "journal and output",
             [*TINY_SEARCH[:-1], "3", "--out", "{w}/run", "--resume"], needs_run=True),
        Case("foreign sqlite in --out", "journal and output", [*TINY_SEARCH, "--out", "{w}/o"],
             lambda w: _foreign_db(w / "o" / "journal.sqlite"), quick=True),
        Case("foreign sqlite in --out + --resume", "journal and output", [*TINY_SEARCH, "--out", "{w}/o", "--resume"],
             lambda w: _foreign_db(w / "o" / "journal.sqlite")),
        Case("--resume on an empty folder", "journal and output", [*TINY_SEARCH, "--out", "{w}/o", "--resume"],
             lambda w: (w / "o").mkdir()),
        Case("--resume on a missing folder", "journal and output", [*TINY_SEARCH, "--out", "{w}/o", "--resume"],
             fresh=("o",)),
        Case("--out holds a user's files", "journal and output", [*TINY_SEARCH, "--out", "{w}/o"],
             lambda w: (_write(w / "o" / "notes.txt", "mine\n"), _write(w / "o" / "report.md", "my report\n")),
             expect="any", timeout=150),
        Case("demo --out holds a user's files", "journal and output", ["demo", "--budget", "1m", "--out", "{w}/o"],
             lambda w: (_write(w / "o" / "best.json", "{}"), _write(w / "o" / "model.tflite", "not mine to lose")),
             expect="any", timeout=200),
        Case("--out is a file", "journal and output", [*TINY_SEARCH, "--out", "{w}/o"],
             lambda w: _write(w / "o", "my notes\n"), quick=True),
        Case("--out under a file", "journal and output", [*TINY_SEARCH, "--out", "{w}/o/run"],
             lambda w: _write(w / "o", "my notes\n")),
        Case("--out unwritable (permissions)", "journal and output", [*TINY_SEARCH, "--out", "{w}/ro/run"],
             lambda w: ((w / "ro").mkdir(), (w / "ro").chmod(0o555)), unprivileged=True, fresh=("ro/run",)),
        Case("collect --out holding another program's manifest.json", "journal and output",
             ["collect", "--port", "{w}/tty", "--plan", "gestures4", "--out", "{w}/o", "--headless"],
             lambda w: _write(w / "o" / "manifest.json", json.dumps({"name": "my web app", "version": "2.1"})),
             device=True, timeout=60),
        Case("collect --out holding a damaged manifest.json", "journal and output",
             ["collect", "--port", "{w}/tty", "--plan", "gestures4", "--out", "{w}/o", "--headless"],
             lambda w: _write(w / "o" / "manifest.json", _noise(300, 11)), device=True, timeout=60),
        Case("collect --out holding a session of another device layout", "journal and output",
             ["collect", "--port", "{w}/tty", "--plan", "gestures4", "--out", "{w}/o", "--headless"],
             lambda w: _session(w / "o"), device=True, timeout=60),
        Case("collect --out is a file", "journal and output",
             ["collect", "--port", "{w}/tty", "--plan", "gestures4", "--out", "{w}/o", "--headless"],
             lambda w: _write(w / "o", "my notes\n"), device=True, timeout=60),
        Case("replay on a folder holding a foreign sqlite", "journal and output",
             ["replay", "{w}/o", "--trial", "0"], lambda w: _foreign_db(w / "o" / "journal.sqlite")),
    ]
    return cases


# ---- disks: read-only and full filesystems ----------------------------------------------------------
def _mount(point: Path, size: str = "1m", readonly: bool = False, fill: bool = False) -> None:
    point.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(point)], check=True)
    if fill:
        _fill(point)
    if readonly:
        _write(point / "keep.txt", "a user's file\n")
        subprocess.run(["mount", "-o", "remount,ro", str(point)], check=True)


def disk_cases() -> list[Case]:
    ro = lambda w: _mount(w / "m", readonly=True)  # noqa: E731
    full = lambda w: _mount(w / "m", size="256k", fill=True)  # noqa: E731
    cases = [
        Case("search --out on a read-only fs", "disks", [*TINY_SEARCH, "--out", "{w}/m/run"], ro, quick=True),
        Case("search --out on a full fs", "disks", [*TINY_SEARCH, "--out", "{w}/m/run"], full, quick=True),
        Case("demo --out on a full fs", "disks", ["demo", "--budget", "1m", "--out", "{w}/m/demo"], full),
        Case("collect --out on a read-only fs", "disks",
             ["collect", "--port", "{w}/tty", "--plan", "gestures4", "--out", "{w}/m/s", "--headless"], ro,
             device=True, timeout=60, mention=("read-only",)),
        Case("service install --unit-dir on a read-only fs", "disks",
             ["service", "install", "--unit-dir", "{w}/m", "--config", "{w}/c.toml"],
             lambda w: (_service_config(w), ro(w))),
        Case("service install --unit-dir missing", "disks",
             ["service", "install", "--unit-dir", "{w}/nowhere", "--config", "{w}/c.toml"], _service_config),
        Case("evaluate with the model folder on a full fs", "disks",
             ["evaluate", "{w}/m/run", "--data", TINY_DATA], lambda w: _full_with_run(w), expect="any", timeout=60,
             needs_run=True),
        Case("onboard with data_dir on a read-only fs", "disks",
             ["onboard", "--user", "alice", "--config", "{w}/c.toml"],
             lambda w: (ro(w), _service_config(w, data_dir=str(w / "m" / "data")))),
    ]
    cases.append(Case("search fills the disk, then --resume after space is freed", "disks", [], runner=_disk_resume,
                      timeout=300))
    return cases


def _full_with_run(w: Path) -> None:
    _mount(w / "m", size="20m")
    shutil.copytree(FIXTURES / "run", w / "m" / "run")
    _fill(w / "m")


def _fill(point: Path) -> None:
    """Write a filler file until the filesystem is full (ENOSPC)."""
    handle = open(point / "filler", "wb", buffering=0)
    try:
        while True:
            handle.write(b"\xaa" * 4096)
    except OSError:
        pass
    finally:
        try:
            handle.close()
        except OSError:
            pass


def _disk_resume(case: Case, w: Path) -> Result:
    """ENOSPC during a search: one line, journal intact; after space is freed --resume finishes."""
    _mount(w / "m", size="600k")
    out = w / "m" / "run"
    argv = [*TINY_SEARCH, "--out", str(out)]
    first = _run(argv, w, case.timeout)
    steps = [f"step 1 exit {first[0]}: {_last_line(first[2]).replace(str(w), '$W')}"]
    if first[0] == 0:
        return Result(case, "wrong exit", "the search fit in 600 KiB: no full disk happened", 0, _show(argv), 0)
    verdict, symptom = _classify_output("error", *first)
    if verdict != "behaved":
        return Result(case, verdict, f"on ENOSPC: {symptom}", 0, _show(argv), first[0])
    subprocess.run(["mount", "-o", "remount,size=200m", str(w / "m")], check=True)
    second = _run([*argv, "--resume"], w, case.timeout)
    steps.append(f"step 2 (--resume) exit {second[0]}")
    verdict, symptom = _classify_output("ok", *second)
    if verdict == "behaved" and not (out / "card.json").exists():
        verdict, symptom = "wrong exit", "--resume exited 0 without a card.json"
    return Result(case, verdict, symptom if verdict != "behaved" else "; ".join(steps), 0,
                  _show([*argv, "--resume"]), second[0])


# ---- service: config, state.json, onboarding --------------------------------------------------------
def _service_config(w: Path, data_dir: str | None = None, extra: str = "") -> None:
    _write(w / "c.toml", f'data_dir = "{data_dir or w / "data"}"\nport = "{w / "tty"}"\n{extra}')


def service_cases() -> list[Case]:
    values = ['workers = "two"', "workers = 0", "workers = -1", 'budget = "abc"', 'budget = "0s"',
              'min_accuracy = "high"', "min_accuracy = 2", 'target = "NOPE"', "http_port = 99999", "http_port = -1",
              "baudrate = 0", "epochs = 0", "hop_seconds = 0", "smoothing = 0", 'strategy = "bogus"',
              'normalize = "bogus"', 'plan = "nope"', "bogus_key = 1", 'http_host = "0.0.0.0"',
              "learning_rate = -1", "batch_size = 0", "final_epochs = -3"]
    cases = []
    for index, value in enumerate(values):
        setup = lambda w, value=value: _service_config(w, extra=value + "\n")  # noqa: E731
        key = _names(value.split(" =")[0])
        cases.append(Case(f"service config {value}", "service", ["service", "config", "--config", "{w}/c.toml"],
                          setup, quick=index % 4 == 0, mention=key))
        if index % 3 == 0:  # (its port is missing: refused for the value, not for the port)
            cases.append(Case(f"service run {value}", "service", ["service", "run", "--config", "{w}/c.toml"],
                              setup, timeout=25, owned=("data/**",), mention=key))
    files = {"binary": _noise(200, 8), "a folder": None, "a TOML syntax error": b"workers = = 2\n",
             "truncated": b'data_dir = "/tm', "UTF-16": "port = 'x'\n".encode("utf-16")}
    for name, data in files.items():
        def setup(w: Path, data=data) -> None:
            if data is None:
                (w / "c.toml").mkdir()
            else:
                _write(w / "c.toml", data)
        for command in ("config", "run", "status"):
            cases.append(Case(f"service {command} with a config that is {name}", "service",
                              ["service", command, "--config", "{w}/c.toml"], setup, timeout=25,
                              quick=command == "run" and name == "binary"))
    cases.append(Case("service config with a missing config", "service",
                      ["service", "config", "--config", "{w}/missing.toml"]))
    states = {"truncated": b'{"state": "SERVING", "us', "a JSON list": b"[1, 2, 3]", "binary": _noise(100, 9),
              "empty": b"", "deployed without user": json.dumps({"state": "SERVING", "deployed": {
                  "model": "m", "accuracy": 0.9}}).encode(),
              "unknown state": b'{"state": "DANCING"}', "a folder": None,
              "wrong types": json.dumps({"state": 3, "user": [], "deployed": "yes"}).encode()}
    for name, data in states.items():
        def setup(w: Path, data=data) -> None:
            _service_config(w)
            if data is None:
                (w / "data" / "state.json").mkdir(parents=True)
            else:
                _write(w / "data" / "state.json", data)
        cases.append(Case(f"service status with state.json {name}", "service",
                          ["service", "status", "--config", "{w}/c.toml"], setup, expect="any",
                          owned=("data/state.json*",), quick=name in ("truncated", "a JSON list")))
    for user in ["..", ".", "a/b", "", ".hidden", "x" * 100, "name with spaces", "../../etc"]:
        cases.append(Case(f"onboard --user {user!r}", "service", ["onboard", "--user", user, "--config", "{w}/c.toml"],
                          _service_config, fresh=("data",), quick=user == ".."))
    cases.append(Case("onboard --plan nope", "service", ["onboard", "--user", "alice", "--plan", "nope",
                                                          "--config", "{w}/c.toml"], _service_config, fresh=("data",)))
    return cases


# ---- a running service on a simulated front-end: a failing onboarding must not end it ------------------
def _service_scenario(case: Case, w: Path, extra: str, prepare: Callable, act: Callable, check: Callable) -> Result:
    """`service run` beside `tinynas simulate`; after `act`, the service must still run, say why in its
    status, and stop cleanly when asked (never exit by itself: systemd would restart it into the same fault)."""
    with socket.socket() as probe:  # a free status port: other services and tests may hold 8765
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    _service_config(w, extra=extra.replace("{w}", str(w)) + f"http_port = {port}\n")
    prepare(w)
    config = str(w / "c.toml")
    shown = f"tinynas service run --config $W/c.toml  # {case.name}"
    started = []
    try:
        simulator = subprocess.Popen(TINYNAS + ["simulate", "--port", str(w / "tty")], cwd=w, env=_env(w),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        started.append(simulator)
        if not _wait(lambda: (w / "tty").exists(), 60):
            return Result(case, "skipped", "the simulated front-end did not start", 0, shown)
        log = open(w.parent / "service.log", "wb")
        service = subprocess.Popen(TINYNAS + ["service", "run", "--config", config], cwd=w, env=_env(w),
                                   stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        started.append(service)
        text = lambda: (w.parent / "service.log").read_text(errors="replace")  # noqa: E731
        if not _wait(lambda: "service up" in text() or service.poll() is not None, 90):
            return Result(case, "hang", f"service not up after 90 s: {_last_line(text())}", 0, shown)
        if service.poll() is not None:
            return Result(case, "wrong exit", f"service run ended at start (exit {service.returncode}): "
                                              f"{_last_line(text())}", 0, shown, service.returncode)
        note, refused_at_the_door, *probed = act(w, config)  # a probe of the running service returns its finding
        state = lambda: _json(w / "data" / "state.json")  # noqa: E731
        # A request refused by `tinynas onboard` itself never reaches the service: it only has to stay up.
        _wait(lambda: service.poll() is not None or refused_at_the_door or (
            state().get("error") and state().get("state") in ("IDLE", "SERVING")), 120)
        time.sleep(2)  # and still be running a moment later
        if service.poll() is not None:
            verdict = "traceback" if "Traceback" in text() else "wrong exit"
            return Result(case, verdict, f"service run ended by itself (exit {service.returncode}; systemd would "
                                         f"restart it into the same fault): {_last_line(text())}", 0, shown,
                          service.returncode)
        code, stdout, stderr, _ = _run(["service", "status", "--config", config, "--json"], w, 60)
        try:
            status = json.loads(stdout)
        except ValueError:
            return Result(case, "wrong exit", f"service status --json gave no JSON (exit {code}): "
                                              f"{_last_line(stderr)}", 0, shown, code)
        problem = probed[0] if probed else "" if refused_at_the_door else check(w, status)
        _run(["service", "stop", "--config", config], w, 60)
        try:
            service.wait(timeout=90)
        except subprocess.TimeoutExpired:
            return Result(case, "hang", "service run still running 90 s after `tinynas service stop`", 0, shown)
        if "Traceback" in text():
            return Result(case, "traceback", _last_line(text()), 0, shown, service.returncode)
        if service.returncode != 0:
            return Result(case, "wrong exit", f"exit {service.returncode} after stop: {_last_line(text())}", 0,
                          shown, service.returncode)
        if problem:
            return Result(case, "wrong exit", problem, 0, shown, 0)
        return Result(case, "behaved", f"{note}status: {status.get('state')}, {status.get('error', '')[:120]}", 0,
                      shown, 0)
    finally:
        for process in started:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()


def _wait(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.5)
    return False


def _json(path: Path) -> dict:
    try:
        value = json.loads(path.read_text())
        return value if isinstance(value, dict) else {}
    except (OSError, ValueError):
        return {}


def _onboard(user: str):
    def act(w: Path, config: str) -> str:
        code, _, stderr, _ = _run(["onboard", "--user", user, "--config", config], w, 60)
        return f"onboard exit {code}; " + (f"{_last_line(stderr)}; " if code else ""), code == 2
    return act


def _raw_request(data: bytes, wait: float = 0):
    def act(w: Path, config: str) -> str:
        _write(w / "data" / "requests" / f"{time.time_ns()}-onboard.json", data)
        if wait:  # nothing to report: it must only stay up once it has read the request (within a second)
            time.sleep(wait)
        return "", bool(wait)
    return act


def _has_error(w: Path, status: dict) -> str:
    return "" if status.get("error") and status.get("state") in ("IDLE", "SERVING") else \
        f"status after the failure: state {status.get('state')!r}, no reason given"


def _kept_aside(original: bytes):
    def check(w: Path, status: dict) -> str:
        aside = [p for p in (w / "data").glob("state.json*") if p.is_file() and p.read_bytes() == original]
        return _has_error(w, status) or ("" if aside else "the damaged state.json was not kept for a person to see")
    return check


def service_scenario_cases() -> list[Case]:
    quick_run = 'workers = 1\nbudget = "1m"\nepochs = 1\nfinal_epochs = 1\n'
    good = json.dumps({"state": "IDLE", "user": "bob"}).encode()
    truncated = b'{"state": "SERVING", "us'
    scenarios = [
        # A board smaller than any built-in one: gestures4's 400 x 8 windows fit none of its networks (the built-in
        # STM32F030F4P6 holds them since the generated C runtime counts RAM more tightly).
        ("onboarding a plan that cannot fit the target", 'target = "{w}/tiny.toml"\n',
         lambda w: _write(w / "tiny.toml",
                          'name = "tiny"\nram_bytes = 1024\nflash_bytes = 8192\nmac_budget = 1000000\n'),
         _onboard("alice"), _has_error),
        ("a hand-written onboarding request for user '..'", "", lambda w: None,
         _raw_request(json.dumps({"kind": "onboard", "user": "..", "plan": "gestures4"}).encode()), _has_error),
        ("a request file of random bytes", "", lambda w: None, _raw_request(_noise(200, 10), wait=5),
         lambda w, status: ""),
        ("a truncated state.json with a last good copy", "",
         lambda w: (_write(w / "data" / "state.json", truncated), _write(w / "data" / "state.json.bak", good)),
         lambda w, config: ("", False), _kept_aside(truncated)),
    ]
    return [Case(f"service run: {name}", "service (running)", [], timeout=240,
                 runner=lambda case, w, e=extra, p=prepare, a=act, c=check:
                 _service_scenario(case, w, quick_run + e, p, a, c))
            for name, extra, prepare, act, check in scenarios]


# ---- issue 35: model folders, ranges, C names, the unit, the status server under attack ---------------
def _edit_card(w: Path, change: Callable[[dict], None]) -> None:
    path = w / "run" / "card.json"
    card = json.loads(path.read_text())
    change(card)
    path.write_text(json.dumps(card))


def _scaled_windows(w: Path, scale: float) -> None:
    with np.load(w / "run" / "windows.npz", allow_pickle=False) as stored:
        arrays = {key: stored[key] for key in stored.files}
    arrays["x"] = (arrays["x"] * np.float32(scale)).astype(np.float32)
    np.savez(w / "new.npz", **arrays)


def _other_classes(w: Path) -> None:
    with np.load(w / "run" / "windows.npz", allow_pickle=False) as stored:
        arrays = {key: stored[key] for key in stored.files}
    meta = json.loads(str(arrays["meta"]))
    meta["class_names"] = [f"other{i}" for i in range(len(meta["class_names"]))]
    arrays["meta"] = np.array(json.dumps(meta))
    np.savez(w / "run" / "windows.npz", **arrays)


def _leftovers(w: Path) -> None:
    """A folder adapt wrote, then the temporary files an interrupted write leaves (an older tinynas left them
    inside the folder; now they can only be in a staging folder beside it)."""
    code, _, stderr, _ = _run(["adapt", str(w / "run"), "--data", TINY_DATA, "--out", str(w / "out")], w, 120)
    if code != 0:
        raise RuntimeError(f"adapt for the setup failed: {_last_line(stderr)}")
    out = w / "out"
    _write(out / ".windows.npz.partial", _noise(300, 11))
    _write(out / "model.weights.h5.partial-123", _noise(300, 12))
    _write(w / ".out.staging-999999" / "card.json", b"{")


def _adapt_over_leftovers(case: Case, w: Path) -> Result:
    """The same adapt again over its earlier folder with an interrupted write's leftovers: it must succeed,
    replace the folder whole (no leftover survives) and leave the source model as it was."""
    _leftovers(w)
    source = _snapshot(w / "run", ())
    argv = ["adapt", str(w / "run"), "--data", TINY_DATA, "--out", str(w / "out")]
    result = _run(argv, w, case.timeout)
    verdict, symptom = _classify_output("ok", *result)
    left = sorted(p.name for p in [*(w / "out").glob("*partial*"), *w.glob(".out.staging-*")])
    if verdict == "behaved" and left:
        verdict, symptom = "lost/changed", f"leftovers survived: {', '.join(left)}"
    elif verdict == "behaved" and not (w / "out" / "card.json").exists():
        verdict, symptom = "wrong exit", "exit 0 without out/card.json"
    elif verdict == "behaved" and _snapshot(w / "run", ()) != source:
        verdict, symptom = "lost/changed", "the source model's folder changed"
    return Result(case, verdict, symptom or "replaced whole; no leftover survived", 0,
                  _show(argv).replace(str(w), "$W"), result[0])


def model_folder_cases() -> list[Case]:
    adapt = ["adapt", "{w}/run", "--data", TINY_DATA]
    recal = ["recalibrate", "{w}/run", "--data", TINY_DATA, "--epochs", "1"]
    user_c = lambda w: (_write(w / "mine" / "model.c", "/* the user's own */\n"),  # noqa: E731
                        _write(w / "mine" / "model.h", "#pragma once\n"))
    card_damage = {
        "a class more in the card": lambda c: (c["classes"].append("extra"),
                                               c["preprocessing"].__setitem__("class_names", c["classes"])),
        "a class named twice": lambda c: (c["classes"].__setitem__(1, c["classes"][0]),
                                          c["preprocessing"].__setitem__("class_names", c["classes"])),
        "architecture of longer windows": lambda c: c["architecture"].__setitem__(
            "input_length", 2 * c["architecture"].get("input_length", 256)),
        "history not a list": lambda c: c.__setitem__("history", {"kind": "adapt"}),
        "a class name with a terminal escape": lambda c: (c["classes"].__setitem__(0, "\x1b[2J\x1b[31mred"),
                                                          c["preprocessing"].__setitem__("class_names",
                                                                                         c["classes"])),
    }
    cases = [
        Case("adapt --out a folder holding the user's model.c", "model folders", [*adapt, "--out", "{w}/mine"],
             user_c, needs_run=True, timeout=120, quick=True),
        Case("recalibrate --out a folder holding the user's model.c", "model folders",
             [*recal, "--out", "{w}/mine"], user_c, needs_run=True, timeout=120),
        Case("adapt --out inside the source model", "model folders", [*adapt, "--out", "{w}/run/inside"],
             needs_run=True, timeout=120, fresh=("run/inside",)),
        Case("recalibrate --out inside the source model", "model folders", [*recal, "--out", "{w}/run/inside"],
             needs_run=True, timeout=120, fresh=("run/inside",)),
        Case("adapt --out a model folder with partial files of a killed run", "model folders", [],
             needs_run=True, timeout=300, runner=_adapt_over_leftovers),
        Case("evaluate a .tflite beside a confusion.png tinynas did not draw", "model folders",
             ["evaluate", "{w}/run/model.tflite", "--data", TINY_DATA], lambda w: _write(
                 w / "run" / "confusion.png", _noise(2000, 13)), expect="any", needs_run=True, timeout=120),
        Case("adapt with a truncated model.tflite", "model folders", [*adapt, "--out", "{w}/out"],
             lambda w: (w / "run" / "model.tflite").write_bytes((w / "run" / "model.tflite").read_bytes()[:999]),
             needs_run=True, timeout=120, fresh=("out",), mention=("model.tflite",)),
        Case("adapt with random bytes as split.npz", "model folders", [*adapt, "--out", "{w}/out"],
             lambda w: _write(w / "run" / "split.npz", _noise(300, 14)), needs_run=True, timeout=120,
             fresh=("out",), forbid=("allow_pickle", "pickle")),
        Case("adapt with windows.npz of other classes", "model folders", [*adapt, "--out", "{w}/out"],
             _other_classes, needs_run=True, timeout=120, fresh=("out",)),
        Case("adapt to all-zero windows", "model folders",
             ["adapt", "{w}/run", "--data", "npz:{w}/new.npz", "--out", "{w}/out"],
             lambda w: _scaled_windows(w, 0.0), needs_run=True, timeout=120, fresh=("out",)),
        Case("adapt to windows 1e30 times louder", "model folders",
             ["adapt", "{w}/run", "--data", "npz:{w}/new.npz", "--out", "{w}/out"],
             lambda w: _scaled_windows(w, 1e30), needs_run=True, timeout=120, fresh=("out",)),
        Case("adapt --only ''", "model folders", [*adapt, "--out", "{w}/out", "--only", ""], needs_run=True,
             fresh=("out",), mention=("--only",)),
        Case("adapt --only normalization of a model without it", "model folders",
             [*adapt, "--out", "{w}/out", "--only", "normalization"], needs_run=True, timeout=120,
             expect="any", forbid=("batch norm",)),
        Case("adapt onto a full disk over an earlier model", "model folders",
             ["adapt", "{w}/m/run", "--data", TINY_DATA, "--out", "{w}/m/run"], _full_with_run, needs_run=True,
             timeout=120, expect="any", owned=("m/.*", "m/.*/**")),
    ]
    for name, change in card_damage.items():
        cases.append(Case(f"adapt a model whose card has {name}", "model folders", [*adapt, "--out", "{w}/out"],
                          lambda w, change=change: _edit_card(w, change), needs_run=True, timeout=120,
                          fresh=("out",), expect="any" if "escape" in name else "error",
                          forbid=("\x1b",)))
    return cases


def range_cases() -> list[Case]:
    cases = []
    for value in ['budget = "9999999h"', 'budget = "31d"', "learning_rate = 50", "epochs = 1000000000",
                  "batch_size = 100000000", 'http_host = "999.1.1.1"', 'http_host = "not a host"',
                  'http_token = "\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9\u00e9"',
                  'http_host = "0.0.0.0"\nhttp_token = " "', 'http_host = "0.0.0.0"\nhttp_token = "short"',
                  "rewear_repetitions = 1000000000", 'data_dir_is_a_file = 1']:
        if value.startswith("data_dir_is_a_file"):
            setup = lambda w: (_write(w / "afile", "x"), _service_config(w, data_dir=str(w / "afile")))  # noqa
            cases.append(Case("service config data_dir is a file", "ranges",
                              ["service", "config", "--config", "{w}/c.toml"], setup, mention=("data_dir",)))
            continue
        setup = lambda w, value=value: _service_config(w, extra=value + "\n")  # noqa: E731
        key = value.split("\n")[-1].split(" =")[0]
        cases.append(Case(f"service config {value!r}", "ranges", ["service", "config", "--config", "{w}/c.toml"],
                          setup, mention=_names(key)))
    spec = "synthetic:vibration?windows_per_class=1000000&length=1"
    cases += [
        Case("data inspect 2 M one-sample windows", "ranges", ["data", "inspect", spec], timeout=60),
        Case("search on 2 M one-sample windows", "ranges",
             ["search", "--data", spec, "--target", "STM32C011F6P6", "--out", "{w}/run"], timeout=60,
             fresh=("run",)),
    ]
    for prefix in ["my-model", "9lives", "", "x" * 200, "int", "a b"]:
        cases.append(Case(f"search --c-prefix {prefix[:20]!r}", "ranges",
                          [*TINY_SEARCH, "--out", "{w}/run", "--c-prefix", prefix], fresh=("run",),
                          mention=("--c-prefix",)))
    return cases


def _pid_file(value: str):
    def setup(w: Path) -> None:
        _service_config(w)
        _write(w / "data" / "service.pid", value)
    return setup


def lifecycle_cases() -> list[Case]:
    unit = ["service", "install", "--unit-dir", "{w}/units", "--config", "{w}/c.toml"]
    make = lambda w: (_service_config(w), (w / "units").mkdir())  # noqa: E731
    cases = [
        Case("service install --user with a newline and a directive", "service lifecycle",
             [*unit, "--user", "x\nExecStartPre=/bin/sh -c id"], make, mention=("--user",)),
        Case("service install --memory-max lots", "service lifecycle", [*unit, "--memory-max", "lots"], make,
             mention=("--memory-max",)),
        Case("service install with a config path holding a space", "service lifecycle",
             ["service", "install", "--unit-dir", "{w}/units", "--config", "{w}/my conf.toml"],
             lambda w: ((w / "units").mkdir(), _write(w / "my conf.toml", f'data_dir = "{w / "data"}"\n')),
             expect="any", owned=("units/**", "data", "data/**")),
        Case("service install without --config", "service lifecycle",
             ["service", "install", "--unit-dir", "{w}/units"], lambda w: (w / "units").mkdir(), expect="any",
             owned=("units/**",)),
        Case("service stop with no service running", "service lifecycle",
             ["service", "stop", "--config", "{w}/c.toml"], _service_config, expect="any", fresh=("data/requests",)),
    ]
    for value in ["0", "-1", "9" * 23, "abc", ""]:
        cases.append(Case(f"service status with service.pid {value!r}", "service lifecycle",
                          ["service", "status", "--config", "{w}/c.toml"], _pid_file(value), expect="any",
                          owned=("data/service.pid",)))
    return cases


def _http(port: int, data: bytes, wait: float = 15.0) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as client:
        client.sendall(data)
        chunks = []
        try:
            while True:
                chunk = client.recv(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        except TimeoutError:
            pass
        return b"".join(chunks)


def _status_code(answer: bytes) -> int:
    parts = answer.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1


def _probe(send: Callable[[int], str]):
    """An act for `_service_scenario` that probes the running status server; `send(port)` returns a problem."""
    def act(w: Path, config: str):
        port = int(re.search(r"http_port = (\d+)", (w / "c.toml").read_text()).group(1))
        problem = send(w, port) if send is _hold_then_serve else send(port)
        if problem.startswith("ok: "):  # a finding worth showing beside the verdict
            return problem[4:] + "; ", True, ""
        return ("" if problem else "the status server answered as it should; "), True, problem
    return act


TOKEN = "probe-token-0123456789"


def _expect(status: int, request: bytes):
    def send(port: int) -> str:
        got = _status_code(_http(port, request))
        return "" if got == status else f"answered {got} to {request[:60]!r}, not {status}"
    return send


def _hold_then_serve(w: Path, port: int) -> str:
    """More idle connections than the service has descriptors (its limit lowered to 256, as a tight
    LimitNOFILE would): it must still serve an authenticated client."""
    import resource

    try:
        pid = int((w / "data" / "service.pid").read_text().split()[0])
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (256, 256))
    except (OSError, ValueError, IndexError) as exc:
        return f"could not lower the service's descriptor limit: {exc}"
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 2048), hard))
    idle = []
    try:  # 1,500: beyond systemd's default LimitNOFILE (1,024) too, which ~1,010 used to exhaust
        for _ in range(min(hard, 2048) - 548):
            try:
                idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                break
        request = f"GET /status.json HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if _status_code(_http(port, request.encode(), wait=10)) == 200:
                    return f"ok: served while {len(idle)} idle connections were held (its limit: 256 descriptors)"
            except OSError:
                pass
            time.sleep(1)
        return f"no answer to an authenticated client within 60 s while {len(idle)} idle connections were held"
    finally:
        for connection in idle:
            connection.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _slow_header(port: int) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        started = time.monotonic()
        try:
            client.recv(100)
        except TimeoutError:
            return "a client that never finishes its headers held its connection for 60 s"
        return "" if time.monotonic() - started < 45 else "the slow client was dropped only after 45 s"


def status_server_cases() -> list[Case]:
    get = lambda path, *headers: (f"GET {path} HTTP/1.1\r\n" + "".join(  # noqa: E731
        h + "\r\n" for h in headers) + "\r\n").encode()
    local = "Host: 127.0.0.1"
    probes = [
        ("a foreign Host header (DNS rebinding)", _expect(421, get("/status.json", "Host: evil.example",
                                                                     f"Authorization: Bearer {TOKEN}"))),
        ("a 10 KB path", _expect(414, get("/" + "a" * 10_000, local))),
        ("a non-ASCII token in the query", _expect(401, get("/status.json?token=%C3%A9", local))),
        ("a non-ASCII bearer token", _expect(401, get("/status.json", local).replace(
            b"\r\n\r\n", "\r\nAuthorization: Bearer \u00e9\r\n\r\n".encode()))),
        ("a lower-case 'bearer' with the right token", _expect(200, get("/status.json", local,
                                                                        f"Authorization: bearer {TOKEN}"))),
        ("no token", _expect(401, get("/status.json", local))),
        ("an HTTP/0.9 request line", lambda port: "" if _status_code(_http(port, b"GET /\r\n")) in (-1, 400)
         else "HTTP/0.9 was answered"),
        ("headers that never end", _slow_header),
        ("more idle connections than descriptors", _hold_then_serve),
    ]
    quick_run = 'workers = 1\nbudget = "1m"\nepochs = 1\nfinal_epochs = 1\n' + f'http_token = "{TOKEN}"\n'
    return [Case(f"status server: {name}", "status server", [], timeout=300,
                 runner=lambda case, w, send=send: _service_scenario(case, w, quick_run, lambda w: None,
                                                                      _probe(send), lambda w, status: ""))
            for name, send in probes]


# ---- issue 53: special files, numbers of any size, untrusted model folders ---------------------------
HUGE = "9" * 4001
"""A 4,001-digit number: Python reads it as an int; float() of it overflows."""
SECRET = b"SECRET-OUTSIDE-THE-MODEL-FOLDER-7f3a"


def _fifo_at(*names: str) -> Callable[[Path], None]:
    def setup(w: Path) -> None:
        for name in names:
            (w / name).parent.mkdir(parents=True, exist_ok=True)
            os.mkfifo(w / name)
    return setup


def special_file_cases() -> list[Case]:
    """A FIFO or a device where a file is named: opened plainly, a FIFO waits for a writer for ever and /dev/zero
    never ends (each case has 30 s: a hang is a failure, not a slow answer)."""
    config = lambda w: _service_config(w)  # noqa: E731
    both = lambda *setups: lambda w: [setup(w) for setup in setups]  # noqa: E731
    cases = [
        ("onboard --plan FIFO", ["onboard", "--user", "a", "--plan", "{w}/plan.json", "--config", "{w}/c.toml"],
         both(config, _fifo_at("plan.json"))),
        ("onboard --plan /dev/zero", ["onboard", "--user", "a", "--plan", "/dev/zero", "--config", "{w}/c.toml"],
         config),
        ("collect --plan FIFO", ["collect", "--port", "{w}/tty", "--plan", "{w}/p.toml", "--out", "{w}/s"],
         _fifo_at("p.toml")),
        ("service config --config FIFO", ["service", "config", "--config", "{w}/c.toml"], _fifo_at("c.toml")),
        ("service run --config FIFO", ["service", "run", "--config", "{w}/c.toml"], _fifo_at("c.toml")),
        ("service status --config /dev/zero", ["service", "status", "--config", "/dev/zero"], None),
        ("cost --arch FIFO", ["cost", "--arch", "{w}/a.json", "--target", "STM32F030F4P6"], _fifo_at("a.json")),
        ("cost --arch /dev/urandom", ["cost", "--arch", "/dev/urandom", "--target", "STM32F030F4P6"], None),
        ("search --target FIFO.toml", ["search", "--data", TINY_DATA, "--target", "{w}/b.toml", "--out", "{w}/run"],
         _fifo_at("b.toml")),
        ("data inspect npz:FIFO", ["data", "inspect", "npz:{w}/d.npz"], _fifo_at("d.npz")),
        ("data inspect npz:/dev/zero", ["data", "inspect", "npz:/dev/zero"], None),
        ("data inspect session:FIFO manifest", ["data", "inspect", "session:{w}/s"], _fifo_at("s/manifest.json")),
        ("data inspect session:FIFO samples", ["data", "inspect", "session:{w}/s"],
         lambda w: (_session(w / "s"), (w / "s" / "samples.bin").unlink(), os.mkfifo(w / "s" / "samples.bin"))),
        ("data inspect folder: a FIFO .csv", ["data", "inspect", "folder:{w}/f?rate=100"],
         lambda w: (_csv(w / "f" / "a" / "x.csv", np.random.default_rng(0)), _fifo_at("f/b/y.csv")(w))),
        ("measure a FIFO .tflite", ["measure", "{w}/m.tflite"], _fifo_at("m.tflite")),
        ("measure /dev/zero", ["measure", "/dev/zero"], None),
        ("evaluate a model whose card.json is a FIFO", ["evaluate", "{w}/run", "--data", TINY_DATA],
         lambda w: ((w / "run" / "card.json").unlink(), os.mkfifo(w / "run" / "card.json"))),
        ("adapt a model whose model.tflite is a FIFO", ["adapt", "{w}/run", "--data", TINY_DATA, "--out", "{w}/o"],
         lambda w: ((w / "run" / "model.tflite").unlink(), os.mkfifo(w / "run" / "model.tflite"))),
    ]
    return [Case(name, "special files", argv, setup, timeout=30, needs_run="{w}/run" in argv, fresh=("o",),
                 quick=index < 2) for index, (name, argv, setup) in enumerate(cases)]


def huge_number_cases() -> list[Case]:
    """A 4,001-digit number wherever a number is taken: refused in one line that says it by its size."""
    search = ["search", "--data", TINY_DATA, "--target", "STM32C011F6P6", "--out", "{w}/run"]
    cases = [Case(f"search {option} <4001 digits>", "huge numbers", [*search, option, HUGE + suffix],
                  fresh=("run",), mention=(option,) if option not in ("--ram", "--flash", "--macs") else ())
             for option, suffix in (("--epochs", ""), ("--seed", ""), ("--batch-size", ""), ("--final-epochs", ""),
                                    ("--workers", ""), ("--threads", ""), ("--budget", "s"),
                                    ("--learning-rate", ""), ("--ram", ""), ("--flash", "KiB"), ("--macs", ""))]
    cases += [Case("search --task anomaly --false-alarm-rate <4001 digits>", "huge numbers",
                   [*search, "--task", "anomaly", "--false-alarm-rate", HUGE], fresh=("run",))]
    for option in ("windows_per_class", "length", "seed", "windows_per_recording"):
        cases.append(Case(f"data inspect synthetic:vibration?{option}=<4001 digits>", "huge numbers",
                          ["data", "inspect", f"synthetic:vibration?{option}={HUGE}"], mention=(option,)))
    cases += [
        Case("data inspect folder:?window=<4001 digits>", "huge numbers",
             ["data", "inspect", f"folder:{{w}}/f?rate=100&window={HUGE}"],
             lambda w: _csv(w / "f" / "a" / "x.csv", np.random.default_rng(0)), mention=("window",)),
        Case("onboard --more <4001 digits>", "huge numbers",
             ["onboard", "--user", "a", "--more", HUGE, "--config", "{w}/c.toml"], lambda w: _service_config(w),
             mention=("--more",)),
        Case("onboard --test --signs <4001 digits>", "huge numbers",
             ["onboard", "--user", "a", "--test", "--signs", HUGE, "--config", "{w}/c.toml"],
             lambda w: _service_config(w), mention=("--signs",)),
        Case("simulate --speed <4001 digits>", "huge numbers", ["simulate", "--port", "{w}/tty", "--speed", HUGE],
             mention=("--speed",)),
        Case("replay --trial <4001 digits>", "huge numbers", ["replay", "{w}/run", "--trial", HUGE],
             needs_run=True, mention=("trial",)),
        Case("an unknown option with a 4001-digit value", "huge numbers", [*search, "--max-trials", HUGE]),
    ]
    for key in ("epochs", "batch_size", "alarm_k", "http_port", "rewear_repetitions", "hop_seconds"):
        cases.append(Case(f"service config {key} = <4001 digits>", "huge numbers",
                          ["service", "config", "--config", "{w}/c.toml"],
                          lambda w, key=key: _service_config(w, extra=f"{key} = {HUGE}\n"), mention=(key,)))
    cases.append(Case("the page's `more` action with a 4001-digit count", "huge numbers", [], timeout=240,
                      runner=lambda case, w: _service_scenario(case, w, "", lambda w: None, _page_more,
                                                               lambda w, status: "")))
    return cases


def _page_request(port: int, kind: str, body: bytes) -> tuple[int, str]:
    page = _http(port, b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").decode(errors="replace")
    form = page.split('name="tinynas-form" content="', 1)[-1].split('"', 1)[0]
    answer = _http(port, (f"POST /action/{kind} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Tinynas-Form: {form}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body)
    return _status_code(answer), answer.decode(errors="replace").split("\r\n\r\n", 1)[-1]


def _port_of(config: str) -> int:
    return int(next(line for line in Path(config).read_text().splitlines()
                    if line.startswith("http_port")).split("=")[1])


def _page_more(w: Path, config: str):
    code, body = _page_request(_port_of(config), "more", b'{"user": "alice", "count": ' + HUGE.encode() + b"}")
    problem = "" if code == 400 and "--more must be" in body and len(body) < 300 else \
        f"INTERNAL: page answered {code}: {body[:200]}"
    return f"page: {code} {body[:120]}; ", True, problem


# A deployed folder, copied in or restored from a backup, with a card or files no tinynas wrote.
def _card_edit(change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    def damage(folder: Path, w: Path) -> None:
        card = json.loads((folder / "card.json").read_text())
        change(card)
        (folder / "card.json").write_text(json.dumps(card))
    return damage


def _link_out(name: str) -> Callable[[Path, Path], None]:
    def damage(folder: Path, w: Path) -> None:
        (folder / name).unlink()
        (folder / name).symlink_to(w / "secret.txt")
    return damage


def _raw_file(name: str, data: bytes) -> Callable[[Path, Path], None]:
    return lambda folder, w: (folder / name).write_bytes(data)


def _deployment_made(value: str) -> Callable[[Path, Path], None]:
    def damage(folder: Path, w: Path) -> None:
        text = (folder / "deployment.json").read_text()
        (folder / "deployment.json").write_text(text.replace('"made": ', f'"made": {value}, "was": ', 1))
    return damage


def _hostile_folder(damage: Callable[[Path, Path], None]) -> Callable[[Path], None]:
    """alice's served model: the fixture search's files in a deployed folder, a secret file beside the data folder,
    state.json naming it as served (as a restored backup would), then `damage` applied to the folder."""
    def prepare(w: Path) -> None:
        from tinynas.folders import MODEL_FILES
        from tinynas.service.models import write_deployment
        from tinynas.service.state import Deployed, ServiceState, save_state

        folder = w / "data" / "profiles" / "alice" / "deployed" / "20261206-090000"
        folder.mkdir(parents=True)
        for name in MODEL_FILES:
            if (FIXTURES / "run" / name).is_file():
                shutil.copyfile(FIXTURES / "run" / name, folder / name)
        card = json.loads((folder / "card.json").read_text())
        deployed = Deployed(user="alice", model=str(folder / "model.tflite"), card=str(folder / "card.json"),
                            accuracy=card.get("int8_test_accuracy"), classes=card.get("classes"), made=time.time())
        write_deployment(folder, deployed)
        save_state(w / "data" / "state.json", ServiceState(state="SERVING", user="alice", deployed=deployed))
        (w / "secret.txt").write_bytes(SECRET + b"\n")
        damage(folder, w)
    return prepare


def _probe_folder(w: Path, config: str):
    """Every page request that reads the model folder, and `service models`: each must be answered (200, or 404
    with one error line), never with a byte of the secret, never 500 or silence."""
    port = _port_of(config)
    problems, leaks = [], []
    for path in ("/status.json", "/download/firmware.zip", "/download/model_compiled.h", "/download/model_compiled.c",
                 "/download/model_prepare.c", "/download/card.json", "/download/model.tflite", "/download/model.h"):
        answer = _http(port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        code = _status_code(answer)
        if SECRET in answer:
            leaks.append(path)
        if code not in (200, 404):
            problems.append(f"{path}: {'no answer' if code == -1 else code}")
    code, stdout, stderr, _ = _run(["service", "models", "--config", config], w, 60)
    if code != 0 or "Traceback" in stderr or SECRET.decode() in stdout:
        problems.append(f"service models exit {code}: {_last_line(stderr)}")
    listed = next((line for line in stdout.splitlines() if "20261206-090000" in line), "")
    if leaks:
        return f"{listed[:100]}; ", True, f"LEAK: the secret beside the data folder was served at {', '.join(leaks)}"
    return f"{listed[:140]}; ", True, ("INTERNAL: " + "; ".join(problems)) if problems else ""


def untrusted_folder_cases() -> list[Case]:
    names = {"../../../secret.txt": "../ to the secret", "{w}/secret.txt": "an absolute path",
             "sub/../../../../../secret.txt": "a folder part", "..": "'..'"}
    damages: dict[str, Callable[[Path, Path], None]] = {}
    for key in ("source", "header", "prepare_source"):
        for name, words in names.items():
            damages[f"c_runtime.{key} is {words}"] = (
                lambda folder, w, key=key, name=name: _card_edit(
                    lambda card: card["c_runtime"].__setitem__(key, name.replace("{w}", str(w))))(folder, w))
    damages.update({
        "model_compiled.h is a link to the secret": _link_out("model_compiled.h"),
        "model_compiled.c is a link to the secret": _link_out("model_compiled.c"),
        "model.tflite is a link to the secret": _link_out("model.tflite"),
        "card.json is a link to the secret": _link_out("card.json"),
        "cost_estimate is a string": _card_edit(lambda card: card.__setitem__("cost_estimate", "lots")),
        "cost_estimate is a list": _card_edit(lambda card: card.__setitem__("cost_estimate", [1, 2])),
        "card.json nested 100,000 deep": _raw_file("card.json", b"[" * 100_000 + b"]" * 100_000),
        "card.json holds NaN": lambda folder, w: (folder / "card.json").write_text(
            (folder / "card.json").read_text().replace('"int8_test_accuracy": ', '"int8_test_accuracy": NaN, "x": ')),
        "a 401-digit flash size": _card_edit(lambda card: card.__setitem__("flash_bytes", 10**400)),
        "c_runtime names a missing file": _card_edit(lambda card: card["c_runtime"].__setitem__("source", "gone.c")),
        "deployment.json made is NaN": _deployment_made("NaN"),
        "deployment.json made is 1e300": _deployment_made("1e300"),
        "an anomaly section that is a list": _card_edit(lambda card: card.__setitem__("anomaly", [1, 2])),
        "a false-alarm rate of -1": _card_edit(lambda card: card.__setitem__("anomaly", {
            "threshold": 1.0, "threshold_steps": 10, "score_scale": 0.1, "false_alarm_rate": -1})),
        "card.json is a FIFO": lambda folder, w: ((folder / "card.json").unlink(), os.mkfifo(folder / "card.json")),
    })
    return [Case(f"served folder: {name}", "untrusted model folders", [], needs_run=True, timeout=240,
                 runner=lambda case, w, damage=damage: _leak_verdict(_service_scenario(
                     case, w, "", _hostile_folder(damage), _probe_folder, lambda w, status: "")))
            for name, damage in damages.items()]


def _leak_verdict(result: Result) -> Result:
    """The scenario's findings under their own names: a leak, or a request the page failed to answer."""
    if result.symptom.startswith("LEAK:"):
        result.verdict = "leaked"
    elif result.symptom.startswith("INTERNAL:"):
        result.verdict = "traceback"
    return result


# ---- interrupts + resume ---------------------------------------------------------------------------
def _interrupt_resume(case: Case, w: Path, sig: signal.Signals) -> Result:
    """Stop a tiny search with `sig` (to its whole process group, as a terminal's Ctrl-C, systemd's stop
    or a power cut would) once a candidate has finished, then --resume it to the end."""
    argv = [*TINY_SEARCH, "--out", str(w / "run")]
    log = w.parent / "first.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(TINYNAS + argv, cwd=w, env=_env(w), stdout=subprocess.DEVNULL, stderr=handle,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + case.timeout
    while time.monotonic() < deadline and process.poll() is None:
        if any(line.startswith("trial ") for line in log.read_text(errors="replace").splitlines()):
            break
        time.sleep(0.3)
    if process.poll() is not None:
        return Result(case, "skipped", f"the search ended (exit {process.returncode}) before it could be "
                                       f"interrupted: {_last_line(log.read_text(errors='replace'))}", 0, _show(argv))
    os.killpg(process.pid, sig)
    try:
        process.wait(timeout=case.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return Result(case, "hang", f"still running {case.timeout:.0f} s after {sig.name}", 0, _show(argv))
    stderr = log.read_text(errors="replace")
    if sig != signal.SIGKILL and ("Traceback" in stderr or process.returncode != 130):
        return Result(case, "traceback" if "Traceback" in stderr else "wrong exit",
                      f"after {sig.name}: exit {process.returncode}, {_last_line(stderr)}", 0, _show(argv),
                      process.returncode)
    code, stdout, stderr, timed_out = _run([*argv, "--resume"], w, case.timeout)
    verdict, symptom = _classify_output("ok", code, stdout, stderr, timed_out)
    if verdict == "behaved" and not (w / "run" / "card.json").exists():
        verdict, symptom = "wrong exit", "--resume exited 0 without a card.json"
    shown = _show(argv).replace(str(w), "$W") + f"  # {sig.name} after the first candidate, then --resume"
    return Result(case, verdict, symptom if verdict != "behaved" else f"{sig.name}, then --resume: exit 0", 0,
                  shown, code)


def _interrupt_simulator(case: Case, w: Path, sig: signal.Signals) -> Result:
    """Ctrl-C or SIGTERM to `tinynas simulate`: it stops, takes its pty link away, and says nothing of journals."""
    argv = ["simulate", "--port", str(w / "tty")]
    shown = _show(argv).replace(str(w), "$W") + f"  # then {sig.name}"
    log = w.parent / "simulate.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(TINYNAS + argv, cwd=w, env=_env(w), stdout=handle, stderr=handle,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    if not _wait(lambda: (w / "tty").exists() or process.poll() is not None, 60):
        os.killpg(process.pid, signal.SIGKILL)
        return Result(case, "hang", "no pty after 60 s", 0, shown)
    os.killpg(process.pid, sig)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return Result(case, "hang", f"still running 60 s after {sig.name}", 0, shown)
    text = log.read_text(errors="replace")
    last = _last_line(text)
    if "Traceback" in text:
        return Result(case, "traceback", last, 0, shown, process.returncode)
    if process.returncode not in (0, 130):
        return Result(case, "wrong exit", f"exit {process.returncode}: {last}", 0, shown, process.returncode)
    if "journal" in last or "--resume" in last:
        return Result(case, "misleading", f"speaks of a journal and --resume: {last}", 0, shown,
                      process.returncode)
    if (w / "tty").is_symlink():
        return Result(case, "wrong exit", "the pty link is left behind", 0, shown, process.returncode)
    return Result(case, "behaved", last, 0, shown, process.returncode)


def interrupt_cases() -> list[Case]:
    return [Case(f"{sig.name} during a tiny search, then --resume", "interrupts", [], timeout=240,
                 runner=lambda case, w, sig=sig: _interrupt_resume(case, w, sig))
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)] + \
        [Case(f"{sig.name} to simulate", "interrupts", [], timeout=60, quick=sig == signal.SIGTERM,
              runner=lambda case, w, sig=sig: _interrupt_simulator(case, w, sig))
         for sig in (signal.SIGINT, signal.SIGTERM)]


# ---- running and classifying -----------------------------------------------------------------------
def _env(w: Path) -> dict:
    env = dict(os.environ)
    env["XDG_STATE_HOME"] = str(w.parent / "xdg")  # crash logs outside the watched folder
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    return env


def _show(argv: list[str]) -> str:
    """The command as a shell line; control characters (a NUL, an escape) written as \\xNN, never raw in the
    results."""
    shown = "tinynas " + " ".join(shlex.quote(a) for a in argv)
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" for c in shown)


def _run(argv: list[str], w: Path, timeout: float, unprivileged: bool = False, env: dict | None = None):
    command = (UNPRIVILEGED if unprivileged else []) + TINYNAS + argv
    process = subprocess.Popen(command, cwd=w, env=_env(w) | (env or {}), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE,
                               stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate()
        timed_out = True
    return process.returncode, out.decode(errors="replace"), err.decode(errors="replace"), timed_out


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _classify_output(expect: str, code, stdout: str, stderr: str, timed_out: bool) -> tuple[str, str]:
    lines = [line for line in stderr.splitlines() if line.strip()]
    if timed_out:
        started = any(line.startswith(("trial ", "search ", "service ", "serving", "waiting")) for line in lines)
        return "hang", ("still running at the timeout" + (" (the bad value was accepted: it started)"
                                                          if started else "") + f"; last: {_last_line(stderr)}")
    if "Traceback (most recent call last)" in stderr or "Traceback (most recent call last)" in stdout:
        frames = [line.strip() for line in stderr.splitlines() if line.startswith("  File ")]
        where = frames[-1] if frames else ""
        return "traceback", f"{_last_line(stderr)} ({where})"
    if code == 1 and "internal error" in stderr:
        return "traceback", _last_line(stderr)
    if code is not None and code < 0:
        return "traceback", f"killed by signal {-code}; {_last_line(stderr)}"
    if expect == "ok" or (expect == "any" and code == 0):
        if code == 0:
            return "behaved", ""
        return "wrong exit", f"exit {code}: {_last_line(stderr)}"
    if code == 0:
        return "wrong exit", f"exit 0 (accepted){': ' + _last_line(stderr) if lines else ''}"
    if code != 2:
        return "wrong exit", f"exit {code}: {_last_line(stderr)}"
    errors = [i for i, line in enumerate(lines) if line.startswith("tinynas: error:")]
    if len(errors) != 1 or errors[0] != len(lines) - 1:
        return "multi-line", " | ".join(lines[-2:])[:300]
    return "behaved", lines[-1][:300]


def _snapshot(folder: Path, owned: tuple[str, ...]) -> dict[str, tuple[str, bool]]:
    """relative path -> (content hash, owned) of every regular file under `folder`."""
    files = {}
    for path in folder.rglob("*") if folder.exists() else []:
        try:
            if path.is_symlink() or not path.is_file():
                continue
            relative = path.relative_to(folder).as_posix()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            relative = path.relative_to(folder).as_posix()
            digest = f"unreadable:{path.stat().st_size}:{path.stat().st_mtime_ns}"
        files[relative] = (digest, any(Path(relative).match(glob) or relative.startswith(glob.rstrip("*"))
                                       for glob in owned))
    return files


def _compare(before: dict, folder: Path, owned: tuple[str, ...]) -> str:
    after = _snapshot(folder, ())
    hashes = {digest for digest, _ in after.values()}
    problems = []
    for relative, (digest, is_owned) in before.items():
        now = after.get(relative)
        if is_owned:
            if digest not in hashes and not digest.startswith("unreadable"):
                problems.append(f"lost {relative} (its content is nowhere)")
        elif now is None:
            problems.append(f"lost {relative}")
        elif now[0] != digest:
            problems.append(f"changed {relative}")
    return "; ".join(problems[:4])


def run_case(case: Case) -> Result:
    base = Path(tempfile.mkdtemp(prefix="case-", dir=WORK))
    w = base / "w"
    w.mkdir()
    if case.unprivileged:
        for folder in (base, w):
            folder.chmod(0o755)
    start = time.monotonic()
    device = None
    try:
        if case.needs_run:
            if not (FIXTURES / "run" / "card.json").exists():
                return Result(case, "skipped", "the fixture search did not finish", 0, _show(case.argv))
            shutil.copytree(FIXTURES / "run", w / "run")
        if case.setup:
            case.setup(w)
        if case.runner:
            result = case.runner(case, w)
            result.seconds = time.monotonic() - start
            return result
        argv = [a.replace("{w}", str(w)) for a in case.argv]
        if any("\0" in a for a in argv):  # the kernel takes no NUL in an argument: tests/robustness runs it in-process
            return Result(case, "skipped", "a NUL cannot be in a real command line's arguments (the test suite gives "
                          "it in-process)", 0, _show(argv))
        if case.device:
            device = _start_device(w)
            if device is None:
                return Result(case, "skipped", "the simulated front-end did not start", 0, _show(argv))
        before = _snapshot(w, case.owned)
        outside = {p for p in OUTSIDE if p.exists()}
        env = {key: value.replace("{w}", str(w)) for key, value in case.env.items()}
        code, stdout, stderr, timed_out = _run(argv, w, case.timeout, case.unprivileged, env)
        created = [p for p in OUTSIDE if p.exists() and p not in outside]
        for path in created:  # made by this run (it did not exist before): take it away again
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        verdict, symptom = _classify_output(case.expect, code, stdout, stderr, timed_out)
        changed = _compare(before, w, case.owned)
        if created:
            changed = "; ".join([f"wrote outside its folder: {p}" for p in created] + ([changed] if changed else []))
        if changed:  # the worst outcome: reported over a hang or a traceback
            verdict, symptom = "lost/changed", changed + (f" (and {verdict}: {symptom})" if symptom else "")
        hints = [word for word in case.forbid + INTERNALS if word in symptom]
        if verdict == "behaved" and hints:
            verdict, symptom = "misleading", f"says {', '.join(map(repr, hints))}: {symptom}"
        if verdict == "behaved" and code == 2 and case.mention and not any(
                word.replace("{w}", str(w)).lower() in symptom.lower() for word in case.mention):
            verdict, symptom = "misleading", f"refused without naming {case.mention[0]!r}: {symptom}"
        if verdict == "behaved" and code == 2:
            left = [f for f in case.fresh if (w / f).exists() and any((w / f).rglob("*"))]
            left += [f for f in case.fresh if (w / f).exists() and not (w / f).is_dir()]
            if left:
                verdict, symptom = "wrote first", f"refused after writing {', '.join(left)}: {symptom}"
        shown = _show(argv).replace(str(w), "$W")
        return Result(case, verdict, symptom.replace(str(w), "$W"), time.monotonic() - start, shown, code)
    except Exception as exc:  # a setup that failed is the benchmark's problem, reported, not a verdict
        return Result(case, "skipped", f"setup failed: {type(exc).__name__}: {exc}", time.monotonic() - start,
                      _show(case.argv))
    finally:
        if device is not None and device.poll() is None:
            os.killpg(device.pid, signal.SIGKILL)
            device.wait()
        if case.teardown is not None:
            case.teardown()
        _cleanup(base)


def _start_device(w: Path) -> subprocess.Popen | None:
    """`tinynas simulate` on a pty linked at {w}/tty (outside the watched folder's files: a symlink)."""
    device = subprocess.Popen(TINYNAS + ["simulate", "--port", str(w / "tty")], cwd=w.parent, env=_env(w),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    if _wait(lambda: (w / "tty").exists() or device.poll() is not None, 60) and device.poll() is None:
        return device
    if device.poll() is None:
        os.killpg(device.pid, signal.SIGKILL)
    device.wait()
    return None


def _cleanup(base: Path) -> None:
    for mount in sorted((p for p in base.rglob("*") if p.is_dir() and p.is_mount()), key=lambda p: -len(p.parts)):
        subprocess.run(["umount", "-l", str(mount)], check=False)
    for path in base.rglob("*"):
        try:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        except OSError:
            pass
    shutil.rmtree(base, ignore_errors=True)


def build_fixture() -> str:
    """A finished tiny search, copied into every case that damages or resumes a run."""
    code, stdout, stderr, timed_out = _run([*TINY_SEARCH, "--out", str(FIXTURES / "run")], FIXTURES, 300)
    if code != 0:
        return f"fixture search failed (exit {code}): {_last_line(stderr)}"
    return "fixture search finished"


# ---- frame decoder fuzz ----------------------------------------------------------------------------
def fuzz_decoder(inputs: int, seed: int = 0) -> dict:
    """Random bytes and mutated valid frames through one StreamDecoder, an intact frame after every tenth."""
    from firmware_bridge.protocol import Mark, Ping, Samples, StreamDecoder, encode_frame

    rng = random.Random(seed)
    nprng = np.random.default_rng(seed)
    templates = [encode_frame(Samples(i * 32, nprng.integers(-128, 128, size=(32, 8)).astype(np.int8)), i)[:-1]
                 for i in range(20)]
    templates += [encode_frame(Mark(5, 2, "go"), 3)[:-1], encode_frame(Ping(7), 9)[:-1]]
    from firmware_bridge.protocol import decode_frame

    known = {repr(decode_frame(t)[1]) for t in templates}
    decoder = StreamDecoder()
    sentinels_sent = sentinels_got = exceptions = unchanged = foreign = 0
    max_buffered = 0
    huge = b"\xff" * (64 << 20)  # a 64 MiB chunk with no delimiter, fed once: must not be buffered
    tracemalloc.start()
    base_memory = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    for index in range(inputs):
        if index % 2:
            data = rng.randbytes(rng.randrange(0, 96))
        else:
            frame = bytearray(rng.choice(templates))
            for _ in range(rng.randrange(1, 4)):
                at = rng.randrange(len(frame))
                how = rng.randrange(4)
                if how == 0:
                    frame[at] ^= 1 << rng.randrange(8)
                elif how == 1:
                    del frame[at]
                elif how == 2:
                    frame.insert(at, rng.randrange(256))
                else:
                    del frame[at:]
                if not frame:
                    break
            data = bytes(frame)
            unchanged += data in templates  # an insertion undone by a deletion: still a valid frame
        try:
            for _, message in decoder.feed(data + (b"\x00" if rng.random() < 0.5 else b"")):
                foreign += repr(message) not in known  # a damaged frame that passed the CRC
            if index % 10 == 9:
                sentinel = 40_000 + index % 20_000
                sentinels_sent += 1
                got = decoder.feed(b"\x00" + encode_frame(Ping(sentinel), index & 0xFFFF))
                sentinels_got += sum(1 for _, m in got if m == Ping(sentinel))
                foreign += sum(1 for _, m in got if m != Ping(sentinel) and repr(m) not in known)
            if index == inputs // 2:
                decoder.feed(huge)
        except Exception:  # noqa: BLE001 - counted: the decoder must raise nothing
            exceptions += 1
        max_buffered = max(max_buffered, decoder.buffered)
    seconds = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del huge
    # Throughput without tracemalloc's bookkeeping: a fresh decoder on 100,000 inputs of the same mix.
    plain, sample = StreamDecoder(), [rng.randbytes(rng.randrange(0, 96)) if i % 2 else rng.choice(templates)
                                      for i in range(100_000)]
    plain_start = time.perf_counter()
    for data in sample:
        plain.feed(data + b"\x00")
    plain_rate = len(sample) / (time.perf_counter() - plain_start)
    stats = decoder.stats
    return {"inputs": inputs, "seconds": seconds, "per_second": inputs / seconds, "plain_per_second": plain_rate,
            "frames_ok": stats.frames_ok,
            "bad_crc": stats.bad_crc, "bad_frames": stats.bad_frames, "gaps": stats.gaps,
            "discarded_bytes": stats.discarded_bytes, "bytes": stats.bytes, "exceptions": exceptions,
            "unchanged_mutations": unchanged, "foreign_messages": foreign, "sentinels_sent": sentinels_sent,
            "sentinels_got": sentinels_got, "max_buffered": max_buffered,
            "max_frame_bytes": decoder._max, "peak_bytes": peak - base_memory}


# ---- report ----------------------------------------------------------------------------------------
def _machine() -> str:
    """Load and the other Python processes (helpers' tests and searches) sharing the cores right now."""
    load = os.getloadavg()
    rows = subprocess.run(["ps", "-eo", "pid,pcpu,args", "--sort=-pcpu", "--no-headers"], capture_output=True,
                          text=True).stdout.splitlines()
    others = []
    for row in rows:
        pid, cpu, *args = row.split()
        if int(pid) != os.getpid() and args and "python" in Path(args[0]).name and float(cpu) >= 1:
            others.append(f"`{' '.join([Path(args[0]).name] + args[1:])[:60]}` {cpu}%")
    return (f"{os.cpu_count()} cores, load average {load[0]:.1f}/{load[1]:.1f}/{load[2]:.1f}; other Python "
            f"processes: {'; '.join(others[:5]) or 'none busy'}")


class _Sampler(threading.Thread):
    """Every 20 s: the load and the other Python processes, to say what shared the machine during the run."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak = 0.0
        self.seen: dict[str, int] = {}

    def run(self) -> None:
        while not self.stop.wait(20):
            self.peak = max(self.peak, os.getloadavg()[0])
            rows = subprocess.run(["ps", "-eo", "pid,ppid,pcpu,args", "--no-headers"], capture_output=True,
                                  text=True).stdout.splitlines()
            mine = {os.getpid()}
            for row in rows:  # children of this benchmark are its own cases, not other load
                pid, ppid, *_ = row.split()
                if int(ppid) in mine:
                    mine.add(int(pid))
            for row in rows:
                pid, ppid, cpu, *args = row.split()
                if int(pid) not in mine and args and "python" in Path(args[0]).name and float(cpu) >= 5:
                    name = " ".join(args[1:4])[:50]
                    self.seen[name] = self.seen.get(name, 0) + 1

    def summary(self) -> str:
        busiest = sorted(self.seen.items(), key=lambda item: -item[1])[:6]
        return (f"During the run: peak 1-min load {self.peak:.1f}; other busy Python processes seen (samples): "
                + ("; ".join(f"`{name}` ({count})" for name, count in busiest) or "none") + ".")


def render(command: str, results: list[Result], fuzz: dict | None, fixture: str, machine: tuple[str, str],
           seconds: float) -> str:
    lines = [f"`{command}`", "",
             f"Robustness benchmark (issues 16 and 53): {len(results)} bad-input and fault cases through the real CLI, "
             f"each in a fresh temporary folder, in {seconds / 60:.1f} min. Machine at start: {machine[0]}. "
             f"At the end: {machine[1]}. {machine[2]} {fixture}.", "",
             "Verdicts: **behaved** = exit 2 with one `tinynas: error:` line last on stderr and no traceback (exit 0 "
             "where the input may be valid or the case should succeed), and no file that existed before the run lost "
             "or changed; **traceback** = a traceback, an internal error (exit 1) or death by a signal; "
             "**lost/changed** = a pre-existing file that was not the run's own disappeared or changed (checked by "
             "content hash; a file set aside must keep its bytes somewhere); **hang** = still running at the case's "
             "timeout; **wrong exit** = e.g. 0 for a value that must be refused; **multi-line**; **wrote first** = "
             "refused only after writing into the output folder; **misleading** = refused without naming the bad "
             "option, or with Python's own words only (`list indices...`, a pickle hint); **skipped** = the case "
             "could not be set up.", "",
             "| category | cases | " + " | ".join(VERDICTS) + " |", "|---|" + "---:|" * (len(VERDICTS) + 1)]
    categories = sorted({r.case.category for r in results}, key=[r.case.category for r in results].index)
    for category in categories + ["all"]:
        rows = [r for r in results if category in ("all", r.case.category)]
        counts = [sum(1 for r in rows if r.verdict == v) for v in VERDICTS]
        name = f"**{category}**" if category == "all" else category
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(str(c) for c in counts) + " |")
    failing = [r for r in results if r.verdict != "behaved"]
    lines += ["", f"## Failing cases ({len(failing)})", ""]
    if not failing:
        lines.append("None.")
    for r in failing:
        lines.append(f"- **{r.verdict}** [{r.case.category}] {r.case.name}: `{r.command}` -> {r.symptom}")
    if fuzz:
        lines += ["", "## Frame decoder fuzz", "",
                  f"{fuzz['inputs']:,} inputs (half random bytes of 0-95 bytes, half valid frames with 1-3 bit "
                  f"flips, dropped or inserted bytes or truncations; a delimiter after half of them; an intact PING "
                  f"after every tenth; one 64 MiB chunk without a delimiter halfway) fed to one `StreamDecoder` "
                  f"under tracemalloc: {fuzz['per_second']:,.0f} inputs/s ({fuzz['seconds']:.0f} s); without "
                  f"tracemalloc {fuzz['plain_per_second']:,.0f} inputs/s. {fuzz['unchanged_mutations']:,} mutated "
                  f"frames came out unchanged (an insertion undone by a deletion) and are valid frames; a damaged "
                  f"frame accepted would show as a message that was never sent.", "",
                  "| frames decoded | bad CRC | bad frames | exceptions | messages never sent | intact frames after "
                  "garbage: sent / decoded | largest buffer | peak traced memory |",
                  "|---:|---:|---:|---:|---:|---:|---:|---:|",
                  f"| {fuzz['frames_ok']:,} | {fuzz['bad_crc']:,} | {fuzz['bad_frames']:,} | {fuzz['exceptions']} | "
                  f"{fuzz['foreign_messages']} | "
                  f"{fuzz['sentinels_sent']:,} / {fuzz['sentinels_got']:,} | {fuzz['max_buffered']:,} B (limit "
                  f"{fuzz['max_frame_bytes']:,}) | {fuzz['peak_bytes'] / 1024:,.0f} KiB |", "",
                  "The peak is the decoder's own allocations while it ran, the 64 MiB chunk included: nothing is "
                  "sized from a length field and a frame longer than the limit is refused before it is copied."]
    lines += ["", "## All cases", "", "What each printed (the error line, or the symptom), to judge the messages too.",
              "",
              "| case | category | verdict | exit | s | message |", "|---|---|---|---:|---:|---|"]
    for r in results:
        message = r.symptom.removeprefix("tinynas: error: ")[:160].replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {r.case.name.replace('|', '/')} | {r.case.category} | {r.verdict} | "
                     f"{r.code if r.code is not None else '-'} | {r.seconds:.1f} | {message} |")
    return "\n".join(lines) + "\n"


def all_cases() -> list[Case]:
    return (interrupt_cases() + disk_cases() + journal_cases() + model_cases() + data_file_cases() + spec_cases()
            + option_cases() + config_file_cases() + service_cases() + service_scenario_cases()
            + model_folder_cases() + range_cases() + lifecycle_cases() + status_server_cases() + special_file_cases()
            + huge_number_cases() + untrusted_folder_cases())


def main(argv: list[str] | None = None) -> int:
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        # Started in the background by a shell without job control, which ignores SIGINT for it: every
        # child would inherit that, and the Ctrl-C cases would measure the shell, not tinynas.
        signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a subset (< 3 minutes)")
    parser.add_argument("--jobs", type=int, default=2, help="cases run in parallel")
    parser.add_argument("--fuzz", type=int, help="decoder fuzz inputs (default 1,000,000; 100,000 with --quick)")
    parser.add_argument("--only", help="run only the cases of this category or whose name contains this")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "robustness.md"))
    parser.add_argument("--failures", default="/tmp/robustness-failures.txt")
    args = parser.parse_args(argv)
    command = "python benchmarks/robustness.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    global WORK, FIXTURES
    WORK = Path(tempfile.mkdtemp(prefix="tinynas-robustness-"))
    WORK.chmod(0o755)
    FIXTURES = WORK / "fixtures"
    FIXTURES.mkdir()
    started = time.monotonic()
    machine_start = _machine()
    sampler = _Sampler()
    sampler.start()
    cases = all_cases()
    if args.quick:
        cases = [c for c in cases if c.quick]
    if args.only:
        cases = [c for c in cases if args.only in c.name or args.only == c.category]
    print(f"{len(cases)} cases; building the fixture search...", flush=True)
    fixture = build_fixture() if any(c.needs_run for c in cases) else "no fixture search needed"
    print(fixture, flush=True)
    results = []
    try:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for result in pool.map(run_case, cases):
                results.append(result)
                print(f"[{len(results)}/{len(cases)}] {result.verdict:12} {result.case.name}"
                      + (f" -- {result.symptom}" if result.verdict != "behaved" or result.case.runner or args.only
                         else ""),
                      flush=True)
        fuzz = None
        if not args.only:
            print("decoder fuzz...", flush=True)
            fuzz = fuzz_decoder(args.fuzz or (100_000 if args.quick else 1_000_000))
            print(json.dumps(fuzz), flush=True)
    finally:
        _cleanup(WORK)
    sampler.stop.set()
    text = render(command, results, fuzz, fixture, (machine_start, _machine(), sampler.summary()),
                  time.monotonic() - started)
    if not args.only:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    failing = [r for r in results if r.verdict != "behaved"]
    Path(args.failures).write_text("".join(f"{r.verdict}\t[{r.case.category}] {r.case.name}\t{r.command}\t"
                                           f"{r.symptom}\n" for r in failing))
    print(f"{len(results) - len(failing)} of {len(results)} behaved; failures in {args.failures}")
    return 0


WORK = FIXTURES = Path()

if __name__ == "__main__":
    sys.exit(main())
