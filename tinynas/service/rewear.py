"""Re-wear / new condition: bring the served model back without a new search, while it keeps serving.

`tinynas onboard --user U --recalibrate` -> COLLECTING (the user's onboarding plan with
`rewear_repetitions` per class) -> RECALIBRATING (`recalibrate` into a staging folder: with two repetitions
or more it chooses its recipe by cross-validating over them, adapt among the recipes, then trains on all)
-> the new model is served only if `recalibrate` accepted it (at least as accurate as the old model on the
held-out new windows, the original test windows not forgotten); otherwise the old one stays and
`state.rewear` says why. With `--unlabelled`, `rewear_unlabelled_seconds` of whatever the machine does are
recorded and `adapt` runs; with no labels the only check is the models' own confidence on those windows,
and the status says so.

Power cuts: the session is crash-safe (Recorder); `state.deployed` changes only after the accepted model
is in its final folder, so a kill at any point leaves the old model serving. A kill in RECALIBRATING
reruns the step from the recorded windows (the staging folder, ours, is removed first). The fine-tuning
runs in a child process: TensorFlow stays out of the serving process, and the kernel kills the child
with the service (PR_SET_PDEATHSIG), so a restarted service never races an orphan on the staging folder.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from firmware_bridge.guide import Plan
from tinynas.atomic import atomic_write_text, publish_folder
from tinynas.card import read_card
from tinynas.data.preprocess import Preprocessing
from tinynas.data.spec import load_windows
from tinynas.errors import TinynasError, user_message
from tinynas.folders import CARD, MODEL, read_model_file
from tinynas.interrupts import die_with_parent
from tinynas.service.collection import Collection
from tinynas.service.context import Phase, ServiceContext, Transition, to
from tinynas.service.state import Deployed, RewearFlow
from tinynas.training import scratch
from tinynas.verdict import HeldOut

log = logging.getLogger(__name__)

UNLABELLED_ATTEMPTS = 5
"""Times an unlabelled recording starts again after a gap (a dropped link, an unplugged device) before it is left
to the adaptation as it is: it uses the windows that are whole, or fails in one line with the old model kept."""

UNLABELLED = ("unlabelled-a", "unlabelled-b")
"""Labels of the two halves of an unlabelled recording: `Windows` needs two classes; `adapt` ignores them
(they are not the model's classes, so they are not even scored)."""


class RewearRefused(TinynasError, ValueError):
    """A re-wear request that cannot be followed (no served model for the user, an old model folder)."""


# ---- the request --------------------------------------------------------------------------------------
def served_model_problem(deployed: Deployed | None, user: str) -> str | None:
    """Why `user` cannot re-wear (one line), or None when the served model is theirs."""
    if deployed is None:
        return f"{user} has no served model (nothing is served yet): onboard {user} first"
    if deployed.user != user:
        return (f"{user} has no served model (the service serves {deployed.user}'s): "
                f"onboard {user} first")
    return None


def onboarding_plan(deployed: Deployed, repetitions: int) -> Plan:
    """The plan the served model was collected with, with `repetitions` per class.

    Models deployed by this version record it; older ones are found through their study's session manifest.
    """
    stored = deployed.plan
    if not isinstance(stored, dict):
        session = deployed.session or ""
        if not session and deployed.study:
            study = Path(deployed.study)
            session = str(study.parent.parent / "sessions" / study.name)
        try:
            stored = json.loads((Path(session) / "manifest.json").read_text(encoding="utf-8")).get("plan")
        except (OSError, ValueError, AttributeError):
            stored = None
    if not isinstance(stored, dict) or not stored.get("classes"):
        raise RewearRefused("the served model's collection plan is not known (its session is gone): "
                            "onboard again to make a model that can be recalibrated")
    try:
        return Plan(**{**stored, "classes": tuple(stored["classes"]), "repetitions": repetitions})
    except (TypeError, TinynasError) as exc:
        raise RewearRefused(f"the served model's collection plan is not usable ({exc})") from None


def new_flow(service: ServiceContext, user: str, unlabelled: bool) -> RewearFlow:
    """The `state.rewear` of a new flow for `user` (RewearRefused in one line if it cannot start)."""
    from tinynas.deploy.modeldir import ModelDir

    deployed = service.state.deployed
    problem = served_model_problem(deployed, user)
    if problem:
        raise RewearRefused(problem)
    assert deployed is not None  # else a problem
    source = ModelDir.open(Path(deployed.model).parent)  # no float weights: refused before anyone records
    stamp = time.strftime("%Y%m%d-%H%M%S")
    profile = service.paths.profile(user)
    scorer = deployed.scorer
    unlabelled = unlabelled or scorer  # a scorer's new condition is its normal running: nothing to label
    window = source.preprocessing.window_length
    flow = RewearFlow(user=user, mode="unlabelled" if unlabelled else "labelled", phase="collecting",
                      session=str(profile / "sessions" / f"{stamp}-rewear"),
                      staging=str(profile / "deployed" / f"{stamp}-rewear.tmp"),
                      final=str(profile / "deployed" / f"{stamp}-rewear"), source=deployed.model,
                      window=window, started=time.time())
    if unlabelled:
        # At least 6 windows long: each half then gives 5 half-overlapping windows, 10 in all (adapt needs 8).
        rate = service.require_device().hello.sample_rate_hz
        least = 6 * window / rate
        if scorer:  # the later half of the windows (hop half a window) sets the threshold again for its rate
            from tinynas.anomaly.threshold import windows_needed

            need = windows_needed(float((deployed.anomaly or {})["false_alarm_rate"]))
            least = max(least, 2 * ((need + 2) * (window // 2) + window) / rate)
        seconds = round(max(float(service.config.rewear_unlabelled_seconds), least), 3)
        return flow.moved(seconds=seconds,
                          text=f"recording {seconds:g} s of unlabelled data (the old model keeps serving)")
    plan = onboarding_plan(deployed, service.config.rewear_repetitions)
    text = (f"collecting {plan.repetitions} repetition(s) of each of {len(plan.classes)} classes "
            f"(the old model keeps serving)")
    if plan.repetitions < 2:
        text += "; with 1 repetition nothing of the new session is held out: the check can only be that nothing is " \
                "forgotten"
    return flow.moved(plan={**plan.to_dict(), "classes": list(plan.classes)}, text=text)


def flow_plan(flow: RewearFlow) -> Plan:
    """The Plan of a labelled flow (stored in state.rewear when it started)."""
    if flow.plan is None:
        raise RewearRefused(f"the {flow.mode} re-wear flow of {flow.user} has no plan")
    return Plan(**{**flow.plan, "classes": tuple(flow.plan["classes"])})


# ---- unlabelled recording -------------------------------------------------------------------------------
def record_unlabelled(service: ServiceContext, flow: RewearFlow, recorder) -> None:
    """Record `flow.seconds` of the stream into the session as two windows (halves); resumable."""
    windows_file = Path(flow.session) / "windows.jsonl"
    if windows_file.exists() and len(windows_file.read_text().splitlines()) >= 2:
        return  # recorded before a power cut that came before the state was saved
    rate = service.require_device().hello.sample_rate_hz
    total = int(round((flow.seconds or 0.0) * rate))
    # The recording starts with the next chunk the recorder is handed, once its live ring holds it: the start is
    # read from the ring (read from it before it held one, the start was 0, the empty ring's, and the windows
    # labelled samples the session never held).
    while not recorder.latest_sample:
        if service.stopping.wait(0.05):
            raise KeyboardInterrupt
    start = recorder.latest_sample
    # No "prompt": nothing is to be performed (a person following the status page must not act on it);
    # what is recorded is said in state.rewear's text.
    service.collection = Collection(total=1, accepted=0, plan="unlabelled")
    for attempt in range(1, UNLABELLED_ATTEMPTS + 1):
        while recorder.latest_sample < start + total:
            if service.stopping.wait(0.1):
                raise KeyboardInterrupt  # stopping: nothing recorded is labelled yet; the next start records again
        # A link that dropped samples or a device that restarted (unplugged) leaves a gap no window may span:
        # the recording goes on from after the last one, as the guide asks a window again.
        broken = [end for begin, end in list(recorder.gaps) if begin < start + total and end > start]
        if not broken:
            break
        if attempt == UNLABELLED_ATTEMPTS:  # never a recording without end: the adaptation takes what is whole
            log.warning("unlabelled recording of %s: samples lost on the link in each of %d attempts; check the "
                        "cable", flow.user, attempt)
            break
        start = max(broken)
        log.info("unlabelled recording of %s: samples lost on the link; recording %g s again from sample %d",
                 flow.user, total / rate, start)
    half = total // 2
    recorder.add_window(UNLABELLED[0], start, half)
    recorder.add_window(UNLABELLED[1], start + half, total - half)


# ---- the child process ----------------------------------------------------------------------------------


def _confidence(tflite: bytes, card: dict, windows) -> float:
    from tinynas.deploy.litert import Int8Model

    logits = Int8Model(tflite).logits(Preprocessing.from_card(card).apply(windows.x)).astype(np.float64)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    return round(float(probabilities.max(axis=1).mean()), 4)


def _job(job: dict) -> dict:
    """Run in the child: recalibrate or adapt into the staging folder; the decision as a dict."""

    windows = load_windows(job["spec"])
    if job["mode"] == "labelled":
        from tinynas.adaptation.recalibrate import Recipe, recalibrate

        def progress(text: str) -> None:  # what the service shows while the child works (fold by fold)

            if job.get("progress"):
                atomic_write_text(Path(job["progress"]), text)

        result = recalibrate(job["source"], windows, job["staging"], spec=job["spec"],
                             recipe=Recipe(epochs=job["epochs"], learning_rate=job["learning_rate"]),
                             progress=progress)
        return {"accepted": result.accepted, "reason": result.reason, "windows": result.windows,
                "verify_windows": result.verify_windows, "seconds": round(result.seconds, 1),
                "verify": [result.verify_before, result.verify_after], "test": [result.test_before, result.test_after],
                # what cross-validation over the repetitions compared, and chose (None: one repetition)
                "chosen": result.selection["chosen"] if result.selection else None,
                "compared": result.selection["accuracy"] if result.selection else None,
                # what the decision rests on: paired counts on today's wear and on the onboarding test
                "paired": result.paired}
    from tinynas.adaptation.adapt import adapt

    adapted = adapt(job["source"], windows, job["staging"], spec=job["spec"])
    source = Path(job["source"])
    if adapted.card.get("anomaly") is not None:
        return _scorer_outcome(source, adapted, windows)
    before = _confidence(read_model_file(source, MODEL), read_card(source).to_dict(), windows)
    after = _confidence(read_model_file(job["staging"], MODEL), adapted.card, windows)
    # No labels: accuracy on the new condition cannot be measured. The served model's own confidence on the
    # new windows is the honest proxy available; a swap on it is said to be one.
    accepted = after >= before
    reason = (f"{'accepted' if accepted else 'rejected'}: no labels, so judged only by mean confidence on "
              f"{len(windows)} new windows ({before:.3f} -> {after:.3f}; confidence is not accuracy)"
              + ("" if accepted else ". The old model stays."))
    return {"accepted": accepted, "reason": reason, "windows": len(windows), "seconds": round(adapted.seconds, 1),
            "confidence": [before, after], "test": [adapted.test_before, adapted.test_after]}


def _scorer_outcome(source: Path, adapted, windows) -> dict:
    """An adapted anomaly scorer is accepted: its threshold was set again, for its rate, on new normal windows it
    did not see; what the old one did on the new windows is said, so the user sees why it was needed."""
    from tinynas.anomaly.card import steps
    from tinynas.deploy.litert import Int8Model

    old_card = read_card(source).to_dict()
    old = old_card["anomaly"]
    scores = steps(Int8Model(read_model_file(source, MODEL)).logits(
        Preprocessing.from_card(old_card).apply(windows.x)), old["score_scale"])
    flagged = float(np.mean(scores > old["threshold_steps"]))
    new = adapted.card["anomaly"]
    reason = (f"accepted: the machine's new normal running set the threshold again ({old['threshold']:.3g} -> "
              f"{new['threshold']:.3g}, for {new['false_alarm_rate']:.2%} false alarms, on "
              f"{new['calibration']['calibration_windows']} windows batch norm did not see); the old threshold "
              f"flagged {flagged:.1%} of the {len(windows)} new windows")
    return {"accepted": True, "reason": reason, "windows": len(windows), "seconds": round(adapted.seconds, 1),
            "old_threshold_flagged": round(flagged, 4), "test": [adapted.test_before, adapted.test_after]}


def _child_main(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    try:
        outcome = _job(job)
    except Exception as exc:  # noqa: BLE001 - reported to the service as one line, never a traceback
        outcome = {"error": user_message(exc) or f"internal error {type(exc).__name__}: {exc} (a bug: please "
                                                  f"report it with the log)"}

    atomic_write_text(Path(job["result"]), json.dumps(outcome))
    return 0


# ---- RECALIBRATING --------------------------------------------------------------------------------------
def _spec(service: ServiceContext, flow: RewearFlow) -> str:
    spec = f"session:{flow.session}"
    if flow.mode == "unlabelled":
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


def _figures(outcome: dict) -> str:
    """Each figure with what it measured: today's wear (the new repetitions) or the onboarding's test windows."""
    parts = []
    # (adapt's confidence figures are in its reason already)
    paired = outcome.get("paired") or {}
    for key, what, side in (("verify", "today's wear", "today"), ("test", "onboarding test", "onboarding")):
        before, after = (outcome.get(key) or [None, None])[:2]
        if before is not None and after is not None:
            measure = (paired.get(side) or {}).get("measure")
            parts.append(f"{what} {before:.3f} -> {after:.3f}" + (f" ({measure})" if measure else ""))
    return "; ".join(parts)


def _cancel_requested(service: ServiceContext, user: str) -> bool:
    cancelled = False
    for path, wanted in service.requests("cancel"):
        path.unlink(missing_ok=True)
        if wanted.get("user") == user:
            cancelled = True
        else:
            service.refuse(f"cancel request for {wanted.get('user')!r} ignored: the running recalibration is "
                            f"{user}'s")
    return cancelled


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
    job = {"mode": flow.mode, "source": str(Path(flow.source).parent), "staging": str(staging),
           "spec": _spec(service, flow), "epochs": service.config.rewear_epochs,
           "learning_rate": service.config.rewear_learning_rate, "result": str(result_path),
           "progress": str(progress_path)}
    job_path = staging.with_name(staging.name + ".job.json")
    job_path.parent.mkdir(parents=True, exist_ok=True)
    job_path.write_text(json.dumps(job))
    flow = flow.moved(phase="adapting" if flow.mode == "unlabelled" else "recalibrating", phase_started=time.time(),
                      text=("adapting batch-norm statistics to the unlabelled windows" if flow.mode == "unlabelled"
                            else "fine-tuning on the new windows") + " (the old model keeps serving)")
    service.update(rewear=flow)
    log_path = staging.with_name(staging.name + ".log")  # a file, not a pipe: a chatty child never blocks
    with open(log_path, "wb") as child_log:
        child = subprocess.Popen([sys.executable, "-m", "tinynas.service.rewear", str(job_path)],
                                 stdout=subprocess.DEVNULL, stderr=child_log, preexec_fn=die_with_parent)
    try:
        while child.poll() is None:
            if _cancel_requested(service, flow.user):
                child.kill()
                child.wait()
                shutil.rmtree(staging, ignore_errors=True)
                for path in (job_path, result_path, log_path, progress_path):
                    path.unlink(missing_ok=True)
                return _finish(service, flow, "cancelled", f"recalibration of {flow.user} cancelled; the old "
                               f"model stays; recordings kept in {flow.session}")
            if service.stopping.wait(0.5):
                return None  # stopping: the child is killed below and the next start runs this step again
            flow = _show_progress(service, flow, progress_path)
    finally:
        if child.poll() is None:  # the service is stopping: the next start runs the step again
            child.kill()
            child.wait()
        scratch.remove_of(child.pid)  # a killed child could not remove its temporary folder
    try:
        stderr = log_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        stderr = ""
    try:
        outcome = json.loads(result_path.read_text())
    except (OSError, ValueError):
        last = stderr.splitlines()[-1] if stderr else ""
        outcome = {"error": f"the recalibration process ended with code {child.returncode}"
                            + (f" ({last})" if last else "")}
    for path in (job_path, result_path, log_path, progress_path):
        path.unlink(missing_ok=True)
    if "error" in outcome:
        shutil.rmtree(staging, ignore_errors=True)
        return _finish(service, flow, "failed", f"recalibration of {flow.user} failed: {outcome['error']}; "
                       f"the old model stays; recordings kept in {flow.session}", error=True)
    figures = _figures(outcome)
    flow = flow.moved(figures={key: outcome[key] for key in ("verify", "confidence", "test", "chosen", "compared",
                                                             "paired") if key in outcome})
    if not outcome["accepted"]:
        shutil.rmtree(staging, ignore_errors=True)
        return _finish(service, flow, "rejected", f"{outcome['reason']}" + (f" ({figures})" if figures else ""))
    return _swap(service, flow, staging, final, outcome, figures)


def _swap(service: ServiceContext, flow: RewearFlow, staging: Path, final: Path, outcome: dict,
          figures: str) -> Transition:
    from tinynas.service.models import write_deployment

    old = service.state.deployed
    assert old is not None  # a flow starts only from a served model, and only a flow swaps
    if str(final / MODEL) == old.model:
        raise RuntimeError(f"{final} is the model being served: a re-wear never replaces it in place")
    card = read_card(staging).to_dict()
    after = [(outcome.get(key) or [None, None])[1] for key in ("verify", "test")]
    # The old model's held-out count is not the new one's: the new windows it was checked on are.
    deployed = old.moved(model=str(final / MODEL), card=str(final / CARD),
                         accuracy=next((value for value in after if value is not None), old.accuracy),
                         held_out=_checked_on(outcome), card_int8_test_accuracy=card.get("int8_test_accuracy"),
                         replaced=old.model,
                         changed_by="recalibrate" if flow.mode == "labelled" else "adapt", made=time.time())
    if card.get("anomaly") is not None and old.anomaly is not None:  # the new threshold is served
        section = card["anomaly"]
        deployed = deployed.moved(accuracy=None, anomaly={
            **old.anomaly, "threshold": section["threshold"], "threshold_steps": section["threshold_steps"],
            "calibration_windows": section["calibration"]["calibration_windows"]})
    write_deployment(staging, deployed)  # `tinynas serve` can bring this model back later
    publish_folder(staging, final)  # a folder a power cut left there (state not yet saved) is exchanged whole
    flow = flow.moved(phase="accepted", text=f"{outcome['reason']}" + (f" ({figures})" if figures else "")
                      + f"; now serving model {final.name}", finished=time.time())
    service.collection = Collection()
    return to(Phase.SERVING, deployed=deployed, rewear=flow, session="", error="", paused="")


def _checked_on(outcome: dict) -> dict | None:
    """The served accuracy's count and interval after an accepted recalibration: the new windows it was checked on
    (`verdict.HeldOut`'s fields and how they were measured), None when it was checked on none. The service gives
    no verification data, so a recalibration is checked by cross-validation over the repetitions (`chosen` is then
    the recipe it chose) or, with one repetition, on no new window; adapt is judged by confidence. Cross-validation's
    figures are the float model's: said so, never shown as int8."""

    windows = outcome.get("verify_windows")
    after = (outcome.get("verify") or [None, None])[1]
    if not outcome.get("chosen") or not isinstance(windows, int) or windows <= 0 or \
            not isinstance(after, (int, float)):
        return None
    return {**HeldOut(int(round(after * windows)), windows).to_dict(),
            "measure": "float, cross-validated over the new repetitions"}


def _finish(service: ServiceContext, flow: RewearFlow, phase: str, text: str, error: bool = False) -> Transition:
    """End the flow without a swap: the old model keeps serving; `text` is what status shows."""
    log.log(logging.ERROR if error else logging.INFO, "%s", text)
    flow = flow.moved(phase=phase, text=text, finished=time.time())
    service.collection = Collection()
    return to(Phase.SERVING, rewear=flow, session="", paused="", error=text if error else "")


def status_line(rewear: dict) -> str:
    """The flow in one line for `tinynas service status`."""
    if not rewear:
        return ""
    phase, text = str(rewear.get("phase", "")), str(rewear.get("text", ""))
    # recalibrate's and adapt's reasons begin with "accepted:" / "rejected:" already
    return f"re-wear of {rewear.get('user')} ({rewear.get('mode')}): " + (text if text.startswith(phase) else
                                                                          f"{phase}: {text}")


if __name__ == "__main__":
    from tinynas.quiet import quiet_environment

    quiet_environment()
    own = scratch.use_own()  # TensorFlow's AutoGraph files, as in a search's worker
    try:
        code = _child_main(sys.argv[1])
    finally:
        if own is not None:
            shutil.rmtree(own, ignore_errors=True)
    sys.exit(code)
