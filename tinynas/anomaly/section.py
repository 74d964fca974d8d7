"""The card's `anomaly` section as its readers use it: typed and checked (`read_section`), one reader for serving,
the deploy step, `evaluate`, adaptation and the page. Written by the study (`tinynas.study.anomaly_card`) and changed
by adaptation (`tinynas.anomaly.section_changes`); scored by `tinynas.anomaly.scoring`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tinynas.anomaly import classical
from tinynas.anomaly.classical import ClassicalScorer
from tinynas.anomaly.conditions import FIRST, Condition, ConditionError, check_condition_name
from tinynas.anomaly.task import NORMAL
from tinynas.card_checks import is_number
from tinynas.errors import TinynasError


class AnomalyCardError(TinynasError, ValueError):
    """A card whose anomaly section cannot be used (edited by hand, or written by another version)."""


@dataclass(frozen=True)
class AnomalySection:
    """A card's anomaly section as its readers use it (serving, the deploy step, `evaluate`): typed and checked
    (`read_section`). The card keeps the whole section (`raw`: calibration, selection, history) as written."""

    threshold_steps: int
    """The threshold in int8 output steps: a window is anomalous above it."""
    score_scale: float
    """One output step, in score units."""
    false_alarm_rate: float
    threshold: float
    """The served scorer's threshold in score units: the network's (threshold_steps x score_scale), or the classical
    scorer's when the family rule chose it."""
    saturation_step: int
    """Steps added per input sample at the int8 range's edge (0: a card made before the rule)."""
    classical: ClassicalScorer | None
    """The classical scorer when the family rule chose it (`family_choice`): then it is what is served and
    exported, with `classical_threshold` in its own score units; None: the int8 network is."""
    classical_threshold: float | None
    conditions: tuple[Condition, ...]
    """Every operating condition the classical scorer keeps (`adapt --condition`), the served one last; () for one
    condition or a network."""
    normal_class: str
    synthetic_auroc: float | None
    """The served scorer's AUROC on the held-out synthetic anomalies (None: not measured)."""
    calibration_windows: int | None
    raw: dict = field(repr=False, compare=False)


def read_section(card: dict) -> AnomalySection | None:
    """The card's anomaly section, checked enough to score with (None for a classifier's card)."""
    section = card.get("anomaly")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise AnomalyCardError("card.json: 'anomaly' must be an object")
    for key, kind in (("threshold_steps", int), ("score_scale", float), ("false_alarm_rate", float)):
        value = section.get(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)) \
                or not np.isfinite(value):
            raise AnomalyCardError(f"card.json: anomaly.{key} must be a number, got {value!r}")
    if section["score_scale"] <= 0:
        raise AnomalyCardError("card.json: anomaly.score_scale must be positive")
    steps_, scale = int(section["threshold_steps"]), float(section["score_scale"])
    saturation = section.get("saturation_step", 0)
    if isinstance(saturation, bool) or not isinstance(saturation, int) or not 0 <= saturation <= 1 << 16:
        raise AnomalyCardError(f"card.json: anomaly.saturation_step must be a whole number of steps from 0 to "
                               f"{1 << 16}, got {saturation!r}")
    threshold = section.get("threshold")
    auroc = (section.get("synthetic_test") or {}).get("auroc") if isinstance(section.get("synthetic_test"), dict) \
        else None
    windows = (section.get("calibration") or {}).get("calibration_windows") \
        if isinstance(section.get("calibration"), dict) else None
    classical, classical_threshold = _chosen_classical(section)
    conditions: tuple[Condition, ...] = ()
    if classical is not None:  # the served scorer's own figures
        held = section["family_choice"]["classical"]
        synthetic = held.get("synthetic_test")
        auroc = synthetic.get("auroc") if isinstance(synthetic, dict) else None
        windows = (held.get("calibration") or {}).get("calibration_windows") \
            if isinstance(held.get("calibration"), dict) else None
        conditions = _kept_conditions(held, classical, float(classical_threshold))  # type: ignore[arg-type]
    return AnomalySection(
        threshold_steps=steps_, score_scale=scale, false_alarm_rate=float(section["false_alarm_rate"]),
        threshold=(classical_threshold if classical_threshold is not None
                   else float(threshold) if is_number(threshold) else steps_ * scale), saturation_step=saturation,
        normal_class=str(section.get("normal_class") or NORMAL),
        synthetic_auroc=float(auroc) if is_number(auroc) else None,
        calibration_windows=int(windows) if is_number(windows) else None, classical=classical,
        classical_threshold=classical_threshold, conditions=conditions, raw=section)


def classical_summary(section: AnomalySection | None) -> dict | None:
    """What a folder serving the classical scorer is, as lists and pages show it (its name, cost, runtime and the
    conditions it keeps); None when the folder serves a network (or is a classifier)."""
    if section is None or section.classical is None:
        return None
    cost = section.raw["family_choice"]["classical"].get("cost")
    cost = cost if isinstance(cost, dict) else {}
    return {"name": classical.NAME + " (classical)", "ram_bytes": cost.get("peak_ram_bytes"),
            "flash_bytes": cost.get("flash_bytes"), "runtime": "generated C, float32",
            "conditions": [c.name for c in section.conditions]}


def score_unit(section: AnomalySection) -> float:
    """One unit of `served_scores` in the score units the page and the predictions show."""
    return 1.0 if section.classical is not None else section.score_scale


def _kept_conditions(held: dict, served: ClassicalScorer, threshold: float) -> tuple[Condition, ...]:
    """The conditions an adapted classical scorer keeps: the earlier ones (`kept_conditions`), then the served one."""
    kept = held.get("kept_conditions")
    if kept is None:
        return ()
    if not isinstance(kept, list) or not kept:
        raise AnomalyCardError("card.json: anomaly.family_choice.classical.kept_conditions must be a list of "
                               "conditions")
    out = []
    for entry in kept:
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not is_number(entry.get("threshold")) or entry["threshold"] <= 0:
            raise AnomalyCardError("card.json: each of anomaly.family_choice.classical.kept_conditions needs a name "
                                   "and a positive threshold")
        try:
            scorer = ClassicalScorer.from_dict(entry.get("scorer"))
        except ValueError as exc:
            raise AnomalyCardError(f"card.json: kept condition {name!r}: {exc}") from None
        if (scorer.length, scorer.channels, scorer.input_scale) != (served.length, served.channels,
                                                                     served.input_scale):
            raise AnomalyCardError(f"card.json: kept condition {name!r} does not read the served scorer's input "
                                   f"(window, channels and int16 scale must be the same)")
        out.append(Condition(name, scorer, float(entry["threshold"])))
    out.append(Condition(str(held.get("condition") or FIRST), served, threshold))
    for condition in out:  # the names a page, a log line and the C header show: as `adapt --condition` takes them
        try:
            check_condition_name(condition.name)
        except ConditionError as exc:
            raise AnomalyCardError(f"card.json: a kept {exc}") from None
    if len({c.name for c in out}) != len(out):
        raise AnomalyCardError("card.json: two kept conditions have the same name")
    return tuple(out)


def _chosen_classical(section: dict) -> tuple[ClassicalScorer | None, float | None]:
    """The classical scorer and its threshold when the card's family choice is the classical scorer."""
    choice = section.get("family_choice")
    if not isinstance(choice, dict) or choice.get("family") != "classical":
        return None, None
    held = choice.get("classical")
    threshold = held.get("threshold") if isinstance(held, dict) else None
    if not isinstance(held, dict) or not is_number(threshold):
        raise AnomalyCardError("card.json: anomaly.family_choice.classical.threshold must be a number")
    try:
        return ClassicalScorer.from_dict(held.get("scorer")), float(threshold)
    except ValueError as exc:
        raise AnomalyCardError(f"card.json: anomaly.family_choice.classical: {exc}") from None
