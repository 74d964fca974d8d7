"""The SEARCHING and DEPLOYING steps: a study on the user's session, then its model served only if it
is accurate enough on held-out windows.

Both resume after a power cut: the search from its journal (a finished one is not rerun), the deployment
from the finished study (the new model gets a folder of its own and is listed as deployed only once it is
complete there, so a kill leaves the previous model served).
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from firmware_bridge.plan import load_plan
from tinynas.anomaly.alarm import Alarm
from tinynas.anomaly.section import read_section
from tinynas.atomic import atomic_write_text, discard_folder, publish_folder, stage_folder
from tinynas.card import card_text, read_card, task_of
from tinynas.data.checks import check_windows
from tinynas.data.preprocess import Preprocessing
from tinynas.data.recording import load_recording, with_context
from tinynas.data.spec import load_windows
from tinynas.data.splits import make_split
from tinynas.data.windows import DataError
from tinynas.deploy.litert import Int8Model
from tinynas.deploy.measure import run_int8
from tinynas.folders import CARD, JOURNAL, MODEL, MODEL_FILES, REPORT, TRAINING_DATA, read_model_file
from tinynas.modes import Task
from tinynas.progress import Progress
from tinynas.search import final_recipe
from tinynas.service.config import config_hint
from tinynas.service.context import Phase, ServiceContext, Transition, to
from tinynas.service.gate import GateOutcome, outcome
from tinynas.service.idle import UNKNOWN, IdleRule, idle_rule, softmax, stream_rule
from tinynas.service.judged import judge_held_out
from tinynas.service.models import write_deployment
from tinynas.service.state import Deployed
from tinynas.study import Study
from tinynas.study.journal import Journal
from tinynas.trial import Fidelity
from tinynas.units import parse_duration
from tinynas.verdict import RECORDINGS, deploy_gate, held_out, per_class

log = logging.getLogger(__name__)


def search(service: ServiceContext) -> Transition:
    """Run (or resume) the study on the recorded session, then move on to DEPLOYING."""

    config = service.config
    study = Path(service.state.study)
    journal_path = study / JOURNAL
    finished = False
    if journal_path.exists():
        with Journal(journal_path) as journal:
            finished = bool(journal.get_meta("finished")) and (study / CARD).exists()
    if not finished:
        windows, data_spec = session_windows(service)
        findings = check_windows(windows)
        for finding in findings:
            log.warning("data check: %s", finding.message)
        errors = [f.message for f in findings if f.severity == "error"]
        if errors:
            # Tell the user before a search is wasted on it; the recording is kept on disk.
            return to(service.idle_phase(),
                      error=f"recording of {service.state.user} not used: {'; '.join(errors)}; record again")
        task = load_plan(service.state.plan).task
        spent = 0.0
        if journal_path.exists():
            with Journal(journal_path) as journal:
                spent = float(journal.get_meta("search_seconds") or 0.0)
        service.search_clock = (time.time(), spent)
        Study(study, windows, config.chip_budget(), strategy=config.strategy, task=task,
              false_alarm_rate=config.false_alarm_rate, scorer=config.scorer,
              budget_seconds=parse_duration(config.budget), max_candidates=config.candidates or None, seed=0,
              fidelity=Fidelity(config.epochs, config.batch_size, config.learning_rate),
              # The strategy's own recipe at the configured length (fast's falls along a cosine).
              final_fidelity=replace(final_recipe(config.strategy, config.final_epochs), batch_size=config.batch_size),
              workers=config.workers, normalize=config.normalize, resume=journal_path.exists(), data_spec=data_spec,
              progress=Progress(interactive=False), pool=service.workers, data_findings=findings).run()
    service.search_clock = None
    return to(Phase.DEPLOYING)


def session_windows(service: ServiceContext):
    """The session's windows as the search uses them, and their data spec.

    When the plan's window is too long for the target (a continuous recording such as bearing4 on a
    small MCU), the recordings are cut into the longest windows the target can hold.
    """

    spec = f"session:{service.state.session}"
    plan = load_plan(service.state.plan)
    fit = service.plan_fit(plan)
    if fit.cut:
        spec += f"?window={fit.window}&hop={fit.hop}"
        log.info("plan windows of %d samples do not fit %s: searching on %d-sample windows cut from them",
                 fit.recorded, service.config.target, fit.window)
    windows = load_windows(spec)
    if plan.kind == "gesture" and not fit.cut:
        # The stream around each window: training on the offsets serving answers at, and the out-of-fold answers
        # along them that serving's rules are set on (tinynas.data.recording).
        try:
            windows = with_context(windows, load_recording(service.state.session))
        except DataError as exc:
            log.info("no stream context for the search: %s", exc)
    return windows, spec


def serving_rule(plan, session: str, tflite: bytes, preprocessing, windows, split,
                 selection: dict | None = None) -> tuple[IdleRule, dict]:
    """Serving's idle / unknown rule for a model (idle.py), its threshold calibrated on answers to windows the
    answering model never trained on: a cross-validated search's out-of-fold answers along the held-out windows'
    streams (a gesture session: `idle.stream_rule`, which chooses the smoothing too), else its out-of-fold answers
    to the cut windows (`selection`, every training and validation window once, by the fold models), else the int8
    model's on the validation windows; and what the rule does to the held-out test windows: the share answered, and
    the accuracy of those answers with every "unknown" counted as wrong."""

    stream = (selection or {}).get("stream")
    if isinstance(stream, dict) and stream.get("window"):
        # The fold models' answers along every held-out window's stream: the offsets a person is answered at.
        rule = stream_rule(plan, session, stream, windows, (selection or {}).get("folds"))
    elif selection and selection.get("confidence"):
        confidences = np.asarray(selection["confidence"], dtype=np.float64)
        correct = np.asarray(selection["correct"], dtype=bool)
        rule = idle_rule(plan, session, confidences, correct,
                         f"{len(confidences)} out-of-fold answers (float models of the {selection.get('folds')} folds)")
    else:
        side, name = (split.val, "validation") if len(split.val) else (split.test, "test")
        held = run_int8(tflite, preprocessing.apply(windows.x[side])) if len(side) else None
        confidences = softmax(held.logits).max(axis=1) if held is not None else np.zeros(0)
        correct = held.predictions == windows.y[side] if held is not None else np.zeros(0, dtype=bool)
        rule = idle_rule(plan, session, confidences, correct, f"{len(side)} {name} windows")
    if not len(split.test):
        return rule, {}
    result = run_int8(tflite, preprocessing.apply(windows.x[split.test]))
    names = list(windows.class_names)
    answers = [rule.answer(windows.x[i], names[p], float(c))[0] for i, p, c in
               zip(split.test, result.predictions, softmax(result.logits).max(axis=1))]
    truth = [names[y] for y in windows.y[split.test]]
    return rule, {"test_windows": len(truth),
                  "test_answered": round(float(np.mean([a != UNKNOWN for a in answers])), 4),
                  "test_answered_accuracy": round(float(np.mean([a == t for a, t in zip(answers, truth)])), 4)}


def deploy(service: ServiceContext) -> Transition:
    """Serve the study's int8 model if its held-out windows show it reaches `min_accuracy` (the 95 % interval's lower
    bound, `tinynas.verdict`); else keep the old, and say whether to record again or how much more."""

    state, config = service.state, service.config
    study = Path(state.study)
    card = read_card(study).to_dict()  # the study's own card, checked like any other before it is served
    if task_of(card) == Task.ANOMALY:
        return _deploy_scorer(service, study, card)
    windows, _ = session_windows(service)
    split = make_split(windows, "auto", seed=0)
    test = split.test
    tflite = read_model_file(study, MODEL)
    preprocessing = Preprocessing.from_card(card)
    classes = len(windows.class_names)
    result = run_int8(tflite, preprocessing.apply(windows.x[test])) if len(test) else None
    said = result.predictions if result is not None else np.zeros(0, dtype=int)
    # Windows cut with a hop share their recording: counted over recordings, each right by most of its windows.
    cut = held_out(said, windows.y[test], windows.groups[test])
    cut_counts = {**cut.to_dict(), **per_class(said, windows.y[test], classes, windows.groups[test])}
    plan = load_plan(state.plan)
    rule, answered = serving_rule(plan, state.session, tflite, preprocessing, windows, split,
                                  card.get("selection"))
    served_card = {**card, "serving": rule.to_dict()}
    # Judged as serving will answer: the held-out signs on the stream (a gesture session), else the cut windows.
    stream = judge_held_out(state.session, study / MODEL, served_card, set(windows.groups[test]), config.hop_seconds,
                            config.smoothing) if plan.kind == "gesture" and len(test) else None
    if stream is not None and stream.signs:
        held, what = stream.held, "held-out signs on the stream"
        counts = {**held.to_dict(), "measure": "on the stream",
                  "recall": [(stream.per_class.get(name) or {}).get("recognised", 0) /
                             (stream.per_class[name]["signs"]) if (stream.per_class.get(name) or {}).get("signs")
                             else None for name in windows.class_names],
                  "support": [(stream.per_class.get(name) or {}).get("signs", 0) for name in windows.class_names]}
    else:
        held, what, counts = cut, "held-out windows", cut_counts
    # The share of what is recorded that lands on the held-out side, in the unit counted (what one more step adds).
    share = (len(np.unique(windows.groups[test])) / max(len(np.unique(windows.groups)), 1)
             if held is cut and cut.unit == RECORDINGS else len(test) / max(len(windows), 1))
    verdict = deploy_gate(held, config.min_accuracy, classes, share, what)
    if verdict.decision != "deploy":
        gate = outcome(verdict, counts, windows.class_names, plan, state.user, share, config_hint(config))
        log.warning("%s", gate.words())
        # One more step is a normal state, not an error: the page shows it as such, with the button for it.
        return to(service.idle_phase(), error=gate.words() if gate.decision == "refuse" else "", gate=gate)
    assert result is not None  # a model deployed was checked on held-out windows
    target = service.paths.profile(state.user) / "deployed" / study.name
    stream_record = {"stream": stream.to_dict(), "stream_words": stream.words()} if stream is not None else {}
    deployed = Deployed(user=state.user, model=str(target / MODEL), card=str(target / CARD),
                        accuracy=held.accuracy, held_out={**counts, **({"cut": cut_counts} if stream else {})},
                        card_int8_test_accuracy=card.get("int8_test_accuracy"), classes=card.get("classes"),
                        study=str(study), session=state.session, plan=plan.to_dict(),
                        serving={**rule.to_dict(), **answered, **stream_record}, made=time.time())
    _publish(service, study, target, {**served_card, **({"stream": stream.to_dict()} if stream else {})}, deployed)
    return to(Phase.SERVING, deployed=deployed, error="", gate=None)


def _publish(service: ServiceContext, study: Path, target: Path, card: dict, deployed: Deployed) -> None:
    """Copy the study's model folder to `target` among the user's deployed models with `card` (the served card) and
    `deployed` (what `state.deployed` holds while it is served: `tinynas serve` serves it again from there), in one
    exchange."""
    staging = stage_folder(target)  # hidden, beside it; a power cut's leftovers are removed first
    try:
        # The float weights, training windows and split too: a served model is a model folder that
        # `recalibrate` / `adapt` can open (tinynas.deploy.modeldir).
        for name in (*(name for name in MODEL_FILES if name != CARD), REPORT, *TRAINING_DATA):
            if (study / name).exists():
                shutil.copy2(study / name, staging / name)
        # The served card carries serving's rules (the study's card stays as it was).
        atomic_write_text(staging / CARD, card_text(card))
        write_deployment(staging, deployed)
        publish_folder(staging, target)  # one exchange: a folder already there stays whole until the new one is
    except BaseException:
        discard_folder(staging)  # a full disk mid-copy: nothing half-copied is left to be served
        raise


def _deploy_scorer(service: ServiceContext, study: Path, card: dict) -> Transition:
    """Serve an anomaly scorer: verified when LiteRT runs it and its card holds a calibrated threshold; the
    served card carries the alarm's debounce (the service's alarm_k of alarm_n)."""

    state, config = service.state, service.config
    section = read_section(card)
    assert section is not None  # the caller saw the anomaly section
    Int8Model(read_model_file(study, MODEL))  # a model LiteRT cannot load is not served
    quality = section.synthetic_auroc
    if quality is None or quality < config.min_auroc:
        plan = load_plan(state.plan)
        gate = GateOutcome(state.user, "refuse", f"the scorer tells its held-out synthetic anomalies from normal "
                           f"running at AUROC {quality if quality is not None else 'not measured'}, below "
                           f"{config.min_auroc:g}",
                           command=f"record longer normal running ({plan.repetitions * plan.block_seconds:.0f} s "
                                   f"were recorded; twice that gives the search more to learn from), with the sensor "
                                   f"mounted firmly: tinynas onboard --user {state.user}{config_hint(config)}")
        log.warning("%s", gate.words())
        return to(service.idle_phase(), error=gate.words(), gate=gate)
    alarm = Alarm(config.alarm_k, config.alarm_n).describe(section.false_alarm_rate)
    target = service.paths.profile(state.user) / "deployed" / study.name
    deployed = Deployed(user=state.user, model=str(target / MODEL), card=str(target / CARD), task=Task.ANOMALY,
                        accuracy=None, classes=card.get("classes"), study=str(study), session=state.session,
                        plan=load_plan(state.plan).to_dict(),
                        anomaly={"threshold": section.threshold, "threshold_steps": section.threshold_steps,
                                 "false_alarm_rate": section.false_alarm_rate,
                                 "calibration_windows": section.calibration_windows,
                                 "synthetic_auroc": section.synthetic_auroc, "alarm": alarm},
                        serving={"alarm": alarm}, made=time.time())
    _publish(service, study, target, {**card, "serving": {"alarm": alarm}}, deployed)
    log.info("serving the %s anomaly scorer of %s: threshold %.3g for %.2g false alarms, alarm at %d of %d windows",
             "classical" if section.classical is not None else "network", state.user, section.threshold,
             section.false_alarm_rate, config.alarm_k, config.alarm_n)
    return to(Phase.SERVING, deployed=deployed, error="")
