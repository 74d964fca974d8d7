"""The alarm as serving raises it: k of the last n windows above the threshold (a debounce), then held.

One window over the threshold is what the false-alarm rate is about (1 % of normal windows pass a
threshold set for 1 %, by construction); an alarm that a user acts on must not be that. So serving raises
it when k of the last n windows pass, and clears it when none of the last n do (hysteresis: a failing
bearing hovers around the threshold and must not make the page blink).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from tinynas.anomaly.threshold import debounced_rate
from tinynas.errors import UsageError

DEBOUNCE = (3, 5)
"""Default: 3 of the last 5 windows."""


def check_debounce(k, n) -> tuple[int, int]:
    """k-of-n, checked: whole numbers with 1 <= k <= n <= 100."""
    for name, value in (("alarm k", k), ("alarm n", n)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
            raise UsageError(f"{name} must be a whole number 1..100, got {value!r}")
    if k > n:
        raise UsageError(f"the alarm needs k <= n windows (k of the last n), got {k} of {n}")
    return k, n


@dataclass
class Alarm:
    """k-of-n debounce of per-window verdicts, with hysteresis."""

    k: int = DEBOUNCE[0]
    n: int = DEBOUNCE[1]

    def __post_init__(self) -> None:
        check_debounce(self.k, self.n)
        self.recent: deque[bool] = deque(maxlen=self.n)
        self.raised = False

    def update(self, anomalous: bool) -> bool:
        """Feed one window's verdict; whether the alarm is raised after it."""
        self.recent.append(bool(anomalous))
        count = sum(self.recent)
        if not self.raised and count >= self.k:
            self.raised = True
        elif self.raised and count == 0 and len(self.recent) == self.n:
            self.raised = False
        return self.raised

    def describe(self, rate: float) -> dict:
        """The debounce and what it does to the per-window rate (independent windows assumed: stated)."""
        return {"k": self.k, "n": self.n, "window_false_alarm_rate": rate,
                "alarm_rate_if_independent": debounced_rate(rate, self.k, self.n),
                "note": "neighbouring windows overlap and are correlated, so the alarm's rate lies between "
                        "this figure and the per-window rate"}
