"""The running collection as the status shows it: the prompt, its phase, the counts, the times the page counts with.

Live only (the session on disk is what survives a power cut). The COLLECTING step (`collect.py`) writes it, the
status writer thread reads it twice a second (`to_dict`); no collection running is the empty record, `{}` in the
status, as it always was.
"""

from __future__ import annotations

from dataclasses import dataclass, fields


@dataclass
class Collection:
    """What status shows of the running collection (every field absent until set)."""

    total: int | None = None
    """Windows the plan records."""
    accepted: int | None = None
    plan: str | None = None
    verb: str | None = None
    kind: str | None = None          # "gesture" or "continuous" (a machine's blocks)
    rest_class: str | None = None
    seconds_per_window: float | None = None
    """What one prompt takes, per window it records: the page's "about N min left"."""
    per_class: dict[str, dict[str, int]] | None = None
    """Per class: windows accepted and rejected."""
    prompt: str | None = None        # the class asked for now
    number: int | None = None        # the prompt's number (counted over the service's life)
    attempt: int | None = None
    phase: str | None = None         # ready, go, kept, not kept, confirm, paused
    countdown_ends: float | None = None
    go: int | None = None            # the sample GO was given at
    go_at: float | None = None       # and when (wall clock: the page shows GO on time)
    window_seconds: float | None = None
    late_seconds: float | None = None
    rest: list | None = None
    """Each channel's level just before the prompt: what the guide compares each window with."""
    last_line: str | None = None     # the guide's last words
    last_rejected: dict | None = None  # the window last not kept: label, problems, advice
    redo_until: float | None = None  # the page offers to redo the window just kept until then
    confirm: str | None = None       # what the person or operator is to confirm (a machine's state, a re-don)
    confirm_since: float | None = None
    redon: bool | None = None
    paused: str | None = None        # why the collection waits (and what to do)
    paused_at: float | None = None

    def update(self, **changes) -> None:
        """Set fields by name (an unknown name is a bug: AttributeError, not a new key no one reads)."""
        for name, value in changes.items():
            if name not in _FIELDS:
                raise AttributeError(f"Collection has no field {name!r}")
            setattr(self, name, value)

    def counts(self, label: str) -> dict[str, int]:
        """The accepted / rejected counter of `label` (made at first use)."""
        if self.per_class is None:
            self.per_class = {}
        return self.per_class.setdefault(label, {"accepted": 0, "rejected": 0})

    def to_dict(self) -> dict:
        """As the status carries it: the fields set. Read by the status thread while the collection writes: the
        per-class counters are copied from a snapshot of their items."""
        data = {name: getattr(self, name) for name in _FIELDS}
        if data["per_class"] is not None:
            data["per_class"] = {label: dict(counts) for label, counts in list(data["per_class"].items())}
        return {name: value for name, value in data.items() if value is not None}


_FIELDS = tuple(field.name for field in fields(Collection))
