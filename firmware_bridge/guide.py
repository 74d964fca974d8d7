"""Guided collection: prompt a person (or a machine operator), record one checked window per prompt.

"Perform sign A - 3, 2, 1, go": the window starts at "go" and is cut from the live stream the
recorder keeps in memory. A window is accepted only if every channel carries signal, none is
flat and none clips; otherwise the prompt is repeated. On a terminal the user can redo the last
accepted window; headless, prompts are log lines (or go to a callback, which the service uses).
Accepted windows are fsynced at once, so a collection resumed after a power cut skips what is done.
"""

from __future__ import annotations

import json
import logging
import select
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from firmware_bridge import onset
from firmware_bridge.errors import CollectionPaused
from firmware_bridge.plan import REDON_TEXT, Plan
from firmware_bridge.repeats import REPEATED, RepeatWatch

log = logging.getLogger(__name__)

FULL_SCALE = {"int8": (-128, 127), "int16": (-32768, 32767)}


WAIT_CHECK_SECONDS = 0.2
"""How often a waiting guide lets its `waiting` callback end the collection (a cancel is heard this promptly)."""

STILL_FACTOR = 1.5
"""A window is movement when its RMS reaches this multiple of the baseline, and still when it stays under it
(the same line both ways: a rest window may be as noisy as the baseline, a gesture must stand out)."""


def check_window(window: np.ndarray, sample_format: str, rest: np.ndarray | None = None,
                 still: bool = False) -> list[str]:
    """Problems with a window, in plain words (empty if it is fine); `still` for a rest-class window, which
    must stay at the baseline `rest` instead of rising above it."""
    problems = []
    spread = window.std(axis=0)
    for channel in np.flatnonzero(spread < 1e-6):
        problems.append(f"channel {channel} is flat - check the electrode or sensor")
    if sample_format in FULL_SCALE:
        low, high = FULL_SCALE[sample_format]
        clipped = np.mean((window <= low) | (window >= high), axis=0)
        for channel in np.flatnonzero(clipped > 0.01):
            problems.append(f"channel {channel} clips ({clipped[channel]:.0%} of samples at full scale) - "
                            f"lower the gain")
    if rest is not None and len(rest):
        # About each channel's rest mean: a sensor's offset (a raw ADC's 512) is no movement (onset.py).
        offset = onset.centre(rest)
        signal, floor = onset.level(window, offset), onset.level(rest, offset)
        if still and signal >= STILL_FACTOR * floor:
            problems.append(f"movement seen while resting (signal RMS {signal:.1f} vs rest {floor:.1f}) - relax the "
                            f"arm and keep it still")
        elif not still and signal < STILL_FACTOR * floor:
            problems.append(f"no movement seen (signal RMS {signal:.1f} vs rest {floor:.1f}) - try again")
    return problems


class Prompter:
    """Where prompts go: log lines by default (headless); subclasses draw on a terminal."""

    def say(self, text: str) -> None:
        """Show a line to the person."""
        log.info("%s", text)

    def wants_redo(self, seconds: float) -> bool:
        """True if the person asked to redo the last window within `seconds` (never, headless)."""
        time.sleep(seconds)
        return False


class TerminalPrompter(Prompter):
    """Prompts on the terminal; typing r + Enter during the rest redoes the last window."""

    def say(self, text: str) -> None:
        print(text, flush=True)

    def wants_redo(self, seconds: float) -> bool:
        if seconds <= 0 or not sys.stdin.isatty():
            return super().wants_redo(seconds)
        print("  (r + Enter to redo it)", flush=True)
        ready, _, _ = select.select([sys.stdin], [], [], seconds)
        return bool(ready) and sys.stdin.readline().strip().lower().startswith("r")


@dataclass
class CollectionResult:
    """What a guided collection did."""

    accepted: Counter = field(default_factory=Counter)
    rejected: int = 0
    redone: int = 0


class GuidedCollection:
    """Runs a plan against a live `Recorder`."""

    def __init__(self, recorder, plan: Plan, prompter: Prompter | None = None,
                 on_prompt: Callable[[str, int], None] | None = None, max_attempts: int = 3,
                 timeout_seconds: float = 30.0, on_announce: Callable[[str, int], None] | None = None,
                 on_result: Callable[[str, bool], None] | None = None,
                 confirm: Callable[[str], None] | None = None,
                 redon: Callable[[], None] | None = None,
                 waiting: Callable[[], None] | None = None) -> None:
        self.recorder = recorder
        self.waiting = waiting
        """Called at least every WAIT_CHECK_SECONDS while the guide waits (countdown, rest, samples to arrive): it may
        raise to end the collection there (the service's cancel); the windows already accepted are on disk."""
        self._checked = 0.0
        self.plan = plan
        self.prompter = prompter or Prompter()
        self.on_prompt = on_prompt  # e.g. a simulated user; gets (label, go sample index)
        self.on_announce = on_announce  # gets (label, attempt) when a prompt is announced
        self.on_result = on_result  # gets (label, kept) once the attempt's window was cut and checked
        self.confirm = confirm or self._confirm_on_terminal  # returns once the operator says the state is set
        self.repeats = RepeatWatch()
        """A continuous plan's kept segments, to notice a recording that repeats itself (a looped file)."""
        self.redon = redon or self._redon_on_terminal  # returns once the person has put the armband on again
        self.max_attempts = max_attempts
        self.timeout_seconds = timeout_seconds
        self.rate = recorder.hello.sample_rate_hz
        self.length = int(round(plan.window_seconds * self.rate))
        self.last_problems: list[str] = []
        self.baseline: np.ndarray | None = None
        """The quietest rest heard in this collection: what a window is compared with when the level just
        before a prompt is not rest (a person still moving, a retry right after a late sign)."""

    def done_counts(self) -> Counter:
        """Accepted windows per label already in the session (a resumed collection skips them)."""
        path = self.recorder.folder / "windows.jsonl"
        counts: Counter = Counter()
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "retract" in record:
                    counts[record["label"]] -= 1
                elif "label" in record:
                    counts[record["label"]] += 1
        return counts

    def _check(self) -> None:
        """Let `waiting` end the collection, at most every WAIT_CHECK_SECONDS (it reads the service's requests)."""
        now = time.monotonic()
        if self.waiting is not None and now - self._checked >= WAIT_CHECK_SECONDS:
            self._checked = now
            self.waiting()

    def _sleep(self, seconds: float) -> None:
        """Wait `seconds` (a countdown step, a rest), checking `waiting` meanwhile."""
        end = time.monotonic() + seconds
        while True:
            self._check()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, WAIT_CHECK_SECONDS))

    def _wait_for(self, sample: int) -> None:
        # The deadline moves with every sample that arrives: a slow (loaded) host is not a silent device.
        seen, deadline = self.recorder.latest_sample, time.monotonic() + self.timeout_seconds
        while self.recorder.latest_sample < sample:
            if self.recorder.latest_sample != seen:
                seen, deadline = self.recorder.latest_sample, time.monotonic() + self.timeout_seconds
            if time.monotonic() > deadline:
                raise CollectionPaused(f"collection paused: no samples for {self.timeout_seconds:g} s - check that "
                                       f"the device is plugged in and streaming; the accepted windows are kept")
            self._check()
            time.sleep(0.01)

    def _confirm_on_terminal(self, label: str) -> None:
        if sys.stdin.isatty():
            self.prompter.say(f"set the machine to state {label}, then press Enter")
            sys.stdin.readline()
        # Headless with no one to confirm: the countdown is the operator's time to switch.

    def _redon_on_terminal(self) -> None:
        self.prompter.say(REDON_TEXT)
        if sys.stdin.isatty():
            self.prompter.say("press Enter once the armband is on again")
            sys.stdin.readline()
        else:  # headless with no one to confirm: the countdown is the person's time
            time.sleep(max(10, self.plan.countdown))

    def donning(self) -> int:
        """Which donning of the armband this collection records now: 2 once the session recorded the re-don."""
        path = self.recorder.folder / "events.jsonl"
        donning = 1
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    donning = max(donning, int(json.loads(line).get("donning", 1)))
                except (ValueError, TypeError, AttributeError):
                    continue
        return donning

    def _maybe_redon(self, accepted: int) -> None:
        """Halfway through a two-donning plan (REDON_AFTER prompts accepted), once: the armband off and on again."""
        if self.plan.donnings < 2 or accepted < self.plan.redon_after or self.donning() >= 2:
            return
        self.redon()
        self.baseline = None  # the electrodes sit elsewhere now: rest is heard again
        self.recorder.add_event({"donning": 2, "sample": self.recorder.latest_sample})
        self.prompter.say("armband on again: the collection continues")

    def _record_block(self, label: str) -> bool:
        """A continuous plan's prompt: hold the state for the block, record it as consecutive segments (each one
        recording), every segment checked (flat, clipping, link gaps); a segment lost is replaced by the next."""
        plan = self.plan
        if self.on_announce is not None:
            self.on_announce(label, 1)
        self.prompter.say(f"{plan.verb} {label} for {plan.block_seconds:g} s")
        if plan.confirm:
            self.confirm(label)
        for number in range(plan.countdown, 0, -1):
            self.prompter.say(f"recording {label} in {number}")
            self._sleep(1.0)
        go = self.recorder.latest_sample
        self.prompter.say("recording")
        self.recorder.add_event({"prompt": label, "go": go, "block_seconds": plan.block_seconds})
        if self.on_prompt is not None:
            self.on_prompt(label, go)
        kept = failures = 0
        start = go
        while kept < plan.segments:
            self._wait_for(start + self.length)
            window = self.recorder.window(start, self.length)
            problems = (["samples were lost during the segment (link gap)"] if window is None else
                        check_window(window, self.recorder.hello.sample_format))
            if window is not None and not problems and self.repeats.repeated_share(window) >= REPEATED:
                problems = ["it repeats what was recorded before, sample for sample (a short file played in a "
                            "loop?): record the machine itself, not a replay"]
            if problems:
                failures += 1
                self.last_problems = problems
                self.recorder.add_event({"rejected": label, "start": start, "go": go, "problems": problems})
                self.prompter.say(f"not kept: {'; '.join(problems)}")
                if failures >= self.max_attempts:
                    if self.on_result is not None:
                        self.on_result(label, False)
                    return False
                # Start again from the newest sample: after a gap (or a restarted device, placed after it).
                start = max(start + self.length, self.recorder.latest_sample)
                continue
            self.recorder.add_window(label, start, self.length, go=go, segment=kept)
            self.repeats.remember(window)
            kept += 1
            start += self.length
        if self.on_result is not None:
            self.on_result(label, True)
        return True

    def _record_one(self, label: str) -> bool:
        plan = self.plan
        if plan.kind == "continuous":
            return self._record_block(label)
        rest_length = int(round(min(plan.rest_seconds, plan.window_seconds) * self.rate))
        for attempt in range(1, self.max_attempts + 1):
            # The rest level is what the sensor saw just before the prompt, while nobody was moving.
            prompted = self.recorder.latest_sample
            rest = None
            if plan.kind == "gesture" and rest_length:
                rest = self.recorder.window(prompted - rest_length, rest_length)
                for _ in range(3):  # just started (or a link gap): hear the rest first, every window is checked
                    if rest is not None:
                        break
                    self._wait_for(self.recorder.latest_sample + rest_length)
                    prompted = self.recorder.latest_sample
                    rest = self.recorder.window(prompted - rest_length, rest_length)
            rest = self._true_rest(rest)
            if self.on_announce is not None:
                self.on_announce(label, attempt)
            countdown = ", ".join(str(n) for n in range(plan.countdown, 0, -1))
            self.prompter.say(f"{plan.verb} {label}" + (f" - {countdown}" if countdown else ""))
            for _ in range(plan.countdown):
                self._sleep(1.0)
            go = self.recorder.latest_sample
            self.prompter.say("go")
            # The rest heard before this prompt: its channel means (a raw ADC's offset) and its level about them,
            # serving's line between an idle arm and a sign (idle.py), measured about the same means.
            level, means = None, None
            if rest is not None:
                centre = onset.centre(rest)
                level, means = round(onset.level(rest, centre), 4), [round(float(v), 4) for v in centre]
            self.recorder.add_event({"prompt": label, "attempt": attempt, "go": go, "rest_rms": level,
                                     "rest_mean": means})
            if self.on_prompt is not None:
                self.on_prompt(label, go)
            found = self._window_start(go, rest) if label != plan.rest_class else (go, None)
            if found is None:
                # No sign begun from just before "go" to LATE_SECONDS after it: asked again, never a window cut at
                # "go" (it would hold rest labelled as the sign, or a sign started later, half outside it).
                start, window = go, None
                problems = (["you were already moving before go - rest your arm, then start at go"]
                            if self._moving_at(go, rest) else
                            [f"no sign seen within {onset.LATE_SECONDS:g} s of go - start as soon as you see go"])
            else:
                start, sign_onset = found
                self._wait_for(start + self.length)
                window = self.recorder.window(start, self.length)
                if window is None:
                    problems = ["samples were lost during the window (link gap) - again"]
                else:
                    problems = check_window(window, self.recorder.hello.sample_format, rest,
                                            still=label == plan.rest_class)
            if not problems:
                donning = {"donning": self.donning()} if plan.donnings > 1 else {}
                # Where the sign began (the stream's judge, tinynas.data.recording): a still class has none.
                marks = {} if sign_onset is None else {"onset": sign_onset}
                self.recorder.add_window(label, start, self.length, attempt=attempt, go=go, **marks, **donning)
            if self.on_result is not None:  # once the window is on disk: what it is told counts it
                self.on_result(label, not problems)
            if not problems:
                return True
            self.recorder.add_event({"rejected": label, "start": start, "go": go, "problems": problems})
            self.prompter.say(f"not kept: {'; '.join(problems)}")
            self.last_problems = problems
        return False

    def _window_start(self, go: int, rest: np.ndarray | None) -> tuple[int, int | None] | None:
        """(where the window starts, where the sign began): just before the movement's onset when one is seen between
        EARLY_SECONDS before and LATE_SECONDS after "go" (onset.py); None when none is (the prompt is asked again).
        Without a rest level to hear the onset against (a plan that is not a gesture one), at "go", onset unknown."""
        if self.plan.kind != "gesture" or rest is None:
            return go, None
        early = int(round(onset.EARLY_SECONDS * self.rate))
        late = int(round(onset.LATE_SECONDS * self.rate))
        frame = onset.frame_length(self.rate)
        first = max(0, go - early)
        while True:
            latest = self.recorder.latest_sample
            heard = self.recorder.window(first, min(latest, go + late + onset.FRAMES_HELD * frame) - first)
            found = onset.find_onset(heard, rest, self.rate) if heard is not None and len(heard) else None
            if found is not None:
                preroll = int(round(onset.PREROLL_FRACTION * self.length))
                return max(first, first + found - preroll), first + found
            if latest >= go + late + onset.FRAMES_HELD * frame:
                return None
            self._wait_for(min(latest + frame, go + late + onset.FRAMES_HELD * frame))

    def _moving_at(self, go: int, rest: np.ndarray | None) -> bool:
        """Whether a movement was under way when the guide began to look for this prompt's sign."""
        if rest is None:
            return False
        first = max(0, go - int(round(onset.EARLY_SECONDS * self.rate)))
        heard = self.recorder.window(first, onset.FRAMES_HELD * onset.frame_length(self.rate))
        return heard is not None and onset.moving_from_the_start(heard, rest, self.rate)

    def _true_rest(self, heard: np.ndarray | None) -> np.ndarray | None:
        """The baseline for this attempt: what was heard before the prompt if it is as quiet as the quietest rest
        so far, else that quietest rest (never a previous attempt's signal taken as rest)."""
        if heard is None:
            return self.baseline
        if self.baseline is None:
            self.baseline = heard
            return heard
        # Each level about its own channel means: a sensor's offset (a raw ADC's 512, drifting a little between
        # prompts) is no movement, the spread around it is.
        level, floor = onset.level(heard, onset.centre(heard)), onset.level(self.baseline, onset.centre(self.baseline))
        if level <= floor:
            self.baseline = heard
            return heard
        return heard if level < STILL_FACTOR * floor else self.baseline

    def run(self) -> CollectionResult:
        """Prompt until every class has its repetitions (resuming what a previous run accepted)."""
        result = CollectionResult()
        done = self.done_counts()
        if self.plan.segments > 1:  # a block is done when all its segments are (a torn block is recorded again)
            done = Counter({label: count // self.plan.segments for label, count in done.items()})
        left = Counter(self.plan.prompts()) - done
        queue = []
        for label in self.plan.prompts():
            if left[label] > 0:
                queue.append(label)
                left[label] -= 1
        if done:
            unit = "windows" if self.plan.segments == 1 else "blocks"
            self.prompter.say(f"resuming: {sum(done.values())} {unit} already recorded, {len(queue)} to go")
        for number, label in enumerate(queue, 1):
            self._maybe_redon(sum(done.values()) + sum(result.accepted.values()))
            self.prompter.say(f"[{number}/{len(queue)}]")
            while True:
                if not self._record_one(label):
                    result.rejected += 1
                    # Not an error of the program: the person must look at the sensor. Everything accepted
                    # is on disk, so running the collection again continues from here.
                    kept = sum(self.done_counts().values())
                    raise CollectionPaused(
                        f"collection paused at {label}: {self.max_attempts} attempts rejected "
                        f"({_why(self.last_problems)}) - {advice(self.last_problems, self.plan.kind)}; "
                        f"{kept} accepted window(s) kept, the collection continues from them",
                        label=label, problems=self.last_problems)
                result.accepted[label] += 1
                if self.plan.kind == "continuous":
                    self._sleep(self.plan.rest_seconds)  # a block is not redone: it has many segments
                elif self.plan.rest_seconds and self.prompter.wants_redo(self.plan.rest_seconds):
                    last = self._last_window()
                    self.recorder.add_window(label, last["start"], last["length"], retract=last["start"])
                    result.accepted[label] -= 1
                    result.redone += 1
                    continue
                break
        return result

    def _last_window(self) -> dict:
        lines = (self.recorder.folder / "windows.jsonl").read_text(encoding="utf-8").splitlines()
        return json.loads(lines[-1])


def _why(problems: list[str]) -> str:
    # The check's own words without its "try again" tail: here trying again is over.
    return "; ".join(problem.split(" - ")[0] for problem in problems) or "unknown"


def advice(problems: list[str], kind: str = "gesture") -> str:
    """What to check after windows were rejected for these problems (shown by the CLI and the status page), in
    the words of an armband (gesture plans) or of a machine (continuous plans)."""
    text = " ".join(problems)
    if "clips" in text:
        return ("lower the gain or mount the sensor further from the strongest vibration" if kind == "continuous"
                else "lower the gain or move the sensor away from the strongest source")
    if "lost" in text:
        return "check the cable and the USB port (samples were lost)"
    if "repeats what was recorded before" in text:
        return "record the machine running, not a file played in a loop (a sensor never repeats itself exactly)"
    if kind == "continuous":
        return "check that the machine runs and the sensor is mounted firmly (screw or magnet, cable)"
    return "check the electrodes or sensor (contact, placement, cable)"
