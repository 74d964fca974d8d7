"""What a collection plan is: the classes, repetitions, windows and pace a guided collection prompts for, the
presets (isl26, gestures4, bearing4, motor-normal), and a plan file read and checked field by field.

`firmware_bridge.guide` runs a plan; the service, its page and tinynas's search read one.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import asdict, dataclass
from pathlib import Path

from firmware_bridge.errors import BridgeError
from firmware_bridge.safe_read import SETTINGS_FILE_BYTES, read_regular_text


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
