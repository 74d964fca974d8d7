"""`tinynas hil`: a model folder's test windows through its firmware on a board, compared with the host.

For every window the device's int8 outputs are compared with the same C runtime built on this computer and with
LiteRT's; its class is scored against the label (a count with its 95 % interval, `tinynas.verdict`). The counted
calls give the time of one inference (instructions under QEMU, cycles with DWT, timer ticks otherwise), and the
painted stack and the image's sections are set against the cost model's figures on the card.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from tinynas.card import read_card
from tinynas.cost.estimate import macs
from tinynas.cost.latency import core_timing, estimate_time
from tinynas.data.npz import load_npz
from tinynas.data.preprocess import Preprocessing
from tinynas.deploy.litert import Int8Model
from tinynas.deploy.measure import tflite_micro_available, tflite_micro_outputs
from tinynas.errors import TinynasError
from tinynas.folders import MODEL, SPLIT, WINDOWS, load_split, read_model_file
from tinynas.hil.board import Board, builtin_boards
from tinynas.hil.build import model_hash, read_manifest
from tinynas.hil.host import HostBuildError, host_outputs
from tinynas.hil.protocol import BoardNonsense, DeviceError, DeviceRefused, DeviceReset, HilLink, NotOurFirmware
from tinynas.space import Architecture
from tinynas.verdict import RECORDINGS, HeldOut, held_out

MAX_RESUMES = 3
"""Interruptions a run resumes after; a board that keeps resetting is said, not retried for ever."""


class HilError(TinynasError, RuntimeError):
    """The board holds another model, or the check cannot start."""


@dataclass
class HilReport:
    """What one check on a board found."""

    board: str
    model_hash: str
    counts: str
    """What a count is: instructions (QEMU), cycles (DWT) or timer ticks."""
    windows: int = 0
    checked: int = 0
    hits: int = 0
    identical_to_host: int | None = None
    host_note: str = ""
    identical_to_tflm: int | None = None
    """Windows whose outputs are TFLite Micro's, the interpreter of microcontrollers (None: not installed here)."""
    identical_to_litert: int = 0
    """LiteRT's optimized kernels round some requantizations otherwise: off by a step on some windows is expected."""
    largest_difference: int = 0
    per_inference: list[float] = field(default_factory=list)
    stack_bytes: int = 0
    stack_estimate: int = 0
    clock_hz: int = 0
    sections: dict = field(default_factory=dict)
    estimate: dict = field(default_factory=dict)
    build: dict = field(default_factory=dict)
    stopped: str = ""
    """Why the run ended before every window was checked (empty: it did not)."""
    resumed: list[str] = field(default_factory=list)
    """Each interruption the run resumed after (a reset; a port that came back), and at which window."""
    accuracy: dict = field(default_factory=dict)
    """The hits as `HeldOut.to_dict()`: over the recordings the windows were cut from when windows share one (they
    overlap: not independent), else over the windows."""
    time: dict = field(default_factory=dict)
    """One inference against the time model and the budget (`time_against_budget`): measured and estimated counts,
    their ratio, seconds at the board's clock, the budget the model was searched under, whether it keeps it."""

    def to_dict(self) -> dict:
        data = asdict(self)
        data["per_inference"] = {"median": self.median, "p95": self.p95} if self.per_inference else None
        data["accuracy"] = self.accuracy or HeldOut(self.hits, self.checked).to_dict()
        return data

    @property
    def median(self) -> float:
        return float(np.median(self.per_inference)) if self.per_inference else 0.0

    @property
    def p95(self) -> float:
        return float(np.percentile(self.per_inference, 95)) if self.per_inference else 0.0

    def card_section(self, when: float) -> dict:
        """What the model's card records of this check (`ModelCard.hil`)."""
        return {"board": self.board, "model_hash": self.model_hash, "when": round(when), "windows": self.windows,
                "checked": self.checked, "hits": self.hits, "accuracy": self.accuracy,
                "identical_to_host": self.identical_to_host,
                "counts": self.counts, "median": round(self.median, 1), "p95": round(self.p95, 1),
                "clock_hz": self.clock_hz, "stack_bytes": self.stack_bytes, "stopped": self.stopped[:300],
                **({"estimated": self.time["estimated"], "seconds": self.time["seconds"],
                    "keeps_budget": self.time["keeps_budget"]} if self.time else {})}

    def text(self) -> str:
        held = HeldOut.from_dict(self.accuracy) or HeldOut(self.hits, self.checked)
        low, high = held.interval
        lines = [f"board {self.board}, model {self.model_hash}: {self.checked} of {self.windows} test windows checked"
                 + (f" (stopped: {self.stopped})" if self.stopped else "")]
        lines += [f"  resumed at {where}" for where in self.resumed]
        if self.checked:
            counted = (f"{held.hits} of {held.windows} recordings ({self.hits} of {self.checked} windows, cut from "
                       f"them with a hop: not independent)" if held.unit == RECORDINGS else
                       f"{self.hits} of {self.checked}")
            lines.append(f"  accuracy on the chip: {counted} ({held.hits / max(held.windows, 1):.1%}; "
                         f"95% interval {low:.1%}-{high:.1%})")
            host = (f"{self.identical_to_host} of {self.checked} identical to the C runtime built here"
                    if self.identical_to_host is not None else f"not compared with a host build ({self.host_note})")
            micro = (f"{self.identical_to_tflm} of {self.checked} identical to TFLite Micro; "
                     if self.identical_to_tflm is not None else "")
            steps = "step" if self.largest_difference == 1 else "steps"
            differs = f", largest difference {self.largest_difference} {steps}" if self.largest_difference else ""
            lines.append(f"  outputs: {host}; {micro}{self.identical_to_litert} of {self.checked} identical to LiteRT "
                         f"(its optimized kernels round otherwise{differs})")
            cycle = " if each took one cycle" if self.counts == "instructions" else ""
            at_clock = (f"{self.median / self.clock_hz * 1e3:.2f} ms at {self.clock_hz / 1e6:g} MHz{cycle}"
                        if self.clock_hz else "the board's clock is not known here")
            lines.append(f"  one inference: {self.median:,.0f} {self.counts} median, {self.p95:,.0f} p95 "
                         f"({at_clock})")
            if self.time:
                lines.append("  " + time_words(self.time))
            lines.append(f"  stack: {self.stack_bytes:,} B measured"
                         + (f", {self.stack_estimate:,} B estimated" if self.stack_estimate else ""))
        if self.sections:
            s, e = self.sections, self.estimate
            lines.append(f"  model in the image: RAM {s['ram']:,} B (.data + .bss; arena {e.get('arena', 0):,} B "
                         f"estimated), flash {s['flash']:,} B (.text + .rodata; {e.get('flash', 0):,} B estimated)")
        if self.build:
            lines.append(f"  built by {self.build.get('compiler', '?')}: {self.build.get('build_line', '')}")
        return "\n".join(lines)


def time_against_budget(card, board: Board, counts: str, median: float, counter_hz: int) -> dict:
    """One inference as measured on `board` against the time model's estimate for its core, in seconds at the
    board's clock, and against the time budget on the card ({} when the card names no architecture)."""
    if not card.architecture or median <= 0:
        return {}
    arch = Architecture.from_dict(card.architecture)
    estimate = estimate_time(arch, board.core, macs(arch))
    timing, _ = core_timing(board.core)
    if counts == "instructions":  # QEMU: instructions; their time at the clock with the core's cycles per instruction
        estimated, seconds = estimate.instructions, median * timing.cycles_per_instruction / board.clock_hz
    elif counts == "cycles":
        estimated, seconds = estimate.cycles, median / board.clock_hz
    else:  # a timer's ticks
        estimated, seconds = estimate.cycles * counter_hz / board.clock_hz, median / counter_hz
    budget = card.latency_seconds()
    return {"counts": counts, "measured": round(median), "estimated": round(estimated),
            "ratio": round(median / estimated, 3) if estimated else None, "seconds": seconds,
            "clock_hz": board.clock_hz, "cycles_per_instruction": timing.cycles_per_instruction,
            "budget_seconds": budget, "keeps_budget": None if budget is None else seconds <= budget}


def time_words(time: dict) -> str:
    """'time: 6,175,958 instructions measured, 6,184,303 estimated (ratio 1.00); 593 ms at 16 MHz (1.53 cycles per
    instruction, estimated): keeps the 750 ms budget'."""
    at = f"{1000 * time['seconds']:,.1f} ms at {time['clock_hz'] / 1e6:g} MHz"
    if time["counts"] == "instructions":
        at += f" ({time['cycles_per_instruction']:.2f} cycles per instruction, estimated)"
    ratio = f" (ratio {time['ratio']:.2f})" if time.get("ratio") else ""
    budget = time.get("budget_seconds")
    verdict = ("no time budget on the card (searched without --latency)" if budget is None else
               f"keeps the {1000 * budget:g} ms budget" if time["keeps_budget"] else
               f"does NOT keep the {1000 * budget:g} ms budget ({time['seconds'] / budget:.1f}x)")
    return (f"time: {time['measured']:,} {time['counts']} measured, {time['estimated']:,} estimated{ratio}; "
            f"{at}: {verdict}")


def _per_inference(counts: tuple[int, ...], profile_hz: int, counts_are: str) -> list[float]:
    if counts_are == "instructions":  # a timer of virtual time under -icount shift=0: 1 ns per instruction
        return [count * 1e9 / profile_hz for count in counts]
    return [float(count) for count in counts]


def check_on_board(model_dir: str | Path, firmware_dir: str | Path | None, board: Board | None, link: HilLink,
                   windows: np.ndarray, labels: np.ndarray, *, runs: int = 1, warmup: int = 0,
                   progress=None, reopen: Callable[[], HilLink] | None = None, what: str = "",
                   groups: np.ndarray | None = None) -> HilReport:
    """Run float `windows` (n, T, C, as the data gives them) through the firmware on `link` and compare.

    A board that starts again in the middle (a reset) is synchronised with and the window sent again; a port that
    goes away is opened again through `reopen` (which waits for it), else the run stops there. Either way the
    report says how many windows were checked, and after what it resumed.

    Without `firmware_dir` (a front-end that holds the firmware, checked over the sensor's link) the image's
    sections and build are not reported; without `board` it is the built-in board the firmware names, if any (its
    clock gives the milliseconds). `what`: the windows, as progress names them; `groups`: each window's recording,
    when known (the accuracy is then counted over recordings where windows share one).

    A board that answers a number its firmware cannot send (`BoardNonsense`: outputs not int8 or not as many as its
    profile says, a negative or 400-digit count, a stack beyond its own) is refused, raised whatever window it came
    at: none of its answers is scored, and the caller records nothing."""
    model_dir = Path(model_dir)
    say = progress or (lambda text: None)
    card = read_card(model_dir)
    runtime = card.c_runtime or {}
    if "source" not in runtime:
        raise HilError(f"{model_dir} has no C runtime on its card (an older folder?): export it again")
    if runtime.get("family") == "classical":
        raise HilError(f"{model_dir} serves the classical anomaly scorer: the hardware check runs int8 networks only")
    source = read_model_file(model_dir, runtime["source"])
    manifest = read_manifest(firmware_dir) if firmware_dir is not None else {}
    expected = model_hash(source)
    link.synchronise()
    profile = link.profile()
    board_name = board.name if board is not None else profile.board
    if profile.model_hash != expected:
        raise HilError(f"{link.name}: the board holds model {profile.model_hash}, not {model_dir}'s ({expected}): "
                       f"flash the firmware of `tinynas firmware {model_dir} --board {board_name}`")
    if board is None:
        board = builtin_boards().get(profile.board)
    tflite = read_model_file(model_dir, MODEL)
    model = Int8Model(tflite)
    inputs = model.quantize(card_inputs(card, windows))
    if profile.input_size != inputs[0].size or profile.output_size != model.classes:
        raise HilError(f"{link.name}: the firmware takes {profile.input_size} bytes and gives {profile.output_size} "
                       f"outputs; the model {inputs[0].size} and {model.classes}")
    # Said once the board answered as the model's firmware: a board refused at its profile is one line, not two.
    say(f"checking {what or f'{len(windows)} windows'} on {board_name}")
    # A folder exported without the cost model's figures (write_export alone) is checked all the same, unestimated.
    cost = card.cost() if isinstance(card.cost_estimate, dict) else None
    litert = model.int8_outputs(inputs)
    micro = tflite_micro_outputs(tflite, inputs).reshape(litert.shape) if tflite_micro_available() else None
    built = {key: manifest.get(key) for key in ("compiler", "build_line")} if manifest.get("compiler") else {}
    report = HilReport(board=board_name, model_hash=expected, counts=profile.counter_kind.replace("-", " "),
                       windows=len(windows), clock_hz=board.clock_hz if board is not None else 0, build=built,
                       stack_estimate=cost.stack_bytes if cost is not None else 0)
    flat = inputs.reshape(len(inputs), -1)
    try:
        host = host_outputs(source, read_model_file(model_dir, runtime["header"]), runtime["header"],
                            runtime.get("prefix", "tinynas"), flat)
    except HostBuildError as exc:
        host, report.host_note = None, str(exc)
    if manifest.get("model"):
        model_sections = manifest["model"]
        report.sections = {"ram": model_sections["data"] + model_sections["bss"],
                           "flash": model_sections["text"] + model_sections["rodata"]}
        if cost is not None:
            report.estimate = {"arena": cost.c_arena_bytes, "flash": cost.flash_bytes, "ram": cost.peak_ram_bytes}
    same_host = same_litert = same_micro = 0
    answers: list[int] = []
    index = 0
    while index < len(flat):
        try:
            done = link.infer(flat[index], runs=runs, warmup=warmup)
        except BoardNonsense:
            raise  # a number the firmware cannot send: nothing this board said is scored or recorded
        except DeviceError as exc:
            # A reset, a brown-out or a replug in the middle: the same window again, once the board (or the port,
            # through `reopen`) is back and still holds this model; a board that keeps failing ends the run.
            if (len(report.resumed) >= MAX_RESUMES or isinstance(exc, (DeviceRefused, NotOurFirmware))
                    or (not isinstance(exc, DeviceReset) and reopen is None)):  # an answer, not an interruption
                report.stopped = str(exc)
                if isinstance(exc, DeviceRefused) and "stack overflow" in report.stopped and report.stack_estimate:
                    report.stopped += (f" (the cost model estimates {report.stack_estimate:,} B: the board's RAM "
                                       f"or its file's stack_reserve must leave that much)")
                break
            try:
                link = reopen() if reopen is not None and not isinstance(exc, DeviceReset) else link
                link.synchronise()
                if link.profile().model_hash != expected:
                    report.stopped = f"{link.name}: after the interruption the board holds another model"
                    break
            except BoardNonsense:
                raise
            except DeviceError as again:
                report.stopped = f"{exc}; then {again}"
                break
            report.resumed.append(f"window {index + 1}: {exc}")
            say(f"resumed at window {index + 1} of {len(flat)} after: {exc}")
            continue
        report.checked += 1
        said = int(np.argmax(done.outputs))
        answers.append(said)
        report.hits += int(said == labels[index])
        same_litert += int(np.array_equal(done.outputs, litert[index]))
        if micro is not None:
            same_micro += int(np.array_equal(done.outputs, micro[index]))
        if host is not None:
            same_host += int(np.array_equal(done.outputs, host[index]))
        report.largest_difference = max(report.largest_difference, int(np.max(np.abs(
            done.outputs.astype(np.int16) - litert[index].astype(np.int16)))))
        report.per_inference += _per_inference(done.counts, profile.counter_hz, profile.counter_kind)
        report.stack_bytes = max(report.stack_bytes, done.stack_bytes)
        index += 1
        if index % 10 == 0 or index == len(flat):
            say(f"{index} of {len(flat)} windows on {board_name}")
    if answers:  # the windows checked are the first ones (a window interrupted is checked again)
        report.accuracy = held_out(np.asarray(answers), np.asarray(labels)[:len(answers)],
                                   None if groups is None else np.asarray(groups)[:len(answers)]).to_dict()
    report.identical_to_litert = same_litert
    report.identical_to_tflm = same_micro if micro is not None else None
    report.identical_to_host = same_host if host is not None else None
    if board is not None and report.per_inference:
        report.time = time_against_budget(card, board, report.counts, report.median, profile.counter_hz)
    return report


def folder_test_windows(folder: str | Path, card) -> tuple[np.ndarray, np.ndarray]:
    """A model folder's test windows (its split's test side) and their labels as the model's class indices; a split
    with no test window is refused (HilError), as is a folder that keeps no windows."""
    folder = Path(folder)
    if not (folder / WINDOWS).is_file() or not (folder / SPLIT).is_file():
        raise HilError(f"{folder} keeps no test windows ({WINDOWS} and {SPLIT}): give --data SPEC")
    stored = load_npz(folder / WINDOWS)
    test = load_split(folder / SPLIT, len(stored))["test"]
    if not len(test):
        raise HilError(f"{folder}'s split holds no test windows: give --data SPEC")
    labels = Preprocessing.from_card(card.to_dict()).labels_for(stored)
    return stored.x[test], labels[test]


def folder_test_groups(folder: str | Path) -> np.ndarray | None:
    """The recording each of a model folder's test windows was cut from (`folder_test_windows`' order), None when
    the folder does not keep them."""
    folder = Path(folder)
    stored = load_npz(folder / WINDOWS)
    test = load_split(folder / SPLIT, len(stored))["test"]
    return None if stored.groups is None else np.asarray(stored.groups)[test]


def card_inputs(card, windows: np.ndarray) -> np.ndarray:
    """Float windows through the card's preprocessing: what the model's int8 input is quantized from."""
    return Preprocessing.from_card(card.to_dict()).apply(windows)
