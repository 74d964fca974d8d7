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
import math
import select
import sys
import time
import tomllib
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from firmware_bridge import onset
from firmware_bridge.errors import BridgeError, CollectionPaused
from firmware_bridge.repeats import REPEATED, RepeatWatch
from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular_text

log = logging.getLogger(__name__)

FULL_SCALE = {"int8": (-128, 127), "int16": (-32768, 32767)}


class PlanError(BridgeError, ValueError):
    """A collection plan that cannot be used."""


@dataclass(frozen=True)
class Plan:
    """What to collect: classes x repetitions of windows, with rest and countdown between them."""

    name: str
    classes: tuple[str, ...]
    repetitions: int = 5
    window_seconds: float = 2.0
    rest_seconds: float = 2.0
    countdown: int = 3
    kind: str = "gesture"  # gesture: a burst over rest; continuous: a machine state (vibration)
    verb: str = "Perform sign"
    rest_class: str = ""
    """A gesture plan's class of doing nothing (gestures4's "rest"): its windows are checked for stillness
    against the baseline, not for movement, and serving can answer it for an idle arm."""
    order: tuple[str, ...] = ()
    """The prompts in order (a class may come back); empty: `repetitions` rounds through every class."""
    hold_seconds: float = 0.0
    """Continuous plans: how long each prompt holds the machine in its state (a block), recorded as consecutive
    segments of `window_seconds` (each segment one recording, kept together by the split); 0: one segment."""
    window_samples: int = 0
    """Continuous plans: the length of the windows the search cuts from the segments; 0: chosen for the target
    and the sensor (service/fit.py)."""
    hop_samples: int = 0
    """Continuous plans: samples between the starts of those windows; 0: half a window."""
    confirm: bool = False
    """Wait for the operator to confirm that the machine is in the prompted state before each block."""
    task: str = "classify"
    """What is searched on the recording: a classifier of the plan's classes, or ("anomaly") a scorer of the
    one state a healthy machine has, its normal running (`tinynas search --task anomaly`)."""
    donnings: int = 1
    """Gesture plans: 2 asks the person to take the armband off and put it on again halfway through, so that the
    recording holds two donnings: the search then validates on the second (leave-one-session-out), ranking the
    networks by what survives re-wearing the armband."""

    def __post_init__(self) -> None:
        if self.task not in ("classify", "anomaly"):
            raise PlanError(f"plan {self.name!r}: task must be classify or anomaly, not {self.task!r}")
        if self.task == "anomaly":
            if self.kind != "continuous" or len(self.classes) != 1:
                raise PlanError(f"plan {self.name!r}: an anomaly plan records one state of a machine (its normal "
                                f"running): kind = continuous and one class, got {self.kind} with "
                                f"{len(self.classes)} classes")
        elif len(self.classes) < 2:
            raise PlanError(f"plan {self.name!r} needs at least 2 classes, got {len(self.classes)} (a machine's "
                            f"normal running alone: task = anomaly)")
        if len(set(self.classes)) != len(self.classes):
            raise PlanError(f"plan {self.name!r} lists a class twice")
        if self.repetitions < 1 or self.window_seconds <= 0 or self.rest_seconds < 0 or self.countdown < 0:
            raise PlanError(f"plan {self.name!r}: repetitions >= 1, window > 0 s, rest and countdown >= 0")
        if self.kind not in ("gesture", "continuous"):
            raise PlanError(f"plan {self.name!r}: kind must be gesture or continuous")
        if self.rest_class and self.rest_class not in self.classes:
            raise PlanError(f"plan {self.name!r}: rest_class {self.rest_class!r} is not one of its classes "
                            f"({', '.join(self.classes)})")
        if self.donnings not in (1, 2) or (self.donnings == 2 and self.kind != "gesture"):
            raise PlanError(f"plan {self.name!r}: donnings is 1 or 2 (2: the armband put on again halfway), for "
                            f"gesture plans; got {self.donnings} for a {self.kind} plan")
        if self.rest_class and self.kind != "gesture":
            raise PlanError(f"plan {self.name!r}: rest_class goes with gesture plans (a machine has states, not rest)")
        if self.confirm and self.kind != "continuous":
            raise PlanError(f"plan {self.name!r}: confirm = true goes with continuous plans (an operator confirms a "
                            f"machine's state); a gesture plan prompts the person with a countdown")
        unknown = sorted(set(self.order) - set(self.classes))
        if unknown:
            raise PlanError(f"plan {self.name!r}: order names {', '.join(unknown)}, not among its classes "
                            f"({', '.join(self.classes)})")
        if self.order and set(self.order) != set(self.classes):
            missing = [c for c in self.classes if c not in self.order]
            raise PlanError(f"plan {self.name!r}: order never prompts {', '.join(missing)}")
        if self.kind == "continuous":
            self._check_durations()
        elif self.hold_seconds or self.window_samples or self.hop_samples:
            raise PlanError(f"plan {self.name!r}: hold_seconds, window_samples and hop_samples go with continuous "
                            f"plans (a gesture is one window)")
        self._check_size()

    def _check_size(self) -> None:
        # Counted, never listed: a typo of 10^9 repetitions must not build a list of them.
        if self.window_seconds > MAX_SEGMENT_SECONDS or self.countdown > MAX_COUNTDOWN or \
                self.rest_seconds > MAX_REST_SECONDS:
            raise PlanError(f"plan {self.name!r}: window_seconds at most {MAX_SEGMENT_SECONDS:g}, countdown at most "
                            f"{MAX_COUNTDOWN}, rest_seconds at most {MAX_REST_SECONDS:g}")
        prompts = len(self.order) if self.order else self.repetitions * len(self.classes)
        total = prompts * (self.block_seconds + self.countdown + self.rest_seconds)
        if total > MAX_PLAN_SECONDS:
            raise PlanError(f"plan {self.name!r} would take {total / 3600:.1f} h ({prompts:,} prompts); at most "
                            f"{MAX_PLAN_SECONDS / 3600:g} h in one collection")

    def _check_durations(self) -> None:
        # A segment is cut from the recorder's memory (60 s by default) once it is complete.
        if self.window_seconds > MAX_SEGMENT_SECONDS:
            raise PlanError(f"plan {self.name!r}: window_seconds = {self.window_seconds:g} s, at most "
                            f"{MAX_SEGMENT_SECONDS:g} s per recorded segment (hold_seconds makes a block longer)")
        if self.hold_seconds and not self.window_seconds <= self.hold_seconds <= MAX_HOLD_SECONDS:
            raise PlanError(f"plan {self.name!r}: hold_seconds = {self.hold_seconds:g} s; a block holds a state "
                            f"from one segment (window_seconds = {self.window_seconds:g} s) to "
                            f"{MAX_HOLD_SECONDS:g} s")
        if self.window_samples < 0 or self.hop_samples < 0:
            raise PlanError(f"plan {self.name!r}: window_samples and hop_samples are sample counts (0: chosen)")

    @property
    def segments(self) -> int:
        """Recorded segments (windows of `window_seconds`) per prompt: 1, or a continuous block's count."""
        if self.kind != "continuous" or not self.hold_seconds:
            return 1
        return max(1, int(self.hold_seconds / self.window_seconds + 1e-9))

    @property
    def block_seconds(self) -> float:
        """How long one prompt records."""
        return self.segments * self.window_seconds

    def prompts(self) -> list[str]:
        """Labels in prompt order: the plan's `order`, else round after round through every class (spreads
        fatigue and drift)."""
        if self.order:
            return list(self.order)
        return [label for _ in range(self.repetitions) for label in self.classes]

    @property
    def redon_after(self) -> int:
        """Prompts accepted before a two-donning plan asks for the re-don: the first half of its rounds (the second
        donning gets the larger half: it validates and tests), or of its `order`."""
        if self.order:
            return len(self.order) // 2
        return (self.repetitions // 2) * len(self.classes)

    def to_dict(self) -> dict:
        """JSON-ready dict (stored in the session manifest)."""
        return asdict(self)

    def check_searchable(self) -> None:
        """PlanError unless every class gets MIN_RECORDINGS recordings: a plan an onboarding searches on (the split
        keeps a recording together; a re-wear's 2 repetitions only fine-tune and verify, and pass)."""
        per_class = ({c: self.order.count(c) for c in self.classes} if self.order else
                     dict.fromkeys(self.classes, self.repetitions))
        fewest = min(per_class, key=lambda c: per_class[c])
        if per_class[fewest] * self.segments < MIN_RECORDINGS:
            raise PlanError(f"plan {self.name!r} records {per_class[fewest] * self.segments} recording(s) of "
                            f"{fewest}; a class needs at least {MIN_RECORDINGS} to search on (one each to train, "
                            f"validate and test on): raise repetitions")


REDON_TEXT = ("take the armband off and put it on again, as you would on another day (the model learns what "
              "survives re-wearing it)")
"""What a two-donning plan asks halfway through (the terminal, the service and its page say it)."""

MAX_SEGMENT_SECONDS = 30.0
"""The longest recorded segment (half the recorder's 60 s of memory, from which it is cut and checked)."""
MAX_HOLD_SECONDS = 3600.0
MAX_PLAN_SECONDS = 12 * 3600.0
MAX_COUNTDOWN = 60
MAX_REST_SECONDS = 600.0
"""Longer than these is a typo (60 minutes for 60 seconds), not a plan."""
MIN_RECORDINGS = 3
"""Recordings per class an onboarding plan must make: the split keeps a recording together, and the search needs
one to train, one to validate and one to test on."""


PRESETS = {
    # 26 letters need more than 5 repetitions: with 5 (3 per letter to train on) the served model reached 0.31 on
    # held-out windows in the onboarding journey (benchmarks/results/onboarding.md), and on recordings never seen
    # 0.78 against 0.89 with 10 (benchmarks/results/repetitions.md). A shorter countdown and rest keep 260 prompts
    # to about 24 minutes.
    "isl26": Plan("isl26", tuple(chr(ord("A") + i) for i in range(26)), repetitions=10, window_seconds=2.0,
                  rest_seconds=1.5, countdown=2),
    # 15 repetitions (about 7 minutes of prompts): measured on ISL as 4-class plans (benchmarks/results/
    # repetitions.md, 5 seeds), 5 and 10 leave 4 and 8 held-out windows, too few for the deploy gate to decide on a
    # good model in 2 of 5 sessions each (it asked for 10-62 more per class); 15 leave 12, and it decided in 5 of 5,
    # with the best accuracy on recordings never seen (0.958 against 0.930 at 5).
    "gestures4": Plan("gestures4", ("rest", "fist", "open", "point"), repetitions=15, window_seconds=2.0,
                      rest_class="rest"),
    # Two runs of each state (the machine stopped and started between them, so the split can test on a run it
    # did not train on), 20 s each, as 2 s segments; the operator confirms each state before it is recorded.
    "bearing4": Plan("bearing4", ("normal", "inner_race", "outer_race", "ball"), repetitions=2,
                     window_seconds=2.0, hold_seconds=20.0, rest_seconds=0.0, countdown=5, kind="continuous",
                     verb="Run the machine in state", confirm=True),
    # A healthy machine: 3 minutes of normal running, as 3 runs of a minute (stopped and started between them,
    # confirmed by the operator), for an anomaly scorer and its threshold (tinynas.anomaly).
    "motor-normal": Plan("motor-normal", ("normal",), repetitions=3, window_seconds=2.0, hold_seconds=60.0,
                         rest_seconds=0.0, countdown=5, kind="continuous", verb="Run the machine normally",
                         confirm=True, task="anomaly"),
}


def load_plan(spec: str) -> Plan:
    """A preset name (isl26, gestures4, bearing4, motor-normal) or a JSON/TOML file with Plan's fields."""
    if spec in PRESETS:
        return PRESETS[spec]
    path = Path(spec)
    if not path.exists():
        raise PlanError(f"unknown plan {spec!r}: not a preset ({', '.join(PRESETS)}) nor a file")
    try:
        text = read_regular_text(path, SETTINGS_FILE_BYTES, "plan file")
        data = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except OSError as exc:
        raise PlanError(f"plan file {path}: cannot read it ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON/TOML, or nested beyond reason
        kind = "TOML" if path.suffix == ".toml" else "JSON"
        raise PlanError(f"plan file {path}: not a {kind} plan ({type(exc).__name__})") from None
    return Plan(**{"name": path.stem, **_plan_fields(path, data)})


# Each field of a plan file: its check and how it is said in an error.
_PLAN_FIELDS = {
    "name": (lambda v: isinstance(v, str) and v.strip() != "", "a non-empty string"),
    "classes": (lambda v: isinstance(v, list) and all(isinstance(c, str) and c.strip() for c in v),
                "a list of class names"),
    "repetitions": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "window_seconds": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                       "a number of seconds"),
    "rest_seconds": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                     "a number of seconds"),
    "countdown": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number"),
    "kind": (lambda v: isinstance(v, str), "gesture or continuous"),
    "verb": (lambda v: isinstance(v, str), "a string"),
    "rest_class": (lambda v: isinstance(v, str), "the name of one of the classes"),
    "order": (lambda v: isinstance(v, list) and all(isinstance(c, str) for c in v), "a list of class names"),
    "hold_seconds": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
                     "a number of seconds"),
    "window_samples": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number of samples"),
    "hop_samples": (lambda v: isinstance(v, int) and not isinstance(v, bool), "a whole number of samples"),
    "confirm": (lambda v: isinstance(v, bool), "true or false"),
    "task": (lambda v: isinstance(v, str), "classify or anomaly"),
    "donnings": (lambda v: isinstance(v, int) and not isinstance(v, bool), "1 or 2"),
}


def _plan_fields(path: Path, data) -> dict:
    """The plan file's fields, each type-checked; a wrong file says which key and what it should be."""
    if not isinstance(data, dict):
        raise PlanError(f"plan file {path}: must be an object with at least 'classes' (a list of class "
                        f"names), not a {type(data).__name__}")
    unknown = sorted(set(data) - set(_PLAN_FIELDS))
    if unknown:
        raise PlanError(f"plan file {path}: unknown key(s) {', '.join(map(str, unknown))} "
                        f"(known: {', '.join(_PLAN_FIELDS)})")
    if "classes" not in data:
        raise PlanError(f"plan file {path}: missing 'classes' (a list of class names)")
    for key, value in data.items():
        check, wanted = _PLAN_FIELDS[key]
        if not check(value):
            raise PlanError(f"plan file {path}: '{key}' must be {wanted}, not {value!r:.60}")
    return {**data, "classes": tuple(data["classes"]), "order": tuple(data.get("order", ()))}


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
        signal = np.sqrt(np.mean(window.astype(np.float64) ** 2))
        floor = np.sqrt(np.mean(rest.astype(np.float64) ** 2))
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
                 redon: Callable[[], None] | None = None) -> None:
        self.recorder = recorder
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

    def _wait_for(self, sample: int) -> None:
        # The deadline moves with every sample that arrives: a slow (loaded) host is not a silent device.
        seen, deadline = self.recorder.latest_sample, time.monotonic() + self.timeout_seconds
        while self.recorder.latest_sample < sample:
            if self.recorder.latest_sample != seen:
                seen, deadline = self.recorder.latest_sample, time.monotonic() + self.timeout_seconds
            if time.monotonic() > deadline:
                raise CollectionPaused(f"collection paused: no samples for {self.timeout_seconds:g} s - check that "
                                       f"the device is plugged in and streaming; the accepted windows are kept")
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
            time.sleep(1.0)
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
                time.sleep(1.0)
            go = self.recorder.latest_sample
            self.prompter.say("go")
            # The rest level heard before this prompt: serving's line between an idle arm and a sign (idle.py).
            level = None if rest is None else round(float(np.sqrt(np.mean(rest.astype(np.float64) ** 2))), 4)
            self.recorder.add_event({"prompt": label, "attempt": attempt, "go": go, "rest_rms": level})
            if self.on_prompt is not None:
                self.on_prompt(label, go)
            start = self._window_start(go, rest) if label != plan.rest_class else go
            self._wait_for(start + self.length)
            window = self.recorder.window(start, self.length)
            if window is None:
                problems = ["samples were lost during the window (link gap) - again"]
            else:
                problems = check_window(window, self.recorder.hello.sample_format, rest,
                                        still=label == plan.rest_class)
            if not problems:
                donning = {"donning": self.donning()} if plan.donnings > 1 else {}
                self.recorder.add_window(label, start, self.length, attempt=attempt, go=go, **donning)
            if self.on_result is not None:  # once the window is on disk: what it is told counts it
                self.on_result(label, not problems)
            if not problems:
                return True
            self.recorder.add_event({"rejected": label, "start": start, "go": go, "problems": problems})
            self.prompter.say(f"not kept: {'; '.join(problems)}")
            self.last_problems = problems
        return False

    def _window_start(self, go: int, rest: np.ndarray | None) -> int:
        """Where the window starts: just before the movement's onset when one is seen between EARLY_SECONDS before
        and LATE_SECONDS after "go" (onset.py), else at "go" (the check then says no movement was seen)."""
        if self.plan.kind != "gesture" or rest is None:
            return go
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
                return max(first, first + found - preroll)
            if latest >= go + late + onset.FRAMES_HELD * frame:
                return go
            self._wait_for(min(latest + frame, go + late + onset.FRAMES_HELD * frame))

    def _true_rest(self, heard: np.ndarray | None) -> np.ndarray | None:
        """The baseline for this attempt: what was heard before the prompt if it is as quiet as the quietest rest
        so far, else that quietest rest (never a previous attempt's signal taken as rest)."""
        if heard is None:
            return self.baseline
        level = float(np.sqrt(np.mean(heard.astype(np.float64) ** 2)))
        if self.baseline is None:
            self.baseline = heard
            return heard
        floor = float(np.sqrt(np.mean(self.baseline.astype(np.float64) ** 2)))
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
                    time.sleep(self.plan.rest_seconds)  # a block is not redone: it has many segments
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
