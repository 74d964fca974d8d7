"""The card's `anomaly` section written for a finished anomaly study: the threshold calibrated on the normal test side
(int8 scores), the synthetic test side's figures, the scorer family the rule chooses and the --test-data evaluation.
Read back by `tinynas.anomaly.section`."""

from __future__ import annotations

import numpy as np

from tinynas.anomaly import classical
from tinynas.anomaly.alarm import Alarm
from tinynas.anomaly.choice import Finalist, choose, flags, validation_rate
from tinynas.anomaly.metrics import above, auroc, score_report
from tinynas.anomaly.scoring import SATURATION_STEP, int8_scores, served_scores
from tinynas.anomaly.section import AnomalySection, read_section
from tinynas.anomaly.task import NORMAL
from tinynas.anomaly.threshold import calibrate
from tinynas.cost.estimate import over_target
from tinynas.deploy.export import io_quantization
from tinynas.deploy.litert import Int8Model
from tinynas.study.final_inputs import FinalInputs

SELECTION = ("validation loss of the scorer on held-out normal windows and synthetic anomalies made from them "
             "(tinynas.anomaly.perturb: bearing-like impulse trains, resonance bands, broadband noise, at "
             "severities from faint to strong); no fault recording is used to choose or tune")
GUARANTEE = ("split conformal: for a normal window exchangeable with the calibration windows, P(score > threshold) "
             "<= the rate; the deployed threshold is the largest of the per-condition ones")


def anomaly_section(study: FinalInputs, tflite: bytes, name: str = "", cost=None) -> dict:
    """The card's anomaly section for a finished anomaly study: threshold from the normal test side (int8
    scores), the synthetic test side's figures, the --test-data evaluation when given, and (given the network
    winner's `name` and budgeted `cost`) which scorer family the rule chooses (`family_choice`)."""

    data, settings = study.anomaly, study.settings
    assert data is not None, "the anomaly section of a classifier's search"
    scale = float(io_quantization(tflite)["output"]["scale"])
    test = study.split.test
    model = Int8Model(tflite)
    scores = int8_scores(model, study.x_test, SATURATION_STEP)
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


def family_choice(study: FinalInputs, model, name: str, cost) -> dict:
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
    over = over_target(target, candidate.cost["peak_ram_bytes"], candidate.cost["flash_bytes"],
                       candidate.cost["macs"])  # the rule a network's cost is held to
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
