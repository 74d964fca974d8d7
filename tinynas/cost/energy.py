"""What one inference costs on the target at its clock: time, share of the stream's hop, energy, battery life.

The cycles come from the time model (`tinynas.cost.latency`), the clock and the run current from the target
(`tinynas.cost.targets`: each built-in target names its datasheet). Energy is the run current x the supply voltage
x the time: the core running the model, nothing else (the sensor, a radio and the sleep current between
inferences are not counted, and a battery lasts less than the figure says). One inference per hop of the stream,
as the service predicts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tinynas.cost.targets import Target

BATTERY_MAH = 225.0
BATTERY = "a 225 mAh CR2032 coin cell"
"""The battery the life is stated for: the smallest a wearable or a sensor node carries."""


@dataclass(frozen=True)
class InferenceOnChip:
    """One inference of a model on a target at its clock (None: not known for this target)."""

    cycles: int
    clock_mhz: float
    seconds: float
    hop_seconds: float | None
    share_of_hop: float | None
    energy_uj: float | None
    """Run current x supply voltage x time, in microjoules."""
    average_ua: float | None
    """The inference's current averaged over the hop (one inference per hop)."""
    battery_hours: float | None
    """BATTERY's life with the inference alone drawing it."""

    def to_dict(self) -> dict:
        return asdict(self)

    def words(self) -> str:
        """'31.2 ms per inference at 48 MHz (12 % of the 0.25 s hop), 25 uJ, 2.1 years on a 225 mAh ...'."""
        parts = [f"{1000 * self.seconds:.1f} ms per inference at {self.clock_mhz:g} MHz"]
        if self.share_of_hop is not None and self.hop_seconds is not None:
            parts[0] += f" ({100 * self.share_of_hop:.0f} % of the {self.hop_seconds:g} s hop)"
        if self.energy_uj is not None:
            parts.append(f"{self.energy_uj:,.1f} uJ")
        if self.battery_hours is not None:
            parts.append(f"{life_words(self.battery_hours)} on {BATTERY} (the inference alone)")
        return ", ".join(parts)


def life_words(hours: float) -> str:
    if hours >= 2 * 8766:
        return f"{hours / 8766:.1f} years"
    if hours >= 48:
        return f"{hours / 24:.0f} days"
    return f"{hours:.1f} hours"


def on_chip(cycles: int, target: Target, hop_seconds: float | None = None) -> InferenceOnChip | None:
    """`cycles` per inference on `target`, or None when its file gives no clock (or no cycles are known)."""
    if not target.clock_mhz or cycles <= 0:
        return None
    seconds = cycles / (target.clock_mhz * 1e6)
    share = seconds / hop_seconds if hop_seconds else None
    energy = average = hours = None
    if target.run_ua_per_mhz is not None and target.supply_v:
        current_ua = target.run_ua_per_mhz * target.clock_mhz
        energy = current_ua * target.supply_v * seconds  # uA x V x s = uJ
        if share is not None:
            average = current_ua * min(share, 1.0)
            hours = BATTERY_MAH * 1000 / average if average > 0 else None
    return InferenceOnChip(cycles=int(cycles), clock_mhz=float(target.clock_mhz), seconds=seconds,
                           hop_seconds=hop_seconds, share_of_hop=share, energy_uj=energy, average_ua=average,
                           battery_hours=hours)
