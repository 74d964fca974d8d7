"""The stream's judge: a served model scored as a person lives with it, not on the windows the guide cut.

Serving answers every hop over whatever the last window holds: the onset of a sign, its middle, its release, the
idle arm between signs. The windows the guide cut (each just before a sign's onset) are one of those positions
out of many, and the easiest. So every verdict about a served model (the deploy gate, the re-wear decision,
`tinynas evaluate --stream`, the page) is taken here, on the recording's stream (`tinynas.data.recording`):

- around each judged sign, from one window before its onset to one window after its end, a window every hop
  goes through the served path (`tinynas.deploy.served`: int8, the card's preprocessing, the idle / unknown rule)
  and the smoothing, exactly as serving runs them;
- a position is a **sign window** of a sign when at least half of the window (or of the sign, if shorter) is the
  sign; an **idle window** when it touches no sign at all (its right answers: the rest class or "unknown"); the
  positions between (a sign's edges) count for nothing but its latency;
- a **sign is recognised** when most of its sign windows' shown answers name it; its **latency** is from its onset
  to the first window that shows its name.

The independent unit is the sign (a performance), not the window: the windows of one sign overlap and stand or
fall together, so intervals are counted in signs (`tinynas.verdict`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from tinynas.data.recording import Recording, SignEvent, load_recording
from tinynas.data.windows import DataError
from tinynas.deploy.served import UNKNOWN, Answer, ServedPath, Smoother, Smoothing
from tinynas.verdict import HeldOut

SIGN_SHARE = 0.5
"""A window is a sign's when this share of it (or of the sign, if shorter) is the sign."""


@dataclass(frozen=True)
class Position:
    """One served window along the stream: where it ends, its answer, what was shown, and what it was."""

    end: int
    answer: Answer
    shown: str
    truth: str
    """The sign's label for a sign window, "idle" for an idle window, "" for an edge (or another sign's)."""
    event: int
    """Which judged sign it belongs to (its index in the judged list), or -1."""


@dataclass
class StreamVerdict:
    """What the stream says of a model: per window, per sign, and how fast."""

    signs: int = 0
    recognised: int = 0
    sign_windows: int = 0
    sign_right: int = 0
    sign_unknown: int = 0
    idle_windows: int = 0
    idle_right: int = 0
    latencies: list[float] = field(default_factory=list)
    """Seconds from each recognised sign's onset to the first window showing it."""
    per_class: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per class: signs, recognised, sign windows, right."""
    hop_seconds: float = 0.0
    smoothing: str = ""

    @property
    def held(self) -> HeldOut:
        """Signs recognised of signs judged: the count (and interval) a verdict stands on."""
        return HeldOut(self.recognised, self.signs)

    def share(self, hits: int, total: int) -> float | None:
        return hits / total if total else None

    def failing(self, at_most: float = 0.5) -> list[str]:
        """Classes recognised in at most `at_most` of their signs ("point: 0 of 4"), worst first."""
        found = [(counts["recognised"] / counts["signs"], name) for name, counts in self.per_class.items()
                 if counts["signs"] and counts["recognised"] / counts["signs"] <= at_most]
        return [f"{name}: {self.per_class[name]['recognised']} of {self.per_class[name]['signs']}"
                for _, name in sorted(found)]

    def to_dict(self) -> dict:
        data = asdict(self)
        low, high = self.held.interval
        data.update(recognised_share=self.share(self.recognised, self.signs), interval=[round(low, 4), round(high, 4)],
                    sign_right_share=self.share(self.sign_right, self.sign_windows),
                    unknown_share=self.share(self.sign_unknown, self.sign_windows),
                    idle_right_share=self.share(self.idle_right, self.idle_windows),
                    median_latency=float(np.median(self.latencies)) if self.latencies else None,
                    latencies=[round(v, 3) for v in self.latencies])
        return data

    def words(self) -> str:
        """'on the stream: 42 of 44 signs recognised (95 % interval 85-99 %), 309 of 352 sign windows right
        (12 % unknown), 352 of 352 idle windows right, 0.6 s median to the first right answer'."""
        low, high = self.held.interval
        parts = [f"{self.recognised} of {self.signs} signs recognised (95% interval {low:.0%}-{high:.0%})"]
        if self.sign_windows:
            parts.append(f"{self.sign_right} of {self.sign_windows} sign windows right "
                         f"({self.sign_unknown / self.sign_windows:.0%} unknown)")
        if self.idle_windows:
            parts.append(f"{self.idle_right} of {self.idle_windows} idle windows right")
        if self.latencies:
            parts.append(f"{np.median(self.latencies):.1f} s median to the first right answer")
        return "on the stream: " + ", ".join(parts)


def positions(served: ServedPath, recording: Recording, hop: int, smoothing: Smoothing,
              judged: list[SignEvent] | None = None, first_end: int | None = None) -> list[Position]:
    """Every served window around the judged signs (all of them by default), one per hop, answered and smoothed as
    serving does. With `first_end`, one run over the whole stream from that window end (a replay of serving)."""
    judged = list(recording.events) if judged is None else judged
    length = served.length
    regions: list[tuple[int, int]] = []
    if first_end is not None:
        regions = [(first_end, recording.end)]
    else:
        for event in judged:  # from a window wholly before the sign to one wholly after it, merged where they meet
            low, high = max(length, event.onset), min(recording.end, event.end + length)
            if regions and low <= regions[-1][1] + hop:
                regions[-1] = (regions[-1][0], max(regions[-1][1], high))
            else:
                regions.append((low, high))
    index_of = {event.record: number for number, event in enumerate(judged)}
    found: list[Position] = []
    for low, high in regions:
        smoother = Smoother(smoothing)  # serving's state starts afresh where it starts
        ends = list(range(low, high + 1, hop))
        kept, windows = [], []
        for end in ends:
            window = recording.samples(end - length, length)
            if window is not None:  # a link gap is skipped, as serving skips it
                kept.append(end)
                windows.append(window)
        for end, answer in zip(kept, served.answers(np.asarray(windows)) if windows else []):
            shown = smoother.update(answer.label, answer.confidence)
            truth, number = _truth(recording.events, index_of, end - length, end)
            found.append(Position(end, answer, shown, truth, number))
    return found


def _truth(events: tuple[SignEvent, ...], index_of: dict[int, int], start: int, end: int) -> tuple[str, int]:
    """What the window [start, end) was: a judged sign's (its label, its number), idle, or neither ("", -1)."""
    touching = [event for event in events if event.overlap(start, end) > 0]
    if not touching:
        return "idle", -1
    best = max(touching, key=lambda event: event.overlap(start, end))
    needed = SIGN_SHARE * min(end - start, best.end - best.onset)
    if best.overlap(start, end) >= needed and best.record in index_of:
        return best.label, index_of[best.record]
    return "", -1


def judge(found: list[Position], judged: list[SignEvent], rest_class: str | None, rate_hz: float,
          hop: int = 0, smoothing: Smoothing | None = None) -> StreamVerdict:
    """The verdict of the positions `positions` gave for `judged`."""
    verdict = StreamVerdict(hop_seconds=hop / rate_hz if rate_hz else 0.0,
                            smoothing=smoothing.words() if smoothing else "")
    idle_answers = {UNKNOWN} | ({rest_class} if rest_class else set())
    for position in found:
        if position.truth == "idle":
            verdict.idle_windows += 1
            verdict.idle_right += position.shown in idle_answers
        elif position.truth:
            verdict.sign_windows += 1
            verdict.sign_right += position.shown == position.truth
            verdict.sign_unknown += position.shown == UNKNOWN
    for number, event in enumerate(judged):
        counts = verdict.per_class.setdefault(event.label, {"signs": 0, "recognised": 0, "windows": 0, "right": 0})
        mine = [p for p in found if p.event == number]
        right = sum(p.shown == event.label for p in mine)
        counts["signs"] += 1
        counts["windows"] += len(mine)
        counts["right"] += right
        verdict.signs += 1
        if mine and right * 2 > len(mine):
            counts["recognised"] += 1
            verdict.recognised += 1
            first = next((p.end for p in found if p.end >= event.onset and p.shown == event.label
                          and p.end <= event.end + 2 * (event.end - event.onset)), None)
            if first is not None:
                verdict.latencies.append((first - event.onset) / rate_hz)
    return verdict


def judge_stream(served: ServedPath, recording: Recording, hop: int, smoothing: Smoothing,
                 judged: list[SignEvent] | None = None) -> StreamVerdict:
    """The stream's verdict on `served` for the judged signs of `recording` (all of them by default)."""
    judged = list(recording.events) if judged is None else judged
    found = positions(served, recording, hop, smoothing, judged)
    rest = served.rule.still_label if served.rule.still_label != UNKNOWN else None
    return judge(found, judged, rest, recording.sample_rate_hz, hop, smoothing)


def judge_session(model, card: dict, session: str, hop_seconds: float | None, smoothing: int) -> StreamVerdict:
    """A model (`model`: its .tflite, as `ServedPath.from_folder` takes it) judged on a recorded session's stream as
    serving answers it, a window every `hop_seconds` (None: serving's 0.25 s): `tinynas evaluate --stream`."""
    recording = load_recording(session)
    served = ServedPath.from_folder(model, card)
    if recording.channels != served.preprocessing.channels:
        raise DataError(f"--stream {session} has {recording.channels} channel(s); the model reads "
                        f"{served.preprocessing.channels}")
    hop = max(1, int(round((hop_seconds or 0.25) * recording.sample_rate_hz)))
    return judge_stream(served, recording, hop, Smoothing.from_card(card, smoothing))
