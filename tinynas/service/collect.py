"""The COLLECTING step: the guided recording of a plan's gestures (or, for an unlabelled re-wear, of
whatever the machine does) into the user's session.

The session is crash-safe (Recorder): after a power cut the step starts again and the guide asks only for
the windows still missing. What the guide says goes to the log and to `status` (there is no screen).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING

from firmware_bridge import onset
from firmware_bridge.errors import BridgeError
from firmware_bridge.guide import GuidedCollection, Prompter, advice, load_plan
from firmware_bridge.recorder import Recorder
from tinynas.errors import TinynasError
from tinynas.service.status_views import channel_levels

if TYPE_CHECKING:
    from tinynas.service.runner import Service

log = logging.getLogger(__name__)


class _StatusPrompter(Prompter):
    """The guide's voice: its lines go to the log and the status; no one at a keyboard asks for a redo."""

    def __init__(self, service: Service) -> None:
        self.service = service

    def say(self, text: str) -> None:
        log.info("collect: %s", text)
        collection = self.service.collection
        collection["last_line"] = text
        label = collection.get("prompt")
        if text.startswith("not kept: ") and label:
            # What the status page shows under the trace: which window, why, and what to check.
            problems = text.removeprefix("not kept: ").split("; ")
            collection["last_rejected"] = {"label": label, "problems": problems, "advice": advice(problems)}
            counts = collection.setdefault("per_class", {}).setdefault(label, {"accepted": 0, "rejected": 0})
            counts["rejected"] += 1

    def wants_redo(self, seconds: float) -> bool:
        time.sleep(seconds)
        return False


def collect(service: Service) -> None:
    """Record the session, then move on: SEARCHING after an onboarding, RECALIBRATING after a re-wear."""
    from tinynas.service import rewear

    state = service.state
    flow = state.rewear if service._rewear_running() else None
    if flow and flow["mode"] == "unlabelled":
        recorder = Recorder(state.session, service.require_device().hello, user=state.user, labels=rewear.UNLABELLED,
                            plan={"name": "unlabelled", "seconds": flow["seconds"]})
        service.recorder = recorder
        try:
            rewear.record_unlabelled(service, flow, recorder)
        finally:
            service.recorder = None
            recorder.close()
        service.collection = {}
        service._save(state="RECALIBRATING")
        return
    try:
        plan = rewear.flow_plan(flow) if flow else load_plan(state.plan)
        service._plan_fit(plan)
    except (TinynasError, BridgeError) as exc:
        # The plan or the target changed since the request: nothing to resume until that is fixed.
        service._failed("COLLECTING", exc)
        return
    service.collection = {"total": len(plan.prompts()), "accepted": 0, "plan": plan.name, "verb": plan.verb}

    def announced(label: str, attempt: int) -> None:
        service.prompt_number += 1
        done = guide.done_counts()
        per_class = service.collection.setdefault("per_class", {})
        for name in plan.classes:
            per_class.setdefault(name, {"accepted": 0, "rejected": 0})["accepted"] = done.get(name, 0)
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
        service.collection.update(go=sample, phase="go", go_at=time.time(), window_seconds=plan.window_seconds,
                                  late_seconds=onset.LATE_SECONDS)
        if service.on_prompt is not None:
            service.on_prompt(label, sample)

    recorder = Recorder(state.session, service.require_device().hello, user=state.user, labels=plan.classes,
                        plan=plan.to_dict())
    service.recorder = recorder
    try:
        guide = GuidedCollection(recorder, plan, _StatusPrompter(service), on_prompt=go, on_announce=announced,
                                 on_result=lambda _label, kept: service.collection.update(
                                     phase="kept" if kept else "not kept", go=None, go_at=None))
        done = guide.done_counts()
        service.collection["accepted"] = sum(done.values())
        guide.run()
    finally:
        service.recorder = None
        recorder.close()
    service.collection = {"total": len(plan.prompts()), "accepted": len(plan.prompts()), "plan": plan.name}
    if flow:
        service._save(state="RECALIBRATING")
        return
    study = service.paths.profile(state.user) / "studies" / Path(state.session).name
    service._save(state="SEARCHING", study=str(study))
