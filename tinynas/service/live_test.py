"""The live test (`tinynas onboard --user U --test`, and the page's "Test the model live"): signs prompted in random
order, each held for a few seconds, the served model's answer read from the service's live predictions: the user
sees the accuracy they really get, with its count and interval, not the held-out figure of the recording day.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from tinynas.verdict import HeldOut

HOLD_SECONDS = 4.0
"""How long each sign is held (the page's TEST_SECONDS)."""
SETTLE_SECONDS = 1.5
"""The start of a hold not read: the person moves into the sign and the smoothed label follows."""


@dataclass
class LiveTest:
    """Hits so far, and each trial as (prompted, answered)."""

    trials: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def held(self) -> HeldOut:
        return HeldOut(sum(asked == said for asked, said in self.trials), len(self.trials))


def run(status: Callable[[], dict], say: Callable[[str], None], signs: int, classes: list[str],
        rng: random.Random | None = None, clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep, poll: float = 0.25) -> LiveTest:
    """Prompt `signs` signs (`say`), reading `status()` (the service's status) while each is held; the answer of a
    trial is the smoothed label most often seen after SETTLE_SECONDS (None when nothing live was seen)."""
    rng = rng or random.Random()
    result = LiveTest()
    for number in range(1, signs + 1):
        sign = rng.choice(classes)
        say(f"[{number}/{signs}] perform {sign} now, hold it {HOLD_SECONDS:g} s")
        started = clock()
        seen: Counter[str] = Counter()
        while clock() - started < HOLD_SECONDS:
            sleep(poll)
            if clock() - started < SETTLE_SECONDS:
                continue
            current = status()
            predictions = current.get("predictions") or []
            if predictions and not (current.get("serving") or {}).get("stale"):
                label = predictions[-1].get("smoothed")
                if isinstance(label, str):
                    seen[label] += 1
        answer = seen.most_common(1)[0][0] if seen else None
        result.trials.append((sign, answer))
        say(f"    the model said {answer or 'nothing live'}: {'right' if answer == sign else 'wrong'}; "
            f"{result.held.describe().replace('held-out windows', 'signs')}")
    return result
