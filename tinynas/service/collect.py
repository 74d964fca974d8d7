"""The COLLECTING step: the guided recording of a plan's gestures (or, for an unlabelled re-wear, of
whatever the machine does) into the user's session.

The session is crash-safe (Recorder): after a power cut the step starts again and the guide asks only for
the windows still missing. What the guide says goes to the log and to `status` (there is no screen).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from firmware_bridge import onset
from firmware_bridge.errors import BridgeError
from firmware_bridge.guide import GuidedCollection, Prompter, advice
from firmware_bridge.plan import load_plan
from firmware_bridge.recorder import Recorder
from tinynas.errors import TinynasError
from tinynas.modes import FlowMode
from tinynas.service.collection import Collection
from tinynas.service.config import config_hint
from tinynas.service.context import CollectionCancelled, Phase, ServiceContext, Transition, to
from tinynas.service.onboarding import cancelled
from tinynas.service.rewear_recording import UNLABELLED, record_unlabelled
from tinynas.service.rewear_request import flow_plan
from tinynas.service.status_views import channel_levels

log = logging.getLogger(__name__)


class _StatusPrompter(Prompter):
    """The guide's voice: its lines go to the log and the status; no one at a keyboard asks for a redo."""

    def __init__(self, service: ServiceContext, kind: str = "gesture") -> None:
        self.service = service
        self.kind = kind  # the advice speaks of an armband or of a machine

    def say(self, text: str) -> None:
        log.info("collect: %s", text)
        collection = self.service.collection
        collection.last_line = text
        label = collection.prompt
        if text.startswith("not kept: ") and label:
            # What the status page shows under the trace: which window, why, and what to check.
            problems = text.removeprefix("not kept: ").split("; ")
            collection.last_rejected = {"label": label, "problems": problems, "advice": advice(problems, self.kind)}
            collection.counts(label)["rejected"] += 1

    def wants_redo(self, seconds: float) -> bool:
        """True if the user asked (the page's button, a `redo` request) to redo the window just kept, during the rest
        after it; the page shows the button until `redo_until`."""
        service = self.service
        deadline = time.monotonic() + seconds
        service.collection.redo_until = time.time() + seconds
        try:
            while True:
                for path, wanted in service.requests("redo"):
                    path.unlink(missing_ok=True)
                    if wanted.get("user") == service.state.user:
                        log.info("collect: the window just kept is recorded again, as asked")
                        return True
                    service.refuse(f"redo request for {wanted.get('user')!r} ignored: the collection is "
                                   f"{service.state.user}'s")
                service.check_cancel()
                left = deadline - time.monotonic()
                if left <= 0 or service.stopping.wait(min(0.1, left)):
                    return False
        finally:
            service.collection.redo_until = None


def wait_for_confirmation(service: ServiceContext, label: str, countdown: int) -> None:
    """Hold a continuous plan's block until the operator confirms that the machine is in state `label`
    (`tinynas onboard --user U --continue`, the request that also continues a paused collection)."""
    _wait_for_continue(service, f"set the machine to state {label}", countdown)


def wait_for_redon(service: ServiceContext, countdown: int) -> None:
    """Halfway through a two-donning plan: hold until the person has put the armband on again and continues."""
    from firmware_bridge.plan import REDON_TEXT

    _wait_for_continue(service, REDON_TEXT, countdown, redon=True)


def _wait_for_continue(service: ServiceContext, what: str, countdown: int, redon: bool = False) -> None:
    user = service.state.user
    service.collection.update(phase="confirm", countdown_ends=None, confirm_since=time.time(), redon=redon,
                              confirm=f"{what}, then confirm: tinynas onboard --user {user} --continue"
                                      f"{config_hint(service.config)}")
    log.info("collect: waiting for the %s: %s", "person" if redon else "operator", service.collection.confirm)
    while True:
        for path, wanted in service.requests("continue"):
            path.unlink(missing_ok=True)
            if wanted.get("user") == user:
                service.collection.update(phase="ready", confirm=None, redon=False,
                                          countdown_ends=time.time() + countdown)
                return
            service.refuse(f"continue request for {wanted.get('user')!r} ignored: the collection is {user}'s")
        service.check_cancel()
        if service.stopping.wait(0.2):
            raise KeyboardInterrupt  # the service stops; the state resumes at this block


def collect(service: ServiceContext) -> Transition:
    """Record the session, then move on: SEARCHING after an onboarding, RECALIBRATING after a re-wear."""

    state = service.state
    flow = state.rewear if service.rewear_running() else None
    if flow and flow.mode is FlowMode.UNLABELLED:
        recorder = Recorder(state.session, service.require_device().hello, user=state.user, labels=UNLABELLED,
                            plan={"name": "unlabelled", "seconds": flow.seconds})
        service.recorder = recorder
        try:
            record_unlabelled(service, flow, recorder)
        except CollectionCancelled:
            return cancelled(service)
        finally:
            service.recorder = None
            recorder.close()
        service.collection = Collection()
        return to(Phase.RECALIBRATING)
    try:
        plan = flow_plan(flow) if flow else load_plan(state.plan)
        service.plan_fit(plan)
    except (TinynasError, BridgeError) as exc:
        # The plan or the target changed since the request: nothing to resume until that is fixed.
        return service.failed(Phase.COLLECTING, exc)
    total = len(plan.prompts()) * plan.segments  # recorded windows: a machine block records several segments
    # What one prompt takes (countdown, window, rest; a machine's block instead): the page's "about N min left".
    per_prompt = plan.countdown + plan.rest_seconds + (plan.block_seconds if plan.kind == "continuous" else
                                                       plan.window_seconds + onset.LATE_SECONDS)
    service.collection = Collection(total=total, accepted=0, plan=plan.name, verb=plan.verb, kind=plan.kind,
                                    rest_class=plan.rest_class, seconds_per_window=round(per_prompt / plan.segments, 3))

    def announced(label: str, attempt: int) -> None:
        service.prompt_number += 1
        for path, _ in service.requests("redo"):  # too late for the window before: not applied to the next one
            path.unlink(missing_ok=True)
        done = guide.done_counts()
        for name in plan.classes:
            service.collection.counts(name)["accepted"] = done.get(name, 0)
        # The rest level the guide compares each window with: the signal just before the prompt.
        device = service.require_device()
        rest = channel_levels(device.ring, device.hello.sample_rate_hz, plan.rest_seconds or 1.0)
        # The guide counts down one second per step after announcing: the page counts with it.
        service.collection.update(prompt=label, number=service.prompt_number, attempt=attempt, go=None,
                                  phase="ready", rest=rest, countdown_ends=time.time() + plan.countdown,
                                  accepted=sum(done.values()))  # what status shows, kept current

    def go(label: str, sample: int) -> None:
        # Wall-clock times, so that the page shows GO on time and stops showing it when the window is over,
        # whatever its poll interval (it counts with its own clock between polls).
        service.collection.update(go=sample, phase="go", go_at=time.time(), window_seconds=plan.block_seconds,
                                  late_seconds=onset.LATE_SECONDS if plan.kind == "gesture" else 0.0)
        if service.on_prompt is not None:
            service.on_prompt(label, sample)

    recorder = Recorder(state.session, service.require_device().hello, user=state.user, labels=plan.classes,
                        plan=plan.to_dict())
    service.recorder = recorder
    try:
        guide = GuidedCollection(recorder, plan, _StatusPrompter(service, plan.kind), on_prompt=go,
                                 on_announce=announced,
                                 confirm=lambda label: wait_for_confirmation(service, label, plan.countdown),
                                 redon=lambda: wait_for_redon(service, plan.countdown),
                                 waiting=service.check_cancel,  # `onboard --cancel`, the page's button: at once
                                 on_result=lambda _label, kept: service.collection.update(
                                     phase="kept" if kept else "not kept", go=None, go_at=None,
                                     accepted=sum(guide.done_counts().values())))  # counted from the session
        done = guide.done_counts()
        service.collection.accepted = sum(done.values())
        guide.run()
    except CollectionCancelled:
        # Every accepted window is on disk (fsynced when accepted); the recorder is closed below, before the runner
        # saves the new state.
        return cancelled(service)
    finally:
        service.recorder = None
        recorder.close()
    service.collection = Collection(total=total, accepted=total, plan=plan.name, kind=plan.kind)
    if flow:
        return to(Phase.RECALIBRATING)
    return to(Phase.SEARCHING, study=str(_new_study(service.paths.profile(state.user) / "studies",
                                                    Path(state.session).name)))


def _new_study(folder: Path, name: str) -> Path:
    """A study folder named after the session, not yet used: a session extended with more recordings
    (`onboard --more`) is searched again in a folder of its own, the first search's kept as it was."""
    study, number = folder / name, 1
    while study.exists():
        number += 1
        study = folder / f"{name}-{number}"
    return study
