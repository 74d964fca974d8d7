"""The re-wear step (RECALIBRATING): the change made in the child, the swap of an accepted model, the status line.

A re-wear / new condition brings the served model back without a new search, while it keeps serving (the
request and the flow it starts: `rewear_request`; its recording: `collect`, `rewear_recording`). The new model is
served only if `recalibrate` accepted it (at least as accurate as the old model on the held-out new windows, the
original test windows not forgotten) or, unlabelled, `adapt`'s model is at least as confident on the new windows
(the status says that is all it could check); otherwise the old one stays and `state.rewear` says why.

Power cuts: `state.deployed` changes only after the accepted model is in its final folder, so a kill at any point
leaves the old model serving; a kill in RECALIBRATING reruns the step from the recorded windows (the staging
folder, ours, is removed first; the child, `rewear_child`, dies with the service).
"""

from __future__ import annotations

import logging
import shutil
import time
from pathlib import Path

from tinynas.adaptation.rewear_job import RewearJob, RewearOutcome
from tinynas.anomaly.section import read_section
from tinynas.atomic import publish_folder
from tinynas.card import read_card
from tinynas.folders import CARD, MODEL
from tinynas.modes import FlowMode, FlowPhase
from tinynas.service import rewear_child
from tinynas.service.collection import Collection
from tinynas.service.context import Phase, ServiceContext, Transition, to
from tinynas.service.models import write_deployment
from tinynas.service.rewear_request import RewearRefused, flow_plan
from tinynas.service.state import RewearFlow
from tinynas.training import scratch
from tinynas.verdict import HeldOut

log = logging.getLogger(__name__)


# ---- RECALIBRATING --------------------------------------------------------------------------------------
def _spec(service: ServiceContext, flow: RewearFlow) -> str:
    spec = f"session:{flow.session}"
    if flow.mode is FlowMode.UNLABELLED:
        return spec + f"?window={flow.window}&hop={max(1, flow.window // 2)}"
    fit = service.plan_fit(flow_plan(flow))
    return spec + (f"?window={fit.window}&hop={fit.hop}" if fit.cut else "")


def _show_progress(service: ServiceContext, flow: RewearFlow, path: Path) -> RewearFlow:
    """The flow with the child's latest step (e.g. "cross-validating fine-tune: fold 1 of 2") as its text, saved."""
    try:
        step = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return flow
    text = f"{step} (the old model keeps serving)"
    if step and flow.text != text:
        flow = flow.moved(text=text)
        service.update(rewear=flow)
    return flow


def _figures(outcome: RewearOutcome) -> str:
    """Each figure with what it measured: today's wear (the new repetitions) or the onboarding's test windows."""
    parts = []
    # (adapt's confidence figures are in its reason already)
    paired = outcome.paired or {}
    for pair, what, side in ((outcome.verify, "today's wear", "today"),
                             (outcome.test, "onboarding test", "onboarding")):
        before, after = pair or (None, None)
        if before is not None and after is not None:
            measure = (paired.get(side) or {}).get("measure")
            parts.append(f"{what} {before:.3f} -> {after:.3f}" + (f" ({measure})" if measure else ""))
    return "; ".join(parts)


def recalibrate_step(service: ServiceContext) -> Transition | None:
    """RECALIBRATING: run the change in a child, then swap only an accepted model (see module docstring)."""
    flow = service.state.rewear
    if flow is None:
        raise RewearRefused("RECALIBRATING without a re-wear flow")  # load_state refuses such a state
    staging, final = Path(flow.staging), Path(flow.final)
    shutil.rmtree(staging, ignore_errors=True)  # ours: a run a power cut interrupted
    result_path = staging.with_name(staging.name + ".result.json")
    result_path.unlink(missing_ok=True)
    progress_path = staging.with_name(staging.name + ".progress")
    progress_path.unlink(missing_ok=True)
    job = RewearJob(mode=flow.mode, source=str(Path(flow.source).parent), staging=str(staging),
                    spec=_spec(service, flow), result=str(result_path), progress=str(progress_path),
                    epochs=service.config.rewear_epochs, learning_rate=service.config.rewear_learning_rate,
                    condition=flow.condition or "", hop_seconds=service.config.hop_seconds,
                    smoothing=service.config.smoothing)
    job_path = staging.with_name(staging.name + ".job.json")
    log_path = staging.with_name(staging.name + ".log")
    adapting = flow.mode is FlowMode.UNLABELLED
    flow = flow.moved(phase=FlowPhase.ADAPTING if adapting else FlowPhase.RECALIBRATING, phase_started=time.time(),
                      text=("adapting batch-norm statistics to the unlabelled windows" if adapting
                            else "fine-tuning on the new windows") + " (the old model keeps serving)")
    service.update(rewear=flow)
    child = rewear_child.start(job, job_path, log_path)
    try:
        while child.poll() is None:
            if service.cancel_requested("recalibration"):
                child.kill()
                child.wait()
                shutil.rmtree(staging, ignore_errors=True)
                for path in (job_path, result_path, log_path, progress_path):
                    path.unlink(missing_ok=True)
                return _finish(service, flow, FlowPhase.CANCELLED, f"recalibration of {flow.user} cancelled; the old "
                               f"model stays; recordings kept in {flow.session}")
            if service.stopping.wait(0.5):
                return None  # stopping: the child is killed below and the next start runs this step again
            flow = _show_progress(service, flow, progress_path)
    finally:
        if child.poll() is None:  # the service is stopping: the next start runs the step again
            child.kill()
            child.wait()
        scratch.remove_of(child.pid)  # a killed child could not remove its temporary folder
    outcome = rewear_child.answer(job, child.returncode, log_path)
    for path in (job_path, result_path, log_path, progress_path):
        path.unlink(missing_ok=True)
    if outcome.error is not None:
        shutil.rmtree(staging, ignore_errors=True)
        return _finish(service, flow, FlowPhase.FAILED, f"recalibration of {flow.user} failed: {outcome.error}; "
                       f"the old model stays; recordings kept in {flow.session}", error=True)
    figures = _figures(outcome)
    recorded = outcome.to_dict()
    flow = flow.moved(figures={key: recorded[key] for key in ("verify", "confidence", "test", "chosen", "compared",
                                                              "paired", "stream") if key in recorded})
    if not outcome.accepted:
        shutil.rmtree(staging, ignore_errors=True)
        # The old model stays, and what it did today is said: the page never goes on claiming the onboarding's
        # figure for an armband worn otherwise today.
        return _finish(service, flow, FlowPhase.REJECTED, f"{outcome.reason}" + (f" ({figures})" if figures else ""),
                       today=_today(outcome))
    return _swap(service, flow, staging, final, outcome, figures)


def _today(outcome: RewearOutcome) -> dict | None:
    """The served model on today's wear, from a re-wear's stream verdict: its signs recognised and the classes it
    fails (None: judged on windows, or nothing judged)."""
    stream = (outcome.stream or {}).get("today") or {}
    old = stream.get("old model")
    if not isinstance(old, dict):
        return None
    return {"signs": old.get("signs"), "recognised": old.get("recognised"), "interval": old.get("interval"),
            "failing": list((outcome.stream or {}).get("failing_today") or []), "when": time.time(),
            "measure": "today's re-wear recording, each repetition held out, float, on the stream as serving answers"}


def _swap(service: ServiceContext, flow: RewearFlow, staging: Path, final: Path, outcome: RewearOutcome,
          figures: str) -> Transition:

    old = service.state.deployed
    assert old is not None  # a flow starts only from a served model, and only a flow swaps
    if str(final / MODEL) == old.model:
        raise RuntimeError(f"{final} is the model being served: a re-wear never replaces it in place")
    card = read_card(staging).to_dict()
    after = [(pair or (None, None))[1] for pair in (outcome.verify, outcome.test)]
    # The old model's held-out count is not the new one's: the new windows it was checked on are.
    deployed = old.moved(model=str(final / MODEL), card=str(final / CARD),
                         accuracy=next((value for value in after if value is not None), old.accuracy),
                         held_out=_checked_on(outcome), card_int8_test_accuracy=card.get("int8_test_accuracy"),
                         replaced=old.model, condition=None,  # an operator's pinned condition: read live again
                         changed_by=flow.mode.change, made=time.time())
    section = read_section(card)
    if section is not None and old.anomaly is not None:  # the new threshold is served
        deployed = deployed.moved(accuracy=None, anomaly={
            **old.anomaly, "threshold": section.threshold, "threshold_steps": section.threshold_steps,
            "calibration_windows": section.calibration_windows})
    write_deployment(staging, deployed)  # `tinynas serve` can bring this model back later
    publish_folder(staging, final)  # a folder a power cut left there (state not yet saved) is exchanged whole
    flow = flow.moved(phase=FlowPhase.ACCEPTED, text=f"{outcome.reason}" + (f" ({figures})" if figures else "")
                      + f"; now serving model {final.name}", finished=time.time())
    service.collection = Collection()
    return to(Phase.SERVING, deployed=deployed, rewear=flow, session="", error="", paused="")


def _checked_on(outcome: RewearOutcome) -> dict | None:
    """The served accuracy's count and interval after an accepted recalibration: the new windows it was checked on
    (`verdict.HeldOut`'s fields and how they were measured), None when it was checked on none. The service gives
    no verification data, so a recalibration is checked by cross-validation over the repetitions (`chosen` is then
    the recipe it chose) or, with one repetition, on no new window; adapt is judged by confidence. Cross-validation's
    figures are the float model's: said so, never shown as int8."""

    windows = outcome.verify_windows
    after = (outcome.verify or (None, None))[1]
    if not outcome.chosen or not isinstance(windows, int) or windows <= 0 or \
            not isinstance(after, (int, float)):
        return None
    on_stream = "stream" in str(((outcome.paired or {}).get("today") or {}).get("measure", ""))
    return {**HeldOut(int(round(after * windows)), windows).to_dict(),
            "measure": "float, cross-validated over the new repetitions" + (", on today's stream as serving "
                                                                            "answers" if on_stream else "")}


def _finish(service: ServiceContext, flow: RewearFlow, phase: FlowPhase, text: str, error: bool = False,
            today: dict | None = None) -> Transition:
    """End the flow without a swap: the old model keeps serving; `text` is what status shows; `today` what the old
    model did on today's wear (kept with the served model, shown instead of the onboarding's figure)."""
    log.log(logging.ERROR if error else logging.INFO, "%s", text)
    flow = flow.moved(phase=phase, text=text, finished=time.time())
    service.collection = Collection()
    served = service.state.deployed
    changes = {"deployed": served.moved(today=today)} if today is not None and served is not None else {}
    return to(Phase.SERVING, rewear=flow, session="", paused="", error=text if error else "", **changes)


def status_line(rewear: dict) -> str:
    """The flow in one line for `tinynas service status`."""
    if not rewear:
        return ""
    phase, text = str(rewear.get("phase", "")), str(rewear.get("text", ""))
    # recalibrate's and adapt's reasons begin with "accepted:" / "rejected:" already
    return f"re-wear of {rewear.get('user')} ({rewear.get('mode')}): " + (text if text.startswith(phase) else
                                                                          f"{phase}: {text}")


