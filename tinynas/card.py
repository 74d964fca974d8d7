"""`ModelCard`: what `card.json` says about an exported model, as a typed record.

The study writes it, `report.md` and the CLI read it, and the deploy side (evaluate, serve, adapt,
recalibrate) starts from it. Sections that are themselves records of other modules (the cost
estimate, the split, the preprocessing, ...) stay JSON objects, described field by field here.
Keys this version does not know (written by a newer tinynas, or by hand) are kept in `extra` and
written back unchanged, so reading and writing a card loses nothing.

The sections most read have typed readers, and nothing else reads them by key (`tests/test_card.py`): the cost
(`ModelCard.cost`), the int8 test's count (`ModelCard.held_out`), the task (`task_of`), the preprocessing
(`Preprocessing.from_card`), the anomaly section (`tinynas.anomaly.section.read_section`) and the serving rules
(`tinynas.service.idle.IdleRule.from_card`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tinynas.atomic import atomic_write_text
from tinynas.card_checks import DamagedCard, check_card
from tinynas.cost.energy import InferenceOnChip, on_chip
from tinynas.cost.estimate import Cost
from tinynas.cost.runtime import recorded_accounting
from tinynas.cost.targets import Target
from tinynas.data.preprocess import CardError, Preprocessing
from tinynas.errors import TinynasError
from tinynas.folders import CARD
from tinynas.modes import Task
from tinynas.space import Architecture, SpecError
from tinynas.verdict import HeldOut

CARD_SCHEMA = 1
"""Version of card.json's layout, written as `card_schema`: the marker that a folder is a model tinynas wrote."""


def task_of(card: dict) -> Task:
    """What a (checked) card's model does: score anomalies (it has an anomaly section) or classify."""
    return Task.ANOMALY if card.get("anomaly") is not None else Task.CLASSIFY


def is_our_card(data) -> bool:
    """Whether a parsed card.json is one tinynas wrote: its schema marker, or (cards before the marker)
    the exported architecture with its schema version and the int8 quantization LiteRT read."""
    if not isinstance(data, dict):
        return False
    if data.get("card_schema") == CARD_SCHEMA:
        return True
    architecture = data.get("architecture")
    return isinstance(architecture, dict) and "schema" in architecture and isinstance(data.get("quantization"), dict)


_OPTIONAL = ("measured_arena_host64", "history", "architecture", "name", "digest", "quantization", "tools",
             "anomaly", "runtime_choice", "int8_test", "c_runtime", "serving", "selection", "hil", "time", "stream")
"""Keys written only when known: the TFLite Micro measurement (needs tflite-micro), the adaptation
history, and what the export adds beside the study's figures."""


@dataclass(frozen=True)
class ModelCard:
    """The figures and provenance of one exported int8 model."""

    classes: list[str]
    """Class names, in the model's output order."""
    input: dict[str, Any]
    """shape [T, C], model_input_shape, sample_rate_hz, channel_names."""
    target: dict[str, Any]
    """The microcontroller budget the model was searched for (`Target.to_dict`)."""
    cost_estimate: dict[str, Any]
    """The cost model's 32-bit figures (`Cost.to_dict`): peak_ram_bytes, flash_bytes, macs, ..."""
    host64_estimate: dict[str, Any]
    """The same for a 64-bit host, to compare with a TFLite Micro measurement on this machine."""
    flash_bytes: int
    """Size of model.tflite."""
    float_test_accuracy: float | None
    int8_test_accuracy: float
    """Accuracy of the int8 model (LiteRT) on the held-out test windows."""
    int8_seconds_per_window: float
    data: dict[str, Any]
    """spec, digest, windows, provenance."""
    split: dict[str, Any]
    """The split's protocol and sizes (`Split.describe`)."""
    preprocessing: dict[str, Any]
    """What every window goes through before the model (`Preprocessing.to_dict`)."""
    test_data: dict[str, Any] | None
    """The separate test set of `--test-data` (None: the split's test side)."""
    data_findings: list[dict[str, Any]]
    """Warnings of the data checks."""
    search: dict[str, Any]
    """strategy, seed, seconds, budget_seconds, winner_trial, candidates, trained, infeasible, ..."""
    training_recipe: dict[str, Any]
    """The final recipe's augmentation and the searched kernel sizes, with why they were chosen."""
    final_training: dict[str, Any]
    """The winner's final training: fidelity, seconds, best_val_loss, retrained, timings."""
    measured_arena_host64: dict[str, Any] | None = None
    history: list[dict[str, Any]] | None = None
    architecture: dict[str, Any] | None = None
    name: str | None = None
    digest: str | None = None
    quantization: dict[str, Any] | None = None
    tools: dict[str, str] | None = None
    runtime: str = "tflm"
    """What the budget was counted for: "tflm" (TFLite Micro) or "c" (tinynas's generated C runtime)."""
    runtime_choice: dict[str, Any] | None = None
    """runtime, accounting (how RAM and flash were counted) and the reason the runtime was chosen
    (`tinynas.cost.runtime.RuntimeChoice`); None on cards written before `--runtime auto`."""
    int8_test: dict[str, Any] | None = None
    """What `int8_test_accuracy` rests on (`tinynas.verdict`): hits, windows, the 95 % interval, and per class the
    recall, support and confusion matrix; None on cards written before it was recorded."""
    anomaly: dict[str, Any] | None = None
    """An anomaly scorer's score, threshold and how they were made (`tinynas.anomaly.section`); None: a classifier."""
    c_runtime: dict[str, Any] | None = None
    """The generated C runtime: its files (plain names in the folder), C names and sizes, or why there is none
    (`tinynas.deploy.export.compiled_c_card`)."""
    serving: dict[str, Any] | None = None
    """A deployed model's serving rules (`tinynas.service.idle.IdleRule`, or an anomaly scorer's alarm)."""
    selection: dict[str, Any] | None = None
    """How the winner was chosen: by cross-validation (its folds, and the winner's answer on each of their windows
    by the fold model that never saw it: `tinynas.study.crossval`), or None: on the split's validation windows."""
    hil: dict[str, Any] | None = None
    """The last check of the model on a chip (`tinynas hil`: `tinynas.hil.check.HilReport.card_section`): the board,
    the windows checked, how many outputs were the host's, the count per inference and the stack; None: never."""
    time: dict[str, Any] | None = None
    """The time budget the model was searched under and its estimate (`tinynas.cost.budget.Budget.time_section`):
    latency_seconds (None: not budgeted), headroom, seconds at the target's clock, basis; None on older cards
    (`on_chip` works from the cost and the target alone)."""
    stream: dict[str, Any] | None = None
    """A served model's held-out signs judged as serving answers them on the session's stream
    (`tinynas.deploy.stream.StreamVerdict.to_dict`): signs recognised with their interval, sign and idle windows
    right, the unknown share, latencies; beside `int8_test`, the onset-cut windows' figure. None: not judged."""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """card.json's content."""
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "extra"}
        for key in _OPTIONAL:
            if data[key] is None:
                del data[key]
        return {**self.extra, **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelCard:
        """A card read from card.json; a key missing from an older card reads as None (runtime as "tflm")."""
        known = {f.name for f in fields(cls)} - {"extra"}
        values: dict[str, Any] = {key: data.get(key) for key in known}  # card.json's values, unchecked
        if values["runtime"] is None:  # cards written before --runtime were budgeted for TFLite Micro
            values["runtime"] = "tflm"
        return cls(**values, extra={key: value for key, value in data.items() if key not in known})

    @property
    def task(self) -> Task:
        return task_of(self.to_dict())

    def cost(self) -> Cost:
        """The cost model's figures for the chip, as `tinynas.cost.estimate.Cost` (older layouts read into it)."""
        return Cost.from_dict(self.cost_estimate)

    def chip_target(self) -> Target:
        """The target the model was made for, as `tinynas.cost.targets.Target` (DamagedCard if unreadable)."""
        try:
            return Target.from_dict(self.target)
        except TinynasError as exc:
            raise DamagedCard(f"the card's target is not readable ({exc})") from None

    def latency_seconds(self) -> float | None:
        """The time per inference the model was searched to keep (None: time was not budgeted)."""
        value = (self.time or {}).get("latency_seconds")
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    def time_cost(self) -> dict | None:
        """What the time budget cost the search (`tinynas.study.time_cost`: architectures its RAM, flash and MAC
        budgets allow, those that kept the time, the budget at which all would): None when time was not budgeted."""
        value = (self.time or {}).get("space")
        return value if isinstance(value, dict) else None

    def on_chip(self, hop_seconds: float | None = None) -> InferenceOnChip | None:
        """One inference on the target at its clock (time, share of `hop_seconds`, energy, battery), from the cost
        model's cycles; None when the target has no clock, the runtime no time model, or the card no cost or target
        (a card written by hand, a minimal one)."""
        if not isinstance(self.cost_estimate, dict) or not isinstance(self.target, dict):
            return None
        return on_chip(self.cost().cycles, self.chip_target(), hop_seconds)

    def input_shape(self) -> tuple[int, ...] | None:
        """The window shape the model reads, (length, channels); None when the card does not say."""
        shape = self.input.get("shape") if isinstance(self.input, dict) else None
        if isinstance(shape, list) and shape and all(isinstance(v, int) and not isinstance(v, bool) and v > 0
                                                     for v in shape):
            return tuple(shape)
        return None

    @property
    def target_name(self) -> str | None:
        """The name of the target the model was made for (None: a card that names none)."""
        name = self.target.get("name") if isinstance(self.target, dict) else None
        return name if isinstance(name, str) else None

    def input_quantization(self) -> dict[str, Any]:
        """The int8 input's scale and zero point as the converter set them ({} when the card has none)."""
        section = self.quantization.get("input") if isinstance(self.quantization, dict) else None
        return section if isinstance(section, dict) else {}

    def held_out(self) -> HeldOut | None:
        """The int8 test's hits of windows, or of the recordings they were cut from (None: a card written before the
        count was recorded)."""
        return HeldOut.from_dict(self.int8_test or {})

    @property
    def accounting(self) -> str:
        """How the budget was counted: the card's own word, else (older cards) TFLite Micro's arena alone, or the
        C runtime's whole footprint."""
        recorded = next((section["accounting"] for section in (self.runtime_choice, self.cost_estimate)
                         if isinstance(section, dict) and isinstance(section.get("accounting"), str)), None)
        return recorded_accounting(self.runtime, recorded)


MAX_CARD_BYTES = 1 << 20
"""A card is a few KiB of JSON (a long adaptation history included); a bigger file is not a card, and is not read."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number a card holds")


def holds_our_card(folder: str | os.PathLike) -> bool:
    """Whether `folder` holds a card tinynas wrote (`is_our_card`), read as `read_card` reads one: what makes a
    folder ours, never its file names alone. Its sections are not checked here: a damaged card of ours is ours."""
    from firmware_bridge.safe_read import read_regular

    try:
        raw = read_regular(Path(folder) / CARD, MAX_CARD_BYTES, "model card", follow_links=False)
        return is_our_card(json.loads(raw, parse_constant=_no_constant))
    except (OSError, ValueError, RecursionError):
        return False


def parse_card(raw: bytes | str, path: str | os.PathLike) -> ModelCard:
    """A card's bytes as a checked `ModelCard` (DamagedCard in one line naming `path` and what is wrong)."""

    try:
        data = json.loads(raw, parse_constant=_no_constant)
    except RecursionError:
        raise DamagedCard(f"{path}: not a model card (JSON nested far too deep)") from None
    except UnicodeDecodeError:
        raise DamagedCard(f"{path}: not a model card (not UTF-8 text; damaged?)") from None
    except ValueError as exc:
        raise DamagedCard(f"{path}: not a model card (not JSON: {str(exc)[:80]}; damaged?)") from None
    try:
        check_card(data)
        Preprocessing.from_card(data)  # classes, input and preprocessing: what serving and evaluate read
        if data.get("architecture") is not None:
            Architecture.from_dict(data["architecture"])
    except DamagedCard as exc:
        raise DamagedCard(f"{path}: {exc}") from None
    except (CardError, SpecError) as exc:
        raise DamagedCard(f"{path}: {exc}") from None
    return ModelCard.from_dict(data)


def card_text(data: dict[str, Any]) -> str:
    """card.json's text for `data`: the one format every writer of a card uses."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def record_section(folder: str | os.PathLike, key: str, section: dict[str, Any]) -> None:
    """Set one optional section of the card of the model folder `folder` (read and checked first; written whole,
    atomically, or not at all)."""
    if key not in _OPTIONAL:
        raise ValueError(f"{key!r} is not a section a card records")
    data = read_card(folder).to_dict()
    data[key] = section
    check_card(data)  # what is written is what a reader accepts
    atomic_write_text(Path(folder) / CARD, card_text(data))


def read_card(folder: str | os.PathLike) -> ModelCard:
    """The card of the model folder `folder`, read as untrusted input: a regular file in the folder (a link, a pipe
    or a device is refused, never opened to block), at most MAX_CARD_BYTES, every section checked for type and
    range (`tinynas.card_checks`). The one reader of card.json: DamagedCard in one line when anything is wrong."""
    from firmware_bridge.safe_read import read_regular

    path = Path(folder) / CARD
    try:
        raw = read_regular(path, MAX_CARD_BYTES, "model card", follow_links=False)
    except FileNotFoundError:
        raise DamagedCard(f"{path}: no such file (the folder holds no model card)") from None
    except OSError as exc:
        raise DamagedCard(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return parse_card(raw, path)
