"""A board that speaks the test firmware's protocol (`tinynas/hil/firmware/hil_main.c`) on a real pseudo-terminal,
and answers what a fault, noise or another build would: numbers of any size or sign, too many or too few outputs.
Where `tinynas hil --port` reads it, nothing it says may be scored or recorded (tests/hil/test_hil_numbers.py and the
bad-input table's `hil-board-*` rows).

And the smallest model folder `tinynas hil` checks: an untrained A(2,1) of 64 x 1 samples for the synthetic
vibration set, int8, its generated C runtime and card (`SPEC`'s windows match it), made in a child (TensorFlow stays
out of the test process); `firmware_folder` writes its test firmware's sources (nothing built: `--port` reads the
manifest only).
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

SPEC = "synthetic:vibration?length=64&windows_per_class=2&windows_per_recording=2"
"""Windows of the tiny model's shape and rate: 8 test windows."""

_MAKE_MODEL = """
import sys
from pathlib import Path
import numpy as np
from tinynas.data.spec import load_windows
from tinynas.deploy.export import convert_int8, write_export
from tinynas.deploy.network import build_model
from tinynas.space import Architecture

data = load_windows(sys.argv[2])
arch = Architecture(data.window_length, data.channels, len(data.class_names), k=2, c=1)
model = build_model(arch, seed=0)
head = model.get_layer("head")
head.bias.assign(np.linspace(-0.1, 0.1, len(data.class_names)))  # a zero bias is dropped by the converter
tflite = convert_int8(model, data.x)
card = {"classes": list(data.class_names),
        "input": {"shape": [data.window_length, data.channels], "sample_rate_hz": data.sample_rate_hz}}
write_export(Path(sys.argv[1]), arch, tflite, card)
"""


def make_model(out: Path) -> Path:
    """The tiny int8 model folder in `out` (about 20 s: TensorFlow's import and converter)."""
    subprocess.run([sys.executable, "-c", _MAKE_MODEL, str(out), SPEC], check=True, capture_output=True, timeout=600)
    return out


def firmware_folder(model: Path, out: Path, board: str = "microbit") -> Path:
    """The model's test firmware sources for `board` in `out`, as `tinynas firmware` writes them (not built)."""
    from tinynas.hil.board import get_board
    from tinynas.hil.build import write_firmware

    write_firmware(model, get_board(board), out)
    return out


@dataclass
class Answers:
    """What the board says: a well-behaved test firmware's answers, and from window `from_window` (1 = the first)
    on, the overrides (None: as the firmware would)."""

    model_hash: str
    board: str = "microbit"
    inputs: int = 64
    outputs: int = 4
    counter: str = "cycles,64000000"
    sizes: str | None = None
    stack_available: str = "2048"
    from_window: int = 1
    counts: str | None = None
    results: str | None = None
    stack: str | None = None
    windows: int = field(default=0)

    def infer(self, runs: int) -> list[str]:
        self.windows += 1
        odd = self.windows >= self.from_window
        counts = self.counts if odd and self.counts is not None else ",".join(["123456"] * runs)
        results = self.results if odd and self.results is not None else ",".join(
            str(v) for v in ([100, -100, 5, -5] * self.outputs)[:self.outputs])
        stack = self.stack if odd and self.stack is not None else "180"
        return ["m-warmup-start-0", "m-warmup-done", f"m-infer-start-{runs}", "m-infer-done",
                f"m-counts-[{counts}]", f"m-stack-[{stack}]", f"m-results-[{results}]"]

    def profile(self) -> list[str]:
        return ["m-profile-[tinynas-hil-1]", f"m-model-[{self.model_hash}]", f"m-board-[{self.board}]",
                f"m-counter-[{self.counter}]", f"m-sizes-[{self.sizes or f'{self.inputs},{self.outputs}'}]",
                f"m-stack-available-[{self.stack_available}]"]


def answers_for(model: Path, **odd) -> Answers:
    """A board holding `model`'s firmware (its hash and sizes), with the `odd` answers of `Answers`."""
    from tinynas.card import read_card
    from tinynas.hil.build import model_hash

    runtime = read_card(model).c_runtime or {}
    return Answers(model_hash((model / runtime["source"]).read_bytes()), inputs=int(runtime["input_bytes"]),
                   outputs=int(runtime["output_bytes"]), **odd)


class PtyBoard:
    """`answers` spoken on a pseudo-terminal (its name: `port`) by a thread, until `close`."""

    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self.master, self.slave = os.openpty()
        self.port = os.ttyname(self.slave)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._speak, daemon=True)
        self.thread.start()

    def _say(self, lines: list[str]) -> None:
        os.write(self.master, "".join(line + "\r\n" for line in [*lines, "m-ready"]).encode())

    def _speak(self) -> None:
        pending, expected, loaded = b"", 0, 0
        while not self.stop.is_set():
            if not select.select([self.master], [], [], 0.05)[0]:
                continue
            try:
                pending += os.read(self.master, 4096)
            except OSError:
                return
            while b"%" in pending:
                raw, _, pending = pending.partition(b"%")
                command = raw.decode("ascii", "replace").strip()
                if not command:
                    continue
                if command == "name":
                    self._say(["m-name-tinynas-hil"])
                elif command == "profile":
                    self._say(self.answers.profile())
                elif command.startswith("db load "):
                    expected, loaded = int(command.split()[2]), 0
                    self._say([f"m-[Expecting {expected} bytes]"])
                elif command.startswith("db "):
                    loaded += len(command[3:]) // 2
                    self._say(["m-load-done"] if loaded >= expected else [])
                elif command.startswith("infer "):
                    self._say(self.answers.infer(int(command.split()[1])))
                else:
                    self._say(["e-[unknown command]"])

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        os.close(self.master)
        os.close(self.slave)
