"""Which scorer family a search's user gets: the network winner or the classical scorer (issue 59).

Within the network family, candidates are ranked by validation cross-entropy (normal against synthetic anomalies):
a smooth figure that orders many candidates well. Across the two families it does not measure what the user gets:
the classical scorer's probability comes from a two-number link, so the cross-entropy charges it for calibration the
alarm never uses, and on CWRU's development data it put the network ahead by 0.055 (ten times the seeds' spread)
where both detect every real fault class (benchmarks/results/anomaly-criterion.md). The two finalists are compared
where the alarm works instead, on the same normal-only windows: each family's threshold is set for the search's
false-alarm rate on the validation side's normal windows (split conformal, as the deployed one is set on the test
side), and the rule counts the validation side's synthetic anomalies each flags.

- **Paired**: both flag the same windows; the windows only one of them flags decide, by an exact two-sided binomial
  test of those discordant pairs (McNemar's). A difference the test cannot tell from chance (p >= `TIE_P`) is a tie.
- **A tie goes to the cheaper** (peak RAM, then flash): the classical scorer's whole footprint (its generated C) is
  compared with the network's RAM and flash as the search budgets them, so the classical scorer wins a tie only
  when it is cheaper even so.
- **A classical scorer that does not fit** the target's RAM, flash or MAC budget is never chosen.

`--scorer network` or `classical` takes that family whatever the rule says (the card still shows both); a
classical scorer asked for that does not fit the budget is refused in one line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from tinynas.anomaly.threshold import conformal_threshold, lowest_rate, windows_needed
from tinynas.errors import TinynasError, UsageError

SCORERS = ("auto", "network", "classical")
"""`--scorer`: which family an anomaly search exports: the rule's choice (auto), or the one named."""


def check_scorer(scorer) -> str:
    """The --scorer option, checked."""
    if scorer not in SCORERS:
        raise UsageError(f"unknown scorer {scorer!r}; choose auto (the family the validation windows favour, ties to "
                         f"the cheaper), network or classical")
    return scorer


class ScorerError(TinynasError, ValueError):
    """The scorer asked for cannot be had (a classical scorer that does not fit the budget)."""

TIE_P = 0.05
"""Discordant pairs whose split a fair coin gives with probability >= this are a tie (two-sided)."""


@dataclass(frozen=True)
class Finalist:
    """One family's finalist as the rule sees it."""

    family: str
    """"network" or "classical"."""
    name: str
    flagged: np.ndarray
    """(n,) bool: which validation synthetic anomalies its threshold flags."""
    threshold: float
    ram_bytes: int
    flash_bytes: int
    fits: bool = True
    why_not: str = ""
    """What of the budget it exceeds (when it does not fit)."""
    val_loss: float | None = None

    def figures(self) -> dict:
        """The card's record of this finalist."""
        return {"family": self.family, "name": self.name, "detected": int(self.flagged.sum()),
                "windows": int(len(self.flagged)), "threshold": self.threshold, "ram_bytes": self.ram_bytes,
                "flash_bytes": self.flash_bytes, "fits": self.fits,
                **({"why_not": self.why_not} if self.why_not else {}),
                **({"val_loss": round(self.val_loss, 5)} if self.val_loss is not None else {})}


@dataclass(frozen=True)
class Choice:
    """The rule's verdict: which family and why, with both finalists' figures."""

    family: str
    why: str
    rate: float
    """The false-alarm rate both thresholds were set for on the validation normal windows."""
    p_value: float | None
    finalists: tuple[dict, ...]

    def to_dict(self) -> dict:
        return {**asdict(self), "rule": RULE}


RULE = ("each family's threshold set for the false-alarm rate on the validation normal windows; synthetic anomalies "
        "of the validation side flagged, compared pairwise (exact binomial test of the windows only one flags, "
        f"p < {TIE_P:g} to differ); a tie goes to the cheaper (peak RAM, then flash); a classical scorer that does "
        "not fit the budget is not chosen")


def validation_rate(rate: float, normal_windows: int) -> float:
    """The rate both thresholds are set for on `normal_windows` validation windows: the search's, or the lowest
    these windows can state when they are too few for it."""
    return rate if normal_windows >= windows_needed(rate) else lowest_rate(normal_windows)


def flags(normal_scores: np.ndarray, synthetic_scores: np.ndarray, rate: float) -> tuple[np.ndarray, float]:
    """(which synthetic windows are flagged, the threshold) for a threshold set at `rate` on `normal_scores`."""
    threshold = conformal_threshold(normal_scores, rate)
    return np.asarray(synthetic_scores, np.float64) > threshold, threshold


def discordant_p(network: np.ndarray, classical: np.ndarray) -> float:
    """Two-sided exact p-value that the windows only one family flags split as evenly as chance would (McNemar)."""
    from scipy.stats import binomtest

    only_network = int(np.sum(network & ~classical))
    only_classical = int(np.sum(classical & ~network))
    if only_network + only_classical == 0:
        return 1.0
    return float(binomtest(only_network, only_network + only_classical, 0.5).pvalue)


def choose(network: Finalist, classical: Finalist, rate: float, asked: str = "auto") -> Choice:
    """The family the user gets (see the module's rule); `asked`: the --scorer option."""
    if len(network.flagged) != len(classical.flagged):
        raise ValueError("both finalists must be measured on the same synthetic windows")
    figures = (network.figures(), classical.figures())
    shown = (f"{network.name} flags {int(network.flagged.sum())} and {classical.name} "
             f"{int(classical.flagged.sum())} of {len(network.flagged)} validation synthetic anomalies at "
             f"{rate:.2%} false alarms")
    if asked == "classical" and not classical.fits:
        raise ScorerError(f"--scorer classical: the classical scorer does not fit the budget ({classical.why_not}); "
                          f"give a larger chip or --scorer auto")
    if asked in ("network", "classical"):
        return Choice(asked, f"asked for with --scorer {asked} ({shown})", rate, None, figures)
    if not classical.fits:
        return Choice("network", f"the classical scorer does not fit the budget ({classical.why_not})", rate, None,
                      figures)
    p = discordant_p(network.flagged, classical.flagged)
    if p < TIE_P:
        better = network if network.flagged.sum() > classical.flagged.sum() else classical
        return Choice(better.family, f"{shown}: the {better.family} scorer detects more (p = {p:.3g})", rate, p,
                      figures)
    cheaper = min((network, classical), key=lambda f: (f.ram_bytes, f.flash_bytes, f.family != "network"))
    return Choice(cheaper.family, f"{shown}: a tie (p = {p:.2g}), so the cheaper: {cheaper.name} "
                  f"({cheaper.ram_bytes:,} B RAM, {cheaper.flash_bytes:,} B flash against "
                  f"{(classical if cheaper is network else network).ram_bytes:,} B and "
                  f"{(classical if cheaper is network else network).flash_bytes:,} B)", rate, p, figures)
