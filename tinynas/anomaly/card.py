"""The card's `anomaly` section: how the score is read, its threshold, and how both were made.

The score is computed from the int8 model's two outputs, in their integer steps: both outputs share one
scale and zero point, so logit[1] - logit[0] = scale * (q[1] - q[0]) exactly, and the threshold, one of
the calibration windows' scores, is a whole number of steps. TFLite Micro and the generated C runtime give
the same score and verdict bit for bit (`PREFIX_score` in model_compiled.h); LiteRT, which sets the threshold
and serves on the Pi, rounds some products otherwise in its optimized kernels: its score can differ by a step
or two (tests/anomaly/test_scorer.py).

A window that leaves the int8 input's range is scored above every window that does not (`SATURATION_STEP`):
the converter sets that range on the training windows, so a fault louder than normal running reaches the
network clipped to normal's range, and a small scorer may then not tell it from normal (issue 59: CWRU's
development data, the 4 KiB `fast` winners of seeds 0 and 2 detected OR007@3 in 58 % and OR021@12 in 22 % of
their windows with the clipped input alone, 100 % and 98 % with the rule; no calibration window reached the
range's edge, so no false alarm was added). The calibration windows are scored by the same rule, so the
threshold's guarantee is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from tinynas.anomaly import classical
from tinynas.anomaly.alarm import Alarm
from tinynas.anomaly.choice import Finalist, choose, flags, validation_rate
from tinynas.anomaly.classical import ClassicalScorer, input_scale_of, refit
from tinynas.anomaly.conditions import FIRST, LIVE, Condition, ConditionError, check_condition_name, read_under
from tinynas.anomaly.metrics import above, auroc, score_report
from tinynas.anomaly.task import NORMAL, score_of
from tinynas.anomaly.threshold import calibrate
from tinynas.card_checks import is_number
from tinynas.deploy.export import io_quantization
from tinynas.deploy.litert import Int8Model
from tinynas.errors import TinynasError

SELECTION = ("validation loss of the scorer on held-out normal windows and synthetic anomalies made from them "
             "(tinynas.anomaly.perturb: bearing-like impulse trains, resonance bands, broadband noise, at "
             "severities from faint to strong); no fault recording is used to choose or tune")
SATURATION_STEP = 512
"""What each int8 input sample at the edge of the range (-128 or 127) adds to a window's score, in output steps:
more than logit[1] - logit[0] can span in int8 (2 x 255), so one such sample puts a window above every window
that has none. Recorded in the card (`anomaly.saturation_step`); a card without it (made before) scores without."""
GUARANTEE = ("split conformal: for a normal window exchangeable with the calibration windows, P(score > threshold) "
             "<= the rate; the deployed threshold is the largest of the per-condition ones")


class AnomalyCardError(TinynasError, ValueError):
    """A card whose anomaly section cannot be used (edited by hand, or written by another version)."""


def steps(logits: np.ndarray, scale: float) -> np.ndarray:
    """Scores in the int8 output's steps (whole numbers) from dequantized logits (the input's range not counted:
    a float model's, or one read before `SATURATION_STEP`)."""
    return np.round(score_of(logits) / scale).astype(np.int64)


def saturated(quantized: np.ndarray) -> np.ndarray:
    """Per int8 input window (n, T, C): how many of its samples sit at the edge of the range (-128 or 127)."""
    q = np.asarray(quantized)
    return np.sum((q == -128) | (q == 127), axis=tuple(range(1, q.ndim))).astype(np.int64)


def int8_scores(model, inputs: np.ndarray, saturation_step: int) -> np.ndarray:
    """Scores in output steps of preprocessed float windows `inputs` (n, T, C) by the int8 scorer `model`
    (`tinynas.deploy.litert.Int8Model`): output[1] - output[0], plus `saturation_step` per input sample at the
    range's edge: what the generated `PREFIX_score` computes."""
    quantized = model.quantize(inputs)
    outputs = model.int8_outputs(quantized).astype(np.int64)
    return outputs[:, 1] - outputs[:, 0] + int(saturation_step) * saturated(quantized)


def anomaly_section(study, tflite: bytes, name: str = "", cost=None) -> dict:
    """The card's anomaly section for a finished anomaly study: threshold from the normal test side (int8
    scores), the synthetic test side's figures, the --test-data evaluation when given, and (given the network
    winner's `name` and budgeted `cost`) which scorer family the rule chooses (`family_choice`)."""

    data, settings = study.anomaly, study.settings
    scale = float(io_quantization(tflite)["output"]["scale"])
    test = study.split.test
    model = Int8Model(tflite)
    scores = int8_scores(model, study.test_set()[0], SATURATION_STEP)
    is_normal = study.windows.y[test] == 0
    sessions = study.windows.sessions[test][is_normal] if study.windows.sessions is not None else None
    threshold = calibrate(scores[is_normal], sessions, settings.false_alarm_rate)
    alarm = Alarm()
    section = {
        "task": "anomaly", "normal_class": study.source_windows.class_names[0],
        "score": (f"output[1] - output[0] of the int8 model, in output steps (real score = steps x score_scale), "
                  f"plus {SATURATION_STEP} per input sample at the edge of the int8 input range"),
        "score_scale": scale, "saturation_step": SATURATION_STEP, "threshold_steps": int(threshold.value),
        "threshold": float(threshold.value) * scale, "false_alarm_rate": settings.false_alarm_rate,
        "calibration": threshold.to_dict(), "guarantee": GUARANTEE, "selection": SELECTION,
        "training": data.describe(), "debounce": alarm.describe(settings.false_alarm_rate),
        "synthetic_test": {"auroc": round(auroc(scores[is_normal], scores[~is_normal]), 4),
                           "detected": above(scores[~is_normal], threshold.value)},
    }
    if cost is not None:
        section["family_choice"] = family_choice(study, model, name, cost)
    if study.test_windows is not None:  # by the scorer the folder serves (the family chosen above)
        windows = study.test_windows
        served, cut = served_scores(_checked(section), model, study.preprocessing, windows.x)
        section["evaluation"] = score_report(served, windows.y, windows.class_names, _normal_of(windows), cut)
    return section


def _checked(section: dict) -> AnomalySection:
    checked = read_section({"anomaly": section})
    assert checked is not None  # a section this module has just written
    return checked


def family_choice(study, model, name: str, cost) -> dict:
    """The network winner (int8 `model`, its budgeted `cost`) against the classical scorer fitted on the same
    training windows, by `tinynas.anomaly.choice`'s rule on the validation side; the classical scorer's own figures
    (its criterion, its threshold on the calibration windows, its cost on the target) beside them."""
    windows, split, target = study.windows, study.split, study.target
    val = np.asarray(split.val)
    normal, synthetic = val[windows.y[val] == 0], val[windows.y[val] == 1]
    rate = validation_rate(study.settings.false_alarm_rate, len(normal))
    candidate = classical.candidate(study.anomaly, study.settings.false_alarm_rate, target.core)
    scorer = candidate.scorer
    scores = int8_scores(model, study.preprocessing.apply(windows.x[np.concatenate([normal, synthetic])]),
                         SATURATION_STEP)
    network_flags, network_threshold = flags(scores[:len(normal)], scores[len(normal):], rate)
    classical_flags, classical_threshold = flags(scorer.score(windows.x[normal]), scorer.score(windows.x[synthetic]),
                                                 rate)
    over = [f"{what} {need:,} > {have:,}" for what, need, have in (
        ("RAM", candidate.cost["peak_ram_bytes"], target.ram_bytes),
        ("flash", candidate.cost["flash_bytes"], target.flash_bytes),
        ("MACs", candidate.cost["macs"], target.mac_budget)) if need > have]
    choice = choose(Finalist("network", name, network_flags, network_threshold, cost.peak_ram_bytes,
                             cost.flash_bytes),
                    Finalist("classical", classical.NAME, classical_flags, classical_threshold,
                             candidate.cost["peak_ram_bytes"], candidate.cost["flash_bytes"], not over,
                             ", ".join(over), candidate.val_loss), rate, study.settings.scorer)
    test = np.asarray(split.test)
    test_scores = scorer.score(windows.x[test])
    is_normal = windows.y[test] == 0
    threshold = candidate.threshold
    return {**choice.to_dict(),
            "classical": {"name": classical.NAME, "scorer": scorer.to_dict(), "threshold": threshold.value,
                          "calibration": threshold.to_dict(), "val_loss": round(candidate.val_loss, 5),
                          "synthetic_test": {"auroc": round(auroc(test_scores[is_normal], test_scores[~is_normal]), 4),
                                             "detected": above(test_scores[~is_normal], threshold.value)},
                          "cost": candidate.cost, "seconds": round(candidate.seconds, 2)}}


def _normal_of(windows) -> str:
    """The class of evaluation data that is normal running: "normal", else the only class."""
    if NORMAL in windows.class_names or len(windows.class_names) != 1:
        return NORMAL
    return windows.class_names[0]


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


def served_scores(section: AnomalySection, model, preprocessing, windows: np.ndarray,
                  condition: str = LIVE) -> tuple[np.ndarray, float]:
    """(scores, threshold) of raw `windows` (n, T, C) by the scorer the card serves: the classical scorer when the
    family rule chose it (its float score), else the int8 network `model` (output steps, `int8_scores`). A window
    is anomalous when its score is above the threshold. With several conditions kept, a window is read under
    `condition` (`tinynas.anomaly.conditions`: the operator's, or the live signal's) and its score is its score
    there over that condition's threshold, times the served condition's threshold."""
    scores, threshold, _ = served_reading(section, model, preprocessing, windows, condition)
    return scores, threshold


def served_reading(section: AnomalySection, model, preprocessing, windows: np.ndarray,
                   condition: str = LIVE) -> tuple[np.ndarray, float, list[str] | None]:
    """`served_scores`, and the condition each window was read under (None: one condition is kept)."""
    if len(section.conditions) > 1 and section.classical_threshold is not None:
        relative, index = read_under(list(section.conditions), windows, condition)
        return (relative * section.classical_threshold, section.classical_threshold,
                [section.conditions[i].name for i in index])
    if section.classical is not None and section.classical_threshold is not None:
        return section.classical.score(windows), section.classical_threshold, None
    return (int8_scores(model, preprocessing.apply(windows), section.saturation_step),
            float(section.threshold_steps), None)


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



def recalibrated_section(section: dict, tflite: bytes, held_out_inputs: np.ndarray, sessions: np.ndarray | None,
                         why: str) -> dict:
    """The anomaly section of a changed model (`adapt` on a new condition's normal windows): its threshold set
    again, for the same rate, on int8 scores of normal windows the change did not see; the old one is kept."""

    scale = float(io_quantization(tflite)["output"]["scale"])
    saturation = read_section({"anomaly": section}).saturation_step  # type: ignore[union-attr]
    scores = int8_scores(Int8Model(tflite), held_out_inputs, saturation)
    threshold = calibrate(scores, sessions, float(section["false_alarm_rate"]))
    previous = {key: section.get(key) for key in ("threshold", "threshold_steps", "score_scale", "calibration")}
    return {**section, "score_scale": scale, "threshold_steps": int(threshold.value),
            "threshold": float(threshold.value) * scale, "calibration": {**threshold.to_dict(), "why": why},
            "previous_threshold": previous}


def refitted_classical(section: dict, fit_windows: np.ndarray, calibration_windows: np.ndarray,
                       sessions: np.ndarray | None, why: str,
                       condition: str | None = None) -> tuple[dict, ClassicalScorer, float]:
    """The anomaly section of a folder serving the classical scorer, on a new condition's normal windows: its
    Gaussian (and input scale) fitted on `fit_windows`, its threshold set again for the same rate on the scores of
    `calibration_windows` (raw windows it did not see); the old scorer's threshold is kept. With a `condition` name
    the earlier conditions are kept beside it (`kept_conditions`, all on one int16 input scale: the largest any of
    them needs) and a condition of that name is replaced. Returns the section, the scorer and its threshold."""
    choice = section["family_choice"]
    held = choice["classical"]
    old = read_section({"anomaly": section})
    kept: list[Condition] = []
    if condition is not None:
        assert old is not None and old.classical is not None and old.classical_threshold is not None
        earlier = old.conditions or (Condition(str(held.get("condition") or FIRST), old.classical,
                                               old.classical_threshold),)
        kept = [c for c in earlier if c.name != condition]
    scale = max([input_scale_of(fit_windows)] + [c.scorer.input_scale for c in kept]) if kept else None
    scorer = refit(ClassicalScorer.from_dict(held["scorer"]), fit_windows, scale)
    threshold = calibrate(scorer.score(calibration_windows), sessions, float(section["false_alarm_rate"]))
    changed = {**held, "scorer": scorer.to_dict(), "threshold": threshold.value,
               "calibration": {**threshold.to_dict(), "why": why},
               "previous_threshold": {"threshold": held.get("threshold"), "calibration": held.get("calibration")}}
    changed.pop("kept_conditions", None)
    changed.pop("condition", None)  # unnamed: the new condition replaces every earlier one
    if condition is not None:
        changed["condition"] = condition
    if kept and scale is not None:
        # An earlier condition read on the common scale: its features move by far less than their spread (the
        # int16 step stays below 1e-4 of the loudest condition's peak), and the Python and C scores stay one.
        changed["kept_conditions"] = [{"name": c.name, "scorer": replace(c.scorer, input_scale=scale).to_dict(),
                                       "threshold": c.threshold} for c in kept]
    return {**section, "family_choice": {**choice, "classical": changed}}, scorer, threshold.value
