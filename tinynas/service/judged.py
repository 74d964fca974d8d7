"""The stream's verdicts the service takes on a model: its held-out signs as serving would answer them.

The deploy gate used to count the held-out windows the guide cut; a person lives with a window every hop. Here a
new model's held-out signs (the split's test recordings: one sign each) are judged on the session's stream, with
the served path and the smoothing serving will use (`tinynas.deploy.stream`): the gate decides on signs
recognised, counted in signs (each one an independent performance; its windows overlap).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

from tinynas.data.recording import load_recording
from tinynas.data.windows import DataError
from tinynas.deploy.served import ServedPath, Smoothing
from tinynas.deploy.stream import StreamVerdict, judge_stream

log = logging.getLogger(__name__)


def hop_samples(hop_seconds: float, rate_hz: float) -> int:
    """Serving's hop in samples at `rate_hz` (at least one)."""
    return max(1, int(round(hop_seconds * rate_hz)))


def judge_held_out(session: str | Path, model_path: Path, card: dict, groups, hop_seconds: float,
                   smoothing: int) -> StreamVerdict | None:
    """The stream's verdict on `model_path` (served with `card`'s rules) for the signs of `session` whose windows
    are in `groups` (the held-out recordings); None when the session cannot be read as a stream or holds none of
    them (a continuous plan, an old session: the windows' count decides then)."""
    try:
        recording = load_recording(session)
    except DataError as exc:
        log.info("no stream verdict: %s", exc)
        return None
    wanted = {str(group) for group in groups}
    judged = [event for event in recording.events if event.group in wanted]
    if not judged:
        return None
    served = ServedPath.from_folder(model_path, card)
    if served.length > recording.end or not math.isfinite(recording.sample_rate_hz):
        return None
    return judge_stream(served, recording, hop_samples(hop_seconds, recording.sample_rate_hz),
                        Smoothing.from_card(card, smoothing), judged)
