"""The order of tinynas's rooms, bottom first: the one list of it.

A room is a subpackage (`data`, `study`, ...) or a top-level module (`errors.py`, `card.py`, ...). A module may
import, at module level or inside a function, from its own room and from rooms of a lower layer only; rooms of one
layer do not import each other. `firmware_bridge` sits under all of it and never imports tinynas; the package's
`__init__` (the public API, loaded on first use) sits on top. `tests/test_boundary.py` holds the code to this list,
and `docs/architecture.md`'s table of layers is `render()` of it (a test compares them).

Nothing imports this module at run time: it is the map, kept where the code is.
"""

from __future__ import annotations

from typing import NamedTuple


class Layer(NamedTuple):
    name: str
    rooms: tuple[str, ...]
    what: str


LAYERS: tuple[Layer, ...] = (
    Layer("base", ("errors", "layers"), "the one error base and the crash log; this map"),
    Layer("words", ("units", "atomic", "c_names", "quiet", "interrupts", "process_memory", "machine", "progress",
                    "augment", "space", "verdict", "modes"),
          "sizes and durations as people write them, crash-safe writes, C names, the door to TensorFlow, signals, "
          "memory and cores, the progress line, augmentation, the A(k, c) family, verdicts with intervals, the modes "
          "(runtime, accounting, task)"),
    Layer("records", ("options", "trial"), "option ranges; a trial and its fidelity"),
    Layer("arguments", ("arguments",), "the public API's argument checks"),
    Layer("data", ("data",), "Windows, the --data spec, loaders, splits, checks, preprocessing"),
    Layer("folders", ("folders",), "every file name of a run or model folder, and reading a model file"),
    Layer("cost", ("cost",), "the analytic cost model and the targets"),
    Layer("card checks", ("card_checks",), "what a card's sections may hold"),
    Layer("card", ("card",), "the model card and its one checked reader"),
    Layer("strategies", ("search",), "search strategies behind one ask/tell interface"),
    Layer("export", ("deploy",), "the Keras network, int8 export, the C runtime, LiteRT, evaluate, model folders"),
    Layer("training", ("training",), "what a worker does: train, monitor, diagnose, and export what it trained"),
    Layer("anomaly", ("anomaly",), "the anomaly task: synthetic anomalies, threshold, metrics, alarm"),
    Layer("chip", ("hil",), "the model on a board: its test firmware, the boards, QEMU, the check over the UART"),
    Layer("jobs", ("study", "adaptation"), "one search; adapt and recalibrate a model folder"),
    Layer("products", ("demo", "service", "sweep"), "the demo; the device service; sweeps of many searches"),
    Layer("commands", ("cli",), "the `tinynas` commands"),
)


def room_of(module: str) -> str:
    """The room of a dotted tinynas module name: `tinynas.study.loop` -> `study`, `tinynas.card` -> `card`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(room: str) -> int | None:
    """The index of `room`'s layer in LAYERS (None: a room the list does not place)."""
    return next((index for index, layer in enumerate(LAYERS) if room in layer.rooms), None)


def upward(importer: str, imported: str) -> bool:
    """Whether module `importer` importing module `imported` goes against the layers (its own room is fine)."""
    a, b = room_of(importer), room_of(imported)
    if a == b:
        return False
    low, high = layer_of(b), layer_of(a)
    return low is None or high is None or low >= high


def render() -> str:
    """LAYERS as the Markdown table docs/architecture.md shows, top layer first."""
    rows = ["| layer | rooms | what |", "|---|---|---|"]
    for index, layer in reversed(list(enumerate(LAYERS))):
        rows.append(f"| {index} {layer.name} | {', '.join(f'`{room}`' for room in layer.rooms)} | {layer.what} |")
    return "\n".join(rows)
