"""Simulated people and machines in front of a simulated front-end, as they are, not as the code expects.

A `Person` reacts to GO after a reaction time drawn from a stated distribution (a log-normal around a
median, plus now and then a late start), holds the sign for about as long as told, rests still with
nothing but sensor noise, and sometimes makes the wrong sign or none at all. A `Machine` runs in the
state it was last set to, playing each state's recording on from where it stopped (never from the start
again, so the blocks of one state are different stretches of the recording) and warning when a state's
recording is used up and wraps.

Both are `SignalSource`s for `simulator.Simulator`; what tells them to act (the service's status page,
or a test) calls `Person.react` / `Machine.set_state`.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass

import numpy as np

from firmware_bridge.simulator import take_queued

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Behaviour:
    """How a simulated person reacts; the defaults are a realistic person, not a perfect one."""

    reaction_median_seconds: float = 0.35
    reaction_spread: float = 0.35
    """Log-normal sigma of the reaction time: with the median, 10 % of reactions take over 0.55 s."""
    late_probability: float = 0.1
    late_seconds: tuple[float, float] = (0.7, 1.1)
    """Now and then a late start, uniform in this range (distracted, looked away)."""
    hold_seconds: float = 0.5
    """How much longer than the window the sign is held (people stop when they think it is over)."""
    wrong_probability: float = 0.02
    """Makes another sign than the prompted one (recorded under the prompt's label: a real labelling error)."""
    miss_probability: float = 0.02
    """Makes no sign at all (the window is rejected and the prompt repeated)."""
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("late_probability", "wrong_probability", "miss_probability"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}")
        low, high = self.late_seconds
        if not (self.reaction_median_seconds > 0 and self.reaction_spread >= 0 and 0 <= low <= high
                and self.hold_seconds >= 0):
            raise ValueError("reaction median > 0, spread >= 0, 0 <= late range, hold >= 0")


class Person:
    """A simulated person wearing the armband: a `SignalSource` of rest noise, and of signs when told to react.

    `signs` maps each sign the person knows to recorded windows (n, T, channels); `noise` is the sensor
    noise (standard deviation, in sample units) of a still arm; `rest_class` is the plan's class of doing
    nothing (reacting to it means staying still).
    """

    def __init__(self, signs: dict[str, np.ndarray], channels: int, sample_rate_hz: float, dtype,
                 noise: float = 1.5, behaviour: Behaviour | None = None, rest_class: str = "") -> None:
        self.signs = {label: np.asarray(w) for label, w in signs.items()}
        self.channels = channels
        self.rate = sample_rate_hz
        self.dtype = np.dtype(dtype)
        self.noise = noise
        self.behaviour = behaviour or Behaviour()
        self.rest_class = rest_class
        self.rng = np.random.default_rng(self.behaviour.seed)
        self._lock = threading.Lock()
        self._queue: list[tuple[str | None, np.ndarray]] = []
        self.samples_read = 0
        self.reactions: list[dict] = []
        """What the person did for each prompt: label asked, sign made (None: none), reaction time."""
        self.played: list[tuple[str, int, int]] = []  # (sign, first sample, samples): each sign as it starts
        self.gains = np.ones(channels)
        """Each electrode's gain as the armband sits now (1 until it is put on again: `redon`)."""
        self.rotation = 0
        """Electrodes the armband sits turned by (0 until it is put on again turned: `redon(rotation=n)`)."""
        self.donnings = 1
        self.redon_spread = 0.25
        """How much each electrode's gain changes when the armband is put on again (log-normal spread)."""

    def reaction_seconds(self) -> float:
        """A reaction time drawn from the behaviour's distribution."""
        b = self.behaviour
        if self.rng.uniform() < b.late_probability:
            return float(self.rng.uniform(*b.late_seconds))
        return float(b.reaction_median_seconds * math.exp(b.reaction_spread * self.rng.standard_normal()))

    def react(self, label: str, window_seconds: float, since_go_seconds: float = 0.0) -> dict:
        """Perform the prompted `label` (seen `since_go_seconds` after GO) for about `window_seconds`."""
        b = self.behaviour
        reaction = self.reaction_seconds()
        roll = self.rng.uniform()
        sign: str | None = label
        if label == self.rest_class or label not in self.signs:
            sign = None  # rest: stay still (a sign the person does not know: nothing either)
        elif roll < b.miss_probability:
            sign = None
        elif roll < b.miss_probability + b.wrong_probability and len(self.signs) > 1:
            others = [s for s in self.signs if s != label]
            sign = others[int(self.rng.integers(len(others)))]
        delay = max(0.0, reaction - since_go_seconds)
        record = {"asked": label, "made": sign, "reaction_seconds": round(reaction, 3)}
        self.reactions.append(record)
        if sign is not None:
            self.perform(sign, delay, window_seconds + b.hold_seconds)
        return record

    def redon(self, rotation: int = 0) -> np.ndarray:
        """Take the armband off and put it on again: every electrode sits a little elsewhere, so each channel's
        gain changes (log-normal, `redon_spread` in log units); the signs' patterns stay. `rotation`: the band
        also sits turned by that many electrodes from the first day (what a ring armband put on without looking
        does: the muscle under electrode i is now under electrode i + rotation). Returns the new gains."""
        with self._lock:
            self.gains = np.exp(self.rng.normal(0.0, self.redon_spread, size=self.channels))
            self.rotation = int(rotation)
            self.donnings += 1
            return self.gains.copy()

    def perform(self, sign: str, delay_seconds: float, seconds: float) -> None:
        """Make `sign` after `delay_seconds` of stillness, held for `seconds` (recorded windows end to end)."""
        need = int(round(seconds * self.rate))
        parts, have = [], 0
        while have < need:
            windows = self.signs[sign]
            part = windows[int(self.rng.integers(len(windows)))]
            parts.append(part)
            have += len(part)
        with self._lock:
            if delay_seconds > 0:
                self._queue.append((None, self._still(int(round(delay_seconds * self.rate)))))
            sound = np.roll(np.concatenate(parts)[:need], self.rotation, axis=1)
            self._queue.append((sign, sound * self.gains))

    def _still(self, count: int) -> np.ndarray:
        return self.rng.normal(0.0, self.noise, size=(count, self.channels))

    def read(self, count: int) -> np.ndarray:
        """The next `count` samples: what is queued (a sign, a pause before it), then stillness."""
        with self._lock:
            parts, needed = take_queued(self._queue, count, self.samples_read, self.played)
            if needed:
                parts.append(self._still(needed))
            self.samples_read += count
        return _as(np.concatenate(parts), self.dtype)


class Machine:
    """A machine running in one state at a time: a `SignalSource` playing each state's recording on.

    `states` maps each state to its recording (n, channels). Switching back to a state continues where it
    stopped; a state played past its end wraps (warned once: blocks of that state then repeat the recording's
    samples, under fresh sensor noise: a machine's sensor never repeats itself sample for sample, a looped file
    does, and the guide says so: `firmware_bridge.repeats`). Until it is first set to a state (and after
    `stop()`), the machine is off: the sensor hears only its own noise, a hundredth of the recordings' level, and no
    recording is used up while nobody records.
    """

    def __init__(self, states: dict[str, np.ndarray], dtype, seed: int = 0) -> None:
        self.states = {name: np.asarray(stream) for name, stream in states.items()}
        if not self.states:
            raise ValueError("a machine needs at least one state")
        self.dtype = np.dtype(dtype)
        self.state: str | None = None
        self.position = dict.fromkeys(self.states, 0)
        self.wrapped: set[str] = set()
        self.noise = 0.01 * float(np.median([np.std(stream) for stream in self.states.values()]))
        self.rng = np.random.default_rng(seed)
        self._lock = threading.Lock()
        self.samples_read = 0
        self.channels = next(iter(self.states.values())).shape[1]

    def set_state(self, state: str) -> None:
        """Run in `state` from now on (a state the machine does not have is refused)."""
        if state not in self.states:
            raise ValueError(f"the machine has no state {state!r} (it has {', '.join(self.states)})")
        with self._lock:
            self.state = state

    def stop(self) -> None:
        """Switch the machine off."""
        with self._lock:
            self.state = None

    def read(self, count: int) -> np.ndarray:
        """The next `count` samples of the current state's recording (sensor noise when off)."""
        with self._lock:
            self.samples_read += count
            if self.state is None:
                return _as(self.rng.normal(0.0, self.noise, size=(count, self.channels)), self.dtype)
            stream, first = self.states[self.state], self.position[self.state]
            index = first + np.arange(count)
            if index[-1] >= len(stream) and self.state not in self.wrapped:
                self.wrapped.add(self.state)
                log.warning("machine state %s: its recording (%d samples) is used up and starts again: later "
                            "blocks of it repeat earlier samples", self.state, len(stream))
            self.position[self.state] = (first + count) % len(stream)
            heard = stream[index % len(stream)] + self.rng.normal(0.0, self.noise, size=(count, self.channels))
            return _as(heard, self.dtype)


def _as(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return np.clip(np.round(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)
