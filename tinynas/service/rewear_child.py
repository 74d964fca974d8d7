"""The re-wear child process: it runs `recalibrate` or `adapt` on a RewearJob and answers a RewearOutcome;
how the service starts it and reads that answer. TensorFlow stays out of the serving process, and the kernel
kills the child with the service (PR_SET_PDEATHSIG), so a restarted service never races an orphan."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from tinynas.adaptation.adapt import adapt
from tinynas.adaptation.recalibrate import Recipe, StreamCheck, recalibrate
from tinynas.adaptation.rewear_job import RewearJob, RewearOutcome
from tinynas.anomaly.scoring import served_scores
from tinynas.anomaly.section import read_section
from tinynas.atomic import atomic_write_text
from tinynas.card import read_card, task_of
from tinynas.data.preprocess import Preprocessing
from tinynas.data.recording import load_recording
from tinynas.data.spec import load_windows
from tinynas.deploy.litert import Int8Model
from tinynas.deploy.modeldir import ModelDir
from tinynas.errors import TinynasError, user_message
from tinynas.folders import MODEL, read_model_file
from tinynas.interrupts import die_with_parent
from tinynas.modes import Task
from tinynas.training import scratch


# ---- in the service ----------------------------------------------------------------------------------------
def start(job: RewearJob, job_path: Path, log_path: Path) -> subprocess.Popen:
    """Leave `job` in `job_path` and start the child on it, its stderr in `log_path`."""
    job_path.parent.mkdir(parents=True, exist_ok=True)
    job_path.write_text(json.dumps(job.to_dict()))
    with open(log_path, "wb") as child_log:  # a file, not a pipe: a chatty child never blocks
        return subprocess.Popen([sys.executable, "-m", "tinynas.service.rewear_child", str(job_path)],
                                stdout=subprocess.DEVNULL, stderr=child_log, preexec_fn=die_with_parent)


def answer(job: RewearJob, returncode: int | None, log_path: Path) -> RewearOutcome:
    """What the ended child answered; when it left no answer, an error with its exit code and last line."""
    outcome = RewearOutcome.read(Path(job.result))
    if outcome is not None:
        return outcome
    try:
        stderr = log_path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        stderr = ""
    last = stderr.splitlines()[-1] if stderr else ""
    return RewearOutcome(error=f"the recalibration process ended with code {returncode}"
                               + (f" ({last})" if last else ""))


# ---- in the child ------------------------------------------------------------------------------------------
def _confidence(tflite: bytes, card: dict, windows) -> float:
    logits = Int8Model(tflite).logits(Preprocessing.from_card(card).apply(windows.x)).astype(np.float64)
    probabilities = np.exp(logits - logits.max(axis=1, keepdims=True))
    probabilities /= probabilities.sum(axis=1, keepdims=True)
    return round(float(probabilities.max(axis=1).mean()), 4)


def stream_check(job: RewearJob) -> StreamCheck | None:
    """Today's session and the onboarding's as streams, for a verdict on signs as serving answers them; None when
    either is not a gesture session tinynas recorded (the windows' count decides then)."""
    try:
        today = load_recording(job.spec.removeprefix("session:").split("?")[0])
        source = ModelDir.open(job.source)
        spec = str((source.card.get("data") or {}).get("spec") or "")
        onboarding = load_recording(spec.removeprefix("session:").split("?")[0]) if spec.startswith("session:") \
            else None
        groups = frozenset(str(g) for g in source.windows.groups[source.split["test"]]) \
            if source.has_training_data else frozenset()
    except TinynasError:
        return None
    return StreamCheck(today, onboarding, groups, job.hop_seconds, job.smoothing)


def _job(job: RewearJob) -> RewearOutcome:
    """Run in the child: recalibrate or adapt into the staging folder; the decision."""

    windows = load_windows(job.spec)
    if job.mode == "labelled":
        def progress(text: str) -> None:  # what the service shows while the child works (fold by fold)

            if job.progress:
                atomic_write_text(Path(job.progress), text)

        result = recalibrate(job.source, windows, job.staging, spec=job.spec,
                             recipe=Recipe(epochs=job.epochs, learning_rate=job.learning_rate),
                             progress=progress, check=stream_check(job))
        return RewearOutcome(accepted=result.accepted, reason=result.reason, windows=result.windows,
                             verify_windows=result.verify_windows, seconds=round(result.seconds, 1),
                             verify=(result.verify_before, result.verify_after),
                             test=(result.test_before, result.test_after),
                             # what cross-validation over the repetitions compared, and chose (None: one repetition)
                             chosen=result.selection["chosen"] if result.selection else None,
                             compared=result.selection["accuracy"] if result.selection else None,
                             # what the decision rests on: paired counts on today's wear and on the onboarding test
                             paired=result.paired, stream=result.stream or None)

    adapted = adapt(job.source, windows, job.staging, spec=job.spec, condition=job.condition or None)
    source = Path(job.source)
    if task_of(adapted.card) == Task.ANOMALY:
        return _scorer_outcome(source, adapted, windows)
    before = _confidence(read_model_file(source, MODEL), read_card(source).to_dict(), windows)
    after = _confidence(read_model_file(job.staging, MODEL), adapted.card, windows)
    # No labels: accuracy on the new condition cannot be measured. The served model's own confidence on the
    # new windows is the honest proxy available; a swap on it is said to be one.
    accepted = after >= before
    reason = (f"{'accepted' if accepted else 'rejected'}: no labels, so judged only by mean confidence on "
              f"{len(windows)} new windows ({before:.3f} -> {after:.3f}; confidence is not accuracy)"
              + ("" if accepted else ". The old model stays."))
    return RewearOutcome(accepted=accepted, reason=reason, windows=len(windows), seconds=round(adapted.seconds, 1),
                         confidence=(before, after), test=(adapted.test_before, adapted.test_after))


def _scorer_outcome(source: Path, adapted, windows) -> RewearOutcome:
    """An adapted anomaly scorer is accepted: its threshold was set again, for its rate, on new normal windows it
    did not see; what the old one did on the new windows is said, so the user sees why it was needed."""

    old_card = read_card(source).to_dict()
    old, new = read_section(old_card), read_section(adapted.card)
    assert old is not None and new is not None  # both scorers: the adaptation keeps the task
    scores, threshold = served_scores(old, Int8Model(read_model_file(source, MODEL)),
                                      Preprocessing.from_card(old_card), windows.x)
    flagged = float(np.mean(scores > threshold))
    fitted = "the Gaussian" if new.classical is not None else "batch norm"
    reason = (f"accepted: the machine's new normal running set the threshold again ({old.threshold:.3g} -> "
              f"{new.threshold:.3g}, for {new.false_alarm_rate:.2%} false alarms, on "
              f"{new.calibration_windows} windows {fitted} did not see); the old threshold "
              f"flagged {flagged:.1%} of the {len(windows)} new windows")
    if new.conditions:
        reason += (f"; conditions kept: {', '.join(c.name for c in new.conditions)} (each window read under the one "
                   f"it looks most like)")
    return RewearOutcome(accepted=True, reason=reason, windows=len(windows), seconds=round(adapted.seconds, 1),
                         old_threshold_flagged=round(flagged, 4), test=(adapted.test_before, adapted.test_after))


def _child_main(job_path: str) -> int:
    job = RewearJob.from_dict(json.loads(Path(job_path).read_text()))
    try:
        outcome = _job(job)
    except Exception as exc:  # noqa: BLE001 - reported to the service as one line, never a traceback
        outcome = RewearOutcome(error=user_message(exc) or f"internal error {type(exc).__name__}: {exc} (a bug: "
                                                           f"please report it with the log)")

    atomic_write_text(Path(job.result), json.dumps(outcome.to_dict()))
    return 0


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
