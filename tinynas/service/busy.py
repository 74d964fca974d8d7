"""What the service is busy with, in words, and how to end it.

A new onboarding (or `--more`, or a recalibration) asked while another flow runs (COLLECTING, SEARCHING, DEPLOYING,
RECALIBRATING) is refused in one line: by `tinynas onboard` and the page at once (`actions`), and by the service for a
request left any other way (`onboarding.refuse_while_busy`). It is never queued: a queued onboarding used to start by
itself once the flow ended, wiping that flow's verdict from the page in the same second.
"""

from __future__ import annotations

from tinynas.service.config import ServiceConfig, config_hint
from tinynas.service.state import Phase, ServiceState

FLOWS = (Phase.COLLECTING, Phase.SEARCHING, Phase.DEPLOYING, Phase.RECALIBRATING)


def busy_with(state: ServiceState, config: ServiceConfig, running: bool = True) -> str:
    """What runs now and how to cancel it ("" when the service rests: IDLE or SERVING); `running` False: the state of a
    stopped service, which goes on with the flow when it starts."""
    user, hint = state.user, config_hint(config)
    cancel = f"cancel it with `tinynas onboard --user {user} --cancel{hint}`"
    now = "runs now" if running else "is under way (the service is stopped: it goes on when started)"
    if state.state == Phase.COLLECTING:
        rewear = state.rewear is not None and state.rewear.running
        what = f"the re-wear recording for {user}'s served model" if rewear else f"{user}'s collection"
        return (f"{what} {'is paused' if state.paused else now}; {cancel} (what it recorded is kept"
                + ("; the old model stays)" if rewear else ")"))
    if state.state == Phase.RECALIBRATING:
        return f"the recalibration of {user}'s served model {now}; {cancel} (the old model stays)"
    if state.state == Phase.SEARCHING:
        return (f"the search for {user}'s model {now}; a search cannot be cancelled: it ends within its budget "
                f"({config.budget}), then the deploy gate decides")
    if state.state == Phase.DEPLOYING:
        return f"{user}'s new model is being checked and deployed (it cannot be cancelled; it takes a minute or so)"
    return ""


def refusal(state: ServiceState, config: ServiceConfig, asked: str, running: bool = True) -> str:
    """The one line refusing `asked` (e.g. "onboarding of bob") while a flow runs ("" when none does)."""
    busy = busy_with(state, config, running)
    return f"{asked} refused: {busy}; ask again once it is done" if busy else ""
