"""The unlabelled recording of a re-wear (a labelled one is the guided collection of `rewear_request.flow_plan`)."""

from __future__ import annotations

import logging
from pathlib import Path

from tinynas.service.collection import Collection
from tinynas.service.context import ServiceContext
from tinynas.service.state import RewearFlow

log = logging.getLogger(__name__)

UNLABELLED_ATTEMPTS = 5
"""Times an unlabelled recording starts again after a gap (a dropped link, an unplugged device) before it is left
to the adaptation as it is: it uses the windows that are whole, or fails in one line with the old model kept."""

UNLABELLED = ("unlabelled-a", "unlabelled-b")
"""Labels of the two halves of an unlabelled recording: `Windows` needs two classes; `adapt` ignores them
(they are not the model's classes, so they are not even scored)."""


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
        service.check_cancel()
        if service.stopping.wait(0.05):
            raise KeyboardInterrupt
    start = recorder.latest_sample
    # No "prompt": nothing is to be performed (a person following the status page must not act on it);
    # what is recorded is said in state.rewear's text.
    service.collection = Collection(total=1, accepted=0, plan="unlabelled")
    for attempt in range(1, UNLABELLED_ATTEMPTS + 1):
        while recorder.latest_sample < start + total:
            service.check_cancel()  # nothing recorded is labelled yet: a cancel drops only the stream's recording
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

